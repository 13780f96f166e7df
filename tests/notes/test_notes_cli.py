"""agenvoy notes add|list|show|search|edit|remove|export (#39): every command, the name rules
through the CLI, bad input refused with exit 2 and nothing written, the legacy knowledge/
folder taken in once, a note removed everywhere it lives."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agenvoy_cli.notes.names import MAX_CONTENT_BYTES
from tests.conftest import ROOT, agenvoy

DEPLOY = "# Deploy rules\n\nProduction deploys go through the release branch only.\n" \
         "Never run migrations by hand on prod; the pipeline runs them.\n"


def rows(home: Path) -> list[tuple]:
    db = home / ".store" / "history.db"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT name, content, source, vector_model FROM notes "
                            "ORDER BY name").fetchall()


def vector_ids(home: Path) -> list[str]:
    """The ids in the notes' Chroma collection (read in this process)."""
    from agenvoy_cli.api import Memory
    from agenvoy_cli.notes.store import NOTES
    from agenvoy_cli.vectors import api as vectors

    with Memory(home) as memory:
        store = memory.store
        with store.write_lock():
            if not vectors.index_exists(store, NOTES):
                return []
            return sorted(vectors.open_index(store, NOTES, create=False).get())


def add_stray(home: Path, vector: str) -> None:
    """A vector of no note, as a crash between Chroma's write and SQLite's would leave."""
    from agenvoy_cli.api import Memory
    from agenvoy_cli.notes.store import NOTES
    from agenvoy_cli.vectors import api as vectors

    with Memory(home) as memory:
        store = memory.store
        index = vectors.open_index(store, NOTES)
        vec = index.embedder.embed_query("stray")
        with store.write_lock():
            index.add([vector], [vec], [{"note": 999, "passage": 0}])


def ok(run, *args: str, input: str | bytes | None = None) -> dict:
    res = run("notes", *args, "--json", input=input)
    assert res.exit_code == 0, res.stderr
    return res.json()


def test_add_list_show_and_the_name_from_the_first_line(run, home):
    doc = ok(run, "add", "--content", DEPLOY)
    assert (doc["name"], doc["action"], doc["content"]) == ("Deploy rules", "added", DEPLOY)
    assert doc["bytes"] == len(DEPLOY.encode()) and doc["has_vector"] is False
    assert doc["created_at_ns"] == doc["updated_at_ns"]
    ok(run, "add", "數據庫規範", "--content", "所有資料表都用 utf8mb4。")
    listed = ok(run, "list")
    assert [n["name"] for n in listed["knowledge_notes"]] == ["Deploy rules", "數據庫規範"]
    assert listed["count"] == 2 and "content" not in listed["knowledge_notes"][0]
    res = run("notes", "show", "Deploy rules.md")  # upstream's Key drops ".md"
    assert res.exit_code == 0 and res.stdout == DEPLOY
    assert ok(run, "show", "數據庫規範")["content"] == "所有資料表都用 utf8mb4。"
    res = run("notes", "show", "nope")
    assert res.exit_code == 3 and "no note named 'nope'" in res.stderr
    table = run("notes", "list").stdout
    assert "Deploy rules" in table and "數據庫規範" in table


def test_an_existing_name_is_refused_unless_replace(run, home):
    ok(run, "add", "rules", "--content", "one")
    before = rows(home)
    res = run("notes", "add", "rules", "--content", "two")
    assert res.exit_code == 2 and "exists" in res.stderr and "--replace" in res.stderr
    assert rows(home) == before
    doc = ok(run, "add", "rules", "--content", "two", "--replace")
    assert doc["action"] == "replaced" and rows(home)[0][1] == "two"
    assert ok(run, "add", "rules", "--content", "two", "--replace")["action"] == "unchanged"


