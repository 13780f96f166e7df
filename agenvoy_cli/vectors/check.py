"""What each layer of a Chroma collection holds, for doctor and for a search that met an
inconsistent index: the ids of Chroma's metadata (its SQLite) and of its HNSW index."""

from __future__ import annotations

from typing import Any


def metadata_ids(col: Any) -> set[str]:
    return set(col.get(include=[])["ids"])


def hnsw_ids(col: Any) -> set[str]:
    """The ids the HNSW layer returns to an unfiltered query for all of them. Cost: one
    exhaustive query, O(collection) — with one collection per session, O(session)."""
    count = col.count()
    if count == 0:
        return set()
    dim = int((col.metadata or {}).get("dim") or 0) or _dim_of(col)
    res = col.query(query_embeddings=[[1.0] + [0.0] * (dim - 1)], n_results=count,
                    include=[])
    return set(res["ids"][0])


def _dim_of(col: Any) -> int:
    got = col.get(limit=1, include=["embeddings"])
    return len(got["embeddings"][0])
