"""agenvoy import while the other agent is still writing: a message is archived only once
complete, whatever the moment of the import, and a home an older version left with an
incomplete message is completed once."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import orjson
import pytest

from tests.helpers.transfer import CODEX, DATA, TURN, provider_errors

LINES = TURN.read_bytes().splitlines(keepends=True)
SID = "cc-shop-5b0d8e21"


def rows(home: Path, sid: str = SID) -> list[tuple]:
    db = home / ".store" / "history.db"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT seq, send_at, role, content, message, gone FROM messages "
                            "WHERE session_id = ? ORDER BY seq", (sid,)).fetchall()


def transcript(folder: Path, lines: list[bytes], name: str = TURN.name) -> Path:
    path = folder / "-home-ada-src-shop" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(lines))
    return path


def importing(run, path: Path, *more: str) -> dict:
    res = run("import", "claude-code", str(path), "--sidechains", "skip", *more, "--json")
    assert res.exit_code == 0, res.stderr
    return res.json()


@pytest.fixture
def one_shot(run, tmp_path, monkeypatch, home) -> list[tuple]:
    """The archive of one import of the whole turn, in a home of its own."""
    other = tmp_path / "one-shot"
    monkeypatch.setenv("AGENVOY_HOME", str(other))
    importing(run, transcript(tmp_path / "whole", LINES), "--now")
    monkeypatch.setenv("AGENVOY_HOME", str(home))
    got = rows(other)
    assert [r[2] for r in got] == ["user", "assistant", "tool", "tool", "assistant"]
    return got


@pytest.mark.parametrize("split", range(1, len(LINES)))
def test_an_import_between_any_two_records_ends_as_one_import(run, home, tmp_path, one_shot,
                                                              split):
    path = transcript(tmp_path / "p", LINES[:split])
    importing(run, path)  # the writer is still at it: its file is fresh
    path.write_bytes(b"".join(LINES))
    importing(run, path, "--now")  # the turn ended (a Stop hook, or a quiet file)
    assert rows(home) == one_shot
    assert run("doctor").exit_code == 0


@pytest.mark.parametrize("split", range(1, len(LINES)))
@pytest.mark.parametrize("early", ["stop hook", "quiet"])
def test_a_message_split_by_an_early_final_import_is_merged_by_the_next(
        run, home, tmp_path, one_shot, split, early):
    """#49: a Stop hook that fires before Claude Code flushed the message's last blocks
    (--now), or a cron import after a block took longer than the quiet time, archives a
    half-written message as final; the next import merges the rest into it, so the archive
    and history.json end as one import of the whole file."""
    path = transcript(tmp_path / "p", LINES[:split])
    if early == "quiet":
        past = time.time() - 3600
        os.utime(path, (past, past))
        importing(run, path)
    else:
        importing(run, path, "--now")
    path.write_bytes(b"".join(LINES))
    importing(run, path, "--now")
    assert rows(home) == one_shot
    history = orjson.loads((home / "sessions" / SID / "history.json").read_bytes())
    assert [orjson.loads(r[4]) for r in one_shot] == history
    assert run("doctor").exit_code == 0
    assert importing(run, path, "--now")["sources"][0]["status"] == "unchanged"


def test_an_import_after_every_record_ends_as_one_import(run, home, tmp_path, one_shot):
    path = transcript(tmp_path / "p", [])
    for done in range(1, len(LINES) + 1):
        path.write_bytes(b"".join(LINES[:done]))
        importing(run, path)
        archived = rows(home)
        assert all(r[4] in {w[4] for w in one_shot} for r in archived), done  # never a part
    importing(run, path, "--now")
    assert rows(home) == one_shot
    context = run("context", SID, "--json").json()["messages"]
    assert provider_errors(context) == []


def test_a_message_still_being_written_is_held_back_and_said(run, home, tmp_path):
    path = transcript(tmp_path / "p", LINES[:4])  # snapshot, question, thinking, text
    doc = importing(run, path)
    (src,) = doc["sources"]
    assert src["added"] == 1 and src["open"] == 2 and src["status"] == "imported"
    assert [r[2] for r in rows(home)] == ["user"]
    again = importing(run, path)  # unchanged file, still open: read again, not skipped
    assert again["sources"][0]["open"] == 2 and again["added"] == 0


def test_a_quiet_transcript_gives_its_last_message(run, home, tmp_path):
    path = transcript(tmp_path / "p", LINES[:4])
    importing(run, path)
    assert len(rows(home)) == 1
    past = time.time() - 180
    os.utime(path, (past, past))  # untouched for 3 minutes: the writer is done with it
    doc = importing(run, path)
    assert doc["added"] == 1 and doc["sources"][0]["open"] == 0
    assert rows(home)[1][2] == "assistant"
    assert orjson.loads(rows(home)[1][4])["reasoning_content"]


def test_how_long_quiet_is_a_setting(run, home, tmp_path, monkeypatch):
    path = transcript(tmp_path / "p", LINES[:4])
    past = time.time() - 30
    os.utime(path, (past, past))  # quiet for 30 s: open under the default 120
    assert importing(run, path)["sources"][0]["open"] == 2
    (home / "config.json").write_bytes(orjson.dumps({"agenvoy": {"import_quiet_seconds": 20}}))
    assert importing(run, path)["added"] == 1  # config.json's 20 s
    monkeypatch.setenv("AGENVOY_IMPORT_QUIET_SECONDS", "soon")
    res = run("import", "claude-code", str(path), "--json")
    assert res.exit_code == 2 and "AGENVOY_IMPORT_QUIET_SECONDS='soon'" in res.stderr


def old_home(home: Path, fixture: Path, transcript_path: Path) -> None:
    """The home as agenvoy-cli before #41 left it (rows, cursor and history.json as that
    version wrote them: tests/data/transfer/old-partial, made by its import). A cursor that
    read the whole file is given the file's size and time (nothing changed since)."""
    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.home.layout import Layout

    state = orjson.loads(fixture.read_bytes())
    store = Store(Layout(home))
    try:
        with store.write_lock(), store.transaction() as conn:
            for row in state["messages"]:
                conn.execute(f"INSERT INTO messages ({', '.join(row)}) VALUES "
                             f"({', '.join('?' * len(row))})", list(row.values()))
            info = transcript_path.stat()
            for src in state["import_sources"]:
                src = {**src, "meta": orjson.dumps({**src["meta"],
                                                    "path": str(transcript_path)}).decode()}
                if src["size"] == info.st_size:
                    src.update(mtime_ns=info.st_mtime_ns)
                conn.execute(f"INSERT INTO import_sources ({', '.join(src)}) VALUES "
                             f"({', '.join('?' * len(src))})", list(src.values()))
    finally:
        store.close()
    folder = home / "sessions" / SID
    folder.mkdir(parents=True)
    (folder / "history.json").write_bytes(orjson.dumps(state["history"]))


