"""The import: each unit into its session through the Store, exactly once and incrementally.

A unit's cursor (import_sources) says how many of its records were read and a digest of
them. A re-import hashes that many records again: the same digest -> only the records after
them are new; another digest -> the old part changed: reported, nothing imported. Messages
go in by Store.append in batches, the cursor written after each under the same lock; a
crash between the two leaves archive rows past the cursor's seq_end that are exactly the
next messages: the next run recognises them and does not append them again. Before a
source's first batch, a cursor of 0 records claims the session (a crash right after that
batch leaves it owned, its rows the tail, not a session to go around with a new id).

Every message is checked with bounds before use (nesting, strings, numbers, the Store's own
rules): one that fails is skipped with its reason, the others go in. A source that cannot be
read on (ReadFailure: an I/O error, JSON cut short) keeps what was read before it: status
`partial` (or `unreadable` when nothing was). A message an older import archived before it
was complete (Record.start) is completed in place, once (Store.complete_message).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

import orjson

from agenvoy_cli.conversation import history_format
from agenvoy_cli.conversation.messages import message_identity, validate_message
from agenvoy_cli.conversation.store import Store
from agenvoy_cli.errors import BadInput
from agenvoy_cli.home.layout import validate_name
from agenvoy_cli.transfer import sources
from agenvoy_cli.transfer.records import (
    MAX_NS,
    MIN_NS,
    OPEN_FROM,
    OWED,
    Learnt,
    ReadFailure,
    Record,
    Timed,
    Unit,
    problem,
)

BATCH = 2000  # messages per append (one lock, one transaction each)
# history.json is compacted once it is this many times its limit (and at the end): each
# compaction reads and rewrites the file, so compacting at every batch over the limit costs
# ~10 % of an import's CPU; up to twice the limit, the file read whole (a list below
# history_view.STREAM_BYTES) lifts the peak to ~93 MiB; at 1.25 it is ~72 MiB for about
# the CPU of 2 (bench/import_memory.py --format claude-code, 50 MiB)
COMPACT_OVER = 1.25
REASONS = 5  # skipped records named in the result
T = TypeVar("T")


def _stamp(message: dict[str, Any], moment: int | None, last: int) -> tuple[dict[str, Any], int]:
    """The message with its time as sendAt (Store.append writes it in the session's format:
    a header, or sendAt): its own when it has one (sendAt, a header), else the record's,
    else the previous message's."""
    own = history_format.time_ns(message)
    if own is not None or history_format.SEND_AT in message:  # (a bad one is refused with it)
        return message, own if own is not None and MIN_NS <= own <= MAX_NS else last
    at = moment if moment is not None else last
    return {**message, history_format.SEND_AT: at}, at


def _identities(message: dict[str, Any]) -> set[str]:
    """The identity of the row the message becomes, in either format."""
    moment = datetime.now()
    return {message_identity(history_format.in_format(message, moment, fmt))
            for fmt in history_format.FORMATS}


def _choose_session(store: Store, unit: Unit, forced: str | None) -> str:
    if forced:
        return validate_name(forced)
    sid = validate_name(unit.session_id)
    conn = store.db_readonly()
    owner = sources.session_owner(conn, sid)
    if (owner is None and not store.exists(sid)) or owner == unit.key:
        return sid
    digest = hashlib.blake2b(unit.key.encode(), digest_size=4).hexdigest()
    return validate_name(f"{sid}-{digest}")


def _tail(store: Store, sid: str, seq_end: int) -> list[str]:
    """Identities of the archive rows after seq_end (a batch whose cursor was not written)."""
    with store.write_lock():
        if store.exists(sid):
            store.align(sid)
        conn = store.db()
        rows = conn.execute("SELECT hash FROM messages WHERE session_id = ? AND seq >= ? "
                            "ORDER BY seq", (sid, seq_end)).fetchall()
    return [r[0] for r in rows]


