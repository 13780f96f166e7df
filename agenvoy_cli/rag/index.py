"""Document RAG: named databases over the user's own files (notes, an inbox, a repository).

A database has a name (validated like a session id), the paths it watches (``rag_sources``),
one row per file (``rag_files``) and the files' chunks (``rag_chunks``, with FTS5 over
CJK-bigram tokens: the same Chinese-aware index as conversation search). Each chunk's
vector lives in the Chroma collection ``agenvoy_rag_<database id>`` under the chunk's id.

Indexing (create/add/sync) walks the paths (rag_formats.walk), compares each file with its
row (size and mtime first, then the SHA-256 of its bytes), and re-indexes only what
changed; a file gone from disk (or now ignored) is dropped. Files are read, chunked and
embedded outside the store lock, in groups of about EMBED_BATCH chunks; each group is then
written under the lock in an order that keeps the database consistent at every instant:

1. files whose old chunks have vectors are marked ``pending``; 2. their old vectors are
deleted; 3. one transaction replaces their chunk rows (files still ``pending``); 4. the new
vectors are added; 5. the files are marked ``done``. A file is ``done`` only when both its
rows and its vectors are written, and Chroma never holds a vector whose chunk SQLite lacks
(it may lack vectors of ``pending`` files). An interrupted run (Ctrl-C, kill) leaves
``pending`` files, which the next sync re-indexes whatever their stat says. One sync per
database runs at a time (a task lock); searches run meanwhile.

Search: keyword (every term, else any term; BM25; never imports chromadb, creates no file),
semantic (cosine similarity over the chunk vectors), hybrid (any-term BM25 fused with the
vector ranking by search.fuse, the reciprocal-rank fusion of conversation search).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from agenvoy_cli.errors import BadInput, NotFound, StoreBusy
from agenvoy_cli.home import fts
from agenvoy_cli.home.layout import validate_name
from agenvoy_cli.home.locking import store_lock
from agenvoy_cli.rag.chunking import Chunk, pack
from agenvoy_cli.rag.formats import (
    Found,
    Skipped,
    binary_reason,
    decode,
    file_format,
    parse,
    walk,
)

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

Progress = Callable[[int, int], None]  # (files done, files to read)


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


# ----------------------------------------------------------------------------- create


def _options(db_options: dict[str, Any], max_file_bytes: int | None,
             hidden: bool | None) -> dict[str, Any]:
    options = dict(db_options)
    if max_file_bytes is not None:
        options["max_file_bytes"] = max_file_bytes
    if hidden is not None:
        options["hidden"] = hidden
    return options


def create(store: Store, name: str, paths: Sequence[str] = (), *,
           max_file_bytes: int | None = None, hidden: bool | None = None) -> Database:
    """A new, empty database bound to `paths` (checked before anything is written)."""
    checked_name(name)
    roots = [_checked_path(p) for p in paths]
    with store.write_lock(), store.transaction() as conn:
        if _database(conn, name) is not None:
            raise BadInput(f"RAG database {name!r} already exists "
                           "(index more with `agenvoy rag add`)")
        options = _options({}, max_file_bytes, hidden)
        cur = conn.execute("INSERT INTO rag_dbs(name, created_at, options) VALUES (?, ?, ?)",
                           (name, now_ns(), orjson.dumps(options).decode()))
        db_id = cur.lastrowid
        conn.executemany(
            "INSERT OR IGNORE INTO rag_sources(db_id, path, kind, added_at) VALUES (?,?,?,?)",
            [(db_id, str(p), kind, now_ns()) for p, kind in roots])
        db = _database(conn, name)
    assert db is not None
    return db


# ----------------------------------------------------------------------------- sync


@dataclass
class SyncReport:
    database: str
    scanned: int = 0  # files found in the paths
    indexed: int = 0  # files (re)indexed
    chunks: int = 0  # chunks written
    unchanged: int = 0
    removed: int = 0  # files dropped: deleted, now ignored, or now skipped
    skipped: list[dict[str, Any]] = field(default_factory=list)  # newly skipped files
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"database": self.database, "scanned": self.scanned, "indexed": self.indexed,
                "chunks": self.chunks, "unchanged": self.unchanged, "removed": self.removed,
                "skipped": self.skipped, "notes": self.notes,
                "seconds": round(self.seconds, 3)}


@dataclass
class _Work:
    """One file to write: new chunks (index), a new stat only (touch), or a skip."""

    path: str
    source: str
    size: int
    mtime_ns: int
    old: FileRow | None
    action: str = "index"  # index | touch | skip
    hash: str | None = None
    format: str | None = None
    reason: str | None = None
    lines: int = 0
    chunks: list[Chunk] = field(default_factory=list)
    label: str = ""  # what the embedder sees before each chunk (file and heading)


def _task_lock(store: Store, name: str) -> contextlib.AbstractContextManager[None]:
    return store_lock(store.layout.task_lock("rag", name), store.settings.lock_timeout)


def _relpath(path: str, source: str) -> str:
    if path == source:
        return os.path.basename(path)
    return os.path.relpath(path, source) if _within(path, source) else path


def _read(work: _Work, max_bytes: int) -> None:
    """Read, hash, decide and chunk one file (outside the lock)."""
    path = Path(work.path)
    fmt = file_format(path)
    if fmt is None:
        work.action, work.reason = "skip", binary_reason(path)
        return
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        work.action, work.reason = "skip", f"cannot read: {exc.strerror or exc}"
        return
    if len(data) > max_bytes:
        work.action, work.reason = "skip", f"larger than {human_size(max_bytes)}"
        return
    work.size = len(data)
    work.hash = hashlib.sha256(data).hexdigest()
    old = work.old
    if old is not None and old.state == "done" and old.hash == work.hash:
        work.action = "touch"
        return
    text = decode(data)
    if text is None:
        work.action, work.reason = "skip", binary_reason(path)
        return
    doc = parse(text, fmt)
    work.format, work.lines = fmt, doc.lines
    work.chunks = pack(doc.blocks, section_breaks=doc.section_breaks, header=doc.header)
    if not work.chunks:
        work.action, work.reason = "skip", "no text"
    work.label = _relpath(work.path, work.source)


def _embed_text(work: _Work, chunk: Chunk) -> str:
    head = f"{work.label} · {chunk.heading}" if chunk.heading else work.label
    return f"{head}\n{chunk.text}"


def _index(store: Store, db: Database, *, create: bool) -> Any:
    from agenvoy_cli.vectors import index as vectors

    name = collection_name(db.id)
    if not create and not vectors.index_exists(store, name):
        return None
    return vectors.VectorIndex(store, name, create=create)


def _rebuild_hint(db: Database) -> Callable[[Exception], Exception]:
    def convert(exc: Exception) -> Exception:
        from agenvoy_cli.vectors.index import IndexModelMismatch

        text = str(exc).split("; rebuild", 1)[0]
        return IndexModelMismatch(f"{text}; re-embed it with `agenvoy rag sync {db.name} "
                                  "--rebuild` (or set AGENVOY_EMBEDDER back)")
    return convert


def _mismatch() -> type[Exception]:
    from agenvoy_cli.vectors.index import IndexModelMismatch

    return IndexModelMismatch


def _commit(store: Store, db: Database, group: list[_Work],
            vectors_by_work: list[list[list[float]]]) -> None:
    """Write one group under the lock, in the order of the module docstring."""
    with store.write_lock():
        conn, current = _writer(store, db.name)
        if current.id != db.id:
            raise NotFound(f"RAG database {db.name!r} was removed during the sync")
        changing = [w.old.id for w in group if w.old is not None and w.action != "touch"]
        old_chunks: list[int] = []
        if changing:
            marks = ",".join("?" * len(changing))
            old_chunks = [r[0] for r in conn.execute(
                f"SELECT id FROM rag_chunks WHERE file_id IN ({marks})", changing)]
        if old_chunks:
            with store.transaction() as tx:
                tx.execute(f"UPDATE rag_files SET state = 'pending' WHERE id IN ({marks}) "
                           "AND state = 'done'", changing)
            index = _index(store, db, create=False)
            if index is not None:
                index.delete(str(i) for i in old_chunks)
        new_ids: list[str] = []
        new_vecs: list[list[float]] = []
        metas: list[dict[str, Any]] = []
        done: list[int] = []
        stamp = now_ns()
        with store.transaction() as tx:
            for work, vecs in zip(group, vectors_by_work):
                fid = work.old.id if work.old is not None else None
                if work.action == "touch":
                    tx.execute("UPDATE rag_files SET size = ?, mtime_ns = ? WHERE id = ?",
                               (work.size, work.mtime_ns, fid))
                    continue
                if fid is not None:
                    tx.execute("DELETE FROM rag_chunks WHERE file_id = ?", (fid,))
                state = "skipped" if work.action == "skip" else "pending"
                values = (work.source, work.format, work.size, work.mtime_ns, work.hash,
                          work.lines, state, work.reason,
                          0 if work.action == "skip" else len(work.chunks), stamp)
                if fid is None:
                    fid = tx.execute(
                        "INSERT INTO rag_files(source, format, size, mtime_ns, hash, lines, "
                        "state, reason, chunks, indexed_at, db_id, path) "
                        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                        (*values, db.id, work.path)).lastrowid
                else:
                    tx.execute(
                        "UPDATE rag_files SET source = ?, format = ?, size = ?, mtime_ns = ?, "
                        "hash = ?, lines = ?, state = ?, reason = ?, chunks = ?, "
                        "indexed_at = ? WHERE id = ?", (*values, fid))
                if work.action == "skip":
                    continue
                for ordinal, (chunk, vec) in enumerate(zip(work.chunks, vecs)):
                    cid = tx.execute(
                        "INSERT INTO rag_chunks(file_id, ord, line_start, line_end, heading, "
                        "text, tokens) VALUES (?,?,?,?,?,?,?)",
                        (fid, ordinal, chunk.line_start, chunk.line_end, chunk.heading,
                         chunk.text, _tokens(work, chunk))).lastrowid
                    new_ids.append(str(cid))
                    new_vecs.append(vec)
                    metas.append({"file_id": fid, "db_id": db.id})
                done.append(fid)
        if new_ids:
            index = _index(store, db, create=True)
            try:
                index.add(new_ids, new_vecs, metas)
            except _mismatch() as exc:
                raise _rebuild_hint(db)(exc) from None
        if done:
            marks = ",".join("?" * len(done))
            with store.transaction() as tx:
                tx.execute(f"UPDATE rag_files SET state = 'done' WHERE id IN ({marks})", done)


def _tokens(work: _Work, chunk: Chunk) -> str:
    """What FTS indexes: the file name, the heading and the text, CJK as bigrams."""
    parts = [os.path.basename(work.path)]
    if chunk.heading:
        parts.append(chunk.heading)
    parts.append(chunk.text)
    return fts.index_text("\n".join(parts))


def _drop(store: Store, db: Database, rows: Sequence[FileRow]) -> None:
    """Forget files (gone from disk, now ignored): vectors first, then rows."""
    if not rows:
        return
    with store.write_lock():
        conn, current = _writer(store, db.name)
        if current.id != db.id:
            raise NotFound(f"RAG database {db.name!r} was removed during the sync")
        ids = [r.id for r in rows]
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            marks = ",".join("?" * len(part))
            chunk_ids = [r[0] for r in conn.execute(
                f"SELECT id FROM rag_chunks WHERE file_id IN ({marks})", part)]
            if chunk_ids:
                with store.transaction() as tx:
                    tx.execute(f"UPDATE rag_files SET state = 'pending' WHERE id IN ({marks})",
                               part)
                index = _index(store, db, create=False)
                if index is not None:
                    index.delete(str(c) for c in chunk_ids)
            with store.transaction() as tx:
                tx.execute(f"DELETE FROM rag_files WHERE id IN ({marks})", part)


def _scan(db: Database, scope: Sequence[Source], report: SyncReport
          ) -> tuple[dict[str, tuple[Found, str]], list[Skipped], set[str]]:
    """Walk the paths in scope: files found (path -> (Found, source)), files skipped by the
    walk, and the sources that are missing."""
    found: dict[str, tuple[Found, str]] = {}
    skipped: list[Skipped] = []
    missing: set[str] = set()
    for source in scope:
        root = Path(source.path)
        try:
            st = root.stat()
        except OSError:
            missing.add(source.path)
            continue
        if source.kind == "file":
            if root.is_file():
                found.setdefault(source.path, (Found(root, st.st_size, st.st_mtime_ns),
                                               source.path))
            else:
                missing.add(source.path)
            continue
        if not root.is_dir():
            missing.add(source.path)
            continue
        for item in walk(root, hidden=db.hidden):
            if isinstance(item, Skipped):
                skipped.append(item)
            else:
                found.setdefault(str(item.path), (item, source.path))
    report.scanned = len(found)
    return found, skipped, missing


def sync(store: Store, name: str, paths: Sequence[str] | None = None, *,
         max_file_bytes: int | None = None, hidden: bool | None = None,
         rebuild: bool = False, progress: Progress | None = None,
         embed: Callable[[list[str]], list[list[float]]] | None = None) -> SyncReport:
    """`rag add` (paths given: add them to the database and index them) or `rag sync`
    (paths None: every path of the database). Re-indexes only what changed."""
    started = time.perf_counter()
    checked_name(name)
    roots = [_checked_path(p) for p in paths] if paths is not None else None
    with store.read_lock():  # an unknown name creates nothing, not even its task lock
        _require(_readonly(store), name, store.layout.home)
    report = SyncReport(name)
    try:
        lock = _task_lock(store, name)
        lock.__enter__()
    except StoreBusy:
        raise StoreBusy(f"another `agenvoy rag` run has been indexing {name!r} for more "
                        f"than {store.settings.lock_timeout:g}s (AGENVOY_LOCK_TIMEOUT); "
                        "retry later") from None
    try:
        db = _prepare(store, name, roots, max_file_bytes, hidden, rebuild)
        _run(store, db, roots, report, progress, embed)
    finally:
        lock.__exit__(None, None, None)
    report.seconds = time.perf_counter() - started
    return report


def _prepare(store: Store, name: str, roots: list[tuple[Path, str]] | None,
             max_file_bytes: int | None, hidden: bool | None, rebuild: bool) -> Database:
    with store.write_lock():
        conn, db = _writer(store, name)
        with store.transaction() as tx:
            options = _options(db.options, max_file_bytes, hidden)
            if options != db.options:
                tx.execute("UPDATE rag_dbs SET options = ? WHERE id = ?",
                           (orjson.dumps(options).decode(), db.id))
            if roots:
                tx.executemany(
                    "INSERT OR IGNORE INTO rag_sources(db_id, path, kind, added_at) "
                    "VALUES (?,?,?,?)", [(db.id, str(p), kind, now_ns()) for p, kind in roots])
            if rebuild:
                tx.execute("UPDATE rag_files SET state = 'pending', hash = NULL "
                           "WHERE db_id = ? AND state = 'done'", (db.id,))
        if rebuild:
            from agenvoy_cli.vectors import index as vectors

            vectors.drop_index(store, collection_name(db.id))
        db = _database(conn, name)
    assert db is not None
    return db


def _run(store: Store, db: Database, roots: list[tuple[Path, str]] | None,
         report: SyncReport, progress: Progress | None,
         embed: Callable[[list[str]], list[list[float]]] | None) -> None:
    if roots is None:
        scope = list(db.sources)
    else:
        given = [str(p) for p, _ in roots]
        scope = [s for s in db.sources
                 if any(_within(s.path, g) for g in given)]
    found, walk_skips, missing = _scan(db, scope, report)
    with store.read_lock():
        conn = _readonly(store)
        assert conn is not None
        rows = _files(conn, db.id)
    max_bytes = db.max_file_bytes

    # Files gone (or no longer wanted) are dropped first: cheap, and it frees their names.
    gone = [r for p, r in rows.items() if p not in found
            and any(_within(p, s.path) for s in scope)]
    for source in sorted(missing):
        count = sum(1 for r in gone if _within(r.path, source))
        report.notes.append(f"{source} is missing" +
                            (f": its {count} file(s) were dropped" if count else ""))
    _drop(store, db, gone)
    report.removed += sum(1 for r in gone if r.state != "skipped")
    if missing:
        _forget_missing_files(store, db, missing)
    for skip in walk_skips:
        report.skipped.append({"path": str(skip.path), "reason": skip.reason})

    todo: list[_Work] = []
    for path, (item, source) in sorted(found.items()):
        old = rows.get(path)
        unchanged = old is not None and (old.size, old.mtime_ns) == (item.size, item.mtime_ns)
        if item.size > max_bytes:
            reason = f"larger than {human_size(max_bytes)}"
            if unchanged and old is not None and old.state == "skipped" and old.reason == reason:
                report.unchanged += 1
                continue
            todo.append(_Work(path, source, item.size, item.mtime_ns, old, "skip",
                              reason=reason))
            continue
        if unchanged and old is not None and (
                old.state == "done"
                or old.state == "skipped" and not (old.reason or "").startswith("larger")):
            report.unchanged += 1
            continue
        todo.append(_Work(path, source, item.size, item.mtime_ns, old))

    total = len(todo)
    if progress is not None and total:
        progress(0, total)
    group: list[_Work] = []
    pending_chunks = 0
    done = 0
    for work in todo:
        if work.action == "index":
            _read(work, max_bytes)
        group.append(work)
        pending_chunks += len(work.chunks) if work.action == "index" else 0
        if pending_chunks >= EMBED_BATCH:
            _flush(store, db, group, report, embed)
            done += len(group)
            group, pending_chunks = [], 0
            if progress is not None:
                progress(done, total)
    if group:
        _flush(store, db, group, report, embed)
        done += len(group)
        if progress is not None:
            progress(done, total)
    with store.write_lock():
        conn, current = _writer(store, db.name)
        if current.id == db.id:
            with store.transaction() as tx:
                tx.execute("UPDATE rag_dbs SET synced_at = ? WHERE id = ?", (now_ns(), db.id))


def _forget_missing_files(store: Store, db: Database, missing: set[str]) -> None:
    """A file the database was given that is gone: forget that path too. A missing folder
    stays registered (its files were dropped): a drive that was not mounted is indexed
    again when it is back."""
    files = [s.path for s in db.sources if s.kind == "file" and s.path in missing]
    if not files:
        return
    with store.write_lock():
        _writer(store, db.name)
        with store.transaction() as tx:
            tx.executemany("DELETE FROM rag_sources WHERE db_id = ? AND path = ?",
                           [(db.id, p) for p in files])


def _interruptible(embed: Callable[[list[str]], list[list[float]]], texts: list[str]
                   ) -> list[list[float]]:
    """embed(texts) in a daemon thread, so that Ctrl-C is not held up until a model's C
    call returns (seconds per batch on a busy machine): the main thread waits in short
    steps and a KeyboardInterrupt leaves the abandoned call behind as the process exits."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["out"] = embed(texts)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as is
            box["exc"] = exc

    thread = threading.Thread(target=work, name="agenvoy-rag-embed", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.1)
    if "exc" in box:
        raise box["exc"]
    return box["out"]


