"""What each layer of a Chroma collection holds, for doctor and for a search that met an
inconsistent index: the ids of Chroma's metadata (its SQLite) and those its HNSW layer knows.

An unfiltered query for all n entries is no census: HNSW is approximate, and with many
near-identical vectors it returns a fraction of them (34 of 50, 103 of 150 measured). What a
filtered search needs, and what a stale client loses, is the id -> label map of the HNSW
layer: a query restricted to ids the map lacks fails ("Error finding id"). So membership is
tested by restricted queries, in batches, bisecting the batches that fail.

A vector the map knows can still be unreachable: HNSW's graph may hold no path to it (many
copies of one vector fill each other's neighbour lists; vectors/collection.py CONSTRUCTION_EF).
A restricted query does not find it either (it walks the same graph): the census is one query
as wide as the collection, whose answer lacks the vectors no search can return (queries from
nine other points, stored vectors and random ones, lacked the same ones: measured on
bench/floor.py's floor-E3). A search of width 1000 for 50 can still miss a vector the census
reaches; the census is what no width can fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PROBE_BATCH = 256


def metadata_ids(col: Any) -> list[str]:
    return list(col.get(include=[])["ids"])


def hnsw_missing(col: Any, ids: Sequence[str] | None = None) -> set[str]:
    """The ids (default: every id of the metadata) the HNSW layer does not know. Cost: one
    tiny query per PROBE_BATCH ids when nothing is missing, ~log2(PROBE_BATCH) more per
    missing id."""
    ids = metadata_ids(col) if ids is None else list(ids)
    if not ids:
        return set()
    probe = [[1.0] + [0.0] * (_dim(col) - 1)]
    missing: set[str] = set()
    stack = [ids[i:i + PROBE_BATCH] for i in range(0, len(ids), PROBE_BATCH)]
    while stack:
        part = stack.pop()
        try:
            col.query(query_embeddings=probe, ids=part, n_results=1, include=[])
        except Exception:  # noqa: BLE001 - chromadb's InternalError "Error finding id"
            if len(part) == 1:
                missing.add(part[0])
            else:
                half = len(part) // 2
                stack += [part[:half], part[half:]]
    return missing


def _dim(col: Any) -> int:
    dim = int((col.metadata or {}).get("dim") or 0)
    if dim:
        return dim
    got = col.get(limit=1, include=["embeddings"])
    return len(got["embeddings"][0])


def unreachable(col: Any, ids: Sequence[str] | None = None) -> set[str]:
    """The ids (default: every id of the metadata; pass those the HNSW layer knows) that no
    search of the collection returns: one query with n_results = the count (44 ms at 10,000
    vectors when it returns them all; docs/benchmarks.md), from a fixed probe."""
    count = int(col.count())
    if not count:
        return set()
    probe = [[1.0] + [0.0] * (_dim(col) - 1)]
    got = col.query(query_embeddings=probe, n_results=max(count, len(ids or ())), include=[])
    if ids is None and len(got["ids"][0]) >= count:
        return set()  # every one returned: no need to list them (half the cost at 10,000)
    return set(metadata_ids(col) if ids is None else ids) - set(got["ids"][0])
