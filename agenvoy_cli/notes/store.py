"""Knowledge notes in history.db: the one writer of `notes`, `notes_fts` (through its
triggers) and `note_files`, and of the notes' vectors in Chroma (collection NOTES).

SQLite is the truth. On a home Agenvoy 1.0 shares (home/generation.py), upstream's
`knowledge(name, content, updated_at)` table is the notes' truth and `notes` the index we
keep over it (tokens, vectors): every write here writes both in one transaction, and
follow_knowledge brings what Agenvoy wrote there into `notes` (and a note saved before the
home's upgrade into `knowledge`) before notes are read. A note's vectors (one per
passage, ids "<note id>:<n>") are derived: added after its row (vector_model then names
their model), deleted before it. A new content or a new name is a new row with a new id
(created_at kept), so the vectors of what was replaced point to no row: searches ignore
them and doctor deletes them. Every write holds the store's write lock; SQLite is written
in one transaction.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from agenvoy_cli.contract import moment
from agenvoy_cli.errors import BadInput, NotFound, OperationFailed
from agenvoy_cli.home import fts, generation
from agenvoy_cli.notes.names import check_content, check_name

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store

NOTES = "agenvoy_notes"  # the Chroma collection of the notes' passage vectors
COLUMNS = ("id, name, content, created_at, updated_at, source, vector_model, vector_count")
Warn = Callable[[str], None]


def quiet(message: str) -> None:
    pass


def now_ns() -> int:
    """The clock of this module (tests replace it)."""
    return time.time_ns()


@dataclass
class Note:
    id: int
    name: str
    content: str
    created_at: int
    updated_at: int
    source: str
    vector_model: str | None
    vector_count: int

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Note:
        return cls(*row)

    @property
    def bytes(self) -> int:
        return len(self.content.encode("utf-8"))

    def vector_ids(self) -> list[str]:
        return [vector_id(self.id, n) for n in range(self.vector_count)]

    def as_dict(self, content: bool = True) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name}
        if content:
            doc["content"] = self.content
        doc.update({"bytes": self.bytes, **moment("created", self.created_at),
                    **moment("updated", self.updated_at), "source": self.source or None,
                    "has_vector": self.vector_model is not None})
        return doc


def vector_id(note_id: int, passage: int) -> str:
    return f"{note_id}:{passage}"


def note_of(vector: str) -> int | None:
    """The note id a vector id names (None: not one of ours)."""
    head, _, tail = vector.partition(":")
    return int(head) if head.isdigit() and tail.isdigit() else None


# --------------------------------------------------------------------------- reading


def fetch(conn: sqlite3.Connection, where: str = "1", params: Sequence[Any] = (), *,
          order: str = "name") -> list[Note]:
    return [Note.from_row(r) for r in conn.execute(
        f"SELECT {COLUMNS} FROM notes WHERE {where} ORDER BY {order}", tuple(params))]


def by_ids(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, Note]:
    out: dict[int, Note] = {}
    for i in range(0, len(ids), 500):
        chunk = list(ids[i:i + 500])
        out.update((n.id, n) for n in fetch(conn, f"id IN ({','.join('?' * len(chunk))})",
                                            chunk, order="id"))
    return out


def find(conn: sqlite3.Connection | None, name: str) -> Note | None:
    if conn is None:
        return None
    found = fetch(conn, "name = ?", (name,))
    return found[0] if found else None


def readable(store: Store) -> sqlite3.Connection | None:
    """A reading connection (None: no database yet). Hold the read lock."""
    return store.db_readonly()


def lookup(store: Store, name: str) -> Note | None:
    """The note of exactly that name, or None (find_knowledge mode=read: no rules applied)."""
    conn = store.db_readonly()
    if conn is None:
        return None
    with store.read_lock():
        return find(store.db_readonly(), name)


def get(store: Store, name: str) -> Note:
    """The note of that name (upstream's name rules: trimmed, ".md" dropped) or NotFound."""
    key = check_name(name)
    conn = store.db_readonly()  # before the shared lock: it may upgrade the schema
    with store.read_lock():
        note = find(store.db_readonly() if conn is not None else None, key)
    if note is None:
        raise NotFound(f"no note named {key!r}")
    return note


def list_notes(store: Store, where: str = "1", *, order: str = "name") -> list[Note]:
    """The notes `where` holds (default: every one), by name (bytewise, as upstream's
    sort.Strings) unless `order` says otherwise; none in a home without a database."""
    conn = store.db_readonly()
    if conn is None:
        return []
    with store.read_lock():
        conn = store.db_readonly()
        return fetch(conn, where, order=order) if conn is not None else []


def names(store: Store, limit: int) -> tuple[list[str], int]:
    """(the first `limit` note names, bytewise as list_notes sorts them; how many notes
    there are): what a context names without reading every note's text."""
    if store.db_readonly() is None:
        return [], 0
    with store.read_lock():
        conn = store.db_readonly()
        if conn is None:
            return [], 0
        names_sql = ("SELECT name FROM knowledge UNION SELECT name FROM notes WHERE "
                     "knowledge_at IS NULL" if _shares_knowledge(conn)
                     else "SELECT name FROM notes")
        first = [r[0] for r in conn.execute(f"SELECT name FROM ({names_sql}) "
                                            "ORDER BY CAST(name AS BLOB) LIMIT ?", (limit,))]
        return first, count(conn)


def count(conn: sqlite3.Connection | None) -> int:
    if conn is None:
        return 0
    if _shares_knowledge(conn):  # Agenvoy's notes count before follow_knowledge took them
        return int(conn.execute("SELECT count(*) FROM (SELECT name FROM knowledge UNION "
                                "SELECT name FROM notes WHERE knowledge_at IS NULL)"
                                ).fetchone()[0])
    return int(conn.execute("SELECT count(*) FROM notes").fetchone()[0])


# --------------------------------------------------------------------------- Agenvoy 1.0


def _shares_knowledge(conn: sqlite3.Connection) -> bool:
    return generation.of(conn).knowledge


def _seconds(ns: int) -> int:
    return ns // 1_000_000_000


def _put_knowledge(conn: sqlite3.Connection, note: Note) -> None:
    """The note as Agenvoy 1.0 reads it (updated_at in unix seconds, as its records)."""
    if not _shares_knowledge(conn):
        return
    at = _seconds(note.updated_at)
    conn.execute("INSERT INTO knowledge (name, content, updated_at) VALUES (?, ?, ?) "
                 "ON CONFLICT(name) DO UPDATE SET content = excluded.content, "
                 "updated_at = excluded.updated_at", (note.name, note.content, at))
    conn.execute("UPDATE notes SET knowledge_at = ? WHERE id = ?", (at, note.id))


def _drop_knowledge(conn: sqlite3.Connection, name: str) -> None:
    if _shares_knowledge(conn):
        conn.execute("DELETE FROM knowledge WHERE name = ?", (name,))


class KnowledgeDiff(NamedTuple):
    incoming: list[tuple[str, str, int]]  # Agenvoy's rows new or changed: (name, content, at)
    outgoing: list[Note]  # ours, saved before the upgrade: written to `knowledge`
    deleted: list[Note]  # ours that Agenvoy deleted there
    marks: list[tuple[int, int]]  # (knowledge_at, id): same content, mark missing or old


def knowledge_diff(conn: sqlite3.Connection) -> KnowledgeDiff:
    """What differs between `knowledge` and `notes` (two reads; notes are few)."""
    theirs = {r[0]: (r[1], r[2]) for r in conn.execute(
        "SELECT name, content, updated_at FROM knowledge")}
    marks = {r[0]: r[1] for r in conn.execute("SELECT id, knowledge_at FROM notes")}
    ours = {n.name: n for n in fetch(conn)}
    diff = KnowledgeDiff([], [], [], [])
    for name, (content, at) in theirs.items():
        mine = ours.get(name)
        if mine is None or mine.content != content:
            diff.incoming.append((name, content, int(at or 0)))
        elif marks.get(mine.id) != at:
            diff.marks.append((int(at or 0), mine.id))
    for name, mine in ours.items():
        if name not in theirs:
            (diff.outgoing if marks.get(mine.id) is None else diff.deleted).append(mine)
    return diff


def follow_knowledge(store: Store, warn: Warn = quiet) -> int:
    """On a home Agenvoy 1.0 shares: its notes in `knowledge` taken into `notes` (a new or
    changed one replaces ours of that name; one it deleted is deleted here, with its
    vectors), and ours saved before the upgrade written to `knowledge`. Cheap when nothing
    differs (two reads); the changes under the write lock, in one transaction. How many
    notes changed."""
    conn = store.db_readonly()
    if conn is None:
        return 0
    with store.read_lock():
        conn = store.db_readonly()
        if conn is None or not _shares_knowledge(conn) or not any(knowledge_diff(conn)):
            return 0
    with store.write_lock():
        conn = store.db()
        diff = knowledge_diff(conn)
        replaced = [n for n in (find(conn, name) for name, _, _ in diff.incoming) if n]
        delete_vectors(store, [v for n in replaced + diff.deleted for v in n.vector_ids()], warn)
        with store.transaction() as tx:
            for n in replaced + diff.deleted:
                tx.execute("DELETE FROM notes WHERE id = ?", (n.id,))
            for name, content, at in diff.incoming:
                old = next((n for n in replaced if n.name == name), None)
                note = _insert(tx, name, content, old.created_at if old else at * 10**9,
                               at * 10**9, old.source if old else "agenvoy")
                tx.execute("UPDATE notes SET knowledge_at = ? WHERE id = ?", (at, note.id))
            for note in diff.outgoing:
                _put_knowledge(tx, note)
            tx.executemany("UPDATE notes SET knowledge_at = ? WHERE id = ?", diff.marks)
        return len(diff.incoming) + len(diff.outgoing) + len(diff.deleted)


# --------------------------------------------------------------------------- writing


def _insert(conn: sqlite3.Connection, name: str, content: str, created: int, updated: int,
            source: str) -> Note:
    cur = conn.execute(
        "INSERT INTO notes (name, content, created_at, updated_at, source, name_tokens, "
        "tokens) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (name, content, created, updated, source, fts.index_text(name),
         fts.index_text(content)))
    return Note(int(cur.lastrowid or 0), name, content, created, updated, source, None, 0)


