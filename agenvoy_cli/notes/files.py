"""Notes as files: Agenvoy's legacy knowledge/*.md taken in once, another home's notes taken
in by `import agenvoy`, and `notes export DIR` (one NAME.md each, the legacy form).

Agenvoy v0.32.6 moved the notes of knowledge/<name>.md into its own store at every start
(internal/knowledge/migrate.go: regular *.md files not starting with '.', the name the
file's without ".md", a name already stored left alone, the files left in place). Here the
first notes command does the same, and note_files remembers each file it considered (size,
mtime, digest): a file is read again only when it changed, and a note removed here is not
brought back from its file. A file whose name breaks the name rules, or that is not UTF-8
text, is left out with a warning (once)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenvoy_cli.errors import AgenvoyError, BadInput, CorruptStore
from agenvoy_cli.notes import store as note_store
from agenvoy_cli.notes.names import MAX_CONTENT_BYTES, check_name, decode_content, note_name
from agenvoy_cli.notes.store import Warn, one_line, quiet

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store

LEGACY = "knowledge/"  # note_files source of a legacy file: knowledge/<file name>
FileRow = tuple[str, int | None, int | None, str, str | None, str]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_bounded(path: Path) -> bytes:
    """A regular file, never more than the largest note allows (+ a BOM, + 1 to tell)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(MAX_CONTENT_BYTES + 4)


def _legacy_entries(folder: Path, warn: Warn) -> list[os.DirEntry[str]]:
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        warn(f"agenvoy: warning: {folder}: {exc.strerror}; its notes were not read")
        return []
    return sorted((e for e in entries if e.name.endswith(".md") and not e.name.startswith(".")
                   and e.is_file(follow_symlinks=False)), key=lambda e: e.name)


def _judge(name: str, data: bytes, where: str) -> tuple[str | None, str | None, str]:
    """(checked name, content, outcome) of a file named `name` holding `data`."""
    try:
        key = check_name(name)
        if key != name:
            raise BadInput(f"note name {name!r} is not in the stored form ({key!r})")
        key = note_name(key, "")
        return key, decode_content(data, where), "taken"
    except BadInput as exc:
        return None, None, f"refused: {exc}"


def take_legacy(store: Store, warn: Warn = quiet) -> list[str]:
    """Take in the home's knowledge/*.md that are new or changed since last time; the
    names added. Cheap when there is nothing new: one directory listing and one read. On a
    home Agenvoy 1.0 shares, its `knowledge` table is followed first (note_store)."""
    note_store.follow_knowledge(store, warn)
    folder = store.layout.knowledge
    entries = _legacy_entries(folder, warn)
    if not entries:
        return []
    conn = store.db_readonly()  # before the shared lock: it may upgrade the schema
    with store.read_lock():
        known = note_store.taken_files(store.db_readonly() if conn else None, LEGACY)
    todo: list[tuple[os.DirEntry[str], os.stat_result]] = []
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        seen = known.get(LEGACY + entry.name)
        if seen is None or (seen[0], seen[1]) != (info.st_size, info.st_mtime_ns):
            todo.append((entry, info))
    if not todo:
        return []
    items: list[tuple[str, str, str, int]] = []
    rows: list[FileRow] = []
    for entry, info in todo:
        source = LEGACY + entry.name
        try:
            data = _read_bounded(Path(entry.path))
        except OSError as exc:
            warn(f"agenvoy: warning: {entry.path}: {exc.strerror}; not taken in")
            continue
        sha = digest(data)
        seen = known.get(source)
        if seen is not None and seen[2] == sha:  # touched, not changed
            rows.append((source, info.st_size, info.st_mtime_ns, sha, None, "unchanged"))
            continue
        name, content, outcome = _judge(entry.name[:-3], data, entry.path)
        if name is None or content is None:
            warn(f"agenvoy: warning: {entry.path} was not taken in as a note: "
                 f"{outcome.removeprefix('refused: ')}")
        else:
            items.append((name, content, source, info.st_mtime_ns))
        rows.append((source, info.st_size, info.st_mtime_ns, sha, name, outcome))
    with store.write_lock():
        added = note_store.insert_missing(store, items, rows, note_store.now_ns())
    if added:
        warn(f"agenvoy: took {len(added)} note(s) in from {folder} (Agenvoy v0.32.5's "
             "knowledge/*.md; the files are left in place)")
    return added


def note_count(store: Store) -> int:
    """The notes of the home, its legacy files not taken in yet counted too; reads only
    (get_context and `context` say whether notes exist, and must not write)."""
    entries = _legacy_entries(store.layout.knowledge, quiet)
    conn = store.db_readonly()
    if conn is None:
        return len(entries)
    with store.read_lock():
        conn = store.db_readonly()
        have = note_store.count(conn)
        known = note_store.taken_files(conn, LEGACY) if entries else {}
    return have + sum(1 for e in entries if LEGACY + e.name not in known)


