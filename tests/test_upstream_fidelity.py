"""Upstream fidelity (issue #20): reset that keeps context, upstream's context text, the small
rules of the window and the summary. Every LLM call goes to a real server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import orjson
import pytest

from agenvoy_cli.conversation.summary import CONTEXT_TEMPLATE_FILE, context_template
from tests.llm_server import FakeLLM

# sha256 of configs/prompts/summary_context.md in pardnchiu/Agenvoy at HEAD 78782e8
UPSTREAM_CONTEXT_SHA256 = "8b66b53686cac8eb5e634c099b1588ae1e94c5093ba32522f9633b326b1eb8cb"


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch):
    with FakeLLM() as server:
        monkeypatch.setenv("AGENVOY_LLM_BASE_URL", server.url)
        monkeypatch.setenv("AGENVOY_LLM_MODEL", "test-model")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
        yield server


def fill(run, sid: str, count: int, minute: int = 0) -> None:
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        res = run("append", sid, "--role", role, "--content", f"{sid} message {i}",
                  "--time", f"2024-05-01 10:{minute + i:02d}:00")
        assert res.exit_code == 0, res.stderr


def snapshot(home: Path) -> dict[str, bytes | list]:
    """Everything a reset may change: the session's files and the archive rows."""
    out: dict[str, bytes | list] = {}
    for path in sorted((home / "sessions").rglob("*")):
        if path.is_file():
            out[str(path.relative_to(home))] = path.read_bytes()
    conn = sqlite3.connect(home / ".store/history.db")
    out["rows"] = conn.execute(
        "SELECT id, session_id, content FROM messages ORDER BY id").fetchall()
    conn.close()
    return out


def agent_files(home: Path, sid: str) -> list[Path]:
    folder = home / "sessions" / sid
    (folder / "history").mkdir()
    (folder / "history" / "2024-05-01.json").write_text("[]")
    (folder / "pending").mkdir()
    (folder / "pending" / "task.json").write_text("{}")
    (folder / "action.log").write_text("log\n")
    return [folder / "history", folder / "pending", folder / "action.log"]


# -- reset without losing context ------------------------------------------------------------
def test_reset_refreshes_the_summary_first(run, home, llm):
    fill(run, "s", 6)
    extras = agent_files(home, "s")
    res = run("session", "reset", "s", "--yes", "--json")
    assert res.exit_code == 0, res.stderr
    assert len(llm.calls) == 1  # the 6 unsummarized messages, one chunk
    folder = home / "sessions/s"
    summary = orjson.loads((folder / "summary.json").read_bytes())
    assert "s message 5" in json.dumps(summary, ensure_ascii=False)
    meta = orjson.loads((folder / "summary.meta.json").read_bytes())
    assert meta["last_message_time"] == "2024-05-01 10:05:00"
    assert not (folder / "history.json").exists()
    assert not any(p.exists() for p in extras)
    doc = res.json()
    assert doc["summary"]["status"] == "summarized" and doc["deleted"] == 6
    assert sorted(doc["deleted_files"]) == ["action.log", "history", "pending"]


def test_reset_aborts_when_the_summary_fails(run, home, llm):
    fill(run, "s", 6)
    agent_files(home, "s")
    before = snapshot(home)
    for n in (1, 2, 3):  # a 500 is retried twice
        llm.plan[n] = "500"
    res = run("session", "reset", "s", "--yes")
    assert res.exit_code == 1
    assert "reset aborted to avoid context loss" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert snapshot(home) == before


def test_reset_aborts_on_a_reply_that_is_no_summary(run, home, llm):
    fill(run, "s", 4)
    before = snapshot(home)
    llm.plan[1] = "garbage"
    assert run("session", "reset", "s", "--yes").exit_code != 0
    assert snapshot(home) == before


def test_reset_no_summary_calls_nothing(run, home, llm):
    fill(run, "s", 4)
    res = run("session", "reset", "s", "--yes", "--no-summary", "--json")
    assert res.exit_code == 0, res.stderr
    assert llm.calls == [] and res.json()["summary"] is None
    assert not (home / "sessions/s/history.json").exists()
    assert not (home / "sessions/s/summary.json").exists()


def test_reset_without_llm_needs_no_summary(run, home):
    fill(run, "s", 4)
    before = snapshot(home)
    res = run("session", "reset", "s", "--yes")
    assert res.exit_code == 2
    assert "--no-summary" in res.stderr and "no LLM is configured" in res.stderr
    assert snapshot(home) == before
    assert run("session", "reset", "s", "--yes", "--no-summary").exit_code == 0


def test_reset_without_llm_when_the_summary_saw_everything(run, home):
    fill(run, "s", 4)
    folder = home / "sessions/s"
    (folder / "summary.json").write_text('{"key_decisions": ["要：x"], "past_discussions": []}')
    (folder / "summary.meta.json").write_text('{"last_message_time": "2024-05-01 10:03:00"}')
    assert run("session", "reset", "s", "--yes").exit_code == 0
    assert not (folder / "history.json").exists() and (folder / "summary.json").exists()