@pytest.mark.parametrize("args, words", [
    (("a/b", "--content", "x"), "path separator"),
    (("a\\b", "--content", "x"), "path separator"),
    ((".hidden", "--content", "x"), "start with a dot"),
    (("..", "--content", "x"), "path segment"),
    (("a*b", "--content", "x"), "glob character"),
    (("[x]", "--content", "x"), "glob character"),
    (("a" * 33, "--content", "x"), "exceed 32 characters"),
    (("--content", "###\n\n"), "name is required"),
    (("--content", "a\x00b"), "NUL"),
    (("--content", "x" * (MAX_CONTENT_BYTES + 1)), "at most"),
    ((), "exactly one of"),
    (("--content", "x", "--file", "-"), "exactly one of"),
    (("--from", "s", "0"), "no archived message"),
    (("--from", "../s", "0"), "path separator"),
    # #49: a place beyond SQLite's integers, a name with a byte that is not UTF-8 (as the
    # shell hands it over: a lone surrogate)
    (("--from", "s", "1000000000000000000000000000000"), "SEQ must be"),
    (("na\udcffme", "--content", "x"), "not valid UTF-8"),
])
def test_bad_input_is_refused_and_nothing_is_written(run, home, args, words):
    ok(run, "add", "kept", "--content", "a note that must stay")
    before = rows(home)
    res = run("notes", "add", *args)
    assert res.exit_code in (2, 3), res.stderr
    assert words in res.stderr and res.stderr.count("\n") == 1
    assert "internal error" not in res.stderr
    assert rows(home) == before


def test_files_text_binary_big_and_stdin(run, home, tmp_path):
    text = tmp_path / "conventions.md"
    text.write_text("# Conventions\n\nUse ruff.\n", "utf-8")
    doc = ok(run, "add", "--file", str(text))
    assert doc["name"] == "Conventions" and doc["source"] == f"file:{text}"
    before = rows(home)
    binary = tmp_path / "logo.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("caf\xe9".encode("latin-1"))
    big = tmp_path / "big.md"
    big.write_bytes(b"x" * (MAX_CONTENT_BYTES + 10))
    for path, words in ((binary, "NUL bytes"), (latin1, "not UTF-8"), (big, "at most"),
                        (tmp_path, "not a regular file"), (tmp_path / "none", "No such file")):
        res = run("notes", "add", "n", "--file", str(path))
        assert res.exit_code == 2 and words in res.stderr, (path, res.stderr)
    assert rows(home) == before
    doc = ok(run, "add", "piped", "--file", "-", input="from stdin\n")
    assert doc["content"] == "from stdin\n" and doc["source"] == "stdin"


def test_a_note_from_an_archived_message(run, home):
    res = run("append", "s", "--role", "assistant", "--content",
              "Staging lives at staging.example.com.\nDeploy with `make ship`.")
    assert res.exit_code == 0, res.stderr
    doc = ok(run, "add", "--from", "s", "0")
    assert doc["name"] == "Staging lives at staging.example"  # its first line, 32 characters
    assert doc["content"] == "Staging lives at staging.example.com.\nDeploy with `make ship`."
    assert "當前時間" not in doc["content"] and doc["source"] == "s#0"
    assert ok(run, "add", "staging", "--from", "s", "0")["name"] == "staging"
    res = run("notes", "add", "--from", "s", "7")
    assert res.exit_code == 3 and "no archived message 7" in res.stderr


def test_keyword_search_ranks_with_snippets_and_cjk_substrings(run, home):
    ok(run, "add", "--content", DEPLOY)
    ok(run, "add", "數據庫規範", "--content", "所有資料表都用 utf8mb4，主鍵用 bigint 自增。")
    ok(run, "add", "coffee", "--content", "The team likes oat milk flat whites.")
    doc = ok(run, "search", "migrations", "--mode", "keyword")
    assert [h["name"] for h in doc["results"]] == ["Deploy rules"]
    hit = doc["results"][0]
    assert hit["rank"] == 1 and hit["score_kind"] == "bm25" and hit["matched_terms"] == \
        ["migrations"] and "Never run migrations by hand" in hit["snippet"]
    doc = ok(run, "search", "資料表", "--mode", "keyword")  # a substring of a CJK run
    assert [h["name"] for h in doc["results"]] == ["數據庫規範"]
    doc = ok(run, "search", "規範", "--mode", "keyword")  # the name is searched too
    assert [h["name"] for h in doc["results"]] == ["數據庫規範"]
    doc = ok(run, "search", "oat", "pipeline", "--mode", "keyword")  # no note has both
    assert doc["match"] == "any" and [n["code"] for n in doc["notes"]] == ["any_term"]
    assert {h["name"] for h in doc["results"]} == {"Deploy rules", "coffee"}
    doc = ok(run, "search", "the", "--mode", "keyword")
    assert doc["results"] and doc["match"] == "all"  # only stop-words: kept as they are
    res = run("notes", "search", "nothing-here-xyz", "--mode", "keyword")
    assert res.exit_code == 0 and "no matching note" in res.stdout