def _flush(store: Store, db: Database, group: list[_Work], report: SyncReport,
           embed: Callable[[list[str]], list[list[float]]] | None) -> None:
    texts: list[str] = []
    for work in group:
        if work.action == "index":
            texts.extend(_embed_text(work, c) for c in work.chunks)
    vecs: list[list[float]] = []
    if texts:
        if embed is None:
            from agenvoy_cli.vectors import index as vectors

            embed = vectors.embedder(store).embed_documents
        vecs = _interruptible(embed, texts)  # outside the lock: the slow part
    per_work: list[list[list[float]]] = []
    at = 0
    for work in group:
        n = len(work.chunks) if work.action == "index" else 0
        per_work.append(vecs[at:at + n])
        at += n
    _commit(store, db, group, per_work)
    for work in group:
        if work.action == "index":
            report.indexed += 1
            report.chunks += len(work.chunks)
        elif work.action == "touch":
            report.unchanged += 1
        else:
            was = work.old
            if was is not None and was.state != "skipped":
                report.removed += 1
            if was is None or was.state != "skipped" or was.reason != work.reason:
                report.skipped.append({"path": work.path, "reason": work.reason})


# ----------------------------------------------------------------------------- remove


def remove(store: Store, name: str) -> dict[str, Any]:
    """Delete a database: its files' rows marked pending, its vectors, then its rows."""
    checked_name(name)
    with store.write_lock():
        conn, db = _writer(store, name)
        files, chunks = conn.execute(
            "SELECT count(*), coalesce(sum(chunks), 0) FROM rag_files WHERE db_id = ? "
            "AND state = 'done'", (db.id,)).fetchone()
        with store.transaction() as tx:
            tx.execute("UPDATE rag_files SET state = 'pending' WHERE db_id = ?", (db.id,))
        if store.layout.chroma.is_dir() or os.environ.get("AGENVOY_CHROMA_URL"):
            from agenvoy_cli.vectors import index as vectors

            vectors.drop_index(store, collection_name(db.id))
            _drop_orphans(store, conn, vectors)
        with store.transaction() as tx:
            tx.execute("DELETE FROM rag_dbs WHERE id = ?", (db.id,))
        from agenvoy_cli.home import sqlite

        sqlite.reclaim_space(conn)
    return {"database": name, "action": "removed", "files": files, "chunks": chunks}


