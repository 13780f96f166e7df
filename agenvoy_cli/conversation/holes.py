"""History.json holes: archived messages an interrupted write left out of history.json.

An append writes history.json, then commits the archive; before #49, an interruption (a
hook's time limit, Ctrl-C) landing right after that commit put the old history.json back,
and the next sync marked the batch `gone`, as if a person had removed it. Such rows are
told apart from messages that really left history.json by where they are:

- at the end: live rows after the last message history.json holds, when every message it
  holds is an archived row unchanged (the put-back's shape; a file a person rewrote, with a
  message edited or new, keeps what they left out);
- anywhere in a session an importer owns (import_sources): only this tool writes its
  history.json, so no other program or editor removed them.

Agenvoy's own sessions keep the identity rule (a row that left history.json mid-file, e.g.
a tool message Agenvoy's rewrite drops, stays `gone`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from agenvoy_cli.conversation import alignment, archive
from agenvoy_cli.conversation.identity import Candidate


def imported(conn: sqlite3.Connection, session_id: str) -> bool:
    """Whether an importer (a transcript of another agent) owns the session: its
    history.json is written by this tool alone. An export restored (format agenvoy) keeps
    the gone rows its own home had."""
    try:
        row = conn.execute("SELECT 1 FROM import_sources WHERE session_id = ? AND "
                           "format != 'agenvoy' LIMIT 1", (session_id,)).fetchone()
    except sqlite3.OperationalError:  # a home from before imports
        return False
    return row is not None


def find(conn: sqlite3.Connection, session_id: str,
         messages: Sequence[dict[str, Any]]) -> tuple[list[Candidate], list[int]]:
    """(the rows of the holes, by place; the place of each history.json message)."""
    rows = archive.session_rows(conn, session_id)
    cands = [c for c in alignment.candidates(conn, session_id, rows.start_seq or 0)
             if c.seq is not None]
    if not cands:
        return [], []
    seqs, ids = alignment.mapping(messages, cands, rows.next_seq, conn)
    matched = {i for i in ids if i is not None}
    top = max((c.seq for c in cands if c.id in matched and c.seq is not None), default=-1)
    owned = imported(conn, session_id)
    put_back = owned or _unchanged(conn, messages, cands, ids)
    found = [c for c in cands if c.id not in matched and c.seq is not None and
             (owned or (put_back and not c.gone and c.seq > top))]
    return found, seqs


def _unchanged(conn: sqlite3.Connection, messages: Sequence[dict[str, Any]],
               cands: list[Candidate], ids: Sequence[int | None]) -> bool:
    """Whether every history.json message is an archived row as it was archived: what the
    put-back leaves. A file a person rewrote (a message edited or new) is theirs: the rows
    it no longer holds left it, and a repair must not put them back."""
    keys = alignment.match_keys(conn, messages, cands)
    hashes = {c.id: c.hash for c in cands}
    return all(i is not None and hashes.get(i) == k for i, k in zip(ids, keys))


def merged(conn: sqlite3.Connection, session_id: str, messages: Sequence[dict[str, Any]],
           seqs: list[int], found: list[Candidate]) -> list[dict[str, Any]]:
    """history.json with the holes' messages back at their places (as archived)."""
    wanted = {c.seq for c in found}
    lo = min(s for s in wanted if s is not None)
    back = [(m.seq, m.raw) for m in archive.rows_from(conn, session_id, lo)
            if m.seq in wanted]
    both = sorted([*zip(seqs, messages), *back], key=lambda pair: pair[0])
    return [m for _, m in both]
