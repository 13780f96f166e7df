"""SQLite: connection settings, running the migrations (home/schema.py), transactions."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from agenvoy_cli.errors import DiskFull, StoreBusy
from agenvoy_cli.home import generation
from agenvoy_cli.home.dbguard import open_guarded, wrap
from agenvoy_cli.home.files import FileIdentity, ensure_dir, file_identity, open_regular
from agenvoy_cli.home.marker import is_empty, note_created
from agenvoy_cli.home.schema import FTS_TOKENIZE, MIGRATIONS, SCHEMA_VERSION

__all__ = ["FTS_TOKENIZE", "MIGRATIONS", "SCHEMA_VERSION", "connect", "is_empty", "migrate",
           "reclaim_space", "transaction", "user_version"]


def _configure(conn: sqlite3.Connection, busy_ms: int) -> None:
    conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
    conn.execute("PRAGMA foreign_keys = ON")


_wrap = wrap  # the mapping lives in dbguard; old name kept for callers


def user_version(conn: sqlite3.Connection) -> int:
    return cast(int, conn.execute("PRAGMA user_version").fetchone()[0])  # sqlite3 rows are untyped


def connect(path: Path, busy_timeout: float, *, readonly: bool = False,
            marker: Path | None = None) -> sqlite3.Connection:
    """A connection with WAL and a busy timeout; migrations run for writers. A writer that
    creates the file notes it in `marker` (see note_created)."""
    busy_ms = max(1, int(busy_timeout * 1000))
    try:
        if readonly:
            # With no -wal file nobody has the database open and everything is in the main
            # file: read it immutable, which creates no -wal/-shm files (a reader must leave
            # the home as it found it). Our writers are kept out by the shared store lock.
            wal = path.with_name(path.name + "-wal")
            mode = "ro" if wal.exists() else "ro&immutable=1"
            conn = open_guarded(f"file:{path}?mode={mode}", path, uri=True,
                                isolation_level=None, check_same_thread=False)
            _configure(conn, busy_ms)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        ensure_dir(path.parent)
        fresh = is_empty(path)
        if fresh:  # created private, never through a link
            os.close(open_regular(path, os.O_RDWR | os.O_CREAT))
        conn = open_guarded(path, path, isolation_level=None, check_same_thread=False)
        if fresh:
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        _configure(conn, busy_ms)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        migrate(conn)
        _follow_layout(conn)
        if fresh and marker is not None:
            note_created(marker, path)
        return conn
    except sqlite3.Error as exc:
        raise _wrap(exc, path) from None


def migrate(conn: sqlite3.Connection) -> None:
    version = user_version(conn)
    if version >= SCHEMA_VERSION:
        return
    with transaction(conn):
        version = user_version(conn)  # another process may have migrated meanwhile
        for number, (_name, step) in enumerate(MIGRATIONS, 1):
            if number > version:
                step(conn)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS agenvoy_migrations (name TEXT PRIMARY KEY, applied_at REAL)"
        )
        conn.executemany(
            "INSERT OR IGNORE INTO agenvoy_migrations VALUES (?, ?)",
            [(name, time.time()) for name, _ in MIGRATIONS],
        )
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _follow_layout(conn: sqlite3.Connection) -> None:
    """A home Agenvoy 1.0 upgraded after our migrations ran: our column on its trim table
    (home/generation.py). Nothing else of the layout is ever changed here."""
    if generation.of(conn).version == generation.V1 and \
            "start_seq" not in generation.columns(conn, "message_meta"):
        with transaction(conn):
            generation.adapt(conn)


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:  # SQLite may have rolled back already (disk full, I/O error)
            conn.execute("ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except BaseException:
        # a COMMIT that failed (disk full, I/O error) may leave the transaction open: a
        # long-lived process (web, MCP server, the API) would then refuse every later
        # transaction on this connection ("cannot start a transaction within a transaction")
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def reclaim_space(conn: sqlite3.Connection) -> bool:
    """Give freed pages back to the file system so the file does not grow forever. Called
    after a delete is committed, it only tidies: a full or failing disk leaves the pages
    free inside the file for later writes (False), never fails what was committed."""
    try:
        if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
            # executescript steps the pragma to completion; execute() frees a single page.
            conn.executescript("PRAGMA incremental_vacuum;")
        else:
            conn.execute("VACUUM")
    except (DiskFull, sqlite3.OperationalError) as exc:
        if isinstance(exc, StoreBusy) or not (isinstance(exc, DiskFull) or
                                              "I/O error" in str(exc)):
            raise
        return False
    return True


def change_stamp(path: Path) -> tuple[FileIdentity | None, FileIdentity | None]:
    """The identity of the database and of its WAL: every commit by any process changes it
    (a commit grows the WAL, a checkpoint writes the database), so an equal stamp means
    nothing was written since. A missing file is None."""
    return file_identity(path), file_identity(path.with_name(path.name + "-wal"))
