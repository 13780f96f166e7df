"""A home shared with Agenvoy 1.0 (tests/agenvoy_sim_v10.py; the facts in docs/upstream.md):
trim points in message_meta, a trigram messages_fts5, notes in `knowledge`, personas in
`session`, finished tasks in `action_history`. The same checks pass on a v0.32 home; a v0.32
home upgraded half way keeps every message exactly once."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.agenvoy_sim_v032 import GoAgentV032
from tests.agenvoy_sim_v10 import GoAgentV10, message_meta, trim_tables, upgrade_to_v10
from tests.helpers.schemas import validate

SID = "s"
TOKEN = re.compile(r"\btok\d+\b")
LAYOUTS = {"v0.32": GoAgentV032, "1.0": GoAgentV10}
VERSION = {"v0.32": "v0.28-v0.32", "1.0": "1.0"}


def db(home: Path) -> sqlite3.Connection:
    return sqlite3.connect(home / ".store" / "history.db")


def own_append(run, *messages: dict[str, Any], sid: str = SID) -> None:
    res = run("append", sid, "--messages", "-", input=orjson.dumps(list(messages)))
    assert res.exit_code == 0, res.stderr


def tokens(home: Path, sid: str = SID) -> list[str]:
    with db(home) as conn:
        rows = conn.execute("SELECT content FROM messages WHERE session_id = ? "
                            "ORDER BY seq IS NULL, seq, id", (sid,)).fetchall()
    return [t for (content,) in rows for t in TOKEN.findall(content)]


def doctor_clean(run) -> dict[str, Any]:
    res = run("doctor", "--json")
    assert res.exit_code == 0, res.stdout + res.stderr
    doc = res.json()
    assert doc["problems"] == []
    return doc


def ok(res) -> Any:
    assert res.exit_code == 0, res.stdout + res.stderr
    return res.json()


@pytest.fixture(params=list(LAYOUTS))
def layout(request) -> str:
    return request.param


@pytest.fixture
def go(home: Path, layout: str):
    agent = LAYOUTS[layout](home)
    yield agent
    agent.close()


# ------------------------------------------------------------------ the layout, said once

def test_the_layout_is_detected_and_said_by_doctor_and_session_list(run, home, go, layout):
    go.say(SID, "user", "hello tok0")
    own_append(run, {"role": "assistant", "content": "hi tok1"})
    for doc, schema in ((doctor_clean(run), "doctor"),
                        (ok(run("session", "list", "--json")), "session-list"),
                        (ok(run("session", "show", SID, "--json")), "session-show"),
                        (ok(run("session", "tasks", SID, "--json")), "session-tasks")):
        validate(doc, schema)
        assert doc["layout"]["version"] == VERSION[layout]
        assert doc["layout"]["trim_table"] == ("message_meta" if layout == "1.0"
                                               else "session_meta")
    fts = ok(run("doctor", "--json"))["layout"]["upstream_fts_tokenizer"]
    assert fts == ("trigram" if layout == "1.0" else "unicode61")
    assert "layout: Agenvoy " + VERSION[layout] in run("doctor").stdout


def test_a_home_without_a_database_has_no_layout_yet(run, home):
    assert ok(run("session", "list", "--json"))["layout"] is None


# ------------------------------------------------------------------ trim points (message_meta)

def test_on_1_0_trim_points_live_in_message_meta_and_no_session_meta_is_made(run, home):
    go = GoAgentV10(home)
    go.say(SID, "user", "first tok0 " + "x" * 300)
    for n in range(1, 40, 2):
        own_append(run, {"role": "assistant", "content": f"answer tok{n} " + "y" * 300},
                   {"role": "user", "content": f"question tok{n + 1} " + "z" * 300})
    res = run("compact", SID, "--max-bytes", "4096", "--json")
    assert ok(res)["removed"] > 0
    assert trim_tables(home) == {"message_meta"}  # read and advanced there; none of ours
    with db(home) as conn:
        start_at, start_seq = conn.execute("SELECT start_at, start_seq FROM message_meta "
                                           "WHERE session_id = ?", (SID,)).fetchone()
        first_kept = conn.execute("SELECT send_at FROM messages WHERE session_id = ? AND "
                                  "seq = ?", (SID, start_seq)).fetchone()[0]
    assert start_seq > 0 and start_at == first_kept
    show = ok(run("session", "show", SID, "--json"))
    assert show["trim_point"]["start_seq"] == start_seq
    assert show["trim_point"]["start_at_ns"] == start_at
    # Agenvoy appends and trims by its own limit: its start_at, our place follows it
    (home / "config.json").write_text('{"limits": {"max_history_bytes": 3000}}')
    for n in range(41, 60, 2):
        go.say(SID, "user", f"theirs tok{n} " + "w" * 300)
        own_append(run, {"role": "assistant", "content": f"ours tok{n + 1} " + "v" * 300})
    assert go.trims > 0 and trim_tables(home) == {"message_meta"}
    assert tokens(home) == [f"tok{n}" for n in range(0, 61)]  # 0 lost, 0 duplicated
    after = ok(run("session", "show", SID, "--json"))["trim_point"]
    assert after["start_seq"] > start_seq
    assert message_meta(home)[SID] == after["start_at_ns"]
    doctor_clean(run)
    go.close()


def test_agenvoys_reset_on_1_0_clears_its_trim_point_and_both_write_again(run, home):
    go = GoAgentV10(home)
    own_append(run, {"role": "user", "content": "before tok1"})
    go.say(SID, "assistant", "before tok2")
    go.reset(SID)
    own_append(run, {"role": "user", "content": "after tok3"})
    go.say(SID, "assistant", "after tok4")
    assert tokens(home) == ["tok3", "tok4"]
    assert trim_tables(home) == {"message_meta"}
    doctor_clean(run)
    go.close()


# ------------------------------------------------------------------ one suite, both layouts

def test_context_search_compaction_reset_and_doctor_on_either_layout(run, home, go, layout):
    """The same checks on a v0.32 and a 1.0 home: Agenvoy's and our messages interleaved."""
    go.say(SID, "user", "the 部署流程 uses blue green tok0", sender="alice")
    own_append(run, {"role": "assistant", "content": "Redis TTL expired tok1"})
    go.say(SID, "user", "The database backup runs every night at 3am tok2")
    own_append(run, {"role": "assistant", "content": "Understood tok3"})
    for n in range(4, 40, 2):
        go.say(SID, "user", f"filler question {n} tok{n} " + "q" * 120)
        own_append(run, {"role": "assistant",
                         "content": f"filler answer tok{n + 1} " + "a" * 120})
    go.say(SID, "user", "再部署一次 please tok40")
    own_append(run, {"role": "assistant", "content": "noted tok41"})
    doctor_clean(run)
    ctx = ok(run("context", SID, "--json"))["messages"]
    assert [TOKEN.findall(m["content"]) for m in ctx[-2:]] == [["tok40"], ["tok41"]]
    assert not any("sendAt" in m or "sender" in m for m in ctx)
    # semantic and hybrid: beyond the context window, Agenvoy's message found by meaning
    for mode in ("semantic", "hybrid"):
        doc = ok(run("search", SID, "when does the nightly database backup run?", "--mode",
                     mode, "--budget", "600", "--json"))
        hits = [t for r in doc["results"] if r["hit"] for t in TOKEN.findall(r["content"])]
        assert "tok2" in hits, (mode, doc["notes"])
    # keyword: exact terms in any order, a 2-character Chinese substring (archive + recent)
    res = ok(run("compact", SID, "--max-bytes", "3000", "--json"))
    assert res["removed"] > 0
    for query, want in ((["ttl", "redis"], ["tok1"]), (["部署"], ["tok0", "tok40"]),
                        (["流程"], ["tok0"]), (["green", "blue"], ["tok0"])):
        doc = ok(run("search", SID, *query, "--mode", "keyword", "--limit", "50", "--json"))
        hits = sorted(t for r in doc["results"] if r["hit"]
                      for t in TOKEN.findall(r["content"]))
        assert hits == want, (query, doc["results"])
    assert tokens(home) == [f"tok{n}" for n in range(42)]
    doctor_clean(run)
    # reset (ours), then both write again
    ok(run("session", "reset", SID, "--yes", "--no-summary", "--json"))
    go.say(SID, "user", "again tok42")
    own_append(run, {"role": "assistant", "content": "again tok43"})
    assert tokens(home) == ["tok42", "tok43"]
    doctor_clean(run)