def _drop_orphans(store: Store, conn: sqlite3.Connection, vectors: Any) -> None:
    """Collections of databases that no longer exist (a remove that died half-way)."""
    live = {vectors.scoped(store, collection_name(r[0]))
            for r in conn.execute("SELECT id FROM rag_dbs")}
    ours = vectors.scoped(store, "")  # "" embedded; "-<home key>" on a shared server
    for col in vectors.client(store).list_collections():
        cname = col if isinstance(col, str) else col.name
        if (cname.startswith(COLLECTION_PREFIX) and cname.endswith(ours)
                and cname not in live):
            with contextlib.suppress(Exception):
                vectors.client(store).delete_collection(cname)


# ----------------------------------------------------------------------------- listing


def _summary(conn: sqlite3.Connection, db: Database) -> dict[str, Any]:
    counts = {state: (n, c, b) for state, n, c, b in conn.execute(
        "SELECT state, count(*), coalesce(sum(chunks), 0), coalesce(sum(size), 0) "
        "FROM rag_files WHERE db_id = ? GROUP BY state", (db.id,))}
    files, chunks, size = counts.get("done", (0, 0, 0))
    return {"name": db.name, "files": files, "chunks": chunks, "bytes": size,
            "pending": counts.get("pending", (0,))[0],
            "skipped": counts.get("skipped", (0,))[0],
            "paths": [s.path for s in db.sources],
            "created_at": iso(db.created_at), "last_sync": iso(db.synced_at),
            "max_file_bytes": db.max_file_bytes, "hidden": db.hidden}


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
              "reason": reason, "bytes": size, "lines": lines, "chunks": chunks,
              "indexed_at": iso(at)}
             for p, src, fmt, state, reason, size, lines, chunks, at in rows]
    return {**summary, "files_list": files}


