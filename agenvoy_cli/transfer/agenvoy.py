"""This tool's own export (JSON Lines, lossless) and reading it, or another home's session
folder, back in.

An export is, per session: a `session` line (id, the home it came from, trim point, the
format history.json uses), one
`message` line per archived row (every column the row has, whatever the schema version:
time, sender, place, gone, and the full message JSON), then a `summary` line (summary.json
and summary.meta.json with its cursor)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from agenvoy_cli.conversation import archive, compaction, history_format
from agenvoy_cli.conversation.history import read_tail
from agenvoy_cli.conversation.store import Store
from agenvoy_cli.home.files import atomic_write_json, read_json
from agenvoy_cli.home.layout import Layout
from agenvoy_cli.home.locking import Locks
from agenvoy_cli.transfer.inputs import lines, open_input
from agenvoy_cli.transfer.records import ReadFailure, Record, Unit, decode_error
from agenvoy_cli.transfer.sources import requests

FORMAT = "agenvoy-export"
VERSION = 1
_DERIVED = ("id", "session_id", "hash", "tokens")  # rebuilt by the archive itself


def session_lines(conn: sqlite3.Connection | None, folder: Path, session_id: str,
                  home: Path) -> Iterator[dict[str, Any]]:
    start = 0
    rows: list[dict[str, Any]] = []
    if conn is not None:
        start = archive.trim_row(conn, session_id)[0] or 0
        cur = conn.execute("SELECT * FROM messages WHERE session_id = ? AND seq IS NOT NULL "
                           "ORDER BY seq", (session_id,))
        names = [d[0] for d in cur.description]
        for values in cur:
            row = dict(zip(names, values))
            for name in _DERIVED:
                row.pop(name, None)
            raw = row.pop("message", None)
            row["message"] = orjson.loads(raw) if raw else {"role": row["role"],
                                                            "content": row["content"]}
            row.pop("content", None)
            rows.append(row)
    if not rows:  # no archive: history.json is the session
        history = read_json(folder / "history.json", default=[])
        rows = [{"seq": i, "message": m, "gone": 0} for i, m in enumerate(history)
                if isinstance(m, dict)]
    head = {"type": "session", "format": FORMAT, "version": VERSION, "session_id": session_id,
            "home": str(home), "start_seq": start, "message_count": len(rows),
            "history_format": _history_format(folder / "history.json")}
    found = requests(conn, session_id)
    yield {**head, "requests": found} if found else head
    for row in rows:
        yield {"type": "message", **row}
    yield {"type": "summary", "summary": read_json(folder / "summary.json", default=None),
           "meta": read_json(folder / "summary.meta.json", default=None)}


def _history_format(path: Path) -> str:
    """The format history.json uses (its tail tells: Store.append keeps sendAt last)."""
    try:
        tail, _ = read_tail(path, path.stat().st_size)
    except OSError:
        return "header"
    return "sendat" if history_format.uses_send_at(tail) else "header"


def export_lines(store: Store, session_id: str) -> Iterator[dict[str, Any]]:
    """The session's lines, after the archive is aligned with history.json (what Agenvoy
    itself appended or trimmed since our last write is archived and its trim point
    recorded: the export holds what `context` shows). Writes nothing else in the home."""
    with store.write_lock():
        store.require(session_id)
        if store.layout.history(session_id).exists():
            store.align(session_id)
        lines = list(session_lines(store.db(), store.layout.session_dir(session_id),
                                   session_id, store.layout.home.resolve()))
    yield from lines


def _units_from_lines(lines: Iterator[tuple[bytes, dict[str, Any], str]], where: str,
                      session: str | None) -> Iterator[Unit]:
    """The sessions of export lines (raw, line, its place: "line N" of a file)."""
    head: dict[str, Any] | None = None
    records: list[Record] = []
    seqs: list[Any] = []  # the exported places, for the trim point
    for raw, line, place in lines:
        kind = line.get("type")
        if kind == "session":
            head, records, seqs = line, [], []
        elif kind == "message" and head is not None:
            records.append(_message_record(raw, line, place))
            if records[-1].messages:
                seqs.append(line.get("seq"))
        elif kind == "summary" and head is not None:
            yield _session_unit(head, line, records, seqs, where, session)
            head = None


def _message_record(raw: bytes, line: dict[str, Any], place: str) -> Record:
    """A message line's record (its sender kept on the message)."""
    message = line.get("message")
    if not isinstance(message, dict):
        return Record(raw, [], f"{place}: a message line without a message")
    if line.get("sender") and "sender" not in message:
        message = {**message, "sender": line["sender"]}
    return Record(raw, [(message, None)])


