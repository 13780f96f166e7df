"""RAG databases as records: names, the paths they watch, their files; create, list.

A database has a name (validated like a session id), the paths it watches (``rag_sources``),
one row per file (``rag_files``) and the files' chunks (``rag_chunks``, with FTS5 over
CJK-bigram tokens: the same Chinese-aware index as conversation search). Each chunk's
vector lives in the Chroma collection ``agenvoy_rag_<database id>`` under the chunk's id.
Indexing is rag.source_sync (with rag.commit), searching rag.search; removing a database is
rag.commit's (its files and vectors first), which deletes the record here last.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from agenvoy_cli.errors import BadInput, NotFound
from agenvoy_cli.home.layout import validate_name

if TYPE_CHECKING:
    import sqlite3

    from agenvoy_cli.conversation.store import Store

MODES = ("hybrid", "keyword", "semantic")
DEFAULT_MODE = "hybrid"
DEFAULT_LIMIT = 8
POOL = 50  # candidates per ranker before fusion
EMBED_BATCH = 32  # chunks embedded (and written) per lock round-trip
DEFAULT_MAX_FILE_BYTES = 1 << 20
COLLECTION_PREFIX = "agenvoy_rag_"
KIND = "RAG database name"


def now_ns() -> int:
    return time.time_ns()


def iso(ns: int | None) -> str | None:
    if not ns:
        return None
    return datetime.fromtimestamp(ns / 1e9).astimezone().isoformat(timespec="seconds")


def collection_name(db_id: int) -> str:
    return f"{COLLECTION_PREFIX}{db_id}"


def checked_name(name: str) -> str:
    return validate_name(name, KIND)


_SIZE = re.compile(r"\A\s*(\d+(?:\.\d+)?)\s*([kmg]?)(i?b)?\s*\Z", re.I)


def parse_size(text: str) -> int:
    """1048576, 512k, 2M, 1.5GiB (powers of 1024)."""
    match = _SIZE.match(text)
    if not match:
        raise BadInput(f"size {text!r} is not a number of bytes (e.g. 500k, 2M)")
    factor = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2).lower()]
    value = int(float(match.group(1)) * factor)
    if value < 1:
        raise BadInput(f"size {text!r} must be at least one byte")
    return value


def human_size(size: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    return str(size)  # pragma: no cover


# ----------------------------------------------------------------------------- records


@dataclass
class Source:
    path: str
    kind: str  # dir | file


@dataclass
class Database:
    id: int
    name: str
    created_at: int
    synced_at: int | None
    options: dict[str, Any]
    sources: list[Source] = field(default_factory=list)

    @property
    def max_file_bytes(self) -> int:
        return int(self.options.get("max_file_bytes") or DEFAULT_MAX_FILE_BYTES)

    @property
    def hidden(self) -> bool:
        return bool(self.options.get("hidden"))

    @property
    def vectors(self) -> bool:
        """False after --no-vectors: keyword search only until `sync --vectors`."""
        return self.options.get("vectors", True) is not False


@dataclass
class FileRow:
    id: int
    path: str
    source: str
    size: int
    mtime_ns: int
    hash: str | None
    state: str
    reason: str | None
    chunks: int


def _database(conn: sqlite3.Connection, name: str) -> Database | None:
    row = conn.execute("SELECT id, name, created_at, synced_at, options FROM rag_dbs "
                       "WHERE name = ?", (name,)).fetchone()
    if row is None:
        return None
    db = Database(row[0], row[1], row[2], row[3], orjson.loads(row[4] or "{}"))
    db.sources = [Source(p, k) for p, k in conn.execute(
        "SELECT path, kind FROM rag_sources WHERE db_id = ? ORDER BY path", (db.id,))]
    return db


def _require(conn: sqlite3.Connection | None, name: str, home: Path) -> Database:
    db = _database(conn, name) if conn is not None else None
    if db is None:
        raise NotFound(f"no RAG database {name!r} in {home} (see `agenvoy rag list`)")
    return db


def _all_databases(conn: sqlite3.Connection | None) -> list[Database]:
    if conn is None:
        return []
    names = [r[0] for r in conn.execute("SELECT name FROM rag_dbs ORDER BY name")]
    return [db for db in (_database(conn, n) for n in names) if db is not None]


def _files(conn: sqlite3.Connection, db_id: int) -> dict[str, FileRow]:
    return {r[1]: FileRow(*r) for r in conn.execute(
        "SELECT id, path, source, size, mtime_ns, hash, state, reason, chunks "
        "FROM rag_files WHERE db_id = ?", (db_id,))}


def _readonly(store: Store) -> sqlite3.Connection | None:
    """The database for reading, or None when the home has none (no file is created)."""
    return store.db_readonly()


def _writer(store: Store, name: str) -> tuple[sqlite3.Connection, Database]:
    """The writer connection and the database `name` (never creates history.db for an
    unknown name). Hold the write lock."""
    if not store.layout.db.exists():
        raise NotFound(f"no RAG database {name!r} in {store.layout.home} "
                       "(create it with `agenvoy rag create`)")
    conn = store.db()
    return conn, _require(conn, name, store.layout.home)


def _checked_path(raw: str | os.PathLike[str]) -> tuple[Path, str]:
    path = Path(raw).expanduser()
    try:
        resolved = path.resolve(strict=True)
    except FileNotFoundError:
        raise BadInput(f"no such file or folder: {raw}") from None
    except (OSError, RuntimeError) as exc:
        raise BadInput(f"cannot use {raw}: {exc}") from None
    if resolved.is_dir():
        return resolved, "dir"
    if resolved.is_file():
        return resolved, "file"
    raise BadInput(f"{raw} is neither a file nor a folder")


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)



def _relpath(path: str, source: str) -> str:
    if path == source:
        return os.path.basename(path)
    return os.path.relpath(path, source) if _within(path, source) else path


# ----------------------------------------------------------------------------- create


def _options(db_options: dict[str, Any], max_file_bytes: int | None,
             hidden: bool | None, vectors: bool | None = None) -> dict[str, Any]:
    options = dict(db_options)
    if vectors is not None:
        options["vectors"] = vectors
    if max_file_bytes is not None:
        options["max_file_bytes"] = max_file_bytes
    if hidden is not None:
        options["hidden"] = hidden
    return options


# -- rag_dbs and rag_sources: their one writer (sync calls these) ----------------------------
def add_sources(conn: sqlite3.Connection, db_id: Any, roots: Sequence[tuple[Path, str]]) -> None:
    conn.executemany(
        "INSERT OR IGNORE INTO rag_sources(db_id, path, kind, added_at) VALUES (?,?,?,?)",
        [(db_id, str(p), kind, now_ns()) for p, kind in roots])


def remove_sources(conn: sqlite3.Connection, db_id: int, paths: Sequence[str]) -> None:
    conn.executemany("DELETE FROM rag_sources WHERE db_id = ? AND path = ?",
                     [(db_id, p) for p in paths])


def set_options(conn: sqlite3.Connection, db_id: int, options: dict[str, Any]) -> None:
    conn.execute("UPDATE rag_dbs SET options = ? WHERE id = ?",
                 (orjson.dumps(options).decode(), db_id))


def set_synced(conn: sqlite3.Connection, db_id: int) -> None:
    conn.execute("UPDATE rag_dbs SET synced_at = ? WHERE id = ?", (now_ns(), db_id))


def delete_database(conn: sqlite3.Connection, db_id: int) -> None:
    """The database's row (its sources, files and chunks go with it: ON DELETE CASCADE)."""
    conn.execute("DELETE FROM rag_dbs WHERE id = ?", (db_id,))