def save(store: Store, name: str, content: str, *, replace: bool = False,
         rename_from: str | None = None, source: str = "", now: int | None = None,
         expect: str | None = None, warn: Warn = quiet) -> tuple[Note, str]:
    """Write a note; (the note, "added" | "replaced" | "renamed" | "unchanged"). `name` is a
    checked name (names.note_name). An existing name is refused (BadInput, nothing
    written) unless `replace`. `rename_from`: the note's old name (it must exist); the new
    name must be free unless `replace`. `expect`: the content the caller's change started
    from (an editor's); a note changed since is refused (OperationFailed), never
    overwritten."""
    check_content(content)
    now = now_ns() if now is None else now
    renamed = rename_from if rename_from is not None and rename_from != name else None
    with store.write_lock():
        conn = store.db()
        target = find(conn, name)
        old = _renamed(conn, renamed) if renamed is not None else target
        if target is not None and not replace and rename_from != name:
            raise BadInput(f"a note named {name!r} exists (use --replace to overwrite it)")
        _check_expected(old if rename_from is not None else target, name, expect)
        if old is not None and target is old and old.content == content:
            return old, "unchanged"
        doomed = list({n.id: n for n in (old, target) if n is not None}.values())
        note = _replace(store, doomed, name, content, now,
                        source or (old.source if old is not None else ""),
                        old.created_at if old is not None else now, warn)
        if renamed is not None:
            return note, "renamed"
        return note, "replaced" if target is not None else "added"


