"""Bringing the archive in line with history.json, whoever edited it (the identity rule of
conversation/identity.py applied to SQLite in the caller's transaction)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, NamedTuple

import orjson

from agenvoy_cli.conversation import archive, identity, sessions
from agenvoy_cli.conversation.history_format import HeaderIdentity, is_record, record_key, time_ns
from agenvoy_cli.conversation.identity import Candidate, Plan
from agenvoy_cli.conversation.messages import (
    content_text,
    message_identity,
)
from agenvoy_cli.conversation.messages import (
    identity_key as identity_of,
)
from agenvoy_cli.home.files import file_identity


class Aligned(NamedTuple):
    seqs: list[int]  # the place of every history.json message
    inserted: int
    edited: list[int]  # places whose text changed
    left: list[int]  # places that left history.json (still archived)
    renumbered_from: int | None  # places from here on moved (a message inserted before them)


def candidates(conn: sqlite3.Connection, session_id: str, lo_seq: int) -> list[Candidate]:
    """Rows that may be in history.json: placed at or after lo_seq (by place), then the rows
    another program inserted (Agenvoy: no place yet), by insertion id, never by time."""
    out = []
    for rid, seq, ident, role, gone, send_at, content, message in conn.execute(
            "SELECT id, seq, hash, role, gone, send_at, CASE WHEN hash IS NULL THEN content END,"
            " CASE WHEN hash IS NULL THEN message END FROM messages "
            "WHERE session_id = ? AND seq >= ? ORDER BY seq", (session_id, lo_seq)):
        if ident is None:  # not derived again yet (migration 006): as rederive() will
            msg = orjson.loads(message) if message else None
            text = content_text(msg.get("content")) if isinstance(msg, dict) else content
            ident = identity_of(role, text, msg)
        out.append(Candidate(rid, seq, ident, role, bool(gone), send_at))
    for row_id, role, content, send_at in conn.execute(
            "SELECT id, role, content, send_at FROM messages WHERE session_id = ? "
            "AND seq IS NULL ORDER BY id", (session_id,)):
        out.append(Candidate(row_id, None, identity_of(role, content, None), role, False,
                             send_at))
    return out


def match_keys(conn: sqlite3.Connection | None, history: Sequence[dict[str, Any]],
               cands: list[Candidate]) -> list[str]:
    """The identity each history.json message is matched by. A message Agenvoy v0.32's
    rewrite put in its format (header -> sendAt, tool-call fields dropped) is the row it was: first
    by the header we would have written (no read), else by what the rewrite leaves of the
    archived rows not matched yet (their JSON read only then)."""
    keys = [message_identity(m) for m in history]
    known = {c.hash for c in cands}
    missing = [i for i, k in enumerate(keys) if k not in known and is_record(history[i])]
    if not missing:
        return keys
    header_identity = HeaderIdentity()
    for i in missing:
        alt = header_identity.key(history[i], known)
        if alt is not None:
            keys[i] = alt
    still = [i for i in missing if keys[i] not in known]
    if still and conn is not None:
        used = set(keys)
        rest = [c for c in cands if c.hash not in used and not c.gone and c.seq is not None]
        pool = _rewritten_pool(conn, rest)
        for i in still:
            found = pool.get(record_key(history[i]))
            if found:
                keys[i] = found.pop(0)
    return keys


def _rewritten_pool(conn: sqlite3.Connection, rest: list[Candidate]) -> dict[str, list[str]]:
    """What a v0.32 rewrite leaves of each row (record_key of its full JSON) -> the rows'
    identities, in place order."""
    pool: dict[str, list[str]] = {}
    for k in range(0, len(rest), 500):
        part = {c.id: c.hash for c in rest[k:k + 500]}
        for rid, message in conn.execute(
                f"SELECT id, message FROM messages WHERE id IN ({','.join('?' * len(part))})"
                " AND message IS NOT NULL ORDER BY seq", list(part)):
            msg = orjson.loads(message)
            if isinstance(msg, dict):
                pool.setdefault(record_key(msg), []).append(part[rid])
    return pool


def _time(message: dict[str, Any], previous: int | None, fallback: int) -> int:
    ns = time_ns(message)
    if ns is not None:
        return ns
    return fallback if previous is None else previous + 1


def apply(conn: sqlite3.Connection, session_id: str, history: Sequence[dict[str, Any]],
          cands: list[Candidate], next_seq: int, fallback_ns: int) -> Aligned:
    """Apply the identity rule: match, mark what left, follow edits, insert what is new."""
    if not cands:  # a first backfill: all new, one bulk insert (FTS indexed set-wise)
        done = archive.insert(conn, session_id, next_seq, history, fallback_ns)
        return Aligned(list(range(next_seq, next_seq + len(history))), done, [], [], None)
    hashes = match_keys(conn, history, cands)
    plan: Plan = identity.plan(hashes, [str(m.get("role")) for m in history], cands)
    by_id = {c.id: c for c in cands}
    places = identity.places(plan.order, {c.id: c.seq for c in cands}, next_seq)
    renumbered = _move_rows(conn, history, plan, by_id, places)
    if plan.gone:
        archive.mark_gone(conn, plan.gone)
    if plan.back:
        archive.mark_back(conn, plan.back)
    inserted, edited = _write_new_and_edited(conn, session_id, history, plan, by_id, places,
                                             fallback_ns)
    seqs = [places[(plan.rows[i], i)] for i in range(len(history))]
    left = [places[(r, None)] for r in plan.gone]
    return Aligned(seqs, inserted, edited, left, min(renumbered) if renumbered else None)


Item = tuple[int | None, int | None]  # (row id, index in history.json)


def _move_rows(conn: sqlite3.Connection, history: Sequence[dict[str, Any]], plan: Plan,
               by_id: dict[int, Candidate], places: dict[Item, int]) -> list[int]:
    """Rows renumbered to their new places (the old places they left), then another
    program's rows given their identity and full JSON."""
    edits = set(plan.edits)
    moves = [(rid, places[item]) for item in plan.order
             if (rid := item[0]) is not None and by_id[rid].seq != places[item]]
    renumbered = [seq for rid, _ in moves if (seq := by_id[rid].seq) is not None]
    if moves:
        archive.renumber(conn, moves)
    for rid, i in plan.order:  # rows of another program: their identity and full JSON
        if rid is not None and by_id[rid].seq is None:
            msg = history[i] if i is not None and i not in edits else None
            archive.complete_external_row(conn, rid, by_id[rid].hash, msg)
    return renumbered


