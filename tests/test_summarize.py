"""summarize: chunks, cursor, failures, the mtime gate, legacy files, concurrency, config.

Every LLM call goes to a real HTTP server on 127.0.0.1 (tests/llm_server.py)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import orjson
import pytest

from agenvoy_cli.conversation.messages import Message
from agenvoy_cli.conversation.summarizer import chunk_messages, enforce_limits
from agenvoy_cli.conversation.summary import parse_summary_reply
from tests.conftest import KEY, ROOT
from tests.helpers.summaries import build, one, session, stamp, summary
from tests.llm_server import merged_summary, wrap


def rfc3339(local: str) -> str:
    """A local 'YYYY-MM-DD HH:MM:SS' as the vocabulary's RFC 3339 time (with the offset)."""
    return datetime.strptime(local, "%Y-%m-%d %H:%M:%S").astimezone().isoformat()


def at_ns(local: str) -> int:
    return int(datetime.strptime(local, "%Y-%m-%d %H:%M:%S").timestamp()) * 10**9


def cursor(home: Path, sid: str = "s") -> dict:
    return orjson.loads((session(home, sid) / "summary.meta.json").read_bytes())


def sent(call) -> list[int]:
    """Numbers of the messages a call carried ('s message 17' -> 17)."""
    return [int(block.rsplit(" ", 1)[1]) for block in call.messages]


def pending(home: Path, sid: str) -> bool:
    folder = session(home, sid)
    summary_file = folder / "summary.json"
    if not summary_file.exists():
        return True
    return (folder / "history.json").stat().st_mtime_ns > summary_file.stat().st_mtime_ns