# ----------------------------------------------------------------------------- search


@dataclass
class Hit:
    database: str
    path: str
    relpath: str
    format: str | None
    line_start: int
    line_end: int
    heading: str | None
    text: str
    score: float
    chunk_id: int

    def as_dict(self) -> dict[str, Any]:
        return {"database": self.database, "path": self.path, "relpath": self.relpath,
                "format": self.format, "line_start": self.line_start,
                "line_end": self.line_end, "heading": self.heading,
                "score": round(self.score, 6), "text": self.text}


@dataclass
class SearchResult:
    query: str
    mode: str
    databases: list[str]
    results: list[Hit] = field(default_factory=list)
    match: str | None = None  # keyword: all | any | none
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"query": self.query, "mode": self.mode,
                               "databases": self.databases}
        if self.match is not None:
            doc["match"] = self.match
        doc["results"] = [h.as_dict() for h in self.results]
        return doc


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def match_every(query: str) -> tuple[str | None, list[str], int]:
    """MATCH requiring every term (any order) and every "quoted phrase" (in order), the
    one-character CJK terms (matched by instr(): a bigram index cannot find them), and
    how many terms that is (a quoted phrase is one)."""
    phrases: list[list[str]] = []
    singles: list[str] = []
    for quoted, bare in re.findall(r'"([^"]*)"|(\S+)', query):
        if quoted:
            toks = [t for word in quoted.split() for t in fts.term_tokens(word)]
        else:
            toks = fts.term_tokens(bare)
            if len(toks) == 1 and len(toks[0]) == 1 and fts._is_cjk(toks[0]):
                singles.append(toks[0])
                continue
        if toks:
            phrases.append(toks)
    match = " AND ".join(" + ".join(_quote(t) for t in p) for p in phrases) or None
    return match, singles, len(phrases) + len(singles)


