"""The import: each unit into its session through the Store, exactly once and incrementally.

A unit's cursor (import_sources) says how many of its records were read and a digest of
them. A re-import hashes that many records again: the same digest -> only the records after
them are new; another digest -> the old part changed: reported, nothing imported. Messages
go in by Store.append in batches, the cursor written after each under the same lock; a
crash between the two leaves archive rows past the cursor's seq_end that are exactly the
next messages: the next run recognises them and does not append them again. Before a
source's first batch, a cursor of 0 records claims the session (a crash right after that
batch leaves it owned, its rows the tail, not a session to go around with a new id).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from agenvoy_cli.conversation.messages import message_identity, validate_message, with_header
from agenvoy_cli.conversation.store import Store
from agenvoy_cli.errors import BadInput
from agenvoy_cli.home.layout import validate_name
from agenvoy_cli.transfer import sources
from agenvoy_cli.transfer.records import Timed, Unit

BATCH = 500  # messages per append (one lock, one transaction each)
REASONS = 5  # malformed records named in the result


def _stamp(messages: list[Timed], last: datetime | None) -> tuple[list[dict[str, Any]],
                                                                   datetime | None]:
    out = []
    for message, moment in messages:
        moment = moment or last
        out.append(with_header(message, moment) if moment else message)
        last = moment or last
    return out, last


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


class Outcome:
    def __init__(self, unit: Unit) -> None:
        self.doc: dict[str, Any] = {"source": unit.key, "format": unit.format,
                                    "session_id": None, "status": "imported", "added": 0,
                                    "record_count": 0, "malformed": 0, "reasons": []}

    def malformed(self, reason: str) -> None:
        self.doc["malformed"] += 1
        if len(self.doc["reasons"]) < REASONS:
            self.doc["reasons"].append(reason)


def check_strict(unit: Unit) -> None:
    bad = [r.error for r in unit.records() if r.error]
    if bad:
        raise BadInput(f"{unit.key}: {len(bad)} malformed record(s), nothing imported "
                       f"(--strict): {bad[0]}")


def import_unit(store: Store, unit: Unit, *, session: str | None = None,
                dry_run: bool = False, strict: bool = False,
                restore: Callable[[Store, str, Unit, int], None] | None = None
                ) -> dict[str, Any]:
    out = Outcome(unit)
    doc = out.doc
    cursor = sources.get(store.db_readonly(), unit.key)
    if cursor is not None and unit.size is not None and \
            (cursor.size, cursor.mtime_ns) == (unit.size, unit.mtime_ns):
        doc.update(session_id=cursor.session_id, status="unchanged", records=cursor.records)
        return doc
    if strict:
        check_strict(unit)
    sid = cursor.session_id if cursor else _choose_session(store, unit, session)
    doc["session_id"] = sid
    seen = hashlib.blake2b(digest_size=16)
    done = cursor.records if cursor else 0
    tail = _tail(store, sid, cursor.seq_end) if cursor and not dry_run else []
    pending: list[Timed] = []
    count, last, total = 0, None, 0
    last_time: datetime | None = None

    claimed = cursor is not None

    def claim() -> None:
        nonlocal claimed
        top = store.db().execute("SELECT max(seq) FROM messages WHERE session_id = ?",
                                 (sid,)).fetchone()[0]
        with store.transaction() as conn:
            sources.put(conn, sources.Cursor(
                unit.key, unit.format, sid, 0, hashlib.blake2b(digest_size=16).hexdigest(),
                0 if top is None else top + 1, None, None, unit.meta))
        claimed = True

    def flush(records: int) -> None:
        nonlocal pending, tail, last_time
        stamped, last_time = _stamp(pending, last_time)
        pending = []
        checked = []
        for i, message in enumerate(stamped):
            try:
                checked.append(validate_message(message, i, store.settings.max_history_bytes))
            except BadInput as exc:
                out.malformed(f"record {records}: {exc}")
        while checked and tail and tail[0] == message_identity(checked[0]):
            tail.pop(0)  # appended by a run that died before writing its cursor
            checked.pop(0)
        tail = [] if checked else tail
        if dry_run:
            doc["added"] += len(checked)
            return
        with store.write_lock():
            if checked and not claimed:
                claim()
            if checked:  # an export's session keeps its own format and trim point
                store.append(sid, checked, compact=unit.trim is None,
                             history_format=unit.history_format)
            conn = store.db()
            top = conn.execute("SELECT max(seq) FROM messages WHERE session_id = ?",
                               (sid,)).fetchone()[0]
            with store.transaction() as conn:
                sources.put(conn, sources.Cursor(
                    unit.key, unit.format, sid, records, seen.hexdigest(),
                    0 if top is None else top + 1, None, None, unit.meta))
        doc["added"] += len(checked)

    for record in unit.records():
        count += 1
        total += len(record.messages)
        seen.update(len(record.raw).to_bytes(8, "little") + record.raw)
        if count <= done:
            if count == done and cursor is not None and seen.hexdigest() != cursor.digest:
                doc.update(status="changed", records=count)
                return doc
            last_time = max((t for _, t in record.messages if t), default=last_time)
            continue
        if record.error:
            out.malformed(record.error)
        pending.extend(record.messages)
        last = count
        if len(pending) >= BATCH:
            flush(count)
    doc["record_count"] = count
    if cursor is not None and count < done:
        doc["status"] = "changed"
        return doc
    if pending or (last is not None and not dry_run):
        flush(count)
    if not dry_run:
        with store.write_lock():
            if restore is not None and store.exists(sid):  # before the file counts as read
                restore(store, sid, unit, total)
            with store.transaction() as conn:
                now = sources.get(conn, unit.key)
                if now is not None:
                    sources.put(conn, now._replace(size=unit.size, mtime_ns=unit.mtime_ns,
                                                   meta=unit.meta))
    if cursor is not None and not doc["added"] and last is None:
        doc["status"] = "unchanged"
    return doc


def run_units(store: Store, units: Iterable[Unit], progress: Callable[[int, int], None]
              | None = None, **options: Any) -> list[dict[str, Any]]:
    results = []
    for unit in units:
        results.append(import_unit(store, unit, **options))
        if progress is not None:
            progress(len(results), 0)
    return results
