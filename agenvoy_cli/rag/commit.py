"""Writing one group of indexed files under the store lock, consistent at every instant.

1. files whose old chunks have vectors are marked ``pending``; 2. their old vectors are
deleted; 3. one transaction replaces their chunk rows (files still ``pending``); 4. the new
vectors are added; 5. the files are marked ``done``. A file is ``done`` only when both its
rows and its vectors are written, and Chroma never holds a vector whose chunk SQLite lacks
(it may lack vectors of ``pending`` files). An interrupted run (Ctrl-C, kill) leaves
``pending`` files, which the next sync re-indexes whatever their stat says. Removing a
database (remove) keeps the same order: files pending, vectors, then the rows.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agenvoy_cli.errors import NotFound
from agenvoy_cli.home import fts
from agenvoy_cli.rag.chunking import Chunk
from agenvoy_cli.rag.records import (
    COLLECTION_PREFIX,
    Database,
    FileRow,
    _index,
    _mismatch,
    _rebuild_hint,
    _writer,
    checked_name,
    collection_name,
    delete_database,
    now_ns,
)
from agenvoy_cli.vectors.location import has_vectors


def mark_pending(tx: sqlite3.Connection, db_id: int) -> None:
    """A rebuild: every indexed file of the database is read and embedded again."""
    tx.execute("UPDATE rag_files SET state = 'pending', hash = NULL "
               "WHERE db_id = ? AND state = 'done'", (db_id,))


if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store


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


class _Rows:
    """One group's rows being written: the vectors to add, the files done."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.ids: list[str] = []
        self.vecs: list[list[float]] = []
        self.metas: list[dict[str, Any]] = []
        self.done: list[int] = []

    def file(self, tx: sqlite3.Connection, work: _Work, vecs: list[list[float]],
             stamp: int) -> None:
        """A file's row (touched, or written again with its chunks)."""
        fid = work.old.id if work.old is not None else None
        if work.action == "touch":
            tx.execute("UPDATE rag_files SET size = ?, mtime_ns = ? WHERE id = ?",
                       (work.size, work.mtime_ns, fid))
            return
        if fid is not None:
            tx.execute("DELETE FROM rag_chunks WHERE file_id = ?", (fid,))
        fid = self._file_row(tx, work, fid, stamp)
        if work.action == "skip":
            return
        for ordinal, chunk in enumerate(work.chunks):
            cid = tx.execute(
                "INSERT INTO rag_chunks(file_id, db_id, ord, line_start, line_end, "
                "heading, text, tokens) VALUES (?,?,?,?,?,?,?,?)",
                (fid, self.db.id, ordinal, chunk.line_start, chunk.line_end, chunk.heading,
                 chunk.text, _tokens(work, chunk))).lastrowid
            if not self.db.vectors:  # --no-vectors: rows only, done at once
                continue
            self.ids.append(str(cid))
            self.vecs.append(vecs[ordinal])
            self.metas.append({"file_id": fid, "db_id": self.db.id})
        self.done.append(fid)

    def _file_row(self, tx: sqlite3.Connection, work: _Work, fid: int | None,
                  stamp: int) -> int:
        state = "skipped" if work.action == "skip" else "pending"
        values = (work.source, work.format, work.size, work.mtime_ns, work.hash,
                  work.lines, state, work.reason,
                  0 if work.action == "skip" else len(work.chunks), stamp)
        if fid is None:
            return int(tx.execute(
                "INSERT INTO rag_files(source, format, size, mtime_ns, hash, lines, "
                "state, reason, chunks, indexed_at, db_id, path) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (*values, self.db.id, work.path)).lastrowid or 0)
        tx.execute(
            "UPDATE rag_files SET source = ?, format = ?, size = ?, mtime_ns = ?, "
            "hash = ?, lines = ?, state = ?, reason = ?, chunks = ?, "
            "indexed_at = ? WHERE id = ?", (*values, fid))
        return fid


def _commit(store: Store, db: Database, group: list[_Work],
            vectors_by_work: list[list[list[float]]]) -> None:
    """Write one group under the lock, in the order of the module docstring."""
    with store.write_lock():
        conn, current = _writer(store, db.name)
        if current.id != db.id:
            raise NotFound(f"RAG database {db.name!r} was removed during the sync")
        _unindex_changing(store, db, conn, group)
        rows = _Rows(db)
        stamp = now_ns()
        with store.transaction() as tx:
            for work, vecs in zip(group, vectors_by_work):
                rows.file(tx, work, vecs, stamp)
        if rows.ids:
            index = _index(store, db, create=True)
            try:
                index.add(rows.ids, rows.vecs, rows.metas)
            except _mismatch() as exc:
                raise _rebuild_hint(db)(exc) from None
        if rows.done:
            marks = ",".join("?" * len(rows.done))
            with store.transaction() as tx:
                tx.execute(f"UPDATE rag_files SET state = 'done' WHERE id IN ({marks})",
                           rows.done)


def _unindex_changing(store: Store, db: Database, conn: sqlite3.Connection,
                      group: list[_Work]) -> None:
    """The files the group changes marked pending, then their old chunks' vectors deleted."""
    changing = [w.old.id for w in group if w.old is not None and w.action != "touch"]
    if not changing:
        return
    marks = ",".join("?" * len(changing))
    old_chunks = [r[0] for r in conn.execute(
        f"SELECT id FROM rag_chunks WHERE file_id IN ({marks})", changing)]
    if not old_chunks:
        return
    with store.transaction() as tx:
        tx.execute(f"UPDATE rag_files SET state = 'pending' WHERE id IN ({marks}) "
                   "AND state = 'done'", changing)
    index = _index(store, db, create=False)
    if index is not None:
        index.delete(str(i) for i in old_chunks)


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
        if has_vectors(store):
            from agenvoy_cli.vectors import api as vectors

            vectors.drop_index(store, collection_name(db.id))
            _drop_orphans(store, conn, vectors)
        with store.transaction() as tx:
            delete_database(tx, db.id)
        from agenvoy_cli.home import sqlite

        sqlite.reclaim_space(conn)
    return {"database": name, "action": "removed", "file_count": files, "chunk_count": chunks}


def _drop_orphans(store: Store, conn: sqlite3.Connection, vectors: Any) -> None:
    """Collections of databases that no longer exist (a remove that died half-way)."""
    live = {collection_name(r[0]) for r in conn.execute("SELECT id FROM rag_dbs")}
    vectors.drop_unlisted(store, COLLECTION_PREFIX, live)
