"""The embedding APIs: an OpenAI-compatible ``POST <base>/embeddings`` and Ollama's
``POST /api/embed``, both through models.http (retries, Retry-After, timeouts, masking)."""

from __future__ import annotations

import math
import urllib.parse
from typing import Any

from agenvoy_cli.models.base import REMOTE_MAX_CHARS, EmbedderError, prepare_text
from agenvoy_cli.models.http import Endpoint, HTTPFailure, credentials
from agenvoy_cli.settings import Settings, number_setting

DEFAULT_TIMEOUT = 60.0

# Dimensions of well-known hosted models (anything else is learnt from the first reply).
KNOWN_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


def _env_number(settings: Settings, name: str, default: float, kind: type = float) -> Any:
    raw = settings.env.get(name)
    return number_setting(raw, name, kind, above=0) if raw else default


class _HTTPEmbedder:
    provider = ""
    max_chars = REMOTE_MAX_CHARS
    default_batch = 64

    def __init__(self, model: str, url: str, *, api_key: str | None = None,
                 dim: int | None = None, timeout: float = DEFAULT_TIMEOUT,
                 batch_size: int | None = None) -> None:
        self.model = model
        # user:password@ in the URL becomes Basic auth, never shown in a message
        self.url, self._basic = credentials(url)
        self.shown_url = self.url
        self.model_id = f"{self.provider}/{model}"
        self._api_key = api_key
        self._dim = dim
        self.timeout = timeout
        self.batch_size = batch_size or self.default_batch

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.model_id} at {self.shown_url}>"

    @property
    def dim(self) -> int:
        """Expected dimension; when not configured, one probe request learns it."""
        if self._dim is None:
            self.embed_query("dimension probe")
        assert self._dim is not None
        return self._dim

    # -- transport

    def _headers(self) -> dict[str, str]:
        from agenvoy_cli.version import __version__

        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "User-Agent": f"agenvoy-cli/{__version__}"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        elif self._basic:
            headers["Authorization"] = f"Basic {self._basic}"
        return headers

    def _post(self, payload: dict[str, Any]) -> Any:
        what = f"{self.model_id} embeddings"
        endpoint = Endpoint(self.url, self._headers(), self.timeout,
                            secrets=(self._api_key or "", self._basic or ""))
        try:
            return endpoint.post_json(payload)
        except HTTPFailure as failure:
            if failure.kind == "status":
                hint = " (check the API key)" if failure.status in (401, 403) else ""
                raise EmbedderError(
                    f"{what}: HTTP {failure.status} from {self.shown_url}{hint}"
                    + (f": {failure.detail}" if failure.detail else "")) from None
            if failure.kind == "not_json":
                raise EmbedderError(f"{what}: {self.shown_url} did not return JSON: "
                                    f"{failure.detail}") from None
            reason = (f"timed out after {self.timeout:g} s" if failure.kind == "timeout"
                      else failure.detail)
            raise EmbedderError(f"{what}: cannot reach {self.shown_url}: {reason}") from None

    # -- vectors

    def _request(self, texts: list[str]) -> list[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _check(self, raw: list[Any], expected: int) -> list[list[float]]:
        what = f"{self.model_id} embeddings"
        if len(raw) != expected:
            raise EmbedderError(f"{what}: asked for {expected} vectors, got {len(raw)}")
        out = []
        for vec in raw:
            if not isinstance(vec, list) or not vec:
                raise EmbedderError(f"{what}: a vector is not a list of numbers")
            try:
                vec = [float(x) for x in vec]
            except (TypeError, ValueError):
                raise EmbedderError(f"{what}: a vector is not a list of numbers") from None
            if self._dim is None:
                self._dim = len(vec)
            elif len(vec) != self._dim:
                raise EmbedderError(
                    f"{what}: got a {len(vec)}-d vector, expected {self._dim}-d "
                    "(set AGENVOY_EMBED_DIM or rebuild the index for the new model)")
            norm = math.sqrt(math.fsum(x * x for x in vec))
            if not norm or not math.isfinite(norm):
                raise EmbedderError(f"{what}: got a zero or non-finite vector")
            out.append([x / norm for x in vec])
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        texts = [prepare_text(t, self.max_chars) for t in texts]
        texts = [t if t.strip() else " " for t in texts]  # hosted APIs refuse ""
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            chunk = texts[i:i + self.batch_size]
            out.extend(self._check(self._request(chunk), len(chunk)))
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class OpenAIEmbedder(_HTTPEmbedder):
    """An OpenAI-compatible ``/v1/embeddings`` (OpenAI, vLLM, llama.cpp, LM Studio, ...)."""

    provider = "openai"

    def _request(self, texts: list[str]) -> list[Any]:
        reply = self._post({"model": self.model, "input": texts, "encoding_format": "float"})
        data = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(data, list):
            raise EmbedderError(f"{self.model_id} embeddings: reply has no 'data' list")
        try:
            items = sorted(data, key=lambda item: int(item.get("index", 0)))
            return [item["embedding"] for item in items]
        except (AttributeError, KeyError, TypeError, ValueError):
            raise EmbedderError(
                f"{self.model_id} embeddings: reply items lack an 'embedding'") from None


class OllamaEmbedder(_HTTPEmbedder):
    """Ollama's native ``/api/embed`` (batched input, server-side truncation)."""

    provider = "ollama"
    default_batch = 32

    def _request(self, texts: list[str]) -> list[Any]:
        reply = self._post({"model": self.model, "input": texts, "truncate": True})
        vectors = reply.get("embeddings") if isinstance(reply, dict) else None
        if not isinstance(vectors, list):
            raise EmbedderError(f"{self.model_id} embeddings: reply has no 'embeddings' list")
        return vectors


def _http_url(raw: str, what: str) -> urllib.parse.SplitResult:
    raw = raw.strip()
    if "://" not in raw:
        raw = "http://" + raw
    parts = urllib.parse.urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EmbedderError(f"{what} {raw!r} is not an http(s) URL")
    return parts


def openai_url(base: str | None = None, settings: Settings | None = None) -> str:
    """<base>/embeddings; a base with no path (http://host:8000) gets the usual /v1."""
    settings = settings or Settings.from_environment()
    base = base or settings.text("AGENVOY_EMBED_BASE_URL", "OPENAI_BASE_URL") \
        or "https://api.openai.com/v1"
    parts = _http_url(base, "embedding base URL")
    path = parts.path.rstrip("/")
    if not path:
        path = "/v1"
    if not path.endswith("/embeddings"):
        path += "/embeddings"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def ollama_url(host: str | None = None, settings: Settings | None = None) -> str:
    """OLLAMA_HOST accepts what Ollama accepts: host, host:port, or a URL."""
    settings = settings or Settings.from_environment()
    host = host or settings.env.get("OLLAMA_HOST") or "http://127.0.0.1:11434"
    parts = _http_url(host, "OLLAMA_HOST")
    netloc = parts.netloc
    if parts.port is None:
        netloc = f"{netloc}:{443 if parts.scheme == 'https' else 11434}"
    if parts.hostname == "0.0.0.0":  # a bind address, not one to connect to
        netloc = netloc.replace("0.0.0.0", "127.0.0.1", 1)
    path = parts.path.rstrip("/") + "/api/embed"
    return urllib.parse.urlunsplit((parts.scheme, netloc, path, "", ""))


def remote_options(settings: Settings) -> dict[str, Any]:
    dim = _env_number(settings, "AGENVOY_EMBED_DIM", 0, int) or None
    return {"dim": dim,
            "timeout": _env_number(settings, "AGENVOY_EMBED_TIMEOUT", DEFAULT_TIMEOUT),
            "batch_size": _env_number(settings, "AGENVOY_EMBED_BATCH", 0, int) or None}