def _renamed(conn: sqlite3.Connection, rename_from: str) -> Note:
    """The note a rename starts from (NotFound)."""
    old = find(conn, rename_from)
    if old is None:
        raise NotFound(f"no note named {rename_from!r}")
    return old


def _check_expected(edited: Note | None, name: str, expect: str | None) -> None:
    """An editor's change is refused when the note changed since it was read."""
    if expect is not None and (edited is None or edited.content != expect):
        raise OperationFailed(f"note {edited.name if edited else name!r} changed while "
                              "it was being edited; nothing saved (edit it again)")


def _replace(store: Store, doomed: list[Note], name: str, content: str, now: int,
             source: str, created: int, warn: Warn) -> Note:
    """The doomed notes' vectors, then (one transaction) their rows, and the new note."""
    delete_vectors(store, [v for n in doomed for v in n.vector_ids()], warn)
    with store.transaction() as tx:
        for n in doomed:
            tx.execute("DELETE FROM notes WHERE id = ?", (n.id,))
            _drop_knowledge(tx, n.name)
        note = _insert(tx, name, content, created, now, source)
        _put_knowledge(tx, note)
    return note


def remove(store: Store, name: str, *, warn: Warn = quiet) -> Note:
    """Delete a note: its vectors first, then its row (and FTS entry)."""
    key = check_name(name)
    if store.db_readonly() is None:
        raise NotFound(f"no note named {key!r}")
    with store.write_lock():
        note = find(store.db(), key)
        if note is None:
            raise NotFound(f"no note named {key!r}")
        delete_vectors(store, note.vector_ids(), warn)
        with store.transaction() as tx:
            tx.execute("DELETE FROM notes WHERE id = ?", (note.id,))
            _drop_knowledge(tx, note.name)
        return note


