"""import_sources: where each imported source was read up to (the one owner of the table)."""

from __future__ import annotations

import sqlite3
import time
from typing import Any, NamedTuple

import orjson

from agenvoy_cli.transfer.records import storable


class Cursor(NamedTuple):
    key: str
    format: str
    session_id: str
    records: int  # source records consumed
    digest: str  # blake2b of those records' bytes, in order
    seq_end: int  # the archive's next place right after what this source added
    size: int | None
    mtime_ns: int | None
    meta: dict[str, Any]


_COLUMNS = "key, format, session_id, records, digest, seq_end, size, mtime_ns, meta"


def get(conn: sqlite3.Connection | None, key: str) -> Cursor | None:
    if conn is None:
        return None
    try:
        row = conn.execute(f"SELECT {_COLUMNS} FROM import_sources WHERE key = ?",
                           (key,)).fetchone()
    except sqlite3.OperationalError:  # a database not migrated yet (read-only)
        return None
    return None if row is None else Cursor._make((*row[:8], orjson.loads(row[8])))


def put(conn: sqlite3.Connection, cursor: Cursor) -> None:
    conn.execute(f"INSERT OR REPLACE INTO import_sources ({_COLUMNS}, updated_at) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 (*cursor[:8], orjson.dumps(storable(cursor.meta)).decode(), time.time_ns()))


def session_owner(conn: sqlite3.Connection | None, session_id: str) -> str | None:
    """The key of a source that imports into this session (None: none does)."""
    if conn is None:
        return None
    try:
        row = conn.execute("SELECT key FROM import_sources WHERE session_id = ? LIMIT 1",
                           (session_id,)).fetchone()
    except sqlite3.OperationalError:
        return None
    return row[0] if row else None


def origins(conn: sqlite3.Connection | None) -> dict[str, str]:
    """session id -> where it came from ('claude-code: /path/to/project (main)')."""
    if conn is None:
        return {}
    try:
        found = conn.execute("SELECT session_id, format, meta FROM import_sources "
                             "ORDER BY updated_at").fetchall()
    except sqlite3.OperationalError:
        return {}
    out = {}
    for sid, fmt, meta in found:
        info = orjson.loads(meta)
        where = info.get("cwd") or info.get("title") or info.get("path") or ""
        branch = f" ({info['git_branch']})" if info.get("git_branch") else ""
        out[sid] = f"{fmt}: {where}{branch}".rstrip(": ")
    return out


def sessions_from(conn: sqlite3.Connection | None, fmt: str, cwd: str) -> list[str]:
    """Sessions imported from sources of `fmt` in the folder `cwd`, the latest first."""
    if conn is None or not cwd:
        return []
    try:
        found = conn.execute("SELECT session_id, meta FROM import_sources WHERE format = ? "
                             "ORDER BY updated_at DESC", (fmt,)).fetchall()
    except sqlite3.OperationalError:
        return []
    out: list[str] = []
    for sid, meta in found:
        if orjson.loads(meta).get("cwd") == cwd and sid not in out:
            out.append(sid)
    return out


def requests(conn: sqlite3.Connection | None, session_id: str) -> list[dict[str, Any]]:
    """What the requests a session was imported from carried beside their messages (model,
    tools, tool_choice...), each once, in the order their sources were read."""
    if conn is None:
        return []
    try:
        found = conn.execute("SELECT meta FROM import_sources WHERE session_id = ? "
                             "ORDER BY updated_at", (session_id,)).fetchall()
    except sqlite3.OperationalError:
        return []
    out: list[dict[str, Any]] = []
    for (meta,) in found:
        info = orjson.loads(meta)
        one = info.get("request")
        for request in ([one] if isinstance(one, dict) else []) + list(
                info.get("requests") or []):
            if isinstance(request, dict) and request and request not in out:
                out.append(request)
    return out


def parents(conn: sqlite3.Connection | None) -> dict[str, str]:
    """session id -> the session that started it (a sub-agent's, as its import recorded)."""
    if conn is None:
        return {}
    try:
        found = conn.execute("SELECT session_id, meta FROM import_sources").fetchall()
    except sqlite3.OperationalError:
        return {}
    out = {}
    for sid, meta in found:
        parent = orjson.loads(meta).get("parent")
        if isinstance(parent, str) and parent:
            out[sid] = parent
    return out