def test_semantic_and_hybrid_catch_the_vectors_up(run, home, words):
    ok(run, "add", "--content", DEPLOY)
    ok(run, "add", "coffee", "--content", "The team likes oat milk flat whites.")
    assert words.calls == 0  # adding embeds nothing (like append)
    doc = ok(run, "search", "oat milk", "--mode", "semantic")
    assert doc["results"][0]["name"] == "coffee" and doc["unindexed_count"] == 0
    assert doc["results"][0]["score_kind"] == "cosine"
    assert all(r[3] == words.model_id for r in rows(home))
    embedded = words.calls
    doc = ok(run, "search", "release branch deploys", "--mode", "hybrid")
    assert doc["results"][0]["name"] == "Deploy rules" and words.calls == embedded
    assert doc["results"][0]["score_kind"] == "rrf"
    doc = ok(run, "search", "oat milk", "--mode", "semantic", "--budget", "0")
    assert doc["unindexed_count"] == 0  # nothing left to embed
    ok(run, "add", "tea", "--content", "Green tea at four.")
    doc = ok(run, "search", "green tea", "--mode", "semantic", "--budget", "0")
    assert doc["unindexed_count"] == 1 and doc["results"][0]["name"] == "tea"  # by keyword
    # the stand-in embedder has no calibration profile: said too (models/profiles.py)
    assert [n["code"] for n in doc["notes"]] == ["uncalibrated", "unindexed"]


def test_edit_without_a_terminal_and_with_options(run, home, tmp_path):
    ok(run, "add", "rules", "--content", "one")
    before = rows(home)
    res = run("notes", "edit", "rules")  # CliRunner: stdin is not a terminal
    assert res.exit_code == 2 and "not a terminal" in res.stderr and rows(home) == before
    doc = ok(run, "edit", "rules", "--content", "two")
    assert (doc["action"], doc["content"]) == ("replaced", "two")
    created = doc["created_at_ns"]
    doc = ok(run, "edit", "rules", "--rename", "house rules")
    assert (doc["name"], doc["action"], doc["renamed_from"]) == ("house rules", "renamed",
                                                                   "rules")
    assert doc["created_at_ns"] == created and [r[0] for r in rows(home)] == ["house rules"]
    ok(run, "add", "other", "--content", "x")
    res = run("notes", "edit", "other", "--rename", "house rules")
    assert res.exit_code == 2 and "exists" in res.stderr
    res = run("notes", "edit", "nope", "--content", "x")
    assert res.exit_code == 3
    res = run("notes", "edit", "other", "--rename", "a/b")
    assert res.exit_code == 2 and "path separator" in res.stderr


def test_edit_in_the_editor_on_a_terminal(home, tmp_path):
    """$EDITOR on a real terminal (a pty): the edited text is saved."""
    import pty

    assert agenvoy("notes", "add", "rules", "--content", "old text").returncode == 0
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nprintf 'new text from the editor\\n' > \"$1\"\n")
    editor.chmod(0o755)
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "agenvoy_cli", "notes", "edit", "rules"],
                              stdin=secondary, stdout=secondary, stderr=subprocess.PIPE,
                              env={**os.environ, "EDITOR": str(editor), "VISUAL": ""},
                              cwd=ROOT, timeout=60)
    finally:
        os.close(secondary)
        os.close(primary)
    assert proc.returncode == 0, proc.stderr
    shown = agenvoy("notes", "show", "rules")
    assert shown.stdout.decode() == "new text from the editor\n"


def _edit_on_a_terminal(tmp_path: Path, script: str) -> subprocess.CompletedProcess:
    """`notes edit rules` on a real terminal (a pty), $EDITOR running `script` (sh)."""
    import pty

    editor = tmp_path / "editor.sh"
    editor.write_text(f"#!/bin/sh\n{script}\n")
    editor.chmod(0o755)
    primary, secondary = pty.openpty()
    try:
        return subprocess.run([sys.executable, "-m", "agenvoy_cli", "notes", "edit", "rules"],
                              stdin=secondary, stdout=secondary, stderr=subprocess.PIPE,
                              env={**os.environ, "EDITOR": str(editor), "VISUAL": ""},
                              cwd=ROOT, timeout=60)
    finally:
        os.close(secondary)
        os.close(primary)


ELSEWHERE = f'"{sys.executable}" -m agenvoy_cli notes edit rules --content "{{}}" >/dev/null'