def insert_missing(store: Store, items: Sequence[tuple[str, str, str, int]],
                   files: Sequence[tuple[str, int | None, int | None, str, str | None, str]],
                   now: int) -> list[str]:
    """Hold write_lock. Notes (name, content, source, updated_at) whose name is free, and
    the note_files rows saying which sources were taken (files.py): one transaction.
    Returns the names added."""
    added: list[str] = []
    with store.transaction() as tx:
        for name, content, source, updated in items:
            if find(tx, name) is None:
                _put_knowledge(tx, _insert(tx, name, content, updated, updated, source))
                added.append(name)
        # a name stored meanwhile (or before) stays as it is: upstream's rule
        tx.executemany(
            "INSERT OR REPLACE INTO note_files (source, size, mtime_ns, digest, name, "
            "outcome, taken_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(*row[:5], "exists" if row[5] == "taken" and row[4] not in added else row[5],
              now) for row in files])
    return added


def taken_files(conn: sqlite3.Connection | None, prefix: str) -> dict[str, tuple[Any, ...]]:
    """note_files rows whose source starts with prefix: source -> (size, mtime_ns, digest)."""
    if conn is None:
        return {}
    return {r[0]: tuple(r[1:]) for r in conn.execute(
        "SELECT source, size, mtime_ns, digest FROM note_files WHERE source >= ? AND "
        "source < ?", (prefix, prefix + "\U0010ffff"))}


# --------------------------------------------------------------------------- vectors


def has_vector_dir(store: Store) -> bool:
    from agenvoy_cli.vectors.location import has_vectors

    return has_vectors(store)


def delete_vectors(store: Store, ids: list[str], warn: Warn) -> None:
    """Hold write_lock. Before the rows go: Chroma is never ahead of SQLite; a failure only
    leaves vectors of no note, which searches ignore and doctor --repair deletes."""
    if not ids or not has_vector_dir(store):
        return
    try:
        from agenvoy_cli.vectors import api as vectors

        if vectors.index_exists(store, NOTES):
            vectors.open_index(store, NOTES, create=False).delete(ids)
    except Exception as exc:  # noqa: BLE001
        warn(f"agenvoy: warning: note vectors not deleted ({one_line(exc)}); "
             "`agenvoy doctor --repair` removes them")


def add_vectors(store: Store, notes: Sequence[tuple[Note, list[list[float]]]],
                model: str) -> int:
    """Hold write_lock. The passage vectors of notes still as they were embedded (a note
    replaced or removed meanwhile is skipped): Chroma first, then vector_model in SQLite (a
    crash in between leaves vectors its row does not claim: embedded again, an upsert)."""
    from agenvoy_cli.vectors import api as vectors

    alive = by_ids(store.db(), [n.id for n, _ in notes])
    keep = [(n, vecs) for n, vecs in notes if n.id in alive and vecs]
    if not keep:
        return 0
    index = vectors.open_index(store, NOTES)
    if index.embedder.model_id != model:
        raise BadInput(f"the embedder changed to {index.embedder.model_id} meanwhile")
    ids = [vector_id(n.id, k) for n, vecs in keep for k in range(len(vecs))]
    metas = [{"note": n.id, "passage": k} for n, vecs in keep for k in range(len(vecs))]
    index.add(ids, [v for _, vecs in keep for v in vecs], metas)
    with store.transaction() as tx:
        tx.executemany("UPDATE notes SET vector_model = ?, vector_count = ? WHERE id = ?",
                       [(model, len(vecs), n.id) for n, vecs in keep])
    return len(keep)


def unflag_vectors(store: Store, ids: Sequence[int] | None = None) -> None:
    """Mark notes as not embedded (ids None: every note). Hold write_lock."""
    with store.transaction() as tx:
        if ids is None:
            tx.execute("UPDATE notes SET vector_model = NULL, vector_count = 0")
        else:
            tx.executemany("UPDATE notes SET vector_model = NULL, vector_count = 0 "
                           "WHERE id = ?", [(i,) for i in ids])


def check_fts(conn: sqlite3.Connection) -> str | None:
    """FTS5's integrity check of notes_fts against the notes (rank 1: the index is also
    compared with the rows; writes nothing): the error, or None."""
    try:
        conn.execute("INSERT INTO notes_fts(notes_fts, rank) VALUES ('integrity-check', 1)")
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return None


def rebuild_fts(store: Store) -> None:
    with store.transaction() as tx:
        tx.execute("INSERT INTO notes_fts(notes_fts) VALUES ('rebuild')")


def one_line(exc: BaseException | str) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:299] + "…"
