"""Sync of a big history.json (a HistoryView) in bounded memory.

The identity rule (alignment.apply) compares the whole history.json with the archive at
once. For a file of a million messages that is most of a gigabyte, and nearly all of it is
work already done: the messages archived at their places in order. So, a batch at a time:
skip the prefix whose identities are the rows at the same places; what follows is either
plain new messages (nothing archived after them: inserted in batches, FTS indexed set-wise)
or a real change, handed to alignment.apply with only the rest of the file and the rows
from there on (memory then follows what changed, not the file).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, NamedTuple

import orjson

from agenvoy_cli.conversation import alignment, archive, sessions
from agenvoy_cli.conversation.dress import Redress, is_record, record_key
from agenvoy_cli.conversation.history import History
from agenvoy_cli.conversation.history_view import batches
from agenvoy_cli.conversation.messages import content_text, is_blank, message_identity


class BigSync(NamedTuple):
    start: int
    inserted: int
    seqs: Sequence[int]
    edited: int
    left: int
    changed: list[int]  # places whose index entries must go (Store tells the hooks)
    renumbered_from: int | None


def archived_prefix(conn: sqlite3.Connection, session_id: str, history: Sequence[Any],
                     lo: int) -> int:
    """How many messages from the start of history are archived at places lo, lo+1, ...:
    as they are, or as Agenvoy v0.32's normalise rewrite left them (header -> sendAt,
    tool-call fields dropped). A rewritten file is rewritten throughout, so the dress the
    previous message matched in is tried first: one identity per message either way. In a
    rewritten batch, the rows of its null-content entries (tool calls whose fields the
    rewrite dropped) are told by the start of their JSON, in the same read as the
    identities (_null_content; any other is compared exactly, _first_other)."""
    done = 0
    redressed = False
    key = Redress().key  # the header each rewritten message had, an hour at a time
    starts: dict[Any, str] = {}
    for part in batches(history):
        first = lo + done
        told: dict[int, str] = {}
        if redressed or _rewritten(conn, session_id, first, part, key):
            got = conn.execute(_TOLD, (session_id, first, first + len(part))).fetchall()
            rows = {seq: have for seq, have, _ in got}
            told = {seq: it for seq, _, it in got if it is not None}
        else:
            rows = dict(conn.execute(_ROWS, (session_id, first, first + len(part))).fetchall())
        end, blanks = len(part), []
        for i, message in enumerate(part):
            have = rows.get(first + i)
            if have is None:
                end = i
                break
            if redressed:
                if message.get("content") is not None:
                    if key(message, (have,), True):
                        continue
                elif is_record(message):
                    # a tool call the rewrite left: only its row tells (_first_other, exact)
                    if not _null_content(told.get(first + i), message.get("role"), starts):
                        blanks.append(i)
                    continue
            if have == message_identity(message):
                redressed = False
                continue
            record = is_record(message)
            if record and not redressed and key(message, (have,)):
                redressed = True
                continue
            if not record or not is_blank(content_text(message.get("content"))):
                end = i
                break
            blanks.append(i)
        end = min(end, _first_other(conn, session_id, first, part, blanks))
        if end < len(part):
            return done + end
        done += len(part)
    return done


_ROWS = "SELECT seq, hash FROM messages WHERE session_id = ? AND seq >= ? AND seq < ?"
# ... and the start of the JSON of a row without text (a tool call's): _null_content, in the
# same read (not a second lookup per tool call's row; no JSON parsed)
_TOLD = ("SELECT seq, hash, CASE WHEN content = '' THEN substr(message, 1, 64) END "
         "FROM messages WHERE session_id = ? AND seq >= ? AND seq < ?")


def _null_content(start: str | None, role: Any, starts: dict[Any, str]) -> bool:
    """Whether a row's JSON (its first 64 characters) is, as we write it (orjson, keys in
    order), an object whose role is this one and whose content is null: what the rewrite
    leaves of it is {"role": role, "content": null}. False is not a difference: the row
    is then compared exactly (_first_other)."""
    if start is None or type(role) is not str:
        return False
    head = starts.get(role)
    if head is None:
        head = starts[role] = f'{{"role":{orjson.dumps(role).decode()},"content":null'
    return start.startswith(head) and start[len(head):len(head) + 1] in (",", "}")


def _rewritten(conn: sqlite3.Connection, session_id: str, first: int,
               part: list[dict[str, Any]], key: Any) -> bool:
    """Whether the first message of part with words is its row re-dressed by the rewrite
    (one row read): then the batch is read with what its tool calls' rows say."""
    for i, message in enumerate(part[:64]):
        if type(message.get("content")) is str and is_record(message):
            row = conn.execute("SELECT hash FROM messages WHERE session_id = ? AND seq = ?",
                               (session_id, first + i)).fetchone()
            return row is not None and key(message, (row[0],)) is not None
    return False


