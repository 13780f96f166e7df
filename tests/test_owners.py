"""One owner per table: every INSERT, UPDATE or DELETE on a table of history.db appears only in
the modules docs/architecture.md names for it (its owner, and the writers listed as debt)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "agenvoy_cli"
WRITE = re.compile(r"\b(?:INSERT(?:\s+OR\s+\w+)?\s+INTO|REPLACE\s+INTO|UPDATE|DELETE\s+FROM)\s+"
                   r"([a-z_][a-z0-9_]*)")
SALVAGE = "home/salvage.py"  # copies every table into a fresh file: allowed on any table
SCHEMA = {"home/schema.py", "home/sqlite.py"}  # DDL, migrations and their backfills


def owners_from_doc() -> dict[str, set[str]]:
    """table -> the modules the ownership table allows to write it."""
    doc = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    section = doc.split("## Who owns each table and file of the home", 1)[1].split("\n## ", 1)[0]
    out: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        tables = re.findall(r"`([a-z_][a-z0-9_]*)`", cells[0])
        modules = set(re.findall(r"`([a-z_]+/[a-z_]+\.py)`", cells[1] + " " + cells[2]))
        for table in tables:
            out.setdefault(table, set()).update(modules)
    return out


def tables() -> set[str]:
    """Every table the migrations create."""
    text = "\n".join(p.read_text("utf-8") for p in (PACKAGE / "home").glob("*.py"))
    return set(re.findall(r"CREATE\s+(?:VIRTUAL\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"
                          r"([a-z_][a-z0-9_]*)", text))


def writers() -> dict[str, set[str]]:
    """table -> the modules whose code writes it."""
    out: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for table in WRITE.findall(path.read_text("utf-8")):
            out.setdefault(table, set()).add(rel)
    return out


def test_every_table_is_written_only_by_its_owners() -> None:
    owners = owners_from_doc()
    assert {"messages", "session_stats", "folder_marks", "error_records", "rag_files"} <= set(
        owners), "the ownership table of docs/architecture.md lost a row"
    stray = []
    known = tables()
    assert {"messages", "session_stats", "error_records", "rag_chunks"} <= known
    for table, modules in writers().items():
        if table not in known:  # prose ("DELETE trigger")
            continue
        for module in sorted(modules - {SALVAGE} - SCHEMA):
            if module not in owners.get(table, set()):
                stray.append(f"{module} writes {table} (owner: {sorted(owners.get(table, []))})")
    assert not stray, "writes outside the owner (call the owner, or say so in " \
        "docs/architecture.md):\n" + "\n".join(stray)


# The debt left, written down: each entry is a writer that is not its table's owner. The test
# fails when one is paid (remove it here and in docs/architecture.md) or a new one appears.
DEBT: dict[str, set[str]] = {}


def owner_cells() -> dict[str, set[str]]:
    """table -> the modules its row names as owner (the middle cell only)."""
    doc = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    section = doc.split("## Who owns each table and file of the home", 1)[1].split("\n## ", 1)[0]
    out: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            for table in re.findall(r"`([a-z_][a-z0-9_]*)`", cells[0]):
                out.setdefault(table, set()).update(
                    re.findall(r"`([a-z_]+/[a-z_]+\.py)`", cells[1]))
    return out


def test_each_table_has_one_owner_and_the_debt_is_exact() -> None:
    """Of a table's writers, one is the owner its row names; the others are exactly DEBT."""
    owner = owner_cells()
    known = tables()
    debt: dict[str, set[str]] = {}
    for table, modules in writers().items():
        if table not in known:
            continue
        modules = modules - {SALVAGE} - SCHEMA
        assert len(owner.get(table, set()) & modules) <= 1, f"{table}: more than one owner"
        rest = modules - owner.get(table, set())
        if rest:
            debt[table] = rest
    assert debt == DEBT


def test_the_check_sees_a_stray_writer(tmp_path: Path) -> None:
    assert WRITE.findall('conn.execute("DELETE FROM messages WHERE id = ?")') == ["messages"]
    assert WRITE.findall("INSERT OR REPLACE INTO session_stats (a) VALUES (1)") == [
        "session_stats"]
    assert "conversation/archive.py" in owners_from_doc()["messages"]


# A write whose table is named at run time (an f-string: `INSERT INTO {table}`) is invisible to
# the check above; the modules allowed one are these, each with the tables it may name.
DYNAMIC = re.compile(r"\b(?:INSERT(?:\s+OR\s+\w+)?\s+INTO|REPLACE\s+INTO|UPDATE|DELETE\s+FROM)"
                     r"\s+\{")
DYNAMIC_WRITERS = {
    # its two full-text indexes, messages_fts and messages_fts5, one statement for both
    "conversation/archive.py",
}


def test_a_write_to_a_table_named_at_run_time_is_in_its_owner() -> None:
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if DYNAMIC.search(path.read_text("utf-8")) and rel not in SCHEMA | {SALVAGE}:
            found.add(rel)
    assert found == DYNAMIC_WRITERS
    assert DYNAMIC.search('conn.execute(f"INSERT INTO {table}({table}) VALUES (\'rebuild\')")')


# Chroma: the collections are made and dropped only by the vector layer's owners of them
# (doctor and rag call vectors/api.py), and entries are written only inside vectors/.
COLLECTIONS = re.compile(r"\.(?:create_collection|get_or_create_collection|delete_collection)\(")
ENTRIES = re.compile(r"\.(?:add|upsert|update|delete)\(ids=")
COLLECTION_OWNERS = {"vectors/collection.py", "vectors/messages.py", "vectors/api.py"}
ENTRY_WRITERS = {"vectors/collection.py", "vectors/messages.py", "vectors/attribution.py"}


def test_chroma_collections_and_entries_are_written_only_by_their_owners() -> None:
    made, written = set(), set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        text = path.read_text("utf-8")
        if COLLECTIONS.search(text):
            made.add(rel)
        if ENTRIES.search(text):
            written.add(rel)
    assert made <= COLLECTION_OWNERS, sorted(made - COLLECTION_OWNERS)
    assert written <= ENTRY_WRITERS, sorted(written - ENTRY_WRITERS)
    assert COLLECTIONS.search("vectors.client(store).delete_collection(name)")
    assert ENTRIES.search("col.update(ids=ids, metadatas=metas)")
