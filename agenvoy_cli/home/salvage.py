"""Salvage of a damaged history.db: every row SQLite can still read goes into a fresh
database with the full schema (the FTS indexes are rebuilt by its triggers); the damaged file
is kept aside. Reads are row by row around damaged pages: a forward scan until the first
unreadable page, a backward scan until the last one, then each rowid in between on its own."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agenvoy_cli.errors import CorruptStore
from agenvoy_cli.home import sqlite
from agenvoy_cli.home.faults import hit, os_error
from agenvoy_cli.home.files import fsync_dir
from agenvoy_cli.home.files import move_aside as move_aside_file
from agenvoy_cli.home.layout import Layout
from agenvoy_cli.home.marker import archive_was_created, is_empty

# Parents before children (foreign keys); the FTS tables are derived and rebuilt.
TABLES = ("messages", "session_meta", "error_records", "error_keywords", "rag_dbs",
          "rag_sources", "rag_files", "rag_chunks", "notes", "note_files",
          # Agenvoy 1.0's, copied when the fresh file has them (keep_upstream_schema)
          "message_meta", "knowledge", "session", "action_history", "file_history")
# Agenvoy 1.0's objects a salvage recreates as the damaged file declared them (home/
# generation.py): the layout stays the one its writer left, its trigram index included.
_UPSTREAM_V10 = ("messages", "message_meta", "messages_fts5", "knowledge", "session",
                 "action_history", "file_history")
MAX_PROBES = 2_000_000  # rowids probed one by one across a damaged stretch


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    try:
        return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    except sqlite3.DatabaseError:
        return []


def _has_rowid(conn: sqlite3.Connection, table: str) -> bool:
    try:
        conn.execute(f"SELECT rowid FROM {table} LIMIT 0")
        return True
    except sqlite3.DatabaseError:
        return False


def _scan(conn: sqlite3.Connection, sql: str,
          args: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Rows until the first one SQLite cannot read."""
    try:
        cursor = conn.execute(sql, args)
        while True:
            row = cursor.fetchone()
            if row is None:
                return
            yield row
    except sqlite3.DatabaseError:
        return


def read_rows(conn: sqlite3.Connection, table: str, cols: list[str]) -> dict[Any, tuple[Any, ...]]:
    """Every readable row of `table`, keyed by rowid (or by the whole row)."""
    names = ", ".join(cols)
    if not _has_rowid(conn, table):
        whole = {r: r for r in _scan(conn, f"SELECT {names} FROM {table}")}
        whole.update({r: r for r in _scan(conn, f"SELECT {names} FROM {table} ORDER BY 1 DESC")})
        return whole
    rows: dict[int, tuple[Any, ...]] = {}
    for row in _scan(conn, f"SELECT rowid, {names} FROM {table} ORDER BY rowid"):
        rows[row[0]] = row[1:]
    low = max(rows, default=None)
    for row in _scan(conn, f"SELECT rowid, {names} FROM {table} ORDER BY rowid DESC"):
        if row[0] in rows:
            break
        rows[row[0]] = row[1:]
    high = min((r for r in rows if low is None or r > low), default=None)
    if low is not None and high is not None and high - low - 1 <= MAX_PROBES:
        for rowid in range(low + 1, high):  # the damaged stretch, one row at a time
            for row in _scan(conn, f"SELECT {names} FROM {table} WHERE rowid = ?", (rowid,)):
                rows[rowid] = row
    return rows


def keep_upstream_schema(source: Path, fresh: Path) -> bool:
    """Before the fresh file gets our schema: when the damaged file is an Agenvoy 1.0 home
    (its message_meta), its upstream tables, indexes and triggers are created first, from
    the statements the damaged file itself holds, so our migrations follow that layout
    (no session_meta, its messages_fts5 tokenizer kept) and never move the home to another.
    False (nothing done) for an older home or when its schema cannot be read."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        found = src.execute("SELECT type, name, tbl_name, sql FROM sqlite_master "
                            "WHERE sql IS NOT NULL ORDER BY rowid").fetchall()
    except sqlite3.DatabaseError:
        return False
    finally:
        src.close()
    if not any(kind == "table" and name == "message_meta" for kind, name, _, _ in found):
        return False
    order = {"table": 0, "index": 1, "trigger": 2}
    keep = sorted(((order[kind], sql) for kind, name, table, sql in found
                   if kind in order and table in _UPSTREAM_V10
                   and (kind != "trigger" or name.startswith("trigger_messages_"))),
                  key=lambda item: item[0])  # our own triggers: the migrations make them
    dest = sqlite3.connect(fresh, isolation_level=None)
    try:
        dest.execute("BEGIN IMMEDIATE")
        for _, sql in keep:
            dest.execute(sql)
        dest.execute("COMMIT")
    finally:
        dest.close()
    return True


def copy_rows(source: Path, dest: sqlite3.Connection) -> dict[str, tuple[int, int | None]]:
    """Copy what can be read of `source` into `dest` (which has the schema). Returns, per
    table, (rows saved, rows the damaged file claims or None when it cannot tell)."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    counts: dict[str, tuple[int, int | None]] = {}
    try:
        for table in TABLES:
            cols = [c for c in _columns(src, table) if c in set(_columns(dest, table))]
            if not cols:
                continue
            rows = read_rows(src, table, cols)
            claimed: int | None = None
            with contextlib.suppress(sqlite3.DatabaseError):
                claimed = src.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            marks = ", ".join("?" * len(cols))
            dest.execute("BEGIN IMMEDIATE")
            dest.executemany(f"INSERT OR IGNORE INTO {table} ({', '.join(cols)}) "
                             f"VALUES ({marks})", rows.values())
            dest.execute("COMMIT")
            counts[table] = (len(rows), claimed)
        _chunk_dbs(dest)
    finally:
        src.close()
    return counts