def _in_dbs(db_ids: Sequence[int]) -> tuple[str, list[int]]:
    return f"f.db_id IN ({','.join('?' * len(db_ids))})", list(db_ids)


def fts_ranking(conn: sqlite3.Connection, db_ids: Sequence[int], match: str | None, n: int,
                contains: Sequence[str] = ()) -> list[tuple[int, float]]:
    """(chunk id, -bm25) best first; every string of `contains` must be in the tokens."""
    if not db_ids or (match is None and not contains):
        return []
    where, args = _in_dbs(db_ids)
    if match is None:
        sql = ("SELECT c.id, 0.0 AS s FROM rag_chunks c JOIN rag_files f ON f.id = c.file_id "
               f"WHERE {where}")
    else:
        sql = ("SELECT c.id, bm25(rag_chunks_fts) AS s FROM rag_chunks_fts "
               "JOIN rag_chunks c ON c.id = rag_chunks_fts.rowid "
               "JOIN rag_files f ON f.id = c.file_id "
               f"WHERE rag_chunks_fts MATCH ? AND {where}")
        args = [match, *args]
    for text in contains:
        sql += " AND instr(c.tokens, ?) > 0"
        args.append(text)
    sql += " ORDER BY s, c.id LIMIT ?"
    args.append(n)
    return [(cid, -score) for cid, score in conn.execute(sql, args)]


