"""Import papercuts of issue #49 (9 to 14): each message keeps its own time, a skip names
the record it skips, a request's model and tools are shown, a hook never takes a folder,
and a session's name does not depend on when its first import ran."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest

CC_ID = "11111111-2222-3333-4444-555555555555"


def claude_record(kind: str, uuid: str, ts: str, message: dict, **more) -> dict:
    return {"parentUuid": None, "isSidechain": False, "userType": "external",
            "cwd": "/home/ada/src/shop", "sessionId": CC_ID, "version": "2.1.9",
            "gitBranch": "main", "type": kind, "uuid": uuid, "timestamp": ts,
            "message": message, **more}


def write_jsonl(path: Path, records: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(r if isinstance(r, bytes) else orjson.dumps(r) + b"\n"
                              for r in records))
    return path


def rows(home: Path, sid: str) -> list[tuple]:
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        return conn.execute("SELECT seq, send_at, role, message FROM messages WHERE "
                            "session_id = ? ORDER BY seq", (sid,)).fetchall()


@pytest.mark.parametrize("fmt", ["header", "sendat"])
def test_an_empty_tool_result_keeps_its_own_time(run, home, tmp_path, monkeypatch, fmt):
    monkeypatch.setenv("AGENVOY_HISTORY_FORMAT", fmt)
    path = write_jsonl(tmp_path / "-home-ada-src-shop" / f"{CC_ID}.jsonl", [
        claude_record("user", "u1", "2026-01-01T10:00:00.000Z",
                      {"role": "user", "content": "run it"}),
        claude_record("assistant", "a1", "2026-01-01T10:00:05.000Z", {
            "id": "m1", "role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "true"}}]}),
        claude_record("user", "u2", "2026-01-01T10:07:00.000Z", {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": ""}]}),
        claude_record("assistant", "a2", "2026-01-01T10:08:00.000Z", {
            "id": "m2", "role": "assistant", "content": [{"type": "text", "text": "done"}]})])
    res = run("import", "claude-code", str(path), "--now", "--json")
    assert res.exit_code == 0, res.stderr
    sid = res.json()["sources"][0]["session_id"]
    got = rows(home, sid)
    assert [r[2] for r in got] == ["user", "assistant", "tool", "assistant"]
    assert got[2][1] == 1767262020 * 10**9  # 10:07:00, not 10:00:05 + 1 ns
    # and so does history.json: a rebuild of the archive from it gives the same time
    assert run("doctor", "--json").exit_code == 0


def test_a_skip_names_the_record_it_skips_not_the_last_one(run, home, tmp_path):
    path = write_jsonl(tmp_path / "chat.jsonl", [
        {"role": "user", "content": "one"}, {"role": "assistant", "content": "two"},
        {"role": "robot", "content": "three"}, {"role": "user", "content": "four"},
        {"role": "assistant", "content": "five"}])
    res = run("import", "openai", str(path), "--json")
    assert res.exit_code == 0, res.stderr
    (reason,) = res.json()["sources"][0]["reasons"]
    assert reason.startswith("record 3: message 0: role 'robot'"), reason


def test_a_skip_in_a_request_names_the_request_line_and_the_message(run, home, tmp_path):
    good = {"role": "user", "content": "fine"}
    path = write_jsonl(tmp_path / "train.jsonl", [
        {"messages": [good, {"role": "assistant", "content": "ok"}]},
        {"messages": [good, {"role": "assistant", "content": "a\u0000b"}]},
        {"messages": [good, {"role": "assistant", "content": "ok"}]}])
    res = run("import", "openai", str(path), "--session", "s", "--json")
    assert res.exit_code == 0, res.stderr
    (reason,) = res.json()["sources"][0]["reasons"]
    assert reason.startswith("record 2: message 1: content contains a NUL"), reason


def test_a_claude_code_skip_names_its_line(run, home, tmp_path):
    records = [claude_record("user", f"u{i}", f"2026-01-01T10:00:0{i}.000Z",
                             {"role": "user", "content": f"question {i}"}) for i in range(5)]
    records[3]["message"]["content"] = "bad \u0000 byte"
    path = write_jsonl(tmp_path / "-home-ada-src-shop" / f"{CC_ID}.jsonl", records)
    res = run("import", "claude-code", str(path), "--now", "--json")
    assert res.exit_code == 0, res.stderr
    (reason,) = res.json()["sources"][0]["reasons"]
    assert reason.startswith("record 4: message 0: content contains a NUL"), reason


def test_an_export_skip_names_its_line(run, home, tmp_path):
    assert run("append", "s", "--role", "user", "--content", "hello").exit_code == 0
    assert run("append", "s", "--role", "assistant", "--content", "hi").exit_code == 0
    res = run("export", "s", "--output", str(tmp_path / "s.jsonl"))
    assert res.exit_code == 0, res.stderr
    lines = (tmp_path / "s.jsonl").read_bytes().splitlines()
    kinds = [orjson.loads(x)["type"] for x in lines]
    at = len(kinds) - 1 - kinds[::-1].index("message")  # the last message line
    bad = orjson.loads(lines[at])
    bad["message"] = "not an object"
    lines[at] = orjson.dumps(bad)
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    res = run("import", "agenvoy", str(path), "--session", "t", "--json")
    assert res.exit_code == 0, res.stderr
    (reason,) = res.json()["sources"][0]["reasons"]
    assert reason.startswith(f"line {at + 1}: "), reason


@pytest.mark.parametrize("key", ["transcript_path", "agent_transcript_path"])
def test_a_hook_given_a_folder_imports_nothing_and_says_so(home, tmp_path, key):
    """A transcript_path naming a folder imported every .jsonl under it. The hook refuses
    in one line of its log; it still exits 0: a Claude Code Stop hook exiting 2 would
    block the turn's end and hand the line to the model."""
    from tests.conftest import agenvoy
    from tests.helpers.transfer import TURN

    folder = tmp_path / "projects"
    shutil.copytree(TURN.parent.parent, folder)
    name = "SubagentStop" if key == "agent_transcript_path" else "Stop"
    doc = {"session_id": TURN.stem, "hook_event_name": name, "cwd": "/home/ada/src/shop",
           key: str(folder)}
    res = agenvoy("hook", "claude-code", input=orjson.dumps(doc),
                  env={"AGENVOY_HOME": str(home)}, timeout=60)
    assert res.returncode == 0 and res.stdout == b""
    db = home / ".store" / "history.db"
    if db.exists():
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
    log = (home / ".store" / "hook.log").read_text()
    assert log.count("\n") == 1 and "is a folder, not a transcript" in log, log


TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}},
         {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
REQUEST = {"model": "gpt-4.1-mini", "tools": TOOLS, "tool_choice": "required",
           "temperature": 0.2,
           "messages": [{"role": "user", "content": "find the invoice"},
                        {"role": "assistant", "content": "found it"}]}


@pytest.mark.parametrize("shape", ["request", "requests-jsonl", "batch", "gathered"])
def test_a_requests_model_and_tools_are_shown_and_exported(run, home, tmp_path, monkeypatch,
                                                          shape):
    if shape == "request":
        path = tmp_path / "req.json"
        path.write_bytes(orjson.dumps(REQUEST, option=orjson.OPT_INDENT_2))
    elif shape == "batch":
        path = write_jsonl(tmp_path / "batch.jsonl", [
            {"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions",
             "body": REQUEST}])
    else:
        other = {**REQUEST, "messages": REQUEST["messages"][:1]}
        path = write_jsonl(tmp_path / "reqs.jsonl", [REQUEST, other])
    more = ["--session", "mine"] if shape == "gathered" else []
    res = run("import", "openai", str(path), *more, "--json")
    assert res.exit_code == 0, res.stderr
    sid = res.json()["sources"][0]["session_id"]
    shown = run("session", "show", sid, "--json")
    assert shown.exit_code == 0, shown.stderr
    (request,) = shown.json()["requests"]
    body = request.get("body", request)
    assert body["model"] == "gpt-4.1-mini" and body["tools"] == TOOLS
    assert body["tool_choice"] == "required" and body["temperature"] == 0.2
    text = run("session", "show", sid).stdout
    assert "gpt-4.1-mini" in text and "lookup, search" in text and "required" in text
    # kept by an export, and by the import of that export into another home
    out = tmp_path / "export.jsonl"
    assert run("export", sid, "--output", str(out)).exit_code == 0
    monkeypatch.setenv("AGENVOY_HOME", str(tmp_path / "other"))
    res = run("import", "agenvoy", str(out), "--json")
    assert res.exit_code == 0, res.stderr
    again = run("session", "show", sid, "--json").json()["requests"]
    assert again == shown.json()["requests"]


def test_codex_hook_under_a_notification_lag_keeps_the_final_reasoning(home, tmp_path):
    """Codex notified the turn's end while the rollout still lacked its final message (its
    reasoning written, the message not yet): that reasoning waits for the message, which
    the next notification's import brings, as one import of the whole rollout does."""
    from tests.conftest import agenvoy
    from tests.helpers.transfer import CODEX

    lines = CODEX.read_bytes().splitlines(keepends=True)
    lines = [x for x in lines if x.strip() != b"{broken"]
    final = next(i for i, x in enumerate(lines) if b'"role": "assistant"' in x)
    reasoning = orjson.dumps({"timestamp": "2025-10-02T10:00:07.500Z", "type": "response_item",
                              "payload": {"type": "reasoning", "summary": [
                                  {"type": "summary_text", "text": "**Dividing by zero**"}],
                                  "content": None}}) + b"\n"
    whole = lines[:final] + [reasoning] + lines[final:]
    codex_home = tmp_path / "codex"
    day = codex_home / "sessions" / "2025" / "10" / "02"
    day.mkdir(parents=True)
    rollout = day / CODEX.name
    rollout.write_bytes(b"".join(whole[:final + 1]))  # the reasoning, not its message yet
    payload = orjson.dumps({"type": "agent-turn-complete", "thread-id": CODEX.stem[-36:],
                            "turn-id": "1", "cwd": "/home/ada/src/api"}).decode()
    env = {"AGENVOY_HOME": str(home), "CODEX_HOME": str(codex_home)}
    assert agenvoy("hook", "codex", payload, env=env).returncode == 0
    rollout.write_bytes(b"".join(whole))  # the final message lands
    assert agenvoy("hook", "codex", payload, env=env).returncode == 0
    one = tmp_path / "whole.jsonl"
    one.write_bytes(b"".join(whole))
    other = tmp_path / "one-shot"
    assert agenvoy("import", "codex", str(one), "--now",
                   env={"AGENVOY_HOME": str(other)}).returncode == 0
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        got = conn.execute("SELECT seq, send_at, role, message FROM messages ORDER BY seq"
                           ).fetchall()
    with sqlite3.connect(other / ".store" / "history.db") as conn:
        want = conn.execute("SELECT seq, send_at, role, message FROM messages ORDER BY seq"
                            ).fetchall()
    assert got == want
    assert "Dividing by zero" in orjson.loads(got[-1][3])["reasoning_content"]


def _turn(cwd: str, sidechain: bool = False, agent: str | None = None) -> list[dict]:
    more = {"agentId": agent} if agent else {}
    out = [claude_record("user", "u1", "2026-01-01T10:00:00.000Z",
                         {"role": "user", "content": "rename the module"}, **more),
           claude_record("assistant", "a1", "2026-01-01T10:00:05.000Z", {
               "id": "m1", "role": "assistant",
               "content": [{"type": "text", "text": "renamed"}]}, **more)]
    for r in out:
        r["cwd"], r["isSidechain"] = cwd, sidechain
    return out


SNAPSHOT = {"type": "file-history-snapshot", "messageId": "u1", "isSnapshotUpdate": False,
            "snapshot": {"messageId": "u1", "trackedFileBackups": {},
                         "timestamp": "2026-01-01T10:00:00.000Z"}}


def _sessions(run) -> list[str]:
    return sorted(d["session_id"] for d in run("session", "list", "--json").json()["sessions"])


def test_a_sessions_name_does_not_depend_on_when_its_first_import_ran(run, home, tmp_path,
                                                                      monkeypatch):
    """A hook before the transcript's first user record named the session from its folder
    (`-home-ada-src-my-shop` -> shop), one after it from its cwd (my-shop)."""
    path = tmp_path / "projects" / "-home-ada-src-my-shop" / f"{CC_ID}.jsonl"
    whole = [SNAPSHOT, *_turn("/home/ada/src/my-shop")]
    monkeypatch.setenv("AGENVOY_HOME", str(tmp_path / "one-shot"))
    write_jsonl(path, whole)
    assert run("import", "claude-code", str(path), "--now").exit_code == 0
    want = _sessions(run)
    assert want == ["cc-my-shop-11111111"]
    monkeypatch.setenv("AGENVOY_HOME", str(home))
    write_jsonl(path, whole[:1])  # only the snapshot so far
    assert run("import", "claude-code", str(path), "--now").exit_code == 0
    write_jsonl(path, whole)
    assert run("import", "claude-code", str(path), "--now").exit_code == 0
    assert _sessions(run) == want


def test_a_sub_agent_is_named_after_its_parent_not_its_own_cwd(run, home, tmp_path):
    folder = tmp_path / "projects" / "-home-ada-src-shop"
    write_jsonl(folder / f"{CC_ID}.jsonl", [SNAPSHOT, *_turn("/home/ada/src/shop")])
    write_jsonl(folder / CC_ID / "subagents" / "agent-b7e2.jsonl",
                _turn("/home/ada/src/shop/web/assets", True, "b7e2"))
    res = run("import", "claude-code", str(folder), "--now", "--json")
    assert res.exit_code == 0, res.stderr
    assert _sessions(run) == ["cc-shop-11111111", "cc-shop-11111111-agent-b7e2"]
    shown = run("session", "show", "cc-shop-11111111-agent-b7e2", "--json").json()
    assert shown["parent"] == "cc-shop-11111111"
