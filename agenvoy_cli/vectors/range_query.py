"""A message search filtered by seq range (and time window) as an unfiltered one.

A filtered search costs what the filter passes: Chroma's `where` in a query scans the
metadata (~28 ms at 10k vectors), an id list is looked up id by id (~35 ms for 10k ids).
The usual search excludes only the few newest messages (the context window): so the
search runs unfiltered for n + SPARE and the filter is applied to the hits' metadata; when
at least n pass (or that was every entry) those are the answer. Otherwise the vectors the
filter excludes are fetched (a `where` get returning few ids, but a scan of the metadata:
~15 ms at 10k), the search runs unfiltered for n + that many (~4 ms), and the excluded are
dropped. Exact either way: the n best that pass are among the n + excluded best of all,
and the first n that pass among the n + SPARE best are the n best that pass. A filter on
the place alone needs no metadata (a message entry's id is "session:seq"): those hits carry
only session_id and seq.
An unfiltered query cannot tell an inconsistent index (HNSW lacking ids its metadata has:
a restricted query fails on those, see vectors/check.py; an unfiltered one silently
leaves them out). So it is used only on a collection this process's client has checked
whole (one restricted query over every id, ~27 ms at 10k, once per client): what the
client adds itself stays consistent, and another process's write reopens the client.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agenvoy_cli.vectors import guard
from agenvoy_cli.vectors.collection import Hit, VectorIndex, directory

COMPLEMENT_MAX = 256  # excluded vectors up to which the unfiltered search is used
SPARE = 32  # extra nearest fetched first, so that the excluded need not be looked up
_NEGATE = {"$gte": "$lt", "$lt": "$gte", "$gt": "$lte", "$lte": "$gt", "$eq": "$ne",
           "$ne": "$eq"}
_TEST = {"$gte": lambda a, b: a >= b, "$lt": lambda a, b: a < b, "$gt": lambda a, b: a > b,
         "$lte": lambda a, b: a <= b, "$eq": lambda a, b: a == b, "$ne": lambda a, b: a != b}


def _comparisons(lo: int | None, hi: int | None, rest: dict[str, Any] | None
                 ) -> list[tuple[str, str, Any]] | None:
    """The filter as (key, op, value) conditions all of which must hold, or None when it
    is not such a conjunction of plain comparisons."""
    out: list[tuple[str, str, Any]] = []
    if lo is not None:
        out.append(("seq", "$gte", lo))
    if hi is not None:
        out.append(("seq", "$lt", hi))
    if rest:
        clauses = rest["$and"] if set(rest) == {"$and"} else [{k: v} for k, v in rest.items()]
        for clause in clauses:
            if not isinstance(clause, dict) or len(clause) != 1:
                return None
            (key, cond), = clause.items()
            if key.startswith("$"):
                return None
            if not isinstance(cond, dict):
                cond = {"$eq": cond}
            for op, value in cond.items():
                if op not in _NEGATE or isinstance(value, (list, dict)) or value is None:
                    return None
                out.append((key, op, value))
    return out


def _passes(meta: dict[str, Any], conds: list[tuple[str, str, Any]]) -> bool:
    for key, op, value in conds:
        have = meta.get(key)
        try:
            if have is None or not _TEST[op](have, value):
                return False
        except TypeError:
            return False
    return True


def _id_metadata(vector_id: str) -> dict[str, Any]:
    """A message entry's session and place, from its id (collection.message_id)."""
    session_id, _, seq = vector_id.rpartition(":")
    return {"session_id": session_id, "seq": int(seq)} if seq.isdigit() else {}


def _plain(meta: dict[str, Any], conds: list[tuple[str, str, Any]]) -> bool:
    """Whether Python compares these values as Chroma's filter does (numbers with numbers,
    strings with strings; a key that is missing fails either way)."""
    for key, _, value in conds:
        have = meta.get(key)
        if have is None:
            continue
        number = (int, float)
        if isinstance(have, bool) or isinstance(value, bool) or not (
                isinstance(have, number) and isinstance(value, number)
                or isinstance(have, str) and isinstance(value, str)):
            return False
    return True


def _consistent(index: VectorIndex) -> bool:
    """Whether the HNSW layer of this client's copy knows every id of the collection (checked
    once per client; see above)."""
    here = directory(index.store)
    if here.checked.get(index.name) == here.epoch:
        return True
    with guard.exclusive(index.store):
        col = index.collection
        epoch = here.epoch
        every = col.get(include=[])["ids"]
        if every:
            dim = int((col.metadata or {}).get("dim") or 0)
            if not dim:
                return False
            try:
                col.query(query_embeddings=[[1.0] + [0.0] * (dim - 1)], ids=every,
                          n_results=1, include=[])
            except Exception:  # noqa: BLE001 - "Error finding id": the slow path says so
                return False
        here.checked[index.name] = epoch
    return True


def query_then_filter(index: VectorIndex, vector: Sequence[float], n: int, lo: int | None,
                      hi: int | None, rest: dict[str, Any] | None) -> list[Hit] | None:
    """The filtered search as an unfiltered one for n + the excluded (see COMPLEMENT_MAX),
    or None when that does not apply (the caller filters the slow way)."""
    conds = _comparisons(lo, hi, rest)
    if conds is None or not _consistent(index):
        return None
    if not conds:
        return index.query(vector, n)
    spare = min(SPARE, COMPLEMENT_MAX)
    if spare >= 0:  # most often the n best that pass are among the n + spare best of all
        by_seq = all(key == "seq" for key, _, _ in conds)  # the id says it: no metadata
        hits = index.query(vector, n + spare, metadata=not by_seq)
        if by_seq:
            hits = [Hit(h.id, h.distance, _id_metadata(h.id)) for h in hits]
        if any(not _plain(h.metadata, conds) for h in hits):
            return None  # metadata of odd types: Chroma's filter decides
        passing = [h for h in hits if _passes(h.metadata, conds)]
        if len(passing) >= n or len(hits) < n + spare:  # enough, or that was every entry
            return passing[:n]
    negated = [{key: {_NEGATE[op]: value}} for key, op, value in conds]
    with guard.exclusive(index.store):
        got = index.collection.get(where=negated[0] if len(negated) == 1
                                   else {"$or": negated}, limit=COMPLEMENT_MAX + 1,
                                   include=[])
        excluded = set(got["ids"])
        if len(excluded) > COMPLEMENT_MAX:
            return None
        hits = index.query(vector, n + len(excluded))
    out = []
    for hit in hits:
        if hit.id in excluded:
            continue
        if not _passes(hit.metadata, conds):  # metadata the negation missed (odd types)
            return None
        out.append(hit)
    return out[:n]
