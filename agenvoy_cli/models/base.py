"""What every embedder shares: the protocol the vector index needs, the error type, and
the text an embedder actually sees."""

from __future__ import annotations

from typing import Protocol

from agenvoy_cli.errors import AgenvoyError

MAX_CHARS = 2000  # local models: ~500 English tokens (e5's window is 512)
REMOTE_MAX_CHARS = 4000  # below 8k tokens even for Chinese text


class EmbedderError(AgenvoyError):
    """An embedder cannot be built or failed to embed; the message is one line."""


class Embedder(Protocol):
    """What the vector index needs. (Not runtime_checkable on purpose: on Python < 3.12
    isinstance() would read `dim`, which for an HTTP embedder may send a probe request.)"""

    model_id: str  # recorded with a vector collection; another id means re-embedding
    dim: int

    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


def prepare_text(text: str, max_chars: int = MAX_CHARS) -> str:
    """What an embedder actually sees: the first max_chars characters, no NUL, valid UTF-8."""
    if not isinstance(text, str):
        text = str(text)
    if len(text) > max_chars:
        text = text[:max_chars]
    if "\x00" in text:
        text = text.replace("\x00", " ")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates (e.g. from JSON "\ud800")
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