def context_note_count(store: Store, warn: Warn = quiet) -> int | None:
    """note_count for `context` and get_context, which read history.json only and so must
    answer without a readable database: None (unknown, with a warning) when it is damaged."""
    try:
        return note_count(store)
    except CorruptStore as exc:
        warn(f"agenvoy: warning: the knowledge notes were not counted ({one_line(exc)})")
        return None


# --------------------------------------------------------------------------- another home


def home_notes(home: Path) -> list[tuple[str, str, int]]:
    """Another home's notes (name, content, updated_at), that home only read: its notes
    table, Agenvoy 1.0's `knowledge` table there (its truth where it exists: a note
    Agenvoy saved or changed counts as it is there), and its knowledge/*.md files it has not
    taken in itself."""
    from agenvoy_cli.home import sqlite
    from agenvoy_cli.home.layout import Layout

    layout = Layout(home)
    found: dict[str, tuple[str, str, int]] = {}
    taken: set[str] = set()
    db = layout.home / ".store" / "history.db"
    if db.is_file():
        try:
            conn = sqlite.connect(db, 5.0, readonly=True)
        except (AgenvoyError, sqlite3.Error):
            conn = None
        if conn is not None:
            try:
                for name, content, updated in conn.execute(
                        "SELECT name, content, updated_at FROM notes ORDER BY name"):
                    found[name] = (name, content, updated)
                taken = set(note_store.taken_files(conn, LEGACY))
            except sqlite3.Error:  # a home from before notes (migration 017)
                pass
            try:
                for name, content, updated in conn.execute(
                        "SELECT name, content, updated_at FROM knowledge ORDER BY name"):
                    found[name] = (name, content, int(updated or 0) * 1_000_000_000)
            except sqlite3.Error:  # no knowledge table: a home older than Agenvoy 1.0
                pass
            finally:
                conn.close()
    for entry in _legacy_entries(layout.knowledge, quiet):
        if LEGACY + entry.name in taken:
            continue
        try:
            data = _read_bounded(Path(entry.path))
            mtime = entry.stat(follow_symlinks=False).st_mtime_ns
        except OSError:
            continue
        name, content, _ = _judge(entry.name[:-3], data, entry.path)
        if name is not None and content is not None and name not in found:
            found[name] = (name, content, mtime)
    return sorted(found.values())


def take_from_home(store: Store, home: Path, *, dry_run: bool = False) -> dict[str, Any]:
    """`import agenvoy HOME`: the other home's notes whose name is free here, each taken
    once (a note removed here is not brought back by importing the same note again)."""
    home = home.expanduser().resolve()
    notes = home_notes(home)
    prefix = f"home:{home}/"
    conn = store.db_readonly()
    with store.read_lock():
        conn = store.db_readonly() if conn is not None else None
        known = note_store.taken_files(conn, prefix)
        have = {n.name for n in note_store.fetch(conn)} if conn is not None else set()
    items, rows = [], []
    for name, content, updated in notes:
        sha = digest(content.encode("utf-8"))
        seen = known.get(prefix + name)
        if seen is not None and seen[2] == sha:
            continue
        outcome = "exists" if name in have else "taken"
        if outcome == "taken":
            items.append((name, content, f"import: {home}", updated))
        rows.append((prefix + name, None, None, sha, name, outcome))
    if dry_run or not rows:
        return {"added": [i[0] for i in items], "note_count": len(notes)}
    with store.write_lock():
        added = note_store.insert_missing(store, items, rows, note_store.now_ns())
    return {"added": added, "note_count": len(notes)}


# --------------------------------------------------------------------------- export


def export(store: Store, directory: str) -> list[str]:
    """Every note as DIRECTORY/NAME.md (its content, as Agenvoy v0.32.5 kept it), each
    written atomically; never inside the home. The paths written."""
    from agenvoy_cli.home.files import atomic_write_bytes, ensure_dir

    target = Path(directory).expanduser().resolve()
    home = store.layout.home.resolve()
    if target == home or home in target.parents:
        raise BadInput(f"{directory} is inside the home {home}; export writes elsewhere")
    if target.exists() and not target.is_dir():
        raise BadInput(f"{directory} is not a folder")
    notes = note_store.list_notes(store)
    ensure_dir(target)
    written = []
    for note in notes:
        path = target / f"{note.name}.md"
        atomic_write_bytes(path, note.content.encode("utf-8"))
        written.append(str(path))
    return written