def snapshot(home: Path) -> dict[str, str]:
    return {str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(home.rglob("*"))
            if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


# -- what is sent, chunking, cursor ------------------------------------------------------------
def test_three_chunks_three_calls_and_what_was_sent(run, home, llm):
    build(run, "s", 48)
    res = run("summarize", "s", "--json")
    assert res.exit_code == 0, res.stderr
    assert one(res) == {"session_id": "s", "status": "summarized", "chunk_count": 3,
                        "summarized": 3, "cursor_at": rfc3339(stamp(47)),
                        "cursor_at_ns": at_ns(stamp(47)), "error": None, "exit_code": 0}
    assert len(llm.calls) == 3
    first, second, third = llm.calls
    assert first.path == "/v1/chat/completions"
    assert first.headers["Authorization"] == f"Bearer {KEY}"
    assert first.body["model"] == "test-model" and first.body["stream"] is False
    assert [m["role"] for m in first.body["messages"]] == ["system", "user"]
    assert [sent(c) for c in llm.calls] == [list(range(0, 16)), list(range(16, 32)),
                                            list(range(32, 48))]
    # The chunk keeps each message's time header, and roles are labelled.
    assert first.messages[0] == f"[user]\n---\n當前時間: {stamp(0)}\n---\ns message 0"
    assert first.messages[1].startswith("[assistant]\n")
    # The merge is in the same call: each system prompt carries the summary so far.
    assert '"key_decisions": []' not in first.body["messages"][0]["content"]
    assert "```json\n{}\n```" in first.body["messages"][0]["content"]
    assert '"call 1"' in second.body["messages"][0]["content"]
    assert '"call 2"' in third.body["messages"][0]["content"]
    assert summary(home)["key_decisions"] == ["call 1", "call 2", "call 3"]
    assert cursor(home)["last_message_time"] == stamp(47)
    assert "chunk 3/3 summarized" in res.stderr and res.stderr.count("\n") == 3

    again = run("summarize", "s", "--json")
    assert again.exit_code == 0 and one(again)["status"] == "up_to_date"
    assert len(llm.calls) == 3  # no new messages -> no call


def test_incremental_run_sends_only_new_messages_with_old_summary(run, home, llm):
    build(run, "s", 20)
    assert run("summarize", "s").exit_code == 0
    assert [len(c.messages) for c in llm.calls] == [16, 4]
    build(run, "s", 4, first=20)
    res = run("summarize", "s", "--json")
    assert res.exit_code == 0 and one(res)["chunk_count"] == 1
    assert sent(llm.calls[2]) == [20, 21, 22, 23]
    assert '"call 2"' in llm.calls[2].body["messages"][0]["content"]
    assert cursor(home)["last_message_time"] == stamp(23)


def test_a_chunk_does_not_end_on_a_user_message(run, home, llm):
    build(run, "s", 20, first_role="assistant")  # message 15 is a user message
    assert run("summarize", "s").exit_code == 0
    assert [sent(c) for c in llm.calls] == [list(range(17)), [17, 18, 19]]


def msg(seq: int, role: str) -> Message:
    return Message(seq, seq, role, f"m{seq}", {"role": role, "content": f"m{seq}"})


def test_chunking_rule_unit():
    roles = ["user", "assistant"] * 8 + ["user"] * 3 + ["assistant"] + ["user"]
    chunks = chunk_messages([msg(i, r) for i, r in enumerate(roles)])
    assert [len(c) for c in chunks] == [16, 5]  # 16 ends on assistant; the tail may end on user
    roles = ["assistant"] + ["user", "assistant"] * 7 + ["user", "user", "assistant", "user"]
    chunks = chunk_messages([msg(i, r) for i, r in enumerate(roles)])
    assert [c[-1].role for c in chunks] == ["assistant", "user"]
    assert [len(c) for c in chunks] == [18, 1]
    assert chunk_messages([]) == []


def test_messages_sharing_one_time_are_not_lost_at_a_chunk_boundary(run, home, llm):
    # A batch without headers gets one time for all; the cursor's place still moves by message.
    batch = [{"role": ("user", "assistant")[i % 2], "content": f"s message {i}"}
             for i in range(20)]
    res = run("append", "s", "--messages", "-", "--time", stamp(0), input=orjson.dumps(batch))
    assert res.exit_code == 0
    assert run("summarize", "s").exit_code == 0
    assert [sent(c) for c in llm.calls] == [list(range(16)), [16, 17, 18, 19]]
    assert run("summarize", "s").exit_code == 0 and len(llm.calls) == 2


def test_cursor_written_by_the_go_agent_is_honoured(run, home, llm):
    build(run, "s", 12)
    folder = session(home, "s")
    (folder / "summary.json").write_text('{"key_decisions": ["old"], "past_discussions": []}')
    (folder / "summary.meta.json").write_text(f'{{"last_message_time":"{stamp(9)}"}}')
    assert run("summarize", "s").exit_code == 0
    assert [sent(c) for c in llm.calls] == [[10, 11]]
    assert '"old"' in llm.calls[0].body["messages"][0]["content"]


def test_rewinding_the_cursor_by_hand_resummarizes_from_that_time(run, home, llm):
    build(run, "s", 20)
    assert run("summarize", "s").exit_code == 0
    meta = cursor(home)
    assert meta["last_seq"] == 19 and meta["last_message_time"] == stamp(19)
    meta["last_message_time"] = stamp(9)
    (session(home, "s") / "summary.meta.json").write_bytes(orjson.dumps(meta))
    assert run("summarize", "s").exit_code == 0
    assert sent(llm.calls[2]) == list(range(10, 20))


def test_messages_trimmed_by_compaction_are_still_summarized(run, home, llm):
    build(run, "s", 40)
    res = run("compact", "s", "--max-bytes", "2048", "--json")
    assert res.exit_code == 0 and res.json()["removed"] > 0
    assert run("summarize", "s").exit_code == 0
    assert [n for c in llm.calls for n in sent(c)] == list(range(40))


def test_deleted_summary_is_rebuilt_from_the_first_message(run, home, llm):
    build(run, "s", 6)
    assert run("summarize", "s").exit_code == 0
    (session(home, "s") / "summary.json").unlink()
    res = run("summarize", "s")
    assert res.exit_code == 0 and "rebuilt" in res.stderr
    assert sent(llm.calls[1]) == list(range(6))


# -- failures ----------------------------------------------------------------------------------
def test_500_on_second_chunk_keeps_the_first_and_rerun_sends_only_the_rest(run, home, llm):
    build(run, "s", 48)
    for n in (2, 3, 4):  # a 500 is retried twice (#18: OpenAI documents it as retryable)
        llm.plan[n] = "500"
    res = run("summarize", "s", "--json")
    assert res.exit_code == 1
    doc = one(res)
    assert doc["status"] == "failed" and doc["summarized"] == 1 and doc["chunk_count"] == 3
    assert doc["cursor_at"] == rfc3339(stamp(15)) and "HTTP 500" in doc["error"]
    assert "agenvoy: error: s: chunk 2/3" in res.stderr and "HTTP 500" in res.stderr
    assert "after 3 attempts" in doc["error"]
    assert len(llm.calls) == 4
    assert summary(home)["key_decisions"] == ["call 1"]
    assert cursor(home)["last_message_time"] == stamp(15)
    assert pending(home, "s")  # stopped early: --pending picks it up again

    res = run("summarize", "--pending", "--json")
    assert res.exit_code == 0 and one(res)["summarized"] == 2
    assert [sent(c) for c in llm.calls[4:]] == [list(range(16, 32)), list(range(32, 48))]
    assert summary(home)["key_decisions"] == ["call 1", "call 5", "call 6"]
    assert not pending(home, "s")


def test_a_first_cursor_that_was_not_saved_leaves_the_rest_to_summarize(run, home, llm,
                                                                          tmp_path,
                                                                          monkeypatch):
    """The first chunk's summary.json is written but its cursor is not (a full disk): the
    next run must not take that summary for one made before cursors existed (which covers
    everything, so only a cursor would be set and the rest never summarized)."""
    import shutil

    from agenvoy_cli.home import faults

    build(run, "s", 20)  # two chunks: 16 + 4
    copy = tmp_path / "count-home"
    shutil.copytree(home, copy)
    log = tmp_path / "points.log"
    monkeypatch.setenv("AGENVOY_HOME", str(copy))
    with faults.armed(faults.parse(f"log={log}")):
        assert run("summarize", "s").exit_code == 0
    monkeypatch.setenv("AGENVOY_HOME", str(home))
    seen = [line.split(" ", 2)[1:] for line in log.read_text().splitlines()]
    first = next(i for i, (point, what) in enumerate(seen)
                 if point == "rename" and what.endswith("/summary.json"))
    at = next(i for i, (point, what) in enumerate(seen)
              if i > first and point == "rename" and what.endswith("/summary.meta.json")) + 1
    calls = len(llm.calls)
    with faults.armed(faults.parse(f"at={at}")):
        res = run("summarize", "s")
    assert res.exit_code == 1 and f"no space left on {home}" in res.stderr, res.stderr
    res = run("summarize", "s", "--json")
    assert res.exit_code == 0, res.stderr
    assert one(res)["status"] == "summarized", one(res)
    assert sent(llm.calls[-1])[-1] == 19  # the last message was summarized
    assert len(llm.calls) > calls + 1


def test_the_api_key_is_never_echoed_or_written(run, home, llm):
    build(run, "s", 2)
    for n in (1, 2, 3):
        llm.plan[n] = "500"  # its body echoes the Authorization header
    res = run("summarize", "s", "--json")
    assert res.exit_code == 1 and KEY not in res.stdout + res.stderr
    assert "Bearer ****" in one(res)["error"]
    assert run("summarize", "s").exit_code == 0
    assert not any(KEY.encode() in p.read_bytes() for p in home.rglob("*") if p.is_file())


@pytest.mark.parametrize("behaviour, needle", [
    ("garbage", "not a valid summary"),
    ("invalid", "not a valid summary"),
    ("invalid_json", "not JSON"),
    ("empty", "reply is empty"),
])
def test_unusable_replies_fail_and_write_nothing(run, home, llm, behaviour, needle):
    build(run, "s", 4)
    llm.plan[1] = behaviour
    res = run("summarize", "s", "--json")
    assert res.exit_code == 1, res.stderr
    assert needle in one(res)["error"] and one(res)["summarized"] == 0
    assert not (session(home, "s") / "summary.json").exists()
    assert not (session(home, "s") / "summary.meta.json").exists()
    assert run("summarize", "s").exit_code == 0 and sent(llm.calls[1]) == [0, 1, 2, 3]


def test_timeout_stops_the_session(run, home, llm, monkeypatch):
    build(run, "s", 4)
    monkeypatch.setenv("AGENVOY_LLM_TIMEOUT", "0.5")
    llm.plan[1] = "hang"
    res = run("summarize", "s", "--json")  # the server holds the reply for 30 s
    assert res.exit_code == 1 and "no answer within 0.5s" in one(res)["error"]
    assert len(llm.calls) == 1  # gave up on the one request, did not retry it
    assert not (session(home, "s") / "summary.json").exists()


@pytest.mark.parametrize("how", ["tag", "fence", "bracket", "bare"])
def test_reply_formats_are_accepted(run, home, llm, how):
    llm.wrap = how
    build(run, "s", 2)
    assert run("summarize", "s").exit_code == 0
    assert summary(home)["key_decisions"] == ["call 1"]


def test_parse_summary_reply_unit():
    good = {"key_decisions": ["a"], "current_discussion": {"topic": "t"}}
    for how in ("tag", "fence", "bracket", "bare"):
        assert parse_summary_reply(wrap(good, how)) == good
    legacy = {"core_discussion": "x", "confirmed_needs": []}
    assert parse_summary_reply(orjson.dumps(legacy).decode()) == legacy
    assert parse_summary_reply('{"key_decisions": []}') is None  # one key is not enough
    assert parse_summary_reply("<think>{maybe}</think>\n" + wrap(good, "bare")) == good
    assert parse_summary_reply('```json\n{"a": 1}\n```\n<summary>' + orjson.dumps(good).decode()
                               + "</summary>") == good  # first *valid* block wins
    assert parse_summary_reply("no json at all") is None


def test_enforce_limits_unit():
    past = [{"topic": str(i), "last_discussed": f"2024-05-{i + 1:02d} 10:00"} for i in range(10)]
    past.insert(0, past.pop())  # the newest first
    out = enforce_limits({"key_decisions": list(range(11)), "past_discussions": past})
    assert out["key_decisions"] == list(range(3, 11))
    assert [p["topic"] for p in out["past_discussions"]] == ["9", "2", "3", "4", "5", "6", "7", "8"]


# -- --pending and the mtime gate --------------------------------------------------------------
def test_pending_follows_the_mtime_gate(run, home, llm):
    for sid in ("a", "b", "c"):
        build(run, sid, 2)
    res = run("summarize", "--pending", "--json")
    assert res.exit_code == 0
    assert [d["session_id"] for d in res.json()["sessions"]] == ["a", "b", "c"]
    assert len(llm.calls) == 3
    assert run("summarize", "--pending", "--json").json() == {"schema_version": 1, "sessions": [],
                                                              "count": 0}

    # history.json newer than summary.json -> pending again, though nothing is new.
    hist = session(home, "a") / "history.json"
    future = time.time_ns() + 60 * 10**9
    os.utime(hist, ns=(future, future))
    res = run("summarize", "--pending", "--json")
    assert [(d["session_id"], d["status"]) for d in res.json()["sessions"]] == [("a", "up_to_date")]
    assert len(llm.calls) == 3 and not pending(home, "a")  # no call; the gate closed

    # A summary older than its history, with a new message: only that one is sent.
    build(run, "b", 1, first=2)
    res = run("summarize", "--pending", "--json")
    assert [d["session_id"] for d in res.json()["sessions"]] == ["b"]
    assert sent(llm.calls[3]) == [2]
    assert res.json() and not pending(home, "b")


def test_pending_goes_on_after_a_failure_and_exits_1(run, home, llm):
    build(run, "a", 2)
    build(run, "b", 2)
    for n in (1, 2, 3):
        llm.plan[n] = "500"
    res = run("summarize", "--pending", "--json")
    assert res.exit_code == 1
    docs = {d["session_id"]: d for d in res.json()["sessions"]}
    assert docs["a"]["status"] == "failed" and docs["b"]["status"] == "summarized"
    assert pending(home, "a") and not pending(home, "b")
    res = run("summarize", "--pending", "--json")
    assert res.exit_code == 0 and [d["session_id"] for d in res.json()["sessions"]] == ["a"]


def test_a_message_appended_during_a_run_keeps_the_session_pending(run, home, llm):
    build(run, "s", 2)
    # An append racing the LLM call: history.json changes after the run read it.
    original = llm._handle

    def racing(req):
        from agenvoy_cli.home.layout import Layout
        from agenvoy_cli.vectors.hooks import open_store

        store = open_store(Layout(home))
        store.append("s", [{"role": "user", "content": "s message 2"}],
                     datetime.strptime(stamp(2), "%Y-%m-%d %H:%M:%S"))
        store.close()
        hist = session(home, "s") / "history.json"
        later = hist.stat().st_mtime_ns + 10**9  # no reliance on the clock's granularity
        os.utime(hist, ns=(later, later))
        llm._handle = original
        return original(req)

    llm._handle = racing
    assert run("summarize", "s").exit_code == 0
    assert pending(home, "s")
    res = run("summarize", "--pending", "--json")
    assert one(res)["summarized"] == 1 and sent(llm.calls[1]) == [2]


# -- legacy ----------------------------------------------------------------------------------
def test_legacy_summary_without_cursor_sets_the_cursor_without_a_call(run, home, llm):
    build(run, "s", 30)
    legacy = {"core_discussion": "old", "discussion_log": [], "confirmed_needs": ["x"]}
    path = session(home, "s") / "summary.json"
    path.write_text(orjson.dumps(legacy).decode())
    old = (session(home, "s") / "history.json").stat().st_mtime_ns - 10**9
    os.utime(path, ns=(old, old))  # written by upstream before the latest messages
    res = run("summarize", "--pending", "--json")
    assert res.exit_code == 0
    assert one(res)["status"] == "cursor_set" and one(res)["cursor_at"] == rfc3339(stamp(29))
    assert llm.calls == [] and summary(home) == legacy
    assert cursor(home)["last_message_time"] == stamp(29) and not pending(home, "s")
    build(run, "s", 2, first=30)
    assert run("summarize", "s").exit_code == 0
    assert sent(llm.calls[0]) == [30, 31]
    assert '"core_discussion"' in llm.calls[0].body["messages"][0]["content"]


# -- configuration ---------------------------------------------------------------------------
def test_missing_configuration_exits_2_and_writes_nothing(run, home):
    build(run, "s", 2)
    before = snapshot(home)
    res = run("summarize", "s")
    assert res.exit_code == 2 and res.stdout == ""
    assert "AGENVOY_LLM_BASE_URL" in res.stderr and "AGENVOY_LLM_MODEL" in res.stderr
    assert snapshot(home) == before
    assert run("summarize", "--pending", "--json").exit_code == 2
    assert snapshot(home) == before


def test_a_key_in_the_config_file_is_refused_without_echoing_it(run, home, llm):
    build(run, "s", 2)
    (home / "config.json").write_text(orjson.dumps(
        {"agenvoy": {"llm": {"api_key": "sk-in-file-999"}}}).decode())
    res = run("summarize", "s")
    assert res.exit_code == 2 and "AGENVOY_LLM_API_KEY" in res.stderr
    assert "sk-in-file-999" not in res.stderr and llm.calls == []


def test_config_file_section_and_openai_fallbacks(run, home, llm, monkeypatch):
    build(run, "s", 2)
    for name in ("AGENVOY_LLM_BASE_URL", "AGENVOY_LLM_MODEL", "AGENVOY_LLM_API_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-fallback")
    (home / "config.json").write_text(orjson.dumps({"limits": {"max_history_messages": 16},
        "agenvoy": {"llm": {"base_url": llm.url, "model": "cfg-model", "timeout": 5,
                            "options": {"temperature": 0.2}}}}).decode())
    res = run("summarize", "s")
    assert res.exit_code == 0, res.stderr
    [call] = llm.calls
    assert call.body["model"] == "cfg-model" and call.body["temperature"] == 0.2
    assert call.headers["Authorization"] == "Bearer sk-openai-fallback"


def test_bad_usage(run, home, llm):
    build(run, "s", 2)
    assert run("summarize").exit_code == 2
    assert run("summarize", "s", "--pending").exit_code == 2
    assert run("summarize", "../x").exit_code == 2
    assert run("summarize", "nope").exit_code == 3
    assert llm.calls == []


# -- dry run ---------------------------------------------------------------------------------
def test_dry_run_prints_exact_requests_and_calls_nothing(run, home, llm):
    build(run, "s", 20)
    before = snapshot(home)
    res = run("summarize", "s", "--dry-run")
    assert res.exit_code == 0 and llm.calls == [] and snapshot(home) == before
    assert "chunk 1/2, 16 messages" in res.stdout and "chunk 2/2, 4 messages" in res.stdout
    assert f"POST {llm.url}/chat/completions" in res.stdout
    assert "Authorization: Bearer ****" in res.stdout and KEY not in res.stdout
    doc = run("summarize", "s", "--dry-run", "--json").json()
    [planned] = doc["sessions"]
    assert planned["status"] == "dry_run" and planned["chunk_count"] == 2
    first = planned["requests"][0]
    assert first["headers"]["Authorization"] == "Bearer ****"
    assert run("summarize", "s").exit_code == 0
    assert first["body"] == llm.calls[0].body  # exactly what a real run sends
    assert "<the summary returned for chunk 1>" in (
        planned["requests"][1]["body"]["messages"][0]["content"])


# -- --llm-command ---------------------------------------------------------------------------
def test_llm_command_gets_the_request_on_stdin(run, home, tmp_path, monkeypatch):
    build(run, "s", 20)
    log = tmp_path / "calls.jsonl"
    script = f"{sys.executable} {ROOT / 'tests' / 'llm_server.py'} --stdin --log {log}"
    monkeypatch.setenv("AGENVOY_LLM_MODEL", "cmd-model")
    res = run("summarize", "s", "--llm-command", script, "--json")
    assert res.exit_code == 0, res.stderr
    assert one(res)["summarized"] == 2
    requests = [orjson.loads(line) for line in log.read_text().splitlines()]
    assert len(requests) == 2 and requests[0]["model"] == "cmd-model"
    assert "s message 0" in requests[0]["messages"][1]["content"]
    assert summary(home)["key_decisions"] == ["call 1", "call 2"]

    build(run, "s", 2, first=20)
    res = run("summarize", "s", "--llm-command", script + " --fail")
    assert res.exit_code == 1 and "exit status 3: fake llm: model not found" in res.stderr
    assert cursor(home)["last_message_time"] == stamp(19)


# -- concurrency -------------------------------------------------------------------------------
def spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "agenvoy_cli", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))