def test_the_editor_never_reverts_a_concurrent_edit(home, tmp_path):
    """#49: another process edits the note while $EDITOR is open. Quitting without saving
    writes nothing (the other edit stays); saving a change refuses in one line, non-zero,
    rather than overwrite the other edit; saving the text unchanged writes nothing."""
    assert agenvoy("notes", "add", "rules", "--content", "old text").returncode == 0
    proc = _edit_on_a_terminal(tmp_path, ELSEWHERE.format("edit one"))  # quits, not saved
    assert proc.returncode == 0, proc.stderr
    assert agenvoy("notes", "show", "rules").stdout.decode() == "edit one\n"
    proc = _edit_on_a_terminal(tmp_path, ELSEWHERE.format("edit two") +
                               "\nprintf 'mine\\n' > \"$1\"")
    said = proc.stderr.decode()
    assert proc.returncode not in (0, 2) and said.count("\n") == 1, said
    assert "changed" in said and "internal error" not in said
    assert agenvoy("notes", "show", "rules").stdout.decode() == "edit two\n"
    proc = _edit_on_a_terminal(tmp_path, ELSEWHERE.format("edit three") +
                               "\ntouch \"$1\"")  # saved with nothing changed
    assert proc.returncode == 0, proc.stderr
    assert agenvoy("notes", "show", "rules").stdout.decode() == "edit three\n"


def test_remove_takes_a_note_out_of_everything(run, home, words):
    ok(run, "add", "--content", DEPLOY)
    ok(run, "add", "coffee", "--content", "oat milk")
    ok(run, "search", "deploys", "--mode", "semantic")  # vectors made
    assert {i.split(":")[0] for i in vector_ids(home)} == {"1", "2"}
    res = run("notes", "remove", "Deploy rules")
    assert res.exit_code == 2 and "--yes" in res.stderr  # not a terminal: --yes needed
    doc = ok(run, "remove", "Deploy rules", "--yes")
    assert doc == {"schema_version": 1, "name": "Deploy rules", "removed": 1}
    assert [r[0] for r in rows(home)] == ["coffee"]
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        assert conn.execute("SELECT count(*) FROM notes_fts WHERE notes_fts MATCH "
                            "'migrations'").fetchone()[0] == 0
    assert {i.split(":")[0] for i in vector_ids(home)} == {"2"}  # only coffee's
    assert ok(run, "search", "migrations", "--mode", "keyword")["results"] == []
    assert run("notes", "remove", "Deploy rules", "--yes").exit_code == 3


def test_export_writes_one_file_per_note(run, home, tmp_path):
    ok(run, "add", "--content", DEPLOY)
    ok(run, "add", "數據庫規範", "--content", "utf8mb4")
    out = tmp_path / "out"
    doc = ok(run, "export", str(out))
    assert doc["count"] == 2 and sorted(p.name for p in out.iterdir()) == [
        "Deploy rules.md", "數據庫規範.md"]
    assert (out / "Deploy rules.md").read_text("utf-8") == DEPLOY
    res = run("notes", "export", str(home / "inside"))
    assert res.exit_code == 2 and "inside the home" in res.stderr


def test_the_legacy_knowledge_folder_is_taken_in_once(run, home):
    folder = home / "knowledge"
    folder.mkdir(parents=True)
    (folder / "release.md").write_text("# Release\n\nTag, build, publish.\n", "utf-8")
    (folder / "發佈流程.md").write_text("先打標籤。", "utf-8")
    (folder / "a*b.md").write_text("glob", "utf-8")  # refused by the name rules
    (folder / "logo.md").write_bytes(b"\x89PNG\x00\x00")  # not text
    (folder / ".draft.md").write_text("hidden", "utf-8")  # skipped, as upstream
    (folder / "readme.txt").write_text("not a note", "utf-8")
    (folder / "linked.md").symlink_to(folder / "release.md")  # not a regular file: skipped
    res = run("notes", "list", "--json")
    assert res.exit_code == 0, res.stderr
    assert [n["name"] for n in res.json()["knowledge_notes"]] == ["release", "發佈流程"]
    assert "took 2 note(s) in" in res.stderr and "a*b.md was not taken in" in res.stderr
    assert "logo.md was not taken in" in res.stderr
    res = run("notes", "list", "--json")  # the second command: nothing new, nothing said
    assert res.exit_code == 0 and res.stderr == "" and res.json()["count"] == 2
    assert sorted(p.name for p in folder.iterdir())[0] == ".draft.md"  # files left in place
    assert run("notes", "remove", "release", "--yes").exit_code == 0
    assert [n["name"] for n in ok(run, "list")["knowledge_notes"]] == ["發佈流程"]  # not back
    (folder / "new.md").write_text("added later by an old Agenvoy", "utf-8")
    assert [n["name"] for n in ok(run, "list")["knowledge_notes"]] == ["new", "發佈流程"]
    (folder / "發佈流程.md").write_text("changed in the file", "utf-8")
    assert ok(run, "show", "發佈流程")["content"] == "先打標籤。"  # a stored name stays