def _chunk_dbs(dest: sqlite3.Connection) -> None:
    """Chunks saved from a home older than migration 011 lack their database id: fill it
    from rag_files and rebuild rag_chunks_fts (an UPDATE of db_id has no FTS trigger)."""
    dest.execute("BEGIN IMMEDIATE")
    fixed = dest.execute("UPDATE rag_chunks SET db_id = (SELECT f.db_id FROM rag_files f "
                         "WHERE f.id = rag_chunks.file_id) WHERE db_id IS NULL").rowcount
    if fixed:
        dest.execute("INSERT INTO rag_chunks_fts(rag_chunks_fts) VALUES ('rebuild')")
    dest.execute("COMMIT")


def move_aside(db: Path) -> Path:
    """history.db (and its -wal/-shm) -> history.db.damaged-<time>[-wal|-shm]."""
    return move_aside_file(db, _COMPANIONS)


_COMPANIONS = ("-wal", "-shm")


def salvage_path(db: Path) -> Path:
    """Where the salvage writes the fresh database before it replaces the damaged one."""
    return db.with_name(db.name + ".salvage")


def copies(db: Path) -> list[Path]:
    """A salvage's fresh database (and its -wal/-shm) left by a salvage that died."""
    fresh = salvage_path(db)
    return [p for p in (fresh.with_name(fresh.name + s) for s in ("", *_COMPANIONS))
            if os.path.lexists(p)]


def remove_copy(db: Path) -> None:
    for path in copies(db):
        path.unlink(missing_ok=True)


def replace_damaged(db: Path, fresh: Path) -> Path:
    """The damaged database aside (history.db.damaged-<time>, kept) and the salvaged copy in
    its place; the damaged file goes back if the copy cannot take its place."""
    kept = move_aside(db)
    try:
        hit("rename", db, lambda code: os_error(code, fresh))
        os.replace(fresh, db)
    except BaseException:
        for suffix in ("", *_COMPANIONS):
            with contextlib.suppress(FileNotFoundError):
                os.rename(f"{kept}{suffix}", f"{db}{suffix}")
        raise
    fsync_dir(db.parent)
    return kept


def lost_archive(layout: Layout) -> str | None:
    """Why history.db must not be created silently: it existed (the store's lock file says
    so, see sqlite.note_created) and is now missing or empty while sessions still have
    history. None when nothing was lost (e.g. an upstream home before its first backfill)."""
    db = layout.db
    if not is_empty(db) or not archive_was_created(layout.lock):
        return None
    count = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(layout.sessions):
            with contextlib.suppress(OSError):
                if os.stat(os.path.join(entry.path, "history.json")).st_size > 2:
                    count += 1
    if not count:
        return None
    return (f"{db} is missing or empty although it was created before, and {count} "
            "session(s) still have history.json (messages trimmed from them are no longer "
            "searchable): restore it from a backup, or run `agenvoy doctor --repair` to "
            "rebuild the archive from history.json")


def refuse_lost(layout: Layout) -> None:
    """Raise CorruptStore (exit 4) when history.db was lost (see lost_archive)."""
    lost = lost_archive(layout)
    if lost:
        raise CorruptStore(lost)


def open_archive(layout: Layout, timeout: float, *, new_archive: bool = False
                 ) -> sqlite3.Connection:
    """The writer connection to a home's history.db; refuses to start a new, empty archive
    over a lost one unless `new_archive` (backfill of every session, doctor --repair)."""
    if not new_archive:
        refuse_lost(layout)
    return sqlite.connect(layout.db, timeout, marker=layout.lock)
