"""doctor's checks of a session's archive against its history.json (the identity rule)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence
from typing import Any

import orjson

from agenvoy_cli.conversation import alignment, archive, holes
from agenvoy_cli.conversation.history import History, dump_history, write_history
from agenvoy_cli.conversation.messages import content_text, identity_key, is_blank, message_identity
from agenvoy_cli.home.files import move_aside

Doctor = Any  # doctor.checks.Doctor (which imports this module): report(), store


def duplicates(conn: sqlite3.Connection, sid: str,
               history: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
    """Ids of rows that repeat a message: same identity and same time as an older row, more
    often than history.json holds that message (two identical messages appended in the
    same second are two messages while both are in history.json). The oldest rows stay."""
    occurs = Counter(message_identity(m) for m in history)
    groups: dict[tuple[str, int], list[int]] = {}
    for rid, role, content, message, send_at in conn.execute(
            "SELECT id, role, content, message, send_at FROM messages WHERE session_id = ? "
            "ORDER BY id", (sid,)):
        msg = orjson.loads(message) if message else None
        text = content_text(msg.get("content")) if isinstance(msg, dict) else content
        groups.setdefault((identity_key(role, text, msg), send_at), []).append(rid)
    drop: list[int] = []
    keep: list[int] = []
    for (ident, _), ids in groups.items():
        allowed = max(1, occurs.get(ident, 0))
        if len(ids) > allowed:
            drop += ids[allowed:]
            keep += ids[:allowed]
    return sorted(drop), keep


def check_archive(doctor: Doctor, sid: str, history: History) -> None:
    store = doctor.store
    conn = store.db()
    rows = archive.session_rows(conn, sid)
    dups, _ = duplicates(conn, sid, history.messages)
    if dups:
        doctor.report(sid, "archive", f"{len(dups)} duplicate row(s) (a message archived "
                      "twice)", lambda: remove_duplicates(doctor, sid))
    if history.raw is None:
        live = conn.execute("SELECT count(*) FROM messages WHERE session_id = ? AND gone = 0 "
                            "AND seq IS NOT NULL", (sid,)).fetchone()[0]
        if live:
            doctor.report(sid, "history.json", f"missing, while {live} archived message(s) "
                          "after the trim point belong in it",
                          lambda: rebuild_history(doctor, sid, aside=False))
        return
    if dups:
        return  # the repair above aligns again
    if report_holes(doctor, sid, history.messages):
        return  # the repair aligns the whole session again
    cands = alignment.candidates(conn, sid, rows.start_seq or 0)
    report_unarchived(doctor, sid, history.messages, cands, rows.next_seq)


def report_unarchived(doctor: Doctor, sid: str, messages: Sequence[dict[str, Any]],
                      cands: list[Any], next_seq: int) -> None:
    """Report the messages of history.json that SQLite lacks or holds in an older version
    (both repaired by a thorough sync)."""
    conn = doctor.store.db()
    _, ids = alignment.mapping(messages, cands, next_seq, conn)
    keys = alignment.match_keys(conn, messages, cands)
    missing = sum(1 for m, rid in zip(messages, ids)
                  if rid is None and not is_blank(content_text(m.get("content"))))
    by_id = {c.id: c for c in cands}
    edited = sum(1 for key, rid in zip(keys, ids)
                 if rid is not None and by_id[rid].hash != key)
    if missing:
        doctor.report(sid, "archive", f"{missing} message(s) of history.json are not in SQLite",
                      lambda: realign(doctor, sid))
    if edited:
        doctor.report(sid, "archive", f"{edited} message(s) of history.json were edited since "
                      "they were archived", lambda: realign(doctor, sid))


def report_holes(doctor: Doctor, sid: str, messages: Sequence[dict[str, Any]]) -> bool:
    """Archived messages an interrupted write left out of history.json (never a person's
    removal: conversation/holes.py); --repair puts them back in place."""
    found, _ = holes.find(doctor.store.db(), sid, messages)
    if not found:
        return False
    places = f"{found[0].seq}" if len(found) == 1 else f"{found[0].seq}-{found[-1].seq}"
    doctor.report(sid, "history.json", f"{len(found)} archived message(s) missing from it "
                  f"(place {places}; an interrupted write left them out)",
                  lambda: f"put {doctor.store.restore_holes(sid)} message(s) back in "
                  "history.json")
    return True


def realign(doctor: Doctor, sid: str) -> str:
    with doctor.store.write_lock():
        result = doctor.store.align(sid, thorough=True)
    return (f"archived {result.inserted} message(s), {result.edited} edited, "
            f"{result.left} no longer in history.json")


def remove_duplicates(doctor: Doctor, sid: str) -> str:
    store = doctor.store
    with store.write_lock():
        history = store.history(sid)
        with store.transaction() as conn:
            dups, keep = duplicates(conn, sid, history.messages)
            archive.drop_duplicates(conn, dups, keep)
        result = store.align(sid, history, thorough=True)
    return f"deleted {len(dups)} duplicate row(s); {result.inserted} message(s) archived"


def rebuild_history(doctor: Doctor, sid: str, *, aside: bool = True) -> str:
    """history.json from the archived messages still in it (the context window kept)."""
    store = doctor.store
    with store.write_lock():
        path = store.layout.history(sid)
        kept = None
        if aside and path.exists():  # the damaged file is kept beside the original
            kept = move_aside(path)
        conn = store.db()
        rows = archive.session_rows(conn, sid)
        messages = [m.raw for m in archive.rows_from(conn, sid, rows.start_seq or 0, live=True)]
        write_history(path, dump_history(messages))
    note = f"; the damaged file is {kept.name}" if kept else ""
    return f"rebuilt history.json from the archive ({len(messages)} message(s)){note}"


def check_archive_big(doctor: Doctor, sid: str, history: History) -> None:
    """check_archive for a history.json too big to hold (a HistoryView): the same findings,
    in memory that follows what is wrong rather than the file. Duplicates are found by SQL
    grouping; the archived prefix (identities at their places) is skipped a batch at a time;
    only the rest is matched by the identity rule."""
    from agenvoy_cli.conversation.big_sync import archived_prefix

    conn = doctor.store.db()
    rows = archive.session_rows(conn, sid)
    repeated = dict(conn.execute(
        "SELECT hash, max(n) FROM (SELECT hash, count(*) AS n FROM messages WHERE session_id = ?"
        " AND hash IS NOT NULL GROUP BY hash, send_at HAVING n > 1) GROUP BY hash", (sid,)))
    if repeated:
        occurs = Counter(h for m in history.messages if (h := message_identity(m)) in repeated)
        extra = sum(n - max(1, occurs.get(h, 0)) for h, n in repeated.items())
        if extra > 0:
            doctor.report(sid, "archive", f"{extra} duplicate row(s) (a message archived "
                          "twice)", lambda: remove_duplicates(doctor, sid))
            return
    lo = rows.start_seq or 0
    k = archived_prefix(conn, sid, history.messages, lo)
    rest = history.messages[k:]
    if not len(rest):
        return
    cands = alignment.candidates(conn, sid, lo + k)
    report_unarchived(doctor, sid, rest, cands, rows.next_seq)