def test_legacy_notes_are_taken_once_by_racing_processes(home):
    folder = home / "knowledge"
    folder.mkdir(parents=True)
    for n in range(5):
        (folder / f"note{n}.md").write_text(f"text {n}", "utf-8")
    procs = [subprocess.Popen([sys.executable, "-m", "agenvoy_cli", "notes", "list", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
             for _ in range(3)]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert [r[0] for r in rows(home)] == [f"note{n}" for n in range(5)]


def test_doctor_finds_and_repairs_the_notes_indexes(run, home, words):
    ok(run, "add", "a", "--content", "alpha text")
    ok(run, "add", "b", "--content", "beta text")
    ok(run, "search", "alpha", "--mode", "semantic")
    assert run("doctor", "--json").json()["remaining"] == 0
    ok(run, "edit", "a", "--content", "alpha changed")  # a new row; the old vectors go too
    assert run("doctor", "--json").json()["remaining"] == 0
    add_stray(home, "999:0")  # a vector of no note (a crash between the two writes)
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        conn.execute("INSERT INTO notes_fts(notes_fts, rowid, name_tokens, tokens) "
                     "VALUES ('delete', 2, 'b', 'beta text')")  # the FTS index damaged
    doc = run("doctor", "--json").json()
    checks = [p for p in doc["problems"] if p["check"] == "notes"]
    assert len(checks) == 2 and doc["remaining"] == 2
    doc = run("doctor", "--repair", "--json").json()
    assert all(p["repaired"] for p in doc["problems"] if not p.get("note"))
    assert run("doctor", "--json").json()["remaining"] == 0
    assert [h["name"] for h in ok(run, "search", "beta", "--mode", "keyword")["results"]] == \
        ["b"]


def test_import_agenvoy_brings_another_homes_notes(run, home, tmp_path):
    other = tmp_path / "other"
    env = {"AGENVOY_HOME": str(other)}
    assert agenvoy("notes", "add", "theirs", "--content", "from the other home",
                   env=env).returncode == 0
    assert agenvoy("notes", "add", "shared", "--content", "theirs too", env=env).returncode == 0
    (other / "knowledge").mkdir()
    (other / "knowledge" / "old.md").write_text("an old note there", "utf-8")
    ok(run, "add", "shared", "--content", "ours")
    res = run("import", "agenvoy", str(other), "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["notes_added"] == 2
    names = {n["name"]: n for n in ok(run, "list")["knowledge_notes"]}
    assert set(names) == {"old", "shared", "theirs"}
    assert ok(run, "show", "shared")["content"] == "ours"  # a name here is kept
    assert names["theirs"]["source"] == f"import: {other.resolve()}"
    assert run("notes", "remove", "theirs", "--yes").exit_code == 0
    res = run("import", "agenvoy", str(other), "--json")
    assert res.json()["notes_added"] == 0  # taken once: a removed note is not brought back


def test_context_does_not_need_a_readable_database_for_the_notes_count(run, home):
    """`context` reads history.json only (tests/test_damaged.py): with history.db damaged it
    still answers, the notes count unknown (null) and a warning saying why, instead of
    failing with exit 4 because it counted the notes."""
    assert run("notes", "add", "--content", DEPLOY).exit_code == 0
    assert run("append", "s", "--role", "user", "--content", "hello").exit_code == 0
    for suffix in ("-wal", "-shm"):
        (home / ".store" / f"history.db{suffix}").unlink(missing_ok=True)
    (home / ".store" / "history.db").write_bytes(b"this is not a database" * 100)
    res = run("context", "s", "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert doc["knowledge_note_count"] is None
    assert [m["content"].endswith("hello") for m in doc["messages"]] == [True]
    assert "agenvoy: warning: " in res.stderr and "notes" in res.stderr