def _write_new_and_edited(conn: sqlite3.Connection, session_id: str,
                          history: Sequence[dict[str, Any]], plan: Plan,
                          by_id: dict[int, Candidate], places: dict[Item, int],
                          fallback_ns: int) -> tuple[int, list[int]]:
    """New messages inserted at their places, edited ones rewritten under their row's id;
    (how many inserted, the places edited). A message without a time follows the one
    before it."""
    edits = set(plan.edits)
    previous: int | None = None
    inserted, edited = 0, []
    for item in plan.order:
        rid, i = item
        if i is None or (rid is not None and i not in edits):
            previous = by_id[rid].send_at if rid is not None else previous
            continue
        msg = history[i]
        if rid is None:
            send_at = _time(msg, previous, fallback_ns)
            archive.insert_placed(conn, session_id, places[item], send_at, msg)
            inserted += 1
        else:  # an edit: the row rewritten under the same id
            ns = time_ns(msg)
            send_at = ns if ns is not None else by_id[rid].send_at
            archive.replace_edited(conn, rid, session_id, places[item], send_at, msg)
            edited.append(places[item])
        previous = send_at
    return inserted, edited


def mapping(history: Sequence[dict[str, Any]], cands: list[Candidate],
            next_seq: int, conn: sqlite3.Connection | None = None
            ) -> tuple[list[int], list[int | None]]:
    """The places history.json's messages have (or would get) and their rows' ids (None:
    not archived yet), without writing anything."""
    hashes = match_keys(conn, history, cands)
    plan = identity.plan(hashes, [str(m.get("role")) for m in history], cands)
    places = identity.places(plan.order, {c.id: c.seq for c in cands}, next_seq)
    return [places[(plan.rows[i], i)] for i in range(len(history))], plan.rows


def rederive(conn: sqlite3.Connection, session_id: str) -> int:
    """Rows left without an identity (migration 006: an older version derived their text
    differently): text, identity and tokens again from their full JSON (the archive
    rewrites each row)."""
    rows = conn.execute("SELECT id, role, content, message FROM messages WHERE session_id = ? "
                        "AND hash IS NULL AND seq IS NOT NULL", (session_id,)).fetchall()
    for rid, role, content, message in rows:
        msg = orjson.loads(message) if message else None
        text = content_text(msg.get("content")) if isinstance(msg, dict) else content
        archive.rederive_row(conn, rid, role, content, text, msg)
    return len(rows)


def unchanged_places(conn: sqlite3.Connection, session_id: str, path: Any,
                     count: int) -> list[tuple[int, int]] | None:
    """(seq, send_at) of history.json's messages when the file is the one we last wrote or
    aligned and nobody added rows since: its live rows, in order, with no matching at all."""
    known = sessions.fingerprint(conn, session_id)
    if known is None or known[1] != count or file_identity(path) != known[0] or \
            archive.has_foreign_rows(conn, session_id):
        return None
    start = archive.session_rows(conn, session_id).start_seq or 0
    rows = conn.execute("SELECT seq, send_at FROM messages WHERE session_id = ? AND seq >= ? "
                        "AND gone = 0 ORDER BY seq", (session_id, start)).fetchall()
    return rows if len(rows) == count else None
