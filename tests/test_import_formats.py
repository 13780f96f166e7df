"""agenvoy import: the shapes each format comes in, what `auto` takes each file for and
what a format refuses, the exit codes and documents, and each message's time and parts."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest

from tests.helpers.transfer import CODEX, DATA, TURN, provider_errors

CLAUDE = DATA / "claude" / "-home-ada-src-shop" / "7f3c2a10-5b1e-4c2d-9a8f-0e1d2c3b4a59.jsonl"
CHATGPT = DATA / "chatgpt" / "conversations.json"
CHAT = [{"role": "system", "content": "You are terse."},
        {"role": "user", "content": "ping 乒乓"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "pong-result"},
        {"role": "assistant", "content": "pong"}]
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def context(run, sid: str) -> list[dict]:
    res = run("context", sid, "--max-messages", "1000", "--json")
    assert res.exit_code == 0, res.stderr
    return res.json()["messages"]


def rows(home: Path, sid: str) -> list[tuple]:
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        return conn.execute("SELECT seq, send_at, role, message FROM messages WHERE "
                            "session_id = ? ORDER BY seq", (sid,)).fetchall()


def meta(home: Path, sid: str) -> dict:
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        found = conn.execute("SELECT meta FROM import_sources WHERE session_id = ?",
                             (sid,)).fetchone()
    return orjson.loads(found[0])


def imported(run, *args: str) -> dict:
    res = run("import", *args, "--json")
    assert res.exit_code == 0, res.stderr
    return res.json()


def bodies(run, sid: str) -> list[dict]:
    """The messages of a session without their time headers (for comparing shapes)."""
    from agenvoy_cli.conversation.messages import strip_header

    out = []
    for m in context(run, sid):
        m = dict(m)
        if isinstance(m.get("content"), str):
            m["content"] = strip_header(m["content"]) or None
        out.append(m)
    return out


# -- the OpenAI shapes ------------------------------------------------------------------------

SHAPES = {
    "messages-jsonl": (".jsonl", b"".join(orjson.dumps(m) + b"\n" for m in CHAT)),
    "messages-array": (".json", orjson.dumps(CHAT, option=orjson.OPT_INDENT_2)),
    "request": (".json", orjson.dumps({"model": "gpt-4o", "messages": CHAT, "tools": TOOLS,
                                       "temperature": 0.2}, option=orjson.OPT_INDENT_2)),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_openai_shape_of_one_conversation(run, home, tmp_path, shape):
    suffix, data = SHAPES[shape]
    path = tmp_path / f"chat{suffix}"
    path.write_bytes(data)
    doc = imported(run, "openai", str(path))
    (src,) = doc["sources"]
    assert src["shape"] == shape and src["added"] == len(CHAT) and src["skipped"] == 0
    assert bodies(run, src["session_id"]) == CHAT
    assert provider_errors(context(run, src["session_id"])) == []
    if shape == "request":  # the request's other members: the session's metadata
        assert meta(home, src["session_id"])["request"] == {
            "model": "gpt-4o", "tools": TOOLS, "temperature": 0.2}
    assert imported(run, "openai", str(path))["added"] == 0


def test_a_request_on_one_line_is_one_request(run, tmp_path):
    path = tmp_path / "body.json"
    path.write_bytes(orjson.dumps({"model": "gpt-4o", "messages": CHAT}))
    (src,) = imported(run, "openai", str(path))["sources"]
    assert src["shape"] == "request" and src["added"] == 5


def batch_lines() -> list[dict]:
    """A Batch API input file: one request a line, its custom_id, and a fine-tuning line."""
    return [{"custom_id": "req-1", "method": "POST", "url": "/v1/chat/completions",
             "body": {"model": "gpt-4o-mini", "messages": CHAT[:2]}},
            {"custom_id": "req-2", "method": "POST", "url": "/v1/chat/completions",
             "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "two"}]}},
            {"messages": [{"role": "user", "content": "three"},
                          {"role": "assistant", "content": "3"}]}]


def test_requests_one_session_each_unless_session(run, home, tmp_path, monkeypatch):
    path = tmp_path / "batch.jsonl"
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in batch_lines()))
    doc = imported(run, "openai", str(path))
    assert [(s["session_id"], s["added"], s["shape"]) for s in doc["sources"]] == [
        ("openai-batch-req-1", 2, "requests-jsonl"), ("openai-batch-req-2", 1, "requests-jsonl"),
        ("openai-batch-3", 2, "requests-jsonl")]
    assert meta(home, "openai-batch-req-1")["request"]["custom_id"] == "req-1"
    assert imported(run, "openai", str(path))["added"] == 0
    with path.open("ab") as handle:  # a line more: one session more, nothing else
        handle.write(orjson.dumps({"messages": [{"role": "user", "content": "four"}]}) + b"\n")
    assert imported(run, "openai", str(path))["added"] == 1
    monkeypatch.setenv("AGENVOY_HOME", str(tmp_path / "other"))
    one = imported(run, "openai", str(path), "--session", "all-of-it")
    assert [s["session_id"] for s in one["sources"]] == ["all-of-it"] and one["added"] == 6


def test_a_list_of_requests(run, tmp_path):
    path = tmp_path / "logged.json"
    path.write_bytes(orjson.dumps([{"model": "gpt-4o", "messages": CHAT},
                                   {"model": "gpt-4o", "messages": CHAT[:2]}]))
    doc = imported(run, "openai", str(path))
    assert [(s["session_id"], s["added"], s["shape"]) for s in doc["sources"]] == [
        ("openai-logged-1", 5, "requests-array"), ("openai-logged-2", 2, "requests-array")]


def test_a_big_request_body_is_read_as_a_stream(run, home, tmp_path, monkeypatch):
    """A request whose messages are far longer than the bound on one value: read message by
    message (the bound is per value, and the document is never held whole)."""
    monkeypatch.setenv("AGENVOY_IMPORT_MAX_RECORD_BYTES", str(64 << 10))
    many = [{"role": ("user", "assistant")[i % 2], "content": f"message {i} " + "z" * 900}
            for i in range(2000)]
    path = tmp_path / "long.json"
    path.write_bytes(orjson.dumps({"model": "m", "messages": many, "tools": TOOLS},
                                  option=orjson.OPT_INDENT_2))
    assert path.stat().st_size > 20 * (64 << 10)
    (src,) = imported(run, "openai", str(path))["sources"]
    assert src["added"] == 2000 and meta(home, src["session_id"])["request"]["tools"] == TOOLS


# -- auto, and what a format refuses ------------------------------------------------------------

def test_auto_reads_each_file_as_what_it_looks_like(run, home, tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(CLAUDE, folder / CLAUDE.name)
    shutil.copy(CODEX, folder / CODEX.name)
    shutil.copy(CHATGPT, folder / "conversations-2024.json")
    (folder / "chat.jsonl").write_bytes(SHAPES["messages-jsonl"][1])
    (folder / "empty.jsonl").write_bytes(b"")
    res = run("import", "auto", str(folder), "--now", "--json")
    assert res.exit_code == 0, res.stderr
    found = {(s["format"], s["status"]) for s in res.json()["sources"]}
    assert {f for f, _ in found} == {"claude-code", "codex", "chatgpt", "openai", "auto"}
    assert ("auto", "unchanged") in found  # the empty file: nothing to read yet
    ids = {s["session_id"] for s in res.json()["sources"] if s["added"]}
    assert {"cc-shop-7f3c2a10", "codex-api-0199a1b2", "openai-chat",
            "chatgpt-cat-names-6700aa11"} <= ids


def test_auto_takes_an_export_folder_and_another_home(run, home, tmp_path, monkeypatch):
    export = tmp_path / "chatgpt-export"
    export.mkdir()
    shutil.copy(CHATGPT, export / "conversations.json")
    (export / "chat.html").write_text("<html></html>")
    doc = imported(run, "auto", str(export))
    assert {s["format"] for s in doc["sources"]} == {"chatgpt"}
    monkeypatch.setenv("AGENVOY_HOME", str(tmp_path / "second"))
    again = imported(run, "auto", str(home))  # a whole other home: its sessions
    assert {s["format"] for s in again["sources"]} == {"agenvoy"} and again["added"] == 6


@pytest.mark.parametrize("fmt,path,looks", [
    ("claude-code", CODEX, "a Codex rollout"),
    ("codex", CLAUDE, "a Claude Code transcript"),
    ("chatgpt", CODEX, "a Codex rollout"),
    ("openai", CHATGPT, "a ChatGPT export"),
    ("claude-code", TURN.parent.parent.parent / "openai.jsonl", "OpenAI-style messages"),
])
def test_a_file_that_does_not_fit_the_format_is_refused(run, home, fmt, path, looks):
    res = run("import", fmt, str(path), "--json")
    assert res.exit_code == 2, res.stderr
    assert f"looks like {looks}" in res.stderr and "import auto" in res.stderr
    assert res.json()["error"]["kind"] == "bad_input"
    assert not (home / ".store" / "history.db").exists() or \
        not sqlite3.connect(home / ".store" / "history.db").execute(
            "SELECT count(*) FROM messages").fetchone()[0]


def test_a_file_nothing_can_read_is_an_error_not_added_0(run, home, tmp_path):
    binary = tmp_path / "blob.jsonl"
    binary.write_bytes(bytes(range(256)) * 64)
    prose = tmp_path / "notes.jsonl"
    prose.write_text("these are my notes\nnot JSON at all\n")
    for fmt in ("claude-code", "codex", "openai", "chatgpt", "auto"):
        for path, what in ((binary, "binary data"), (prose, "text that is not JSON")):
            res = run("import", fmt, str(path))
            assert res.exit_code == 2 and what in res.stderr, (fmt, res.stderr)
    folder = tmp_path / "p"
    folder.mkdir()
    shutil.copy(binary, folder / binary.name)
    shutil.copy(CLAUDE, folder / CLAUDE.name)
    res = run("import", "claude-code", str(folder), "--now", "--json")
    assert res.exit_code == 1  # one source not read: the other one written
    status = {Path(s["source"].split(":", 1)[1]).name if "/" in s["source"] else s["source"]:
              s["status"] for s in res.json()["sources"]}
    assert status["blob.jsonl"] == "unreadable"


# -- exit codes and documents -------------------------------------------------------------------

def truncated_export(path: Path, keep: int) -> int:
    """conversations.json cut short after `keep` whole conversations."""
    conversations = orjson.loads(CHATGPT.read_bytes())
    many = [{**conversations[0], "conversation_id": f"c{i:03d}-0000", "title": f"Cats {i}"}
            for i in range(keep + 3)]
    data = orjson.dumps(many)
    cut = len(orjson.dumps(many[:keep])) + 40  # inside the next conversation
    path.write_bytes(data[:cut])
    return keep


def test_a_truncated_export_exits_1_and_names_what_was_written(run, home, tmp_path):
    path = tmp_path / "conversations.json"
    kept = truncated_export(path, 12)
    res = run("import", "chatgpt", str(path), "--json")
    assert res.exit_code == 1, res.stderr
    doc = res.json()
    assert not doc["complete"] and len(doc["sessions_written"]) == kept
    assert doc["sources"][-1]["status"] == "partial" and doc["sources"][-1]["reasons"]
    assert f"written: {kept} session(s)" in res.stderr and "again" in res.stderr
    again = run("import", "chatgpt", str(path), "--json")
    assert again.exit_code == 2 and "nothing was written" in again.stderr


def test_exit_0_only_when_every_source_was_read_whole(run, home, tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_bytes(SHAPES["messages-jsonl"][1])
    assert run("import", "openai", str(good)).exit_code == 0
    assert run("import", "openai", str(good)).exit_code == 0  # unchanged: whole
    cut = tmp_path / "cut.json"
    cut.write_bytes(SHAPES["messages-array"][1][:-30])
    res = run("import", "openai", str(good), str(cut), "--json")
    assert res.exit_code == 1 and res.json()["sources"][-1]["status"] == "partial"
    assert res.json()["sessions_written"] == ["openai-cut"]


# -- times and parts ------------------------------------------------------------------------------

def test_chatgpt_tool_calls_keep_their_own_time(run, home):
    sid = imported(run, "chatgpt", str(CHATGPT))["sources"][0]["session_id"]
    got = rows(home, sid)
    call = next(r for r in got if '"tool_calls"' in r[3])
    assert call[1] == 1727773301 * 10**9  # its create_time, not the previous message's


@pytest.mark.parametrize("history_format", ["header", "sendat"])
def test_every_format_keeps_each_message_time_in_either_history_format(
        run, home, tmp_path, monkeypatch, history_format):
    monkeypatch.setenv("AGENVOY_HISTORY_FORMAT", history_format)
    imported(run, "claude-code", str(TURN), "--now", "--sidechains", "skip")
    times = [r[1] // 10**9 for r in rows(home, "cc-shop-5b0d8e21")]
    assert times == [1762179600, 1762179604, 1762179608, 1762179608, 1762179612]
    (src,) = imported(run, "codex", str(CODEX), "--now")["sources"]
    got = [r[1] // 10**9 for r in rows(home, src["session_id"])]
    assert got == [1759399200, 1759399201, 1759399203, 1759399205, 1759399206, 1759399207,
                   1759399208]


def test_chatgpt_images_become_parts_a_provider_takes(run, home, tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    shutil.copy(CHATGPT, export / "conversations.json")
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
    (export / "file-abc-screenshot.png").write_bytes(png)
    sid = imported(run, "chatgpt", str(export))["sources"][0]["session_id"]
    sent = context(run, sid)[2]
    image = next(p for p in sent["content"] if p["type"] == "image_url")
    assert image["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")
    assert "original_parts" not in sent  # never sent to a provider
    archived = orjson.loads(rows(home, sid)[2][3])
    assert archived["original_parts"][0]["part"]["asset_pointer"] == "file-service://file-abc"


def test_codex_web_search_and_parallel_calls(run, home, tmp_path):
    items = [
        {"type": "session_meta", "payload": {"id": "0199ffff-0000-7000-8000-000000000001",
                                             "cwd": "/home/ada/src/web"}},
        {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "latest sqlite release?"}]}},
        {"type": "response_item", "payload": {"type": "web_search_call", "id": "ws_1",
                                              "status": "completed", "action": {
                                                  "type": "search", "query": "sqlite release"}}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "shell",
                                              "arguments": "{\"command\":[\"ls\"]}",
                                              "call_id": "call_1"}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "shell",
                                              "arguments": "{\"command\":[\"pwd\"]}",
                                              "call_id": "call_2"}},
        {"type": "response_item", "payload": {"type": "function_call_output",
                                              "call_id": "call_1", "output": "a b"}},
        {"type": "response_item", "payload": {"type": "function_call_output",
                                              "call_id": "call_2", "output": "/w"}},
        {"type": "response_item", "payload": {"type": "message", "role": "assistant",
                                              "content": [{"type": "output_text",
                                                           "text": "3.51.0"}]}}]
    path = tmp_path / "rollout-2025-11-01T10-00-00-0199ffff-0000-7000-8000-000000000001.jsonl"
    path.write_bytes(b"".join(orjson.dumps({"timestamp": "2025-11-01T10:00:00Z", **x}) + b"\n"
                              for x in items))
    (src,) = imported(run, "codex", str(path), "--now")["sources"]
    msgs = context(run, src["session_id"])
    assert provider_errors(msgs) == []
    search = msgs[1]["tool_calls"][0]["function"]
    assert search["name"] == "web_search" and "sqlite release" in search["arguments"]
    both = next(m for m in msgs if m.get("tool_calls") and len(m["tool_calls"]) == 2)
    assert [c["id"] for c in both["tool_calls"]] == ["call_1", "call_2"]


def test_markdown_export_shows_images_and_reasoning(run, home, tmp_path):
    imported(run, "claude-code", str(CLAUDE), "--now", "--sidechains", "skip")
    out = tmp_path / "md"
    assert run("export", "cc-shop-7f3c2a10", "--format", "markdown", "--output",
               str(out)).exit_code == 0
    text = (out / "cc-shop-7f3c2a10.md").read_text("utf-8")
    assert "<details><summary>reasoning</summary>" in text
    assert "Check the script's mode first." in text
    assert "*[image/png, " in text and "iVBORw0KGgo" not in text


# -- doctor: tool calls and results per session ---------------------------------------------------

def test_doctor_reports_unpaired_tool_calls_and_results(run, home):
    batch = [{"role": "user", "content": "go"},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                 {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
             {"role": "tool", "tool_call_id": "a", "content": "ok"},
             {"role": "tool", "tool_call_id": "z", "content": "from nowhere"},
             {"role": "assistant", "content": "done"},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]
    assert run("append", "s", "--messages", "-", input=orjson.dumps(batch)).exit_code == 0
    res = run("doctor", "s", "--json")
    assert res.exit_code == 0 and res.json()["remaining"] == 0  # notes: nothing repairs them
    assert all(p["note"] for p in res.json()["problems"])
    details = sorted(p["detail"] for p in res.json()["problems"] if p["check"] == "tool-pairs")
    assert len(details) == 2
    assert details[0].startswith("1 tool call(s) without their result (seq 1: b)")
    assert details[1].startswith("1 tool result(s) without their call (seq 3)")
    # the last call ("c") is still running: not reported
    assert "note: s: tool-pairs: 1 tool result(s)" in run("doctor", "s").stdout


def test_openai_messages_keep_their_own_times(run, home, tmp_path):
    path = tmp_path / "timed.jsonl"
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in [
        {"role": "user", "content": "with sendAt", "sendAt": 1_700_000_000_000_000_000},
        {"role": "assistant", "content": "---\n當前時間: 2024-01-02 03:04:05\n---\nheader"},
        {"role": "user", "content": "none: the one before's"}]))
    sid = imported(run, "openai", str(path))["sources"][0]["session_id"]
    got = [r[1] for r in rows(home, sid)]
    header = 1704135845 * 10**9  # 2024-01-02 03:04:05 in Asia/Taipei
    assert got == [1_700_000_000 * 10**9, header, header]


def test_codex_images_and_claude_images_become_image_url_parts(run, home, tmp_path):
    image = {"type": "input_image", "image_url": "data:image/png;base64,AA=="}
    items = [{"type": "session_meta", "payload": {"id": "0199eeee-0000-7000-8000-00000000000e",
                                                  "cwd": "/w"}},
             {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [
                 {"type": "input_text", "text": "this?"}, image]}}]
    path = tmp_path / "rollout-2025-11-01T10-00-00-0199eeee-0000-7000-8000-00000000000e.jsonl"
    path.write_bytes(b"".join(orjson.dumps({"timestamp": "2025-11-01T10:00:00Z", **x}) + b"\n"
                              for x in items))
    (src,) = imported(run, "codex", str(path), "--now")["sources"]
    parts = context(run, src["session_id"])[0]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url"]
    imported(run, "claude-code", str(CLAUDE), "--now", "--sidechains", "skip")
    shot = context(run, "cc-shop-7f3c2a10")[5]["content"][1]
    assert shot == {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


def test_a_file_of_many_requests_keeps_the_document_bounded(run, home, tmp_path, monkeypatch):
    from agenvoy_cli.transfer import service

    monkeypatch.setattr(service, "SHOWN", 3)
    path = tmp_path / "many.jsonl"
    path.write_bytes(b"".join(orjson.dumps({"custom_id": f"r{i}", "body": {"messages": [
        {"role": "user", "content": f"q{i}"}]}}) + b"\n" for i in range(7)))
    doc = imported(run, "openai", str(path))
    assert len(doc["sources"]) == 4 and doc["sources"][-1]["folded"] == 4
    assert doc["sources"][-1]["written_count"] == 4 and doc["written_count"] == 7
    assert doc["added"] == 7 and len(doc["sessions_written"]) == 3
