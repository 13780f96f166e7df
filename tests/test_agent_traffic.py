"""Issue #12: real agent traffic, stored exactly once, whoever else writes the home.

Agenvoy (tests/agenvoy_sim.py, written from its Go source) and people with an editor
write the same home as this project; every message must be archived exactly once, in
order, and found by search once.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.agenvoy_sim import GoAgent, extract_content, header

SID = "s"
TOKEN = re.compile(r"\btok\d+\b")


def user(n: int, moment: str | None = None) -> dict[str, Any]:
    stamp = moment or f"2026-01-05 10:{n // 60:02d}:{n % 60:02d}"
    return {"role": "user", "content": header(stamp) + f"question tok{n} please"}


def reply(n: int) -> dict[str, Any]:
    return {"role": "assistant", "content": f"answer tok{n} done"}


def exchange(n: int) -> list[dict[str, Any]]:
    return [user(n), reply(n + 1)]


def tool_exchange(n: int) -> list[dict[str, Any]]:
    """A tool-using turn as an OpenAI-compatible agent writes it."""
    call = {"id": f"call_{n}", "type": "function",
            "function": {"name": "read_file", "arguments": f'{{"path": "/etc/tok{n + 1}"}}'}}
    return [user(n),
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{n}", "content": f"file body tok{n + 2}"},
            reply(n + 3)]


def history(home: Path, sid: str = SID) -> list[dict[str, Any]]:
    return orjson.loads((home / "sessions" / sid / "history.json").read_bytes())


def write_history(home: Path, messages: list[dict[str, Any]], sid: str = SID) -> None:
    """As a person with an editor saves it (pretty-printed)."""
    path = home / "sessions" / sid / "history.json"
    path.write_bytes(orjson.dumps(messages, option=orjson.OPT_INDENT_2))


def archive(home: Path, sid: str = SID) -> list[tuple[str, str]]:
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        return conn.execute("SELECT role, content FROM messages WHERE session_id = ? "
                            "ORDER BY seq, id", (sid,)).fetchall()


def tokens_in(rows: list[tuple[str, str]]) -> list[str]:
    return [t for _, content in rows for t in TOKEN.findall(content)]


def own_append(run, *messages: dict[str, Any], when: str = "2026-01-05 12:00:00") -> None:
    res = run("append", SID, "--messages", "-", "--time", when,
              input=orjson.dumps(list(messages)))
    assert res.exit_code == 0, res.stderr


def keyword_hits(run, word: str) -> list[dict[str, Any]]:
    res = run("search", SID, word, "--mode", "keyword", "--json")
    assert res.exit_code == 0, res.stderr
    return [r for r in res.json()["results"] if r["hit"]]


def assert_once(run, home: Path, expected: list[str], gone: tuple[str, ...] = ()) -> None:
    """Every expected token archived exactly once and in order; search shows each once;
    tokens in `gone` are nowhere; doctor finds nothing."""
    found = tokens_in(archive(home))
    counts = Counter(found)
    assert {t: c for t, c in counts.items() if c > 1} == {}, "archived twice"
    assert found == expected
    for word in gone:
        assert word not in counts
        assert keyword_hits(run, word) == []
    for word in expected[:: max(1, len(expected) // 6)] + expected[-1:]:
        assert len(keyword_hits(run, word)) == 1, word
    res = run("doctor", "--json")
    assert res.exit_code == 0, res.stdout + res.stderr
    res = run("doctor", "--repair", "--json")
    assert res.exit_code == 0 and tokens_in(archive(home)) == expected


def toks(*numbers: int) -> list[str]:
    return [f"tok{n}" for n in numbers]


@pytest.fixture
def go(home: Path):
    agent = GoAgent(home)
    yield agent
    agent.close()


# ------------------------------------------------------------------ accepting real messages

def test_tool_calls_null_content_parts_and_tool_messages_are_accepted(run, home):
    parts = {"role": "user", "content": [
        {"type": "text", "text": "look tok9"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
        {"type": "file", "file": {"file_id": "file-1"}}]}
    absent = {"role": "assistant", "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    empty = {"role": "assistant", "content": "", "reasoning_content": "thinking tok10",
             "tool_calls": [{"id": "c3", "type": "function",
                             "function": {"name": "g", "arguments": "{}"}}]}
    batch = [*tool_exchange(1), parts, absent,
             {"role": "tool", "tool_call_id": "c2", "content": "r2"}, empty,
             {"role": "tool", "tool_call_id": "c3", "content": [{"type": "text", "text": "r3"}]}]
    own_append(run, *batch)
    stored = history(home)
    assert len(stored) == len(batch)
    assert stored[1]["content"] is None and stored[1]["tool_calls"] == batch[1]["tool_calls"]
    assert stored[5] == absent and stored[7]["reasoning_content"] == "thinking tok10"
    assert stored[4]["content"][1:] == parts["content"][1:]
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        kept = [orjson.loads(m) for (m,) in conn.execute(
            "SELECT message FROM messages WHERE session_id = ? ORDER BY seq", (SID,))]
    assert kept == stored  # lossless: the full JSON next to the text
    assert_once(run, home, toks(1, 2, 3, 4, 9))


def test_context_json_round_trip_is_a_valid_chat_request(run, home):
    own_append(run, *tool_exchange(1), *tool_exchange(5))
    for n in range(1, 9):
        res = run("context", SID, "-n", str(n), "--json")
        assert res.exit_code == 0, res.stderr
        messages = res.json()["messages"]
        assert messages and messages[0]["role"] != "tool"
        pending: set[str] = set()
        for m in messages:  # every tool message answers a call of an earlier message
            pending |= {c["id"] for c in m.get("tool_calls") or []}
            if m["role"] == "tool":
                assert m["tool_call_id"] in pending
            assert set(m) <= {"role", "content", "tool_calls", "tool_call_id", "name",
                              "reasoning_content"}
            assert isinstance(m.get("content"), (str, list, type(None)))


def test_keyword_search_finds_tool_results_and_arguments(run, home):
    own_append(run, *tool_exchange(1), *exchange(20), *exchange(22), *exchange(24))
    assert [h["role"] for h in keyword_hits(run, "tok3")] == ["tool"]
    assert [h["role"] for h in keyword_hits(run, "tok2")] == ["assistant"]


# ------------------------------------------------------------------ foreign writers

def test_go_compact_removes_exchanges_from_the_middle(run, home, go):
    for n in range(0, 20, 2):
        go.append(SID, exchange(n))
    own_append(run, *exchange(20))
    go.compact_exchanges(SID, {2, 3, 5})
    own_append(run, *exchange(22))
    go.append(SID, exchange(24))
    own_append(run, *exchange(26))
    assert_once(run, home, toks(*range(28)))


def test_person_deletes_a_message_in_the_middle(run, home):
    own_append(run, *[m for n in range(0, 20, 2) for m in exchange(n)])
    messages = history(home)
    del messages[7]
    write_history(home, messages)
    own_append(run, *exchange(20))
    assert_once(run, home, toks(*range(22)))


def test_person_redacts_a_message(run, home):
    own_append(run, *[m for n in range(0, 20, 2) for m in exchange(n)])
    messages = history(home)
    messages[7]["content"] = "answer tok7 [redacted] done"
    messages[9]["content"] = messages[9]["content"].replace("tok9", "tok99")
    write_history(home, messages)
    own_append(run, *exchange(20))
    assert_once(run, home, toks(*range(9), 99, *range(10, 22)), gone=("tok9",))
    assert "tok9" not in str(archive(home))


def test_content_parts_with_an_image_written_by_go(run, home, go):
    image = {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}}
    for n in range(0, 10, 2):
        first = user(n)
        go.append(SID, [{"role": "user", "content": [{"type": "text", "text": first["content"]},
                                                     image, {"type": "text", "text": ""}]},
                        reply(n + 1)])
    own_append(run, *exchange(10))
    assert_once(run, home, toks(*range(12)))


def test_blank_messages_skipped_by_go(run, home, go):
    go.append(SID, tool_exchange(0))
    own_append(run, *exchange(4))
    go.append(SID, tool_exchange(6))
    go.append(SID, [user(10), {"role": "assistant", "content": "   "}, reply(11)])
    own_append(run, *exchange(12))
    assert_once(run, home, toks(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13))
    # the blank messages are archived too (losslessly), once each
    blanks = [r for r in archive(home) if not r[1].strip()]
    assert len(blanks) == 3


def test_header_times_that_go_backwards(run, home, go):
    own_append(run, *exchange(0), when="2026-11-01 01:30:00")
    go.append(SID, [user(2, "2026-11-01 01:50:00"), reply(3),
                    user(4, "2026-11-01 01:10:00"), reply(5)])  # the clock fell back
    own_append(run, *exchange(6), when="2026-11-01 01:20:00")
    go.append(SID, [user(8, "2026-11-01 00:59:00"), reply(9)])
    own_append(run, *exchange(10), when="2026-11-01 01:00:00")
    assert_once(run, home, toks(*range(12)))


def test_backfill_and_compact_between_foreign_edits(run, home, go):
    for n in range(0, 16, 2):
        go.append(SID, exchange(n))
    assert run("backfill", SID).exit_code == 0
    go.compact_exchanges(SID, {1})
    assert run("compact", SID, "--force").exit_code == 0 or True
    messages = history(home)
    messages[-2]["content"] = messages[-2]["content"].replace("tok14", "tok44")
    write_history(home, messages)
    assert run("backfill", SID).exit_code == 0
    own_append(run, *exchange(16))
    assert_once(run, home, toks(*range(14), 44, *range(15, 18)), gone=("tok14",))


# ------------------------------------------------------------------ doctor on Agenvoy homes

def test_doctor_passes_on_a_home_compacted_by_agenvoy(run, home):
    go = GoAgent(home, max_history_bytes=2000)
    for n in range(0, 40, 2):
        go.append(SID, exchange(n))
    go.append(SID, tool_exchange(40))
    go.close()
    assert len(history(home)) < 44
    res = run("doctor", "--json")
    assert res.exit_code == 0, res.stdout + res.stderr
    own_append(run, *exchange(50))
    assert_once(run, home, toks(*range(44), 50, 51))


def test_doctor_finds_and_removes_duplicate_rows(run, home):
    own_append(run, *[m for n in range(0, 10, 2) for m in exchange(n)])
    with sqlite3.connect(home / ".store" / "history.db") as conn:  # today's bug, replayed
        conn.execute("INSERT INTO messages (session_id, send_at, role, content) "
                     "SELECT session_id, send_at, role, content FROM messages "
                     "WHERE session_id = ? AND role = 'user' ORDER BY id", (SID,))
    res = run("doctor", "--json")
    assert res.exit_code == 1 and "duplicate" in res.stdout
    assert run("doctor", "--repair").exit_code == 0
    assert_once(run, home, toks(*range(10)))


def test_doctor_rebuilds_a_deleted_history_json(run, home):
    own_append(run, *[m for n in range(0, 10, 2) for m in exchange(n)], *tool_exchange(10))
    before = history(home)
    (home / "sessions" / SID / "history.json").unlink()
    res = run("doctor", "--json")
    assert res.exit_code == 1 and "history.json" in res.stdout
    assert run("doctor", "--repair").exit_code == 0
    assert history(home) == before
    assert len(run("context", SID, "--json").json()["messages"]) == 16


def test_limits_at_or_below_zero_mean_the_default(run, home):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(
        '{"limits": {"max_history_bytes": 0, "max_history_messages": -1}}')
    own_append(run, *[m for n in range(0, 40, 2) for m in exchange(n)])
    assert len(run("context", SID, "--json").json()["messages"]) == 16
    assert run("doctor").exit_code == 0


# ------------------------------------------------------------------ forget

def test_forget_removes_a_message_everywhere(run, home):
    own_append(run, *exchange(0), {"role": "user", "content": "my key is sk-tok777 oops"},
               *exchange(2))
    res = run("forget", SID, "--match", "sk-tok777", "--dry-run", "--json")
    assert res.exit_code == 0, res.stderr
    assert len(res.json()["messages"]) == 1 and "sk-tok777" in str(archive(home))
    res = run("forget", SID, "--match", "sk-tok777", "--yes", "--json")
    assert res.exit_code == 0, res.stderr
    assert "tok777" not in (home / "sessions" / SID / "history.json").read_text()
    assert "tok777" not in str(archive(home))
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        for table in ("messages_fts", "messages_fts5"):
            assert conn.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH 'tok777'"
                                ).fetchone()[0] == 0
    assert_once(run, home, toks(0, 1, 2, 3), gone=("tok777",))


def test_forget_by_place_and_refusals(run, home):
    own_append(run, *exchange(0), *exchange(2))
    assert run("forget", SID, "--match", "nothing-like-this", "--yes").exit_code == 1
    assert run("forget", SID, "1", "--match", "x", "--yes").exit_code == 2
    assert run("forget", SID, "99", "--yes").exit_code == 1
    res = run("forget", SID, "1", "--yes", "--json")
    assert res.exit_code == 0, res.stderr
    assert tokens_in(archive(home)) == toks(0, 2, 3)
    assert extract_content(history(home)[0]["content"]).endswith("tok0 please")