def read_error(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    if isinstance(exc, RecursionError):
        return "nested too deep to read"
    return str(exc) or type(exc).__name__


def guarded(make: Callable[[], Iterable[T]]) -> Iterator[T]:
    """What a reader makes (records, units); whatever stops the reading (the input's own I/O
    error, a value it cannot decode) is a ReadFailure. Only the reader runs inside: an error
    of the home (a full disk while writing) is never taken for one of the input."""
    try:
        it = iter(make())
        while True:
            try:
                record = next(it)
            except StopIteration:
                return
            yield record
    except ReadFailure:
        raise
    except (OSError, ValueError, RecursionError, UnicodeError) as exc:
        raise ReadFailure(read_error(exc)) from None


def fold(unit: Unit, learnt: Learnt) -> None:
    """What the reader learnt, into the unit's meta and report: the one place either is
    written while the unit is read (readers return, they never write)."""
    for key in learnt.dropped:
        unit.meta.pop(key, None)
    unit.meta.update(learnt.meta)
    for key, values in learnt.lists.items():
        kept = unit.meta.setdefault(key, [])
        for value in values:
            if value not in kept:
                kept.append(value)
    unit.report.update(learnt.report)


def records(unit: Unit, skip: int = 0) -> Iterator[Record]:
    """The unit's records; what its reader learnt beside them folded in as it comes (before
    the records read after it, as a reader that wrote it would have)."""
    for item in unit.records(skip=skip) if skip else unit.records():
        if isinstance(item, Learnt):
            fold(unit, item)
        else:
            yield item


class Outcome:
    def __init__(self, unit: Unit) -> None:
        self.doc: dict[str, Any] = {"source": unit.key, "format": unit.format,
                                    "session_id": None, "status": "imported", "added": 0,
                                    "record_count": 0, "skipped": 0, "malformed": 0,
                                    "reasons": []}

    def skip(self, reason: str) -> None:
        self.doc["skipped"] += 1
        self.doc["malformed"] += 1
        if len(self.doc["reasons"]) < REASONS:
            self.doc["reasons"].append(reason)

    def failed(self, status: str, reason: str) -> None:
        self.doc["status"] = status
        self.doc["reasons"] = [reason, *self.doc["reasons"]][:REASONS]


def check_strict(unit: Unit) -> None:
    try:
        bad = [r.error for r in guarded(partial(records, unit)) if r.error]
    except ReadFailure as exc:
        raise BadInput(f"{unit.key}: cannot be read ({exc}), nothing imported "
                       "(--strict)") from None
    if bad:
        raise BadInput(f"{unit.key}: {len(bad)} malformed record(s), nothing imported "
                       f"(--strict): {bad[0]}")


SCANNED = "whole_messages"  # in a cursor's meta: its rows were checked for incomplete ones
BOUNDARY = "between_messages"  # in a cursor's meta: written where no message was open
WINDOW = 64  # archived rows looked ahead for a message's own


class Completions:
    """One pass, in order, over a session's archived assistant rows beside the messages its
    source had before the cursor: a row that is an incomplete form of its message (an older
    version archived it while the message was still being written, and lost the rest) is
    completed, once, when the source is next imported (the cursor's meta then says so)."""

    def __init__(self, store: Store, sid: str, part_of: Callable[[dict[str, Any],
                                                                   dict[str, Any]], bool]):
        self.store, self.sid, self.part_of = store, sid, part_of
        conn = store.db_readonly()
        self.rows: Iterator[tuple[int, str | None]] | None = iter(()) if conn is None else \
            iter(conn.execute("SELECT seq, message FROM messages WHERE session_id = ? AND "
                              "role = 'assistant' AND seq IS NOT NULL ORDER BY seq", (sid,)))
        self.ahead: list[tuple[int, dict[str, Any]]] = []
        self.found: list[tuple[int, Timed]] = []

    def see(self, record: Record) -> None:
        for message, moment in record.messages:
            if message.get("role") == "assistant" and self.rows is not None:
                self._match(message, moment, bool(record.start))

    def _match(self, message: dict[str, Any], moment: int | None, grouped: bool) -> None:
        assert self.rows is not None
        while len(self.ahead) < WINDOW:
            row = next(self.rows, None)
            if row is None:
                break
            if row[1]:
                self.ahead.append((row[0], orjson.loads(row[1])))
        for i, (seq, archived) in enumerate(self.ahead):
            if self.part_of(archived, message):
                if grouped and not self.part_of(message, archived):
                    self.found.append((seq, (message, moment)))
                del self.ahead[:i + 1]
                return

    def close(self) -> list[tuple[int, Timed]]:
        """The rows to complete (seq, message); the pass is over."""
        self.rows = None
        self.ahead = []
        return self.found


def _skip(cursor: sources.Cursor) -> int:
    """Records the reader may pass unparsed: those the cursor covers, less the last
    message when it was taken as complete only because the file was settled (OPEN_FROM:
    its writer may have added blocks to it since, which must merge into it)."""
    first = cursor.meta.get(OPEN_FROM)
    if isinstance(first, int) and not isinstance(first, bool) and 0 < first <= cursor.records:
        return first - 1
    return cursor.records


class _Import:
    """One unit's import, record by record."""

    def __init__(self, store: Store, unit: Unit, cursor: sources.Cursor | None, sid: str,
                 dry_run: bool) -> None:
        self.store, self.unit, self.cursor, self.sid, self.dry_run = \
            store, unit, cursor, sid, dry_run
        self.out = Outcome(unit)
        self.doc = self.out.doc
        self.doc["session_id"] = sid
        self.seen = hashlib.blake2b(digest_size=16)
        self.tail = _tail(store, sid, cursor.seq_end) if cursor and not dry_run else []
        self.pending: list[Timed] = []
        self.places: list[int] = []  # the record (1-based) of each pending message
        self.size = 0  # of history.json after this import's last append (0: not known)
        self.total = 0  # messages the unit has
        self.scan = self._scan() if cursor is not None and not dry_run else None
        if unit.rescan:
            unit.meta[SCANNED] = 1
        for key, value in (cursor.meta if cursor else {}).items():
            unit.meta.setdefault(key, value)  # what the reader learns only from skipped records
        self.skip = self._skippable()
        self.claimed = cursor is not None
        # a message with no time of its own and none before it: the source's (stable
        # across runs, so a re-run recognises what a killed one appended)
        self.last_time = unit.mtime_ns or time.time_ns()

    def _scan(self) -> Completions | None:
        """The pass that completes rows an older version archived incomplete, when owed."""
        unit, cursor = self.unit, self.cursor
        if unit.part_of is None or not unit.rescan or cursor is None or \
                cursor.meta.get(SCANNED):
            return None
        return Completions(self.store, self.sid, unit.part_of)

    def _skippable(self) -> int:
        """Records the reader may pass unparsed (none while the pass must see them)."""
        cursor = self.cursor
        if cursor and self.unit.skips and self.scan is None and cursor.meta.get(BOUNDARY):
            return _skip(cursor)
        return 0

    def claim(self) -> None:
        top = self.store.db().execute("SELECT max(seq) FROM messages WHERE session_id = ?",
                                      (self.sid,)).fetchone()[0]
        with self.store.transaction() as conn:
            sources.put(conn, sources.Cursor(
                self.unit.key, self.unit.format, self.sid, 0,
                hashlib.blake2b(digest_size=16).hexdigest(), 0 if top is None else top + 1,
                None, None, self.unit.meta))
        self.claimed = True

    def stamped(self, items: list[Timed]) -> list[dict[str, Any]]:
        out = []
        for message, moment in items:
            message, self.last_time = _stamp(message, moment, self.last_time)
            out.append(message)
        return out

    def valid(self, messages: list[dict[str, Any]], places: int | list[int]
              ) -> list[dict[str, Any]]:
        """The messages Store.append takes; the others skipped with their reasons (asked
        only when a batch was refused, or to count a dry run: the Store checks every batch).
        `places`: the record of each message (or of them all), named in a reason with the
        message's index in it."""
        return self._valid(messages, places)[0]

    def _valid(self, messages: list[dict[str, Any]], places: int | list[int]
               ) -> tuple[list[dict[str, Any]], list[int]]:
        out: list[dict[str, Any]] = []
        kept: list[int] = []
        limit = self.store.settings.max_history_bytes
        at = places if isinstance(places, list) else [places] * len(messages)
        index = 0  # of the message in its record
        for i, message in enumerate(messages):
            index = index + 1 if i and at[i] == at[i - 1] else 0
            try:
                history_format.validate(validate_message(message, index, limit), "message")
            except BadInput as exc:  # the bounds' own words when one of them is the cause
                self.out.skip(f"record {at[i]}: {problem(message) or exc}")
                continue
            out.append(message)
            kept.append(at[i])
        return out, kept

    def checked(self, items: list[Timed], records: int) -> list[dict[str, Any]]:
        """The messages that can be stored, stamped with their times; the others skipped."""
        return self.valid(self.stamped(items), records)

    def cursor_put(self, records: int) -> None:
        if self.unit.skips:
            self.unit.meta[BOUNDARY] = 1
        top = self.store.db().execute("SELECT max(seq) FROM messages WHERE session_id = ?",
                                      (self.sid,)).fetchone()[0]
        with self.store.transaction() as conn:
            sources.put(conn, sources.Cursor(
                self.unit.key, self.unit.format, self.sid, records, self.seen.hexdigest(),
                0 if top is None else top + 1, None, None, self.unit.meta))

    def flush(self, records: int) -> None:
        checked = self.stamped(self.pending)
        places = self.places[:len(checked)] + [records] * (len(checked) - len(self.places))
        self.pending, self.places = [], []
        if self.dry_run:
            self.doc["added"] += len(self.valid(checked, places))
            return
        if self.tail:  # (rare: a killed run's last batch) compared as the Store wrote them
            checked, places = self._valid(checked, places)
        while checked and self.tail and self.tail[0] in _identities(checked[0]):
            self.tail.pop(0)  # appended by a run that died before writing its cursor
            checked.pop(0)
            places.pop(0)
        self.tail = [] if checked else self.tail
        with self.store.write_lock():
            if checked and not self.claimed:
                self.claim()
            if checked:
                checked = self.append(checked, places)
            self.cursor_put(records)
        self.doc["added"] += len(checked)

    def append(self, messages: list[dict[str, Any]], places: list[int]
               ) -> list[dict[str, Any]]:
        """Append a batch (an export's session keeps its own format and trim point); a batch
        the Store refuses goes in without the messages it refuses. What went in."""
        try:
            done = self.store.append(self.sid, messages, compact=False,
                                     history_format=self.unit.history_format)
        except BadInput:
            messages = self.valid(messages, places)
            if not messages:
                return messages
            done = self.store.append(self.sid, messages, compact=False,
                                     history_format=self.unit.history_format)
        self.compact(done.bytes, COMPACT_OVER)
        return messages

    def finish(self) -> None:
        """The session within its limit, as an append leaves it."""
        if self.size and not self.dry_run:
            with self.store.write_lock():
                self.compact(self.size, 1)

    def compact(self, size: int, over: float) -> None:
        """Trim history.json once it is `over` times its limit (never an export's session:
        it restores its own trim point)."""
        self.size = size
        if self.unit.trim is None and size > over * self.store.settings.max_history_bytes:
            self.store.compact(self.sid)
            self.size = 0

    def complete(self, record: Record, records: int) -> list[Timed]:
        """The first message of `record` completes the row an older import archived of it
        (the last it added); what is left to append."""
        assert self.cursor is not None and self.unit.part_of is not None
        if self.pending:
            self.flush(records - 1)
        checked = self.checked(record.messages[:1], records)
        if not checked:
            return record.messages[1:]
        if self.dry_run:
            self.doc["completed"] = self.doc.get("completed", 0) + 1
            return record.messages[1:]
        with self.store.write_lock():
            done = self.store.complete_message(self.sid, self.cursor.seq_end - 1, checked[0],
                                               self.unit.part_of)
        if not done:
            return record.messages
        self.doc["completed"] = self.doc.get("completed", 0) + 1
        return record.messages[1:]

    def complete_scanned(self, records: int) -> None:
        """Complete the rows the pass over what was read before found incomplete."""
        if self.scan is None:
            return
        found, self.scan = self.scan.close(), None
        assert self.unit.part_of is not None
        for seq, item in found:
            checked = self.checked([item], records)
            if checked:
                with self.store.write_lock():
                    if self.store.complete_message(self.sid, seq, checked[0],
                                                   self.unit.part_of):
                        self.doc["completed"] = self.doc.get("completed", 0) + 1

    def run(self) -> None:
        done = self.cursor.records if self.cursor else 0
        count = 0
        last: int | None = None  # the last record read past the cursor
        try:
            for record in guarded(partial(records, self.unit, self.skip)):
                count += 1
                self.total += len(record.messages)
                self.seen.update(len(record.raw).to_bytes(8, "little") + record.raw)
                if count > done:
                    self.take(record, count, done)
                    last = count
                elif not self.reread(record, count, done):
                    return
        except ReadFailure as exc:
            self.doc["record_count"] = count
            self.flush_last(count, last)
            self.out.failed("partial" if count else "unreadable", str(exc))
            return
        self.wrap_up(count, done, last)

    def reread(self, record: Record, count: int, done: int) -> bool:
        """A record the cursor covers (read by an earlier import): seen by the pass that
        completes rows, its times carried; False when the source changed under the cursor."""
        if self.scan is not None:
            self.scan.see(record)
        if count == done and self.cursor is not None and \
                self.seen.hexdigest() != self.cursor.digest:
            self.doc.update(status="changed", record_count=count)
            return False
        for message, moment in record.messages:
            self.last_time = history_format.time_ns(message) or moment or self.last_time
        if count == done:
            self.complete_scanned(count)
        return True

    def take(self, record: Record, count: int, done: int) -> None:
        """A record past the cursor: its messages pending (a batch appended when full)."""
        if record.error:
            self.out.skip(record.error)
        messages = record.messages
        if record.start and self.cursor is not None and record.start <= done and \
                self.unit.part_of is not None and messages:
            messages = self.complete(record, count)
        self.pending.extend(messages)
        self.places.extend([count] * len(messages))
        if len(self.pending) >= BATCH:
            self.flush(count)

    def flush_last(self, count: int, last: int | None) -> None:
        """The last batch (and the cursor, when anything new was read), then the trim."""
        if self.pending or (last is not None and not self.dry_run):
            self.flush(count)
        self.finish()

    def wrap_up(self, count: int, done: int, last: int | None) -> None:
        """The source read to its end: the last batch and the unit's status."""
        doc = self.doc
        doc["record_count"] = count
        if self.cursor is not None and count < done:
            # fewer records than were read before: the file shrank (changed), or its end
            # is held back as still being written (an older import read into it)
            doc["status"] = "imported" if self.unit.report.get("open") else "changed"
            return
        self.flush_last(count, last)
        if count and not self.total and doc["skipped"] == count and not done:
            self.out.failed("unreadable", f"no record of it can be read as {self.unit.format}")
        if self.cursor is not None and not doc["added"] and last is None:
            doc["status"] = "unchanged"


def import_unit(store: Store, unit: Unit, *, session: str | None = None,
                dry_run: bool = False, strict: bool = False,
                restore: Callable[[Store, str, Unit, int], None] | None = None
                ) -> dict[str, Any] | None:
    """The unit's result; None for a resume_only unit with nothing to finish."""
    conn = store.db_readonly()
    cursor = sources.get(conn, unit.key)
    if unit.resume_only and not _owed(conn, unit, cursor):
        return None
    if cursor is not None and _read_whole_before(cursor, unit, dry_run):
        doc = Outcome(unit).doc
        doc.update(session_id=cursor.session_id, status="unchanged",
                   record_count=cursor.records, **unit.report)
        return doc
    if strict:
        check_strict(unit)
    sid = cursor.session_id if cursor else _choose_session(store, unit, session)
    job = _Import(store, unit, cursor, sid, dry_run)
    job.run()
    doc = job.doc
    doc.update(unit.report)
    whole = doc["status"] in ("imported", "unchanged") and not unit.report.get("open")
    if not dry_run and doc["status"] not in ("changed", "unreadable"):
        with store.write_lock():
            if restore is not None and whole and store.exists(sid):  # before "read whole"
                restore(store, sid, unit, job.total)
            _mark_read(store, unit, whole)
    return doc


def _read_whole_before(cursor: sources.Cursor, unit: Unit, dry_run: bool) -> bool:
    """The source is as its cursor read it whole (size and time), nothing left to scan."""
    return unit.size is not None and (cursor.size, cursor.mtime_ns) == \
        (unit.size, unit.mtime_ns) and (not unit.rescan or bool(cursor.meta.get(SCANNED))
                                        or dry_run)


def _mark_read(store: Store, unit: Unit, whole: bool) -> None:
    """The cursor's size and time (when read whole: skipped next time) and meta; the
    parent's debt to this unit paid."""
    with store.transaction() as conn:
        now = sources.get(conn, unit.key)
        if now is None:
            return
        parent = sources.get(conn, unit.parent) if unit.parent else None
        sources.put(conn, now._replace(
            size=unit.size if whole else None,
            mtime_ns=unit.mtime_ns if whole else None,
            meta=unit.meta if parent is None else {**unit.meta, "parent": parent.session_id}))
        if parent is not None and parent.meta.get(OWED) == unit.key:
            sources.put(conn, parent._replace(meta={
                k: v for k, v in parent.meta.items() if k != OWED}))


def _owed(conn: Any, unit: Unit, cursor: sources.Cursor | None) -> bool:
    """Whether a resume_only unit has something to finish: its cursor is there and the
    file changed since it was read whole, or there is none and its parent's says one is
    owed (OWED)."""
    if cursor is not None:
        return (cursor.size, cursor.mtime_ns) != (unit.size, unit.mtime_ns)
    parent = sources.get(conn, unit.parent) if unit.parent else None
    return parent is not None and parent.meta.get(OWED) == unit.key
