"""import_sources: how far each source was read (its owner; see docs/architecture.md)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from typing import Any, NamedTuple

import orjson

try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - not CPython
    from hashlib import blake2b


class Seen(NamedTuple):
    session_id: str
    count: int
    digest: str
    size: int | None
    mtime_ns: int | None
    pending: int | None
    base: int | None


def digest(messages: Iterable[dict[str, Any]]) -> str:
    """The hash of a run of messages (their JSON, keys sorted)."""
    h = blake2b(digest_size=16)
    for message in messages:
        h.update(orjson.dumps(message, option=orjson.OPT_SORT_KEYS))
        h.update(b"\n")
    return h.hexdigest()


def seen(conn: sqlite3.Connection | None, file: str) -> dict[str, Seen]:
    """key -> what was read of it, for one source file."""
    if conn is None or not _exists(conn):
        return {}
    rows = conn.execute("SELECT key, session_id, count, digest, size, mtime_ns, pending, base "
                        "FROM import_sources WHERE file = ?", (file,))
    return {r[0]: Seen(*r[1:]) for r in rows}


def _exists(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'import_sources'"
                        ).fetchone() is not None


def write(conn: sqlite3.Connection, file: str, key: str, session_id: str, fmt: str,
          count: int, dig: str, stat: Any, meta: dict[str, Any],
          pending: int | None = None, base: int | None = None) -> None:
    conn.execute(
        "INSERT INTO import_sources (file, key, session_id, format, count, digest, size, "
        "mtime_ns, pending, base, meta, imported_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT(file, key) DO UPDATE SET session_id = excluded.session_id, "
        "format = excluded.format, count = excluded.count, digest = excluded.digest, "
        "size = excluded.size, mtime_ns = excluded.mtime_ns, pending = excluded.pending, "
        "base = excluded.base, meta = excluded.meta, imported_at = excluded.imported_at",
        (file, key, session_id, fmt, count, dig, stat.st_size if stat else None,
         stat.st_mtime_ns if stat else None, pending, base,
         orjson.dumps(meta).decode() if meta else None, time.time_ns()))


def touch(conn: sqlite3.Connection, file: str, stat: Any) -> None:
    """The file was read again and nothing in it changed: remember its size and mtime."""
    conn.execute("UPDATE import_sources SET size = ?, mtime_ns = ? WHERE file = ?",
                 (stat.st_size, stat.st_mtime_ns, file))


def origins(conn: sqlite3.Connection | None) -> dict[str, str]:
    """session id -> 'FORMAT:FILE' it was imported from (the first source, for listings)."""
    if conn is None or not _exists(conn):
        return {}
    out: dict[str, str] = {}
    for sid, fmt, file in conn.execute(
            "SELECT session_id, format, file FROM import_sources ORDER BY imported_at"):
        out.setdefault(sid, f"{fmt}:{file}")
    return out