def test_keyword_search_finds_rows_agenvoy_inserted_by_any_2_character_substring(
        run, home, go, layout):
    """Upstream's index (trigram on 1.0) is not ours: our messages_fts keeps the promise for
    rows Agenvoy wrote too, including what trigram cannot match (2 characters)."""
    own_append(run, {"role": "user", "content": "start tok0"})
    go.say(SID, "assistant", "資料庫連線逾時 tok1")
    go.say(SID, "user", "Kubernetes pod restarted tok2")
    for query, want in (("連線", "tok1"), ("逾時", "tok1"), ("庫連", "tok1"),
                        ("restarted kubernetes", "tok2"), ("POD", "tok2")):
        doc = ok(run("search", SID, *query.split(), "--mode", "keyword", "--json"))
        hits = [t for r in doc["results"] if r["hit"] for t in TOKEN.findall(r["content"])]
        assert hits == [want], (query, doc["results"])
    if layout == "1.0":
        assert go.fts_match("連線") == []  # trigram itself finds no 2-character term
        assert go.fts_match("資料庫") != []


# ------------------------------------------------------------------ notes both ways

def test_notes_are_shared_both_ways(run, home, go, layout):
    go.say(SID, "user", "hello tok0")
    own_append(run, {"role": "assistant", "content": "hi tok1"})
    ok(run("notes", "add", "ours", "--content", "rollback with the 回滾 script", "--json"))
    if layout == "1.0":
        go.save_note("theirs", "Deploy on Tuesdays; 部署 needs a ticket")
        assert go.notes() == {"ours": "rollback with the 回滾 script",
                              "theirs": "Deploy on Tuesdays; 部署 needs a ticket"}
        listed = [n["name"] for n in ok(run("notes", "list", "--json"))["knowledge_notes"]]
        assert listed == ["ours", "theirs"]
        doc = ok(run("notes", "search", "部署", "--mode", "keyword", "--json"))
        assert [r["name"] for r in doc["results"]] == ["theirs"]
        go.save_note("theirs", "Deploy on Fridays now")  # Agenvoy edits it
        assert ok(run("notes", "show", "theirs", "--json"))["content"] == "Deploy on Fridays now"
        go.delete_note("ours")  # Agenvoy deletes ours
        listed = [n["name"] for n in ok(run("notes", "list", "--json"))["knowledge_notes"]]
        assert listed == ["theirs"]
        ok(run("notes", "edit", "theirs", "--rename", "renamed", "--json"))
        assert go.notes() == {"renamed": "Deploy on Fridays now"}
        ok(run("notes", "remove", "renamed", "--yes", "--json"))
        assert go.notes() == {}
    else:
        with db(home) as conn:
            assert "knowledge" not in {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
        listed = [n["name"] for n in ok(run("notes", "list", "--json"))["knowledge_notes"]]
        assert listed == ["ours"]
    doctor_clean(run)


def test_find_knowledge_serves_a_note_agenvoy_saved(home):
    from tests.mcp_client import connect, run_async, text_of

    go = GoAgentV10(home)
    go.say(SID, "user", "hello tok0")
    go.save_note("部署規範", "上線前先跑檢查")
    go.close()

    async def body() -> dict[str, Any]:
        async with connect("--tools", "agenvoy") as s:
            return {"list": await s.call_tool("find_knowledge", {"mode": "list"}),
                    "read": await s.call_tool("find_knowledge", {"name": "部署規範"})}

    out = run_async(body)
    assert json.loads(text_of(out["list"])) == ["部署規範"]
    assert json.loads(text_of(out["read"]))["content"] == "上線前先跑檢查"


# ------------------------------------------------------------------ personas and tasks

def test_session_list_and_show_give_the_1_0_persona(run, home):
    go = GoAgentV10(home)
    go.say(SID, "user", "hello tok0")
    go.say("other", "user", "hi tok1")
    go.set_persona(SID, name="Jarvis", self_id="Jarvis", model="openai@gpt-5")
    docs = {d["session_id"]: d for d in ok(run("session", "list", "--json"))["sessions"]}
    assert docs[SID]["persona"] == {"name": "Jarvis", "self_id": "jarvis",
                                    "model": "openai@gpt-5", "reasoning": "medium"}
    assert docs["other"]["persona"] is None
    assert ok(run("session", "show", SID, "--json"))["persona"]["name"] == "Jarvis"
    text = run("session", "list").stdout
    assert "Jarvis (@jarvis)" in text and "openai@gpt-5" in text
    go.close()


def test_a_v032_persona_file_becomes_a_row_at_the_upgrade(run, home):
    old = GoAgentV032(home)
    old.say(SID, "user", "hello tok0")
    old.close()
    (home / "sessions" / SID / "bot.json").write_text(
        json.dumps({"name": "Friday", "model": "claude@opus", "body": "be brief"}))
    upgrade_to_v10(home).close()
    assert not (home / "sessions" / SID / "bot.json").exists()
    doc = ok(run("session", "show", SID, "--json"))
    assert doc["persona"]["name"] == "Friday" and doc["persona"]["model"] == "claude@opus"


def test_session_tasks_finds_what_the_agent_did_by_words_and_time(run, home):
    go = GoAgentV10(home)
    go.say(SID, "user", "hello tok0")
    day = 86_400
    now = int(__import__("time").time())
    go.finish_task(SID, "a1", "Rotate the Redis password", reply="rotated; 已更新密碼",
                   tool_results="redis-cli CONFIG SET requirepass", end_at=now - 2 * day)
    go.finish_task(SID, "a2", "Summarise the 部署 checklist", reply="done",
                   end_at=now - 10 * day)
    go.finish_task("other", "b1", "Rotate TLS certificates", reply="renewed", end_at=now)

    def hashes(*args: str) -> list[str]:
        return [t["task_hash"] for t in ok(run("session", "tasks", *args, "--json"))["tasks"]]

    assert hashes(SID) == ["a1", "a2"]  # newest first
    validate(ok(run("session", "tasks", SID, "--full", "--json")), "session-tasks")
    assert hashes(SID, "password", "REDIS") == ["a1"]  # every word, any order, any case
    assert hashes(SID, "requirepass") == ["a1"]  # the tools' results are searched too
    assert hashes(SID, "密碼") == ["a1"] and hashes(SID, "部署") == ["a2"]
    assert hashes(SID, "rotate", "--range", "7d") == ["a1"]
    assert hashes(SID, "--until", "3 days ago") == ["a2"]
    assert hashes("--all-sessions", "rotate") == ["b1", "a1"]
    assert hashes(SID, "kubernetes") == []
    full = ok(run("session", "tasks", SID, "redis", "--full", "--json"))["tasks"][0]
    assert full["tool_results"].startswith("redis-cli") and full["ended_at_ns"] > 0
    assert "Rotate the Redis password" in run("session", "tasks", SID, "redis").stdout
    res = run("session", "tasks")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    go.close()


def test_session_tasks_on_a_v032_home_is_empty_and_says_why(run, home):
    old = GoAgentV032(home)
    old.say(SID, "user", "hello tok0")
    old.close()
    assert ok(run("session", "tasks", SID, "--json"))["tasks"] == []
    assert "keeps none" in run("session", "tasks", SID).stdout


# ------------------------------------------------------------------ upgraded half way

def test_a_v032_home_upgraded_half_way_loses_and_duplicates_nothing(run, home):
    (home / "config.json").parent.mkdir(parents=True, exist_ok=True)
    old = GoAgentV032(home)
    old.say(SID, "user", "hello tok0 " + "x" * 200)
    for n in range(1, 30, 2):
        own_append(run, {"role": "assistant", "content": f"ours tok{n} " + "y" * 200})
        old.say(SID, "user", f"theirs tok{n + 1} " + "z" * 200)
    assert ok(run("compact", SID, "--max-bytes", "3000", "--json"))["removed"] > 0
    ok(run("notes", "add", "before", "--content", "saved on v0.32", "--json"))
    with db(home) as conn:
        legacy = conn.execute("SELECT start_at, start_seq FROM session_meta WHERE "
                              "session_id = ?", (SID,)).fetchone()
    old.close()
    doctor_clean(run)

    go = upgrade_to_v10(home)  # Agenvoy 1.0 starts on the same home
    assert trim_tables(home) == {"message_meta", "session_meta"}
    doc = doctor_clean(run)
    assert doc["layout"]["version"] == "1.0" and doc["layout"]["trim_table"] == "message_meta"
    assert doc["layout"]["upstream_fts_tokenizer"] == "unicode61"  # 1.0 kept the old one
    show = ok(run("session", "show", SID, "--json"))["trim_point"]
    assert (show["start_at_ns"], show["start_seq"]) == legacy  # read, not copied
    assert message_meta(home) == {}
    assert go.notes() == {}
    assert [n["name"] for n in ok(run("notes", "list", "--json"))["knowledge_notes"]] == \
        ["before"]
    assert go.notes() == {"before": "saved on v0.32"}  # ours is a row Agenvoy reads now
    for n in range(31, 60, 2):
        go.say(SID, "user", f"theirs tok{n} " + "z" * 200)
        own_append(run, {"role": "assistant", "content": f"ours tok{n + 1} " + "y" * 200})
    assert ok(run("compact", SID, "--max-bytes", "3000", "--json"))["removed"] > 0
    assert tokens(home) == [f"tok{n}" for n in range(61)]
    with db(home) as conn:  # the v0.32 row is left as it was; the new trim point is 1.0's
        assert conn.execute("SELECT start_at, start_seq FROM session_meta WHERE "
                            "session_id = ?", (SID,)).fetchone() == legacy
    assert message_meta(home)[SID] > legacy[0]
    for mode in ("keyword", "hybrid"):
        doc = ok(run("search", SID, "tok3", "--mode", mode, "--json"))
        assert any("tok3 " in r["content"] for r in doc["results"] if r["hit"]), mode
    doctor_clean(run)
    go.close()


def test_import_agenvoy_takes_the_notes_of_another_1_0_home(run, home, tmp_path):
    other = tmp_path / "other"
    there = GoAgentV10(other)
    there.say(SID, "user", "hello tok0")
    there.save_note("runbook", "restart the queue first")
    there.close()
    res = run("import", "agenvoy", str(other), "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["notes_added"] == 1
    assert ok(run("notes", "show", "runbook", "--json"))["content"] == "restart the queue first"


def test_a_salvaged_1_0_archive_stays_a_1_0_home(run, home, monkeypatch):
    """doctor --repair of a damaged history.db keeps Agenvoy 1.0's layout and rows (its
    trigram index, message_meta, knowledge, session, action_history): never moved to ours."""
    go = GoAgentV10(home)
    go.say(SID, "user", "first tok0")
    go.save_note("runbook", "restart the queue first")
    go.set_persona(SID, name="Jarvis", self_id="jarvis")
    go.finish_task(SID, "t1", "restart the queue")
    go.close()
    own_append(run, *[{"role": "assistant" if n % 2 else "user",
                       "content": f"message tok{n} " + "z" * 60} for n in range(1, 61)])
    assert ok(run("compact", SID, "--max-bytes", "2048", "--json"))["removed"] > 0
    ok(run("notes", "list", "--json"))
    db = home / ".store" / "history.db"
    conn = sqlite3.connect(db)
    before = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in ("messages", "message_meta", "knowledge", "session", "action_history")}
    page = [r[0] for r in conn.execute("SELECT pageno FROM dbstat WHERE name = "
                                       "'idx_messages_session_seq' AND pagetype = 'leaf'")][0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    with open(db, "r+b") as handle:  # one index page smashed (tests/test_hardening.py)
        handle.seek((page - 1) * size)
        handle.write(b"\xff" * size)
    repair = run("doctor", "--repair", "--json")
    assert repair.exit_code == 0, repair.stdout + repair.stderr
    doc = doctor_clean(run)
    assert doc["layout"]["version"] == "1.0"
    assert doc["layout"]["upstream_fts_tokenizer"] == "trigram"
    assert trim_tables(home) == {"message_meta"}
    with sqlite3.connect(db) as conn:
        after = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in before}
    assert after == before
    assert tokens(home) == [f"tok{n}" for n in range(61)]
    assert ok(run("session", "tasks", SID, "queue", "--json"))["count"] == 1
