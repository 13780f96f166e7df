"""Indexing a RAG database (create/add/sync): walk, compare, read, chunk, embed, commit.

The paths are walked (rag.walk); each file is compared with its row (size and mtime first,
then the SHA-256 of its bytes) and only what changed is re-indexed; a file gone from disk
(or now ignored) is dropped. Files are read, chunked and embedded outside the store lock,
in groups of about EMBED_BATCH chunks; each group is then written under the lock by
rag.commit. One sync per database runs at a time (a task lock); searches run meanwhile.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenvoy_cli.errors import StoreBusy
from agenvoy_cli.models.local import interruptible
from agenvoy_cli.rag.chunking import Chunk, pack
from agenvoy_cli.rag.commit import _commit, _drop, _Work, mark_pending
from agenvoy_cli.rag.formats import parse
from agenvoy_cli.rag.reading import binary_reason, decode, file_format
from agenvoy_cli.rag.records import (
    Database,
    Source,
    _checked_path,
    _database,
    _files,
    _options,
    _readonly,
    _relpath,
    _require,
    _within,
    _writer,
    add_sources,
    checked_name,
    collection_name,
    human_size,
    remove_sources,
    set_options,
    set_synced,
)
from agenvoy_cli.rag.walk import Found, Skipped, walk

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store

EMBED_BATCH = 32  # chunks embedded (and written) per lock round-trip

Progress = Callable[[int, int], None]  # (files done, files to read)
Announce = Callable[[int, int, bool], None]  # (files to read, their bytes, embedding?)


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
                "chunk_count": self.chunks, "unchanged": self.unchanged,
                "removed": self.removed, "skipped": len(self.skipped),
                "skipped_files": self.skipped, "notes": self.notes,
                "seconds": round(self.seconds, 3)}


def _task_lock(store: Store, name: str) -> contextlib.AbstractContextManager[None]:
    return store.locks.hold(store.layout.task_lock("rag", name), store.settings.lock_timeout)


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
         rebuild: bool = False, vectors: bool | None = None,
         progress: Progress | None = None, announce: Announce | None = None,
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
        db = _prepare(store, name, roots, max_file_bytes, hidden, rebuild, vectors)
        _run(store, db, roots, report, progress, embed, announce)
    finally:
        lock.__exit__(None, None, None)
    report.seconds = time.perf_counter() - started
    return report


def _prepare(store: Store, name: str, roots: list[tuple[Path, str]] | None,
             max_file_bytes: int | None, hidden: bool | None, rebuild: bool,
             vectors: bool | None) -> Database:
    with store.write_lock():
        conn, db = _writer(store, name)
        # Vectors switched on after --no-vectors: every file is embedded again (its
        # chunks have no vectors), which is what a rebuild does.
        rebuild = rebuild or (vectors is True and not db.vectors)
        with store.transaction() as tx:
            options = _options(db.options, max_file_bytes, hidden, vectors)
            if options != db.options:
                set_options(tx, db.id, options)
            if roots:
                add_sources(tx, db.id, roots)
            if rebuild:
                mark_pending(tx, db.id)
        if rebuild or (vectors is False and db.vectors):  # no stale vectors kept
            from agenvoy_cli.vectors import api as vectors

            vectors.drop_index(store, collection_name(db.id))
        db = _database(conn, name)
    assert db is not None
    return db


Embed = Callable[[list[str]], list[list[float]]]


def _run(store: Store, db: Database, roots: list[tuple[Path, str]] | None,
         report: SyncReport, progress: Progress | None, embed: Embed | None,
         announce: Announce | None = None) -> None:
    scope = _scope(db, roots)
    found, walk_skips, missing = _scan(db, scope, report)
    with store.read_lock():
        conn = _readonly(store)
        assert conn is not None
        rows = _files(conn, db.id)
    # Files gone (or no longer wanted) are dropped first: cheap, and it frees their names.
    _drop_gone(store, db, scope, rows, found, missing, report)
    for skip in walk_skips:
        report.skipped.append({"path": str(skip.path), "reason": skip.reason})
    todo: list[_Work] = []
    for path, (item, source) in sorted(found.items()):
        work = _work_for(path, item, source, rows.get(path), db.max_file_bytes)
        if work is None:
            report.unchanged += 1
        else:
            todo.append(work)
    _index_all(store, db, todo, report, progress, embed, announce)
    with store.write_lock():
        conn, current = _writer(store, db.name)
        if current.id == db.id:
            with store.transaction() as tx:
                set_synced(tx, db.id)


def _scope(db: Database, roots: list[tuple[Path, str]] | None) -> list[Source]:
    """The database's sources a sync looks at: all, or those within the paths given."""
    if roots is None:
        return list(db.sources)
    given = [str(p) for p, _ in roots]
    return [s for s in db.sources if any(_within(s.path, g) for g in given)]


def _drop_gone(store: Store, db: Database, scope: list[Source], rows: dict[str, Any],
               found: dict[str, Any], missing: set[str], report: SyncReport) -> None:
    """The files of the scope the walk no longer finds dropped (a note for each missing
    source), and a missing file the database was given forgotten."""
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


def _work_for(path: str, item: Any, source: Any, old: Any, max_bytes: int) -> _Work | None:
    """What to do with a file the walk found (None: unchanged since the last sync)."""
    unchanged = old is not None and (old.size, old.mtime_ns) == (item.size, item.mtime_ns)
    if item.size > max_bytes:
        reason = f"larger than {human_size(max_bytes)}"
        if unchanged and old.state == "skipped" and old.reason == reason:
            return None
        return _Work(path, source, item.size, item.mtime_ns, old, "skip", reason=reason)
    if unchanged and (old.state == "done" or old.state == "skipped"
                      and not (old.reason or "").startswith("larger")):
        return None
    return _Work(path, source, item.size, item.mtime_ns, old)


def _index_all(store: Store, db: Database, todo: list[_Work], report: SyncReport,
               progress: Progress | None, embed: Embed | None,
               announce: Announce | None) -> None:
    """Read, embed and commit the work in groups of about EMBED_BATCH chunks."""
    total = len(todo)
    reading = [w for w in todo if w.action == "index"]
    if announce is not None and reading:
        announce(len(reading), sum(w.size for w in reading), db.vectors)
    if progress is not None and total:
        progress(0, total)
    group: list[_Work] = []
    pending_chunks = 0
    done = 0
    for k, work in enumerate(todo):
        if work.action == "index":
            _read(work, db.max_file_bytes)
        group.append(work)
        pending_chunks += len(work.chunks) if work.action == "index" else 0
        if pending_chunks >= EMBED_BATCH or k == total - 1:
            _flush(store, db, group, report, embed)
            done += len(group)
            group, pending_chunks = [], 0
            if progress is not None:
                progress(done, total)


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
            remove_sources(tx, db.id, files)


def _flush(store: Store, db: Database, group: list[_Work], report: SyncReport,
           embed: Callable[[list[str]], list[list[float]]] | None) -> None:
    texts: list[str] = []
    for work in group:
        if work.action == "index":
            texts.extend(_embed_text(work, c) for c in work.chunks)
    vecs: list[list[float]] = []
    if texts and db.vectors:
        if embed is None:
            from agenvoy_cli.vectors import api as vectors

            embed = vectors.embedder(store).embed_documents
        # outside the lock: the slow part; Ctrl-C is seen at once (models/local.py)
        vecs = interruptible(embed, texts)
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

