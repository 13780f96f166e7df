"""Consistency of the error-memory vector index with SQLite (doctor)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agenvoy_cli.errormem import records
from agenvoy_cli.errormem.records import Draft, Warn, quiet, semantic_default, vector_meta
from agenvoy_cli.errormem.store import (
    add_vectors,
    by_ids,
    check_fts,
    embed,
    fetch,
    rebuild_fts,
    restore_keywords,
    unflag_vectors,
    vector_dir_exists,
    warm_chroma,
)

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store


# --------------------------------------------------------------------------- consistency


@dataclass
class _IndexState:
    problems: list[str]
    fts_broken: bool = False
    missing_keywords: list[int] = field(default_factory=list)
    drop_collection: bool = False
    stale: list[str] = field(default_factory=list)  # vectors without a record
    unflag: list[str] = field(default_factory=list)  # records flagged, vector gone


def _inspect(store: Store) -> _IndexState:
    """Hold write_lock."""
    state = _IndexState([])
    conn = store.db()
    broken = check_fts(conn)
    if broken is not None:
        state.fts_broken = True
        state.problems.append(f"error-memory full-text index: {broken}")
    state.missing_keywords = [r[0] for r in conn.execute(
        "SELECT seq FROM error_records r WHERE NOT EXISTS "
        "(SELECT 1 FROM error_keywords k WHERE k.seq = r.seq)")]
    if state.missing_keywords:
        state.problems.append(
            f"{len(state.missing_keywords)} error record(s) lack their keyword rows")
    if semantic_default(store):
        _inspect_vectors(store, conn, state)
    return state


def _inspect_vectors(store: Store, conn: sqlite3.Connection, state: _IndexState) -> None:
    """The error records beside their vectors: an index of another model, vectors without a
    record, records that lost theirs or have none yet."""
    rows = conn.execute("SELECT id, vector_model, expires_at FROM error_records").fetchall()
    flagged = {i for i, m, _ in rows if m is not None}
    all_ids = {i for i, _, _ in rows}
    from agenvoy_cli.vectors import api as vectors

    have: set[str] = set()
    exists = vector_dir_exists(store) and vectors.index_exists(store, vectors.ERRORS)
    if exists:
        index = vectors.open_index(store, vectors.ERRORS, create=False)
        built = (index.collection.metadata or {}).get("model_id")
        current = vectors.embedder(store).model_id
        if built != current:
            state.drop_collection = True
            state.problems.append(
                f"error-memory vector index was built with {built}, the embedder is "
                f"{current}: it must be rebuilt")
            flagged = set()
        else:
            have = set(index.get())
    state.stale = sorted(have - all_ids)
    if state.stale:
        state.problems.append(f"{len(state.stale)} error-memory vector(s) without a record")
    if state.drop_collection:
        return
    state.unflag = sorted(flagged - have)
    if state.unflag:
        where = "index is missing" if not exists else "index lacks them"
        state.problems.append(
            f"{len(state.unflag)} error record(s) have lost their vector (the vector "
            f"{where}); lookups rank them by keywords only")
    now = records.now_ns()
    unembedded = sum(1 for _, m, e in rows if m is None and e > now)
    if unembedded:
        state.problems.append(f"{unembedded} error record(s) have no vector yet "
                              "(recorded while no embedder was available)")


def check_error_index(store: Store) -> list[str]:
    """What is out of line between the error records and their indexes (doctor)."""
    if not store.layout.db.exists():
        return []
    with store.write_lock():  # Chroma access holds the lock; nothing is changed
        return _inspect(store).problems


def repair_error_index(store: Store, *, warn: Warn = quiet) -> list[str]:
    """Bring the indexes back in line with the records; returns what was done."""
    if not store.layout.db.exists():
        return []
    from agenvoy_cli.vectors import api as vectors

    done: list[str] = []
    with store.write_lock():
        state = _inspect(store)
        if state.fts_broken:
            rebuild_fts(store)
            done.append("rebuilt the error-memory full-text index")
        if state.missing_keywords:
            restore_keywords(store, state.missing_keywords)
            done.append(f"restored the keyword rows of {len(state.missing_keywords)} record(s)")
        if state.drop_collection:
            vectors.drop_index(store, vectors.ERRORS)
            unflag_vectors(store)
            done.append("dropped the error-memory vector index (built with another model)")
        if state.stale:
            vectors.open_index(store, vectors.ERRORS, create=False).delete(state.stale)
            done.append(f"deleted {len(state.stale)} stale vector(s)")
        if state.unflag:
            unflag_vectors(store, state.unflag)
        todo = fetch(store.db(), "vector_model IS NULL AND expires_at > ?", (records.now_ns(),),
                      order="seq") if semantic_default(store) else []
    if todo:
        drafts = [Draft(r.tool_name, tuple(r.keywords), r.error_type, r.symptom, r.cause,
                        r.action, r.outcome) for r in todo]
        vecs, model = embed(store, [d.document() for d in drafts])  # outside the lock
        warm_chroma()
        with store.write_lock():
            alive = {r.id for r in by_ids(store.db(), [r.id for r in todo])}
            keep = [n for n, r in enumerate(todo) if r.id in alive]
            if keep:
                add_vectors(store, [todo[n].id for n in keep], [vecs[n] for n in keep],
                             [vector_meta(drafts[n]) for n in keep], model)
        done.append(f"embedded {len(keep)} record(s)")
    return done