def create(store: Store, name: str, paths: Sequence[str] = (), *,
           max_file_bytes: int | None = None, hidden: bool | None = None,
           vectors: bool | None = None) -> Database:
    """A new, empty database bound to `paths` (checked before anything is written)."""
    checked_name(name)
    roots = [_checked_path(p) for p in paths]
    with store.write_lock(), store.transaction() as conn:
        if _database(conn, name) is not None:
            raise BadInput(f"RAG database {name!r} already exists "
                           "(index more with `agenvoy rag add`)")
        options = _options({}, max_file_bytes, hidden, vectors)
        cur = conn.execute("INSERT INTO rag_dbs(name, created_at, options) VALUES (?, ?, ?)",
                           (name, now_ns(), orjson.dumps(options).decode()))
        db_id = cur.lastrowid
        add_sources(conn, db_id, roots)
        db = _database(conn, name)
    assert db is not None
    return db


# ----------------------------------------------------------------------------- vectors


def _index(store: Store, db: Database, *, create: bool) -> Any:
    from agenvoy_cli.vectors import api as vectors

    name = collection_name(db.id)
    if not create and not vectors.index_exists(store, name):
        return None
    return vectors.open_index(store, name, create=create)


def _rebuild_hint(db: Database) -> Callable[[Exception], Exception]:
    def convert(exc: Exception) -> Exception:
        from agenvoy_cli.vectors.api import IndexModelMismatch

        text = str(exc).split("; rebuild", 1)[0]
        return IndexModelMismatch(f"{text}; re-embed it with `agenvoy rag sync {db.name} "
                                  "--rebuild` (or set AGENVOY_EMBEDDER back)")
    return convert