def _session_unit(head: dict[str, Any], line: dict[str, Any], records: list[Record],
                  seqs: list[Any], where: str, session: str | None) -> Unit:
    """An exported session, its summary line read: its records, summary and trim point."""
    sid = str(head.get("session_id"))
    start = head.get("start_seq") or 0
    fmt = head.get("history_format")
    return Unit(f"agenvoy:{head.get('home')}/{sid}", "agenvoy", session or sid,
                partial(list, records),
                {"path": where, "home": head.get("home"),
                 **({"requests": head["requests"]}
                    if isinstance(head.get("requests"), list) else {})},
                summary=(line.get("summary"), line.get("meta")),
                history_format=fmt if fmt in history_format.FORMATS else None,
                trim=sum(1 for seq in seqs if isinstance(seq, int) and seq < start))


def _file_lines(path: Path) -> Iterator[tuple[bytes, dict[str, Any], str]]:
    """An export's lines (a regular file, each line bounded): one that is not a JSON object
    ends the read (ReadFailure), the sessions before it imported."""
    with open_input(path) as handle:
        for line in lines(handle):
            try:
                value = orjson.loads(line.data) if line.data is not None else None
            except orjson.JSONDecodeError as exc:
                raise ReadFailure(f"line {line.number}: {decode_error(exc)}") from None
            if not isinstance(value, dict):
                raise ReadFailure(f"line {line.number}: not an export line")
            yield line.raw, value, f"line {line.number}"


def units(path: Path, session: str | None, locks: Locks | None = None) -> Iterator[Unit]:
    """The sessions of an export file or of another home's folders; `locks`: the importing
    Store's, so that reading a folder of the importing home itself never waits on its own
    lock (home/locking.py)."""
    if path.is_file():
        yield from _units_from_lines(_file_lines(path), str(path.resolve()), session)
        return
    sessions = path / "sessions"
    if not (path / "history.json").exists() and not sessions.is_dir() and \
            ((path / "knowledge").is_dir() or (path / ".store").is_dir()):
        return  # a home with notes and no sessions (service._notes_of_homes takes those)
    folders = [path] if (path / "history.json").exists() else \
        sorted(p for p in sessions.iterdir() if p.is_dir())
    for folder in folders:
        lines = [(orjson.dumps(x, option=orjson.OPT_SORT_KEYS), x, f"{folder}: line {i}")
                 for i, x in enumerate(folder_lines(folder, locks), 1)]
        yield from _units_from_lines(iter(lines), str(folder.resolve()), session)


def folder_lines(folder: Path, locks: Locks | None = None) -> list[dict[str, Any]]:
    """Another home's session as an export of it, that home only read: its archive before
    what history.json holds, then history.json's messages at their places by the identity
    rule (what Agenvoy itself appended or trimmed there since that home's last sync too)."""
    home = folder.resolve().parent.parent
    if not (home / ".store" / "history.db").exists():
        return list(session_lines(None, folder, folder.name, home))
    other = Store(Layout(home), locks=locks)
    try:
        with other.read_lock():
            lines = list(session_lines(other.db_readonly(), folder, folder.name, home))
            recent = other.recent(folder.name) if (folder / "history.json").exists() else []
    finally:
        other.close()
    if not recent:
        return lines
    first = recent[0].seq
    head, summary = lines[0], lines[-1]
    body = [x for x in lines[1:-1] if isinstance(x.get("seq"), int) and x["seq"] < first]
    body += [{"type": "message", "seq": m.seq, "send_at": m.send_at, "role": m.role,
              "gone": 0, "sender": history_format.sender(m.raw), "message": m.raw} for m in recent]
    return [{**head, "start_seq": first, "message_count": len(body)}, *body, summary]


def restore(store: Store, session_id: str, unit: Unit, messages: int) -> None:
    """What an export keeps beside the messages: the trim point (history.json holding only
    what the exported one held) and the summary with its cursor. `messages`: how many the
    unit has; the trim is restored only into a session made of exactly those, untrimmed
    (idempotent: a re-import, or one after a crash, finds it done)."""
    if unit.trim:
        with store.write_lock():
            history = store.history(session_id)
            if store.trim_point(session_id)[0] == 0 and len(history.messages) == messages \
                    and unit.trim < messages:
                done = compaction.drop_oldest(store, session_id, unit.trim,
                                              "the trim point of the export", history)
                if done.start_seq is not None:
                    store.hooks.after_trim(store, session_id, done.start_seq)
    write_summary(store, session_id, unit)


def write_summary(store: Store, session_id: str, unit: Unit) -> None:
    """Restore the exported summary and its cursor, unless the session has its own."""
    summary, meta = unit.summary or (None, None)
    if summary is None:
        return
    with store.write_lock():
        path = store.layout.summary(session_id)
        with contextlib.suppress(Exception):
            if read_json(path, default=None) not in (None, summary):
                return
        atomic_write_json(path, summary, indent=False)
        if meta is not None:
            atomic_write_json(store.layout.summary_meta(session_id), meta, indent=False)
