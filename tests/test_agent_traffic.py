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
from tests.helpers.home import write_history

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


def archive(home: Path, sid: str = SID) -> list[tuple[str, str]]:
    """(role, text) of every row by place; the text with the row's tool-call arguments."""
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        rows = conn.execute("SELECT role, content, message FROM messages WHERE session_id = ? "
                            "ORDER BY seq, id", (sid,)).fetchall()
    out = []
    for role, content, message in rows:
        calls = orjson.loads(message).get("tool_calls") if message else None
        args = " ".join(c["function"]["arguments"] for c in calls or [])
        out.append((role, f"{content} {args}" if args else content))
    return out


def tokens_in(rows: list[tuple[str, str]]) -> list[str]:
    return [t for _, content in rows for t in TOKEN.findall(content)]


def own_append(run, *messages: dict[str, Any], when: str = "2026-01-05 12:00:00") -> None:
    res = run("append", SID, "--messages", "-", "--time", when,
              input=orjson.dumps(list(messages)))
    assert res.exit_code == 0, res.stderr


def keyword_hits(run, word: str) -> list[dict[str, Any]]:
    res = run("search", SID, word, "--mode", "keyword", "--json")
    assert res.exit_code == 0, res.stderr
    whole = re.compile(rf"\b{re.escape(word)}\b")  # tok1 is also a substring of tok12
    return [r for r in res.json()["results"] if r["hit"] and whole.search(r["content"])]


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
    own_append(run, *tool_exchange(1), *exchange(40), *exchange(42), *exchange(44))
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
    assert not re.search(r"\btok9\b", str(archive(home)))


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
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        blanks = conn.execute("SELECT count(*) FROM messages WHERE trim(content) = ''"
                              ).fetchone()[0]
    assert blanks == 3


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
    assert run("compact", SID, "--max-bytes", "1024").exit_code == 0  # a real trim
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
    assert run("context", SID, "--json").json()["messages"] == before


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


# ------------------------------------------------------------------ property

def test_random_foreign_edits_never_duplicate_or_lose(run, tmp_path):
    """Random interleavings of Agenvoy appends and /compact, a person deleting, redacting
    and trimming history.json, and our own appends: no message is ever archived twice,
    none archived is lost, history.json is always fully archived, doctor passes."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    ops = st.lists(st.tuples(st.sampled_from(["own", "go", "delete", "edit", "trim", "gocompact",
                                              "tool"]),
                             st.integers(0, 10_000)), min_size=1, max_size=10)

    @settings(max_examples=20, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(ops)
    def check(steps):
        import itertools
        import shutil
        import uuid

        where = tmp_path / uuid.uuid4().hex
        hist = where / "sessions" / SID / "history.json"
        go = GoAgent(where)
        numbers = itertools.count(100)
        seen: set[str] = set()  # every token this project or Agenvoy had a chance to archive
        edited_away: set[str] = set()

        def cli(*args, **kw):
            res = run("--home", str(where), *args, **kw)
            assert res.exit_code == 0, res.stdout + res.stderr
            return res

        def new_exchange():
            n = next(numbers)
            m = next(numbers)
            return [user(n), {"role": "assistant", "content": f"answer tok{m} done"}]

        def go_append(messages):
            go.append(SID, messages)  # Agenvoy archives the non-blank ones at once
            seen.update(t for m in messages for t in TOKEN.findall(
                extract_content(m.get("content"))))

        try:
            for op, r in [*steps, ("own", 0)]:
                msgs = orjson.loads(hist.read_bytes()) if hist.exists() else []
                if op == "own":  # what history.json holds now gets archived
                    seen.update(TOKEN.findall(hist.read_text()) if hist.exists() else [])
                    cli("append", SID, "--messages", "-", "--time", "2026-01-05 12:00:00",
                        input=orjson.dumps(new_exchange()))
                elif op == "go":
                    go_append(new_exchange())
                elif op == "tool":
                    n = next(numbers)
                    for _ in range(3):
                        next(numbers)
                    go_append(tool_exchange(n))
                elif op == "delete" and msgs:
                    del msgs[r % len(msgs)]
                    write_history(where, msgs)
                elif op == "edit" and msgs:
                    i = r % len(msgs)
                    text = extract_content(msgs[i].get("content"))
                    old = TOKEN.findall(text)
                    if old and isinstance(msgs[i]["content"], str):
                        fresh = f"tok{next(numbers)}"
                        msgs[i]["content"] = text.replace(old[0], fresh)
                        edited_away.add(old[0])
                        write_history(where, msgs)
                elif op == "trim" and len(msgs) > 2:
                    write_history(where, msgs[1 + r % (len(msgs) - 1):])
                elif op == "gocompact" and msgs:
                    users = sum(1 for m in msgs if m.get("role") == "user")
                    if users > 1:
                        go.compact_exchanges(SID, {r % users})
            seen.update(TOKEN.findall(hist.read_text()))
            found = Counter(tokens_in(archive(where)))
            assert {t: c for t, c in found.items() if c > 1} == {}, "archived twice"
            assert seen - edited_away <= set(found), "an archived message was lost"
            in_history = set(TOKEN.findall(hist.read_text()))
            assert in_history <= set(found)
            assert run("--home", str(where), "doctor").exit_code == 0
        finally:
            go.close()
            shutil.rmtree(where, ignore_errors=True)

    check()


# ------------------------------------------------------------------ vectors follow

def test_edits_and_forget_reach_the_vector_index(run, home, monkeypatch):
    """An edited message is re-embedded and a forgotten one leaves the index: semantic
    search never returns the old text."""
    from agenvoy_cli.vectors import api as vectors
    from tests import words_embedder

    words_embedder.use(monkeypatch, words_embedder.WordsEmbedder())
    words = ["zebra", "giraffe", "walrus", "otter", "heron", "falcon", "badger", "lynx"]
    batch = []
    for n in range(40):
        batch.append({"role": "user" if n % 2 == 0 else "assistant",
                      "content": f"note {n} about the {words[n % len(words)]}{n}"})
    own_append(run, *batch)

    def indexed_seqs() -> set[int]:
        from agenvoy_cli.home.layout import Layout
        from agenvoy_cli.vectors.hooks import open_store

        store = open_store(Layout(home))
        try:
            with store.write_lock():
                found = vectors.open_index(store, vectors.MESSAGES, create=False)
                return {int(m["seq"]) for m in found.get({"session_id": SID}).values()}
        finally:
            store.close()

    def semantic(query: str) -> str:
        res = run("search", SID, query, "--mode", "semantic", "--json")
        assert res.exit_code == 0, res.stderr
        return " ".join(r["content"] for r in res.json()["results"])

    assert "zebra0" in semantic("zebra0")
    messages = history(home)
    messages[0]["content"] = messages[0]["content"].replace("zebra0", "[redacted]")
    write_history(home, messages)
    own_append(run, *exchange(100))
    assert 0 not in indexed_seqs()  # the edited message's old vector is gone at once
    assert "zebra0" not in semantic("zebra0")
    assert re.search(r"\bgiraffe1\b", semantic("giraffe1"))
    assert 1 in indexed_seqs()
    assert run("forget", SID, "1", "--yes").exit_code == 0  # seq 1: "... giraffe1"
    assert 1 not in indexed_seqs()
    assert not re.search(r"\bgiraffe1\b", semantic("giraffe1"))