def _any_match(query: str) -> str | None:
    from agenvoy_cli.search.engine import content_query

    return fts.match_any(content_query(query))


def vector_ranking(store: Store, dbs: Sequence[Database], vector: Sequence[float], n: int
                   ) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) over the databases' collections, best first. Hold the
    write lock (Chroma)."""
    ranked: list[tuple[int, float]] = []
    for db in dbs:
        index = _index(store, db, create=False)
        if index is None:
            continue
        try:
            hits = index.query(vector, n)
        except _mismatch() as exc:
            raise _rebuild_hint(db)(exc) from None
        ranked.extend((int(h.id), 1.0 - float(h.distance)) for h in hits)
    ranked.sort(key=lambda kv: -kv[1])
    return ranked[:n]


def _hits(conn: sqlite3.Connection, ranked: Sequence[tuple[int, float]]) -> list[Hit]:
    """The chunks of a ranking, in its order (ids whose chunk is gone are left out)."""
    ids = [cid for cid, _ in ranked]
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = {r[0]: r for r in conn.execute(
        "SELECT c.id, d.name, f.path, f.source, f.format, c.line_start, c.line_end, "
        "c.heading, c.text FROM rag_chunks c JOIN rag_files f ON f.id = c.file_id "
        f"JOIN rag_dbs d ON d.id = f.db_id WHERE c.id IN ({marks})", ids)}
    out = []
    for cid, score in ranked:
        row = rows.get(cid)
        if row is None:
            continue
        _, dbname, path, source, fmt, lo, hi, heading, text = row
        out.append(Hit(dbname, path, _relpath(path, source), fmt, lo, hi, heading, text,
                       score, cid))
    return out


def _pending_note(conn: sqlite3.Connection, dbs: Sequence[Database]) -> list[str]:
    notes = []
    for db in dbs:
        n = conn.execute("SELECT count(*) FROM rag_files WHERE db_id = ? AND state = "
                         "'pending'", (db.id,)).fetchone()[0]
        if n:
            notes.append(f"{n} file(s) of {db.name!r} are not fully indexed (an interrupted "
                         f"sync?): run `agenvoy rag sync {db.name}`")
    return notes


def search(store: Store, names: Sequence[str] | None, query: str, mode: str = DEFAULT_MODE,
           *, limit: int = DEFAULT_LIMIT) -> SearchResult:
    """search_rag over the named databases (None: all of them)."""
    if mode not in MODES:
        raise BadInput(f"unknown search mode {mode!r} (expected {', '.join(MODES)})")
    if limit < 1:
        raise BadInput("--limit must be at least 1")
    query = " ".join(query.split())
    if not query:
        raise BadInput("the query is empty")
    for name in names or ():
        checked_name(name)
    with store.read_lock():
        conn = _readonly(store)
        if names is None:
            dbs = _all_databases(conn)
        else:
            dbs = [_require(conn, n, store.layout.home) for n in dict.fromkeys(names)]
        result = SearchResult(query, mode, [db.name for db in dbs])
        if conn is None or not dbs:
            return result
        ids = [db.id for db in dbs]
        if mode == "keyword":
            return _keyword(conn, ids, query, limit, result)
        kw: list[tuple[int, float]] = []
        if mode == "hybrid":
            kw = fts_ranking(conn, ids, _any_match(query), POOL)
            result.match = "any"
        result.notes.extend(_pending_note(conn, dbs))
        if not (store.layout.chroma.is_dir() or os.environ.get("AGENVOY_CHROMA_URL")):
            result.results = _hits(conn, kw[:limit])  # nothing was ever embedded
            return result
    from agenvoy_cli.vectors import index as vectors

    vector = vectors.embedder(store).embed_query(query)  # outside the lock
    with store.write_lock():
        vec = vector_ranking(store, dbs, vector, POOL if mode == "hybrid" else limit)
        if mode == "semantic":
            ranked = vec[:limit]
        else:
            from agenvoy_cli.search.engine import fuse

            ranked = fuse(kw, vec)[:limit]
        conn = _readonly(store)
        assert conn is not None
        result.results = _hits(conn, ranked)
    return result


def _keyword(conn: sqlite3.Connection, ids: list[int], query: str, limit: int,
             result: SearchResult) -> SearchResult:
    match, singles, terms = match_every(query)
    if match is None and not singles:
        result.match = "none"
        return result
    ranked = fts_ranking(conn, ids, match, limit, singles)
    result.match = "all"
    if not ranked and terms > 1:
        any_match = _any_match(query)
        ranked = fts_ranking(conn, ids, any_match, limit)
        result.match = "any"
    result.results = _hits(conn, ranked)
    return result


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