def test_concurrent_runs_never_send_a_chunk_twice(run, home, llm):
    build(run, "s", 48)
    llm.hold_on = 1  # the first run is inside its first call ...
    first = spawn("summarize", "s", "--json")
    assert llm.wait_for_calls(1)
    # ... while a cron run comes by: it skips the session instead of waiting.
    cron = subprocess.run([sys.executable, "-m", "agenvoy_cli", "summarize", "--pending",
                           "--json"], cwd=ROOT, capture_output=True, timeout=60)
    assert cron.returncode == 0, cron.stderr
    assert [d["status"] for d in orjson.loads(cron.stdout)["sessions"]] == ["skipped"]
    llm.release()
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert len(llm.calls) == 3

    # Two single-session runs at once: the second waits for the lock, then finds nothing new.
    build(run, "s", 32, first=48)
    procs = [spawn("summarize", "s", "--json") for _ in range(2)]
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [r[1] for r in results]
    done = sorted(orjson.loads(r[0])["sessions"][0]["summarized"] for r in results)
    assert done == [0, 2]
    assert len(llm.calls) == 5
    assert [n for c in llm.calls for n in sent(c)] == list(range(80))


def test_merged_summary_helper_is_deterministic():
    body = {"messages": [{"role": "system", "content": '```json\n{"key_decisions": ["x"]}\n```'},
                         {"role": "user", "content": "```\n[user]\nhi\n\n```\n\ngo"}]}
    assert merged_summary(body, 2)["key_decisions"] == ["x", "call 2"]


def test_max_chunks_bounds_a_run_and_leaves_the_rest_pending(run, home, llm):
    build(run, "s", 48)
    res = run("summarize", "s", "--max-chunks", "2", "--json")
    assert res.exit_code == 0
    assert one(res)["status"] == "limited" and one(res)["summarized"] == 2
    assert len(llm.calls) == 2 and pending(home, "s")
    res = run("summarize", "--pending", "--json")
    assert one(res)["status"] == "summarized" and sent(llm.calls[2]) == list(range(32, 48))


def test_chunks_hold_at_most_32000_characters_and_an_oversized_message_alone():
    def big(i: int, role: str, size: int) -> Message:
        return Message(i, i, role, "x" * size, {"role": role, "content": "x" * size})

    roles = ["assistant", "assistant", "user", "assistant", "assistant"]
    sizes = [20_000, 20_000, 5_000, 6_000, 40_000]
    chunks = chunk_messages([big(i, r, s) for i, (r, s) in enumerate(zip(roles, sizes))])
    assert [[m.seq for m in c] for c in chunks] == [[0], [1, 2, 3], [4]]
    assert all(c[-1].role != "user" for c in chunks)
