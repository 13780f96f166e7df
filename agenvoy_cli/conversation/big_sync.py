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
from agenvoy_cli.conversation.history import History
from agenvoy_cli.conversation.history_format import is_record, record_hash
from agenvoy_cli.conversation.history_view import batches
from agenvoy_cli.conversation.messages import identities


class BigSync(NamedTuple):
    start: int
    inserted: int
    seqs: Sequence[int]
    edited: int
    left: int
    changed: list[int]  # places whose index entries must go (Store tells the hooks)
    renumbered_from: int | None


def archived_prefix(conn: sqlite3.Connection, session_id: str, history: Sequence[Any],
                    lo: int, derived: dict[int, str] | None = None) -> int:
    """How many messages from the start of history are archived at places lo, lo+1, ...:
    as they are (the row's identity), or as Agenvoy v0.32's normalise rewrite left them
    (header -> sendAt, tool-call fields dropped: the row's record_hash, for a message the
    rewrite could have left, is_record). One identity per message either way, both read
    from one index (idx_messages_identities), no row. A batch is first compared whole with
    one column: the one its first message's row matches (a probe of one place), each
    message's identity made by the same code whatever its format (messages.identities);
    anything else (a mixed batch, a row without a record_hash, one that stops) is decided
    a message at a time (_walk). A row without a record_hash (older than migration 016, or
    Agenvoy's) has it derived from its JSON, only when the message is not the row itself;
    derived (when given) receives them by place, for the caller to store
    (archive.set_record_hashes)."""
    done = 0
    for part in batches(history):
        first = lo + done
        keys, odd = identities(part)
        probe = conn.execute(_PROBE, (session_id, first)).fetchone()
        columns: tuple[str, ...] = ()
        if probe is not None and keys:
            if keys[0] == probe[0]:  # the file as the rows are; or, a row the rewrite
                # leaves as it is (record_hash ""), maybe each as the rewrite left its row
                columns = (_HASHES, _LEFT) if probe[1] == "" and not odd else (_HASHES,)
            elif keys[0] == probe[1] and not odd:  # each as the rewrite left its row: the
                # rows' record_hash, or where one is "" (its own identity) the mixed column
                columns = (_RECORDS, _LEFT)
        for column in columns:
            got = conn.execute(column, (session_id, first, first + len(part))).fetchall()
            n = len(got)
            if n and got[-1][0] == first + n - 1:  # a row at each of the first n places
                _, idents = zip(*got)
                if idents == tuple(keys if n == len(part) else keys[:n]):
                    break
        else:
            got = conn.execute(_IDENTITIES, (session_id, first, first + len(part))).fetchall()
            n = _walk(conn, session_id, first, part, keys, got, derived)
        if n < len(part):
            return done + n
        done += n
    return done


# the identities of the row at one place; then, of the rows at some places in order, one
# column: the rows' own identities (hash), or their record_hash as it is (a file the rewrite
# left, every row with a header or tool call: what a file we wrote holds), or what the
# rewrite leaves of each row (record_hash, or hash where it is ""; a CASE per row: ~250
# instructions, only when the column as it is did not match); NULL (not derived yet)
# matches nothing here; all from the index alone
_PROBE = "SELECT hash, record_hash FROM messages WHERE session_id = ? AND seq = ?"
_HASHES = ("SELECT seq, hash FROM messages "
           "WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq")
_RECORDS = ("SELECT seq, record_hash FROM messages "
            "WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq")
_LEFT = ("SELECT seq, CASE record_hash WHEN '' THEN hash ELSE record_hash END "
         "FROM messages WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq")
# both identities of the rows at some places, in order (the walk a message at a time)
_IDENTITIES = ("SELECT seq, hash, record_hash FROM messages "
               "WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq")


def _walk(conn: sqlite3.Connection, session_id: str, first: int, part: list[dict[str, Any]],
          keys: list[str], got: list[tuple[int, str | None, str | None]],
          derived: dict[int, str] | None) -> int:
    """How many messages of part (at places first.., their identities keys) are archived:
    archived_prefix's test, a message at a time (a mixed batch, or one that stops)."""
    rows = {seq: (have, told) for seq, have, told in got}
    end, unknown = len(part), []
    for i, message in enumerate(part):
        row = rows.get(first + i)
        if row is None or row[0] is None:
            end = i
            break
        key = keys[i]
        if key == row[0]:
            continue
        if (key == row[1] or row[1] is None) and is_record(message):
            if row[1] is None:  # not derived yet: from the row's JSON, below
                unknown.append((i, key))
            continue
        end = i
        break
    if unknown:
        end = min(end, _first_other(conn, session_id, first, len(part), unknown, derived))
    return end


def _first_other(conn: sqlite3.Connection, session_id: str, first: int, size: int,
                 unknown: list[tuple[int, str]], derived: dict[int, str] | None) -> int:
    """The first of these messages (index into their batch of `size`, identity), at places
    first + i, whose row had no record_hash and is not the message as the rewrite leaves it
    (the rows' JSON read and their record_hash derived: history_format.record_hash); size
    if none."""
    for k in range(0, len(unknown), 500):
        some = unknown[k:k + 500]
        told = {}
        for seq, ident, message in conn.execute(
                f"SELECT seq, hash, message FROM messages WHERE session_id = ? "
                f"AND seq IN ({','.join('?' * len(some))})",
                [session_id, *(first + i for i, _ in some)]).fetchall():
            msg = orjson.loads(message) if message else None
            # a row without its JSON has no other identity (as alignment.match_keys has it)
            told[seq] = record_hash(msg, ident) if isinstance(msg, dict) else ""
        if derived is not None:
            derived.update(told)
        for i, key in some:
            if told.get(first + i) != key:
                return i
    return size


def sync_big(conn: sqlite3.Connection, session_id: str, history: History,
             fallback: int) -> BigSync:
    """Store.align's work, in its transaction (fallback: the time of a message with none)."""
    messages = history.messages
    alignment.rederive(conn, session_id)
    rows = archive.session_rows(conn, session_id)
    lo = rows.start_seq or 0
    derived: dict[int, str] = {}
    k = archived_prefix(conn, session_id, messages, lo, derived)
    if derived:
        archive.set_record_hashes(conn, session_id, derived)
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
