"""RAG keyword search narrowed inside FTS5: the database is a column of rag_chunks_fts
(migration 011), so a search's cost follows the searched databases, not the home."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.conftest import vm_steps
from tests.helpers.rag import find, ok
from tests.old_schemas import V10_RAG_FTS

# The reference: the ranking before migration 011 (one tokens-only index, filtered after
# MATCH), rebuilt beside the real index from the same rows (in a copy of the home's file).
REFERENCE = """
CREATE VIRTUAL TABLE ref USING fts5(tokens, content='rag_chunks', content_rowid='id',
                                         tokenize='porter unicode61 remove_diacritics 2');
INSERT INTO ref(ref) VALUES ('rebuild');
"""


def write_docs(folder: Path, files: int, sections: int, words: str) -> None:
    folder.mkdir(parents=True)
    for i in range(files):
        body = "".join(f"## Part {j}\n\n{words} {i} {j} " + "filler text " * (3 + (i * j) % 7)
                       + "\n\n" for j in range(sections))
        (folder / f"doc{i}.md").write_text(f"# Doc {i}\n\n{body}", encoding="utf-8")


def db_path(home: Path) -> Path:
    return home / ".store" / "history.db"


def db_id(home: Path, name: str) -> int:
    conn = sqlite3.connect(db_path(home))
    try:
        return conn.execute("SELECT id FROM rag_dbs WHERE name = ?", (name,)).fetchone()[0]
    finally:
        conn.close()


def integrity(home: Path) -> None:
    """FTS5 integrity-check (against the content table) and every chunk's db_id = its file's."""
    conn = sqlite3.connect(db_path(home))
    try:
        conn.execute("INSERT INTO rag_chunks_fts(rag_chunks_fts, rank) VALUES "
                     "('integrity-check', 1)")
        bad = conn.execute("SELECT count(*) FROM rag_chunks c LEFT JOIN rag_files f "
                           "ON f.id = c.file_id WHERE c.db_id IS NOT f.db_id").fetchone()[0]
        assert bad == 0
        indexed = conn.execute("SELECT count(*) FROM rag_chunks_fts").fetchone()[0]
        assert indexed == conn.execute("SELECT count(*) FROM rag_chunks").fetchone()[0]
    finally:
        conn.close()


def fts_count(home: Path, dbid: int) -> int:
    conn = sqlite3.connect(db_path(home))
    try:
        return conn.execute("SELECT count(*) FROM rag_chunks_fts WHERE rag_chunks_fts MATCH ?",
                            [f'db_id : "{dbid}"']).fetchone()[0]
    finally:
        conn.close()


def steps(home: Path, name: str, query: str) -> tuple[int, list]:
    """SQLite VM steps (a progress handler every 50) of the keyword ranking of one database."""
    from agenvoy_cli.home import sqlite as db
    from agenvoy_cli.rag.search import fts_ranking, match_every

    conn = db.connect(db_path(home), 5.0)
    ident = db_id(home, name)
    try:
        return vm_steps(conn, lambda: fts_ranking(conn, [ident], match_every(query)[0], 10))
    finally:
        conn.close()


def test_rag_keyword_cost_follows_the_database_not_the_home(run, tmp_path, monkeypatch):
    """A small database searched in a home where another database holds ~1,500 chunks
    matching the same word: the search walks its own matches only (before migration 011
    FTS5 returned every database's matches and the join dropped the others')."""
    write_docs(tmp_path / "small", 3, 4, "memory")
    write_docs(tmp_path / "big", 60, 25, "memory zebra")
    costs = {}
    for home_name, dbs in (("alone", ["small"]), ("crowded", ["big", "small"])):
        home = tmp_path / home_name
        monkeypatch.setenv("AGENVOY_HOME", str(home))
        for name in dbs:
            ok(run("rag", "create", name, "--path", str(tmp_path / name), "--no-vectors",
                   "--max-file-size", "10M"))
        costs[home_name] = {q: steps(home, "small", q) for q in ("memory", "zebra")}
        if home_name == "crowded":
            conn = sqlite3.connect(db_path(home))
            assert conn.execute("SELECT count(*) FROM rag_chunks c JOIN rag_files f ON "
                                "f.id = c.file_id WHERE f.db_id = ?",
                                (db_id(home, "big"),)).fetchone()[0] > 1000
            conn.close()
    print({h: {q: c[0] for q, c in v.items()} for h, v in costs.items()})
    base, alone = costs["alone"]["memory"]
    cost, crowded = costs["crowded"]["memory"]
    assert len(alone) == 10 and len(crowded) == 10
    assert cost <= 1.5 * base + 20, (cost, base)
    # a word only the other database holds costs nothing in this one
    empty, none = costs["alone"]["zebra"]
    cost, none2 = costs["crowded"]["zebra"]
    assert none == none2 == [] and cost <= 1.5 * empty + 20, (cost, empty)


def multi_db_home(run, tmp_path) -> None:
    write_docs(tmp_path / "a", 4, 5, "alpha memory deploy")
    write_docs(tmp_path / "b", 3, 6, "beta memory")
    write_docs(tmp_path / "c", 5, 3, "gamma deploy memory memory")
    for name in ("a", "b", "c"):
        ok(run("rag", "create", name, "--path", str(tmp_path / name), "--no-vectors"))


def reference(home: Path, names: list[str], match: str, n: int) -> list[tuple[str, int]]:
    src = sqlite3.connect(db_path(home))
    conn = sqlite3.connect(":memory:")
    src.backup(conn)
    src.close()
    try:
        conn.executescript(REFERENCE)
        marks = ",".join("?" * len(names))
        return [(Path(p).name, line) for p, line in conn.execute(
            "SELECT f.path, c.line_start FROM ref JOIN rag_chunks c ON c.id = ref.rowid "
            "JOIN rag_files f ON f.id = c.file_id JOIN rag_dbs d ON d.id = f.db_id "
            f"WHERE ref MATCH ? AND d.name IN ({marks}) ORDER BY bm25(ref), c.id LIMIT ?",
            [match, *names, n])]
    finally:
        conn.close()


def hits(run, name: str | None, query: str, n: int = 10) -> list[tuple[str, int]]:
    doc = find(run, name, query, limit=str(n))
    return [(Path(r["path"]).name, r["line_start"]) for r in doc["results"]]


def test_rag_keyword_results_match_the_unnarrowed_ranking(run, home, tmp_path):
    """Same hits in the same order as the tokens-only index filtered after MATCH."""
    multi_db_home(run, tmp_path)
    for name, query, match in (("a", "memory", '"memori"'), ("c", "deploy memory",
                               '"deploi" AND "memori"'), ("b", "beta", '"beta"'),
                               ("a", "gamma", '"gamma"')):
        want = reference(home, [name], match, 10)
        assert hits(run, name, query) == want, (name, query)
    got = hits(run, None, "memory", 30)
    assert got == reference(home, ["a", "b", "c"], '"memori"', 30) and len(got) == 30
    assert hits(run, "a", "gamma") == []


def test_remove_sync_and_deletion_keep_the_rag_index_consistent(run, home, tmp_path):
    multi_db_home(run, tmp_path)
    integrity(home)
    a, b = db_id(home, "a"), db_id(home, "b")
    before_a = fts_count(home, a)
    # a file deleted and another edited on disk, then a sync
    (tmp_path / "a" / "doc0.md").unlink()
    (tmp_path / "a" / "doc1.md").write_text("# New\n\nalpha rewritten memory\n", encoding="utf-8")
    ok(run("rag", "sync", "a"))
    integrity(home)
    assert 0 < fts_count(home, a) < before_a
    assert hits(run, "a", "rewritten") == [("doc1.md", 1)]
    # the whole database removed: its chunks leave the index through the cascade
    ok(run("rag", "remove", "b", "--yes"))
    integrity(home)
    assert fts_count(home, b) == 0
    assert hits(run, None, "beta") == []
    assert len(hits(run, "c", "gamma")) == 10


def test_migration_011_puts_the_database_into_the_index(run, home, tmp_path):
    from agenvoy_cli.home.schema import SCHEMA_VERSION

    multi_db_home(run, tmp_path)
    before = {name: hits(run, name, "memory") for name in ("a", "b", "c")}
    conn = sqlite3.connect(db_path(home))
    conn.executescript(V10_RAG_FTS)
    assert [r[1] for r in conn.execute("PRAGMA table_info(rag_chunks_fts)")] == ["tokens"]
    conn.close()
    # any command upgrades the home first
    assert {name: hits(run, name, "memory") for name in ("a", "b", "c")} == before
    conn = sqlite3.connect(db_path(home))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert [r[1] for r in conn.execute("PRAGMA table_info(rag_chunks_fts)")] == [
        "tokens", "db_id"]
    conn.close()
    integrity(home)
    c = db_id(home, "c")
    conn = sqlite3.connect(db_path(home))
    chunks = conn.execute("SELECT count(*) FROM rag_chunks WHERE db_id = ?", (c,)).fetchone()[0]
    conn.close()
    assert fts_count(home, c) == chunks > 0


def test_migration_011_is_all_or_nothing(run, home, tmp_path, monkeypatch):
    from agenvoy_cli.home import schema

    multi_db_home(run, tmp_path)
    conn = sqlite3.connect(db_path(home))
    alpha = conn.execute("SELECT count(*) FROM rag_chunks_fts WHERE rag_chunks_fts MATCH "
                         "'alpha'").fetchone()[0]
    conn.executescript(V10_RAG_FTS)
    conn.close()

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # after the column, the fill and the drop: the process dies

    with monkeypatch.context() as patched:
        patched.setattr(schema, "fts_triggers", crash)
        res = run("rag", "search", "a", "memory", "--mode", "keyword", "--json")
    assert res.exit_code != 0
    conn = sqlite3.connect(db_path(home))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 10
    assert [r[1] for r in conn.execute("PRAGMA table_info(rag_chunks_fts)")] == ["tokens"]
    assert "db_id" not in [r[1] for r in conn.execute("PRAGMA table_info(rag_chunks)")]
    assert conn.execute("SELECT count(*) FROM rag_chunks_fts WHERE rag_chunks_fts MATCH "
                        "'alpha'").fetchone()[0] == alpha > 0
    conn.close()
    assert len(hits(run, "a", "memory")) == 10
    integrity(home)