def _mismatch() -> type[Exception]:
    from agenvoy_cli.vectors.api import IndexModelMismatch

    return IndexModelMismatch


# ----------------------------------------------------------------------------- listing


def _summary(conn: sqlite3.Connection, db: Database) -> dict[str, Any]:
    counts = {state: (n, c, b) for state, n, c, b in conn.execute(
        "SELECT state, count(*), coalesce(sum(chunks), 0), coalesce(sum(size), 0) "
        "FROM rag_files WHERE db_id = ? GROUP BY state", (db.id,))}
    files, chunks, size = counts.get("done", (0, 0, 0))
    return {"name": db.name, "file_count": files, "chunk_count": chunks, "bytes": size,
            "pending_count": counts.get("pending", (0,))[0],
            "skipped_count": counts.get("skipped", (0,))[0],
            "paths": [s.path for s in db.sources],
            "created_at": iso(db.created_at), "synced_at": iso(db.synced_at),
            "max_file_bytes": db.max_file_bytes, "hidden": db.hidden,
            "has_vectors": db.vectors}


def list_databases(store: Store) -> list[dict[str, Any]]:
    """list_rag: every database with its file and chunk counts, size and last sync."""
    with store.read_lock():
        conn = _readonly(store)
        return [_summary(conn, db) for db in _all_databases(conn)] if conn else []


def list_files(store: Store, name: str) -> dict[str, Any]:
    checked_name(name)
    with store.read_lock():
        conn = _readonly(store)
        db = _require(conn, name, store.layout.home)
        assert conn is not None
        rows = conn.execute(
            "SELECT path, source, format, state, reason, size, lines, chunks, indexed_at "
            "FROM rag_files WHERE db_id = ? ORDER BY path", (db.id,)).fetchall()
        summary = _summary(conn, db)
    files = [{"path": p, "relpath": _relpath(p, src), "format": fmt, "state": state,
              "reason": reason, "bytes": size, "lines": lines, "chunk_count": chunks,
              "indexed_at": iso(at)}
             for p, src, fmt, state, reason, size, lines, chunks, at in rows]
    return {**summary, "files_list": files}


def iter_chunks(store: Store, name: str) -> Iterable[dict[str, Any]]:
    """Every chunk of a database (for benchmarks and checks)."""
    with store.read_lock():
        conn = _readonly(store)
        db = _require(conn, name, store.layout.home)
        assert conn is not None
        rows = conn.execute(
            "SELECT c.id, f.path, c.line_start, c.line_end, c.heading, c.text "
            "FROM rag_chunks c JOIN rag_files f ON f.id = c.file_id WHERE f.db_id = ? "
            "ORDER BY f.path, c.ord", (db.id,)).fetchall()
    for cid, path, lo, hi, heading, text in rows:
        yield {"id": cid, "path": path, "line_start": lo, "line_end": hi, "heading": heading,
               "text": text}