def _first_other(conn: sqlite3.Connection, session_id: str, first: int,
                 part: list[dict[str, Any]], blanks: list[int]) -> int:
    """The first of these blank entries (indexes into part, at places first + i) whose row
    is not the message it is once the rewrite's dropped fields are left out; len(part) if
    none is."""
    for k in range(0, len(blanks), 500):
        some = blanks[k:k + 500]
        rows = {seq: (role, kind) for seq, role, kind in conn.execute(
            f"SELECT seq, role, json_type(message, '$.content') FROM messages "
            f"WHERE session_id = ? AND seq IN ({','.join('?' * len(some))}) "
            f"AND message IS NOT NULL", [session_id, *(first + i for i in some)]).fetchall()}
        for i in some:
            message = part[i]
            found = rows.get(first + i)
            if found is None:
                return i
            if message.get("content") is None and found[1] in (None, "null") and \
                    found[0] == str(message.get("role")):
                continue  # a tool call's null content (record_key says the same, slower)
            raw = conn.execute("SELECT message FROM messages WHERE session_id = ? AND seq = ?",
                               (session_id, first + i)).fetchone()[0]
            msg = orjson.loads(raw)
            if not isinstance(msg, dict) or record_key(msg) != record_key(message):
                return i
    return len(part)


def sync_big(conn: sqlite3.Connection, session_id: str, history: History,
             fallback: int) -> BigSync:
    """Store.align's work, in its transaction (fallback: the time of a message with none)."""
    messages = history.messages
    alignment.rederive(conn, session_id)
    rows = archive.session_rows(conn, session_id)
    lo = rows.start_seq or 0
    k = archived_prefix(conn, session_id, messages, lo)
    rest = messages[k:]
    edited = left = 0
    changed: list[int] = []
    renumbered = None
    if rows.next_seq <= lo + k and not archive.has_foreign_rows(conn, session_id):
        inserted, seq = 0, lo + k  # only new messages after the archive's end
        for part in batches(rest):
            inserted += archive.insert(conn, session_id, seq, part, fallback)
            seq += len(part)
        seqs: Sequence[int] = range(lo, lo + len(messages))
    else:
        done = alignment.apply(conn, session_id, rest,
                               alignment.candidates(conn, session_id, lo + k),
                               rows.next_seq, fallback)
        inserted, edited, left = done.inserted, len(done.edited), len(done.left)
        changed, renumbered = done.left + done.edited, done.renumbered_from
        seqs = list(range(lo, lo + k)) + done.seqs
    start = seqs[0] if len(seqs) else archive.session_rows(conn, session_id).next_seq
    if start != (rows.start_seq or 0) and (len(seqs) or rows.has_rows):
        archive.set_start(conn, session_id, start)
    sessions.write_stats(conn, session_id, history.path, len(messages), start,
                         size=history.size)
    return BigSync(start, inserted, seqs, edited, left, changed, renumbered)