@pytest.mark.parametrize("records", [3, 5])
def test_a_home_an_older_version_left_partial_is_completed_once(run, home, tmp_path, one_shot,
                                                                 records):
    path = transcript(tmp_path / "p", LINES)
    old_home(home, DATA / "old-partial" / f"after-{records}-records.json", path)
    partial = rows(home)
    assert partial[1][2] == "assistant" and len(partial) == 2  # what the old import kept
    doc = importing(run, path, "--now")
    (src,) = doc["sources"]
    assert src["completed"] == 1 and src["added"] == 3  # the tool results, the answer
    assert rows(home) == one_shot  # one row per message: the partial one replaced in place
    history = orjson.loads((home / "sessions" / SID / "history.json").read_bytes())
    assert [orjson.loads(r[4]) for r in rows(home)] == history
    assert run("doctor").exit_code == 0
    again = importing(run, path, "--now")
    assert again["added"] == 0 and "completed" not in again["sources"][0]
    assert rows(home) == one_shot
    hits = run("search", SID, "cron log", "--mode", "keyword", "--json").json()["results"]
    assert [h["role"] for h in hits] == ["assistant"]  # the completed text is searchable


def codex_lines() -> list[bytes]:
    return [x for x in CODEX.read_bytes().splitlines(keepends=True)
            if not x.startswith(b"{broken")]


@pytest.mark.parametrize("split", range(1, len(codex_lines())))
def test_codex_an_import_between_any_two_items_ends_as_one_import(run, home, tmp_path,
                                                                  monkeypatch, split):
    lines = codex_lines()
    whole = tmp_path / "whole" / CODEX.name
    whole.parent.mkdir()
    whole.write_bytes(b"".join(lines))
    monkeypatch.setenv("AGENVOY_HOME", str(tmp_path / "one"))
    res = run("import", "codex", str(whole), "--now", "--json")
    sid = res.json()["sources"][0]["session_id"]
    want = rows(tmp_path / "one", sid)
    monkeypatch.setenv("AGENVOY_HOME", str(home))
    path = tmp_path / "p" / CODEX.name
    path.parent.mkdir()
    path.write_bytes(b"".join(lines[:split]))
    assert run("import", "codex", str(path)).exit_code == 0
    path.write_bytes(b"".join(lines))
    assert run("import", "codex", str(path), "--now").exit_code == 0
    assert rows(home, sid) == want
    context = run("context", sid, "--json").json()["messages"]
    assert provider_errors(context) == []


def test_codex_a_call_without_its_output_waits(run, home, tmp_path):
    lines = codex_lines()
    at = next(i for i, x in enumerate(lines) if b'"function_call"' in x)
    path = tmp_path / CODEX.name
    path.write_bytes(b"".join(lines[:at + 1]))
    doc = run("import", "codex", str(path), "--json").json()
    assert doc["sources"][0]["open"] == 2  # the reasoning, and the call it led to
    sid = doc["sources"][0]["session_id"]
    assert "tool_calls" not in rows(home, sid)[-1][4]
    shutil.copy(CODEX, path)
    assert run("import", "codex", str(path), "--now").exit_code == 0
    roles = [r[2] for r in rows(home, sid)]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]


def test_a_home_whose_cron_import_lost_the_rest_of_a_message_is_completed(run, home, tmp_path,
                                                                          one_shot):
    """The issue's case: an import mid-turn kept the first blocks of a message, the next
    one (after the turn) read on and lost the others: a tool result without its call, the
    answer's text and a call gone; the file has not changed since."""
    path = transcript(tmp_path / "p", LINES)
    past = time.time() - 3600  # written an hour ago, untouched since
    os.utime(path, (past, past))
    old_home(home, DATA / "old-partial" / "after-5-records-then-all.json", path)
    doctor = run("doctor", "--json")
    assert doctor.exit_code == 0  # said as a note: what repairs it is the import below
    found = [p for p in doctor.json()["problems"] if p["check"] == "tool-pairs"]
    assert len(found) == 1 and "1 tool result(s) without their call (seq 3)" in \
        found[0]["detail"], found
    doc = importing(run, path)  # the file is whole and unchanged: read again, once
    assert doc["sources"][0]["completed"] == 1 and doc["added"] == 0
    assert rows(home) == one_shot
    assert run("doctor", "--json").json()["problems"] == []
    again = importing(run, path)
    assert again["sources"][0]["status"] == "unchanged" and rows(home) == one_shot