def test_remove_deletes_agent_files_and_needs_no_llm(run, home):
    fill(run, "s", 4)
    agent_files(home, "s")
    assert run("session", "remove", "s", "--yes").exit_code == 0
    assert not (home / "sessions/s").exists()


def test_reset_removes_a_symlinked_agent_folder_without_following_it(run, home, tmp_path):
    fill(run, "s", 2)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    (home / "sessions/s/pending").symlink_to(outside)
    assert run("session", "reset", "s", "--yes", "--no-summary").exit_code == 0
    assert (outside / "keep.txt").read_text() == "keep"
    assert not (home / "sessions/s/pending").exists()


# -- the context text --------------------------------------------------------------------------
def test_context_template_is_upstreams_current_one():
    from importlib import resources

    raw = (resources.files("agenvoy_cli") / "prompts" / CONTEXT_TEMPLATE_FILE).read_bytes()
    assert hashlib.sha256(raw).hexdigest() == UPSTREAM_CONTEXT_SHA256
    assert "**`key_decisions` is binding**" in context_template()


def write_summary(home: Path, sid: str, summary: dict) -> None:
    (home / "sessions" / sid / "summary.json").write_bytes(orjson.dumps(summary))


def context_summary(run, sid: str) -> tuple[str, dict]:
    res = run("context", sid, "--json")
    assert res.exit_code == 0, res.stderr
    first = res.json()["messages"][0]
    assert first["role"] == "system"
    head, _, rest = first["content"].partition("```json\n")
    body = rest.rsplit("\n```", 1)[0]
    return head + "```json\n{{.Summary}}\n```" + rest.rsplit("\n```", 1)[1], json.loads(body), body


def test_context_injects_upstreams_text_with_go_json(run, home):
    fill(run, "s", 2)
    write_summary(home, "s", {"key_decisions": ["要：<a> & b"], "past_discussions": [],
                              "current_discussion": {"topic": "t"}})
    template, summary, body = context_summary(run, "s")
    assert template == context_template()
    # Go's json.Marshal of a map: compact, sorted keys, HTML characters escaped
    assert body == ('{"current_discussion":{"topic":"t"},"key_decisions":'
                    '["要：\\u003ca\\u003e \\u0026 b"],"past_discussions":[]}')


def test_cutoff_is_the_first_window_message_with_a_time(run, home):
    # window[0] has no header (content parts); the first timed one is 10:05
    parts = [{"role": "user", "content": [{"type": "text", "text": "look"}]}]
    fill(run, "s", 1)
    folder = home / "sessions/s"
    history = orjson.loads((folder / "history.json").read_bytes())
    history = history[:0] + parts + [
        {"role": "assistant", "content": "---\n當前時間: 2024-05-01 10:05:00\n---\nok"}]
    (folder / "history.json").write_bytes(orjson.dumps(history))
    write_summary(home, "s", {"key_decisions": [], "past_discussions": [
        {"topic": "old", "last_discussed": "2024-05-01 10:04"},
        {"topic": "same minute", "last_discussed": "2024-05-01 10:05"},
        {"topic": "undated"}, "not an object"],
        "discussion_log": [{"time": "2024-05-01 09:00", "text": "legacy old"},
                           {"time": "2024-05-01 11:00", "text": "legacy new"}]})
    _, summary, _ = context_summary(run, "s")
    assert [p["topic"] for p in summary["past_discussions"]] == ["same minute", "undated"]
    assert [d["text"] for d in summary["discussion_log"]] == ["legacy new"]


def test_cutoff_compares_minutes_with_seconds_as_upstream(run, home):
    fill(run, "s", 1)
    folder = home / "sessions/s"
    (folder / "history.json").write_bytes(orjson.dumps([
        {"role": "user", "content": "---\n當前時間: 2024-05-01 10:05:30\n---\nhi"}]))
    write_summary(home, "s", {"key_decisions": [], "past_discussions": [
        {"topic": "10:05", "last_discussed": "2024-05-01 10:05"},
        {"topic": "10:06", "last_discussed": "2024-05-01 10:06"}]})
    _, summary, _ = context_summary(run, "s")
    assert [p["topic"] for p in summary["past_discussions"]] == ["10:06"]


def test_refusals_are_left_out_of_the_window(run, home):
    fill(run, "s", 2)
    for text in ("抱歉，無法執行此操作。", "blocked [KARAPPO] by the guardrail"):
        assert run("append", "s", "--role", "assistant", "--content", text).exit_code == 0
    assert run("append", "s", "--role", "user", "--content", "next").exit_code == 0
    res = run("context", "s", "--json")
    texts = [m["content"] for m in res.json()["messages"]]
    assert len(texts) == 3 and not any("KARAPPO" in t or "無法執行此操作" in t for t in texts)
    # still archived and in history.json: only the context leaves them out
    assert len(orjson.loads((home / "sessions/s/history.json").read_bytes())) == 5


def test_summary_prompt_uses_upstreams_decision_prefixes():
    from agenvoy_cli.conversation.summarizer import prompt_template

    text = prompt_template()
    assert "要：" in text and "不要：" in text and "Do: ..." not in text
