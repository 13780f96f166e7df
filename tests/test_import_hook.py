"""agenvoy hook claude-code | codex, run as the host runs it (a subprocess fed the host's
JSON): it imports what a one-shot import would, never exits non-zero, prints nothing on
stdout but the context asked for, and stops at its time limit."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import agenvoy
from tests.helpers.transfer import AGENT, CODEX, SIDECHAINS, TURN

SESSION = TURN.stem


def archive(home: Path) -> list[tuple]:
    db = home / ".store" / "history.db"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT session_id, seq, send_at, role, content, message, gone "
                            "FROM messages ORDER BY session_id, seq").fetchall()


def project(tmp_path: Path) -> Path:
    """The turn's project folder as Claude Code keeps it, files just written."""
    folder = tmp_path / "projects" / TURN.parent.name
    shutil.copytree(TURN.parent, folder)
    return folder


def event(name: str, folder: Path, **more: object) -> bytes:
    doc = {"session_id": SESSION, "transcript_path": str(folder / TURN.name),
           "cwd": "/home/ada/src/shop", "permission_mode": "default", "hook_event_name": name,
           **more}
    return orjson.dumps(doc)


def hook(home: Path, data: bytes, *args: str, env: dict | None = None):
    res = agenvoy("hook", "claude-code", *args, input=data,
                  env={"AGENVOY_HOME": str(home), **(env or {})}, timeout=60)
    assert res.returncode == 0, res.stderr
    return res


@pytest.fixture
def one_shot(tmp_path) -> list[tuple]:
    """What `import claude-code <project> --now` archives."""
    other = tmp_path / "one-shot"
    res = agenvoy("import", "claude-code", str(project(tmp_path / "o")), "--now",
                  env={"AGENVOY_HOME": str(other)})
    assert res.returncode == 0, res.stderr
    return archive(other)


@pytest.mark.parametrize("name,more", [
    ("Stop", {"stop_hook_active": False}),
    ("PreCompact", {"trigger": "auto", "custom_instructions": ""}),
    ("SessionEnd", {"reason": "prompt_input_exit"}),
])
def test_a_turn_end_imports_the_transcript_as_a_one_shot_import(home, tmp_path, one_shot,
                                                                  name, more):
    folder = project(tmp_path)
    res = hook(home, event(name, folder, **more))
    assert res.stdout == b""
    want = [r for r in one_shot if not r[0].endswith(("-agent-a91c4e2f",))]
    assert archive(home) == want
    assert not (home / ".store" / "hook.log").exists()
    assert hook(home, event(name, folder, **more)).stdout == b""  # again: nothing new
    assert archive(home) == want


def test_subagent_stop_imports_the_sub_agent_whole_and_names_its_parent(home, tmp_path,
                                                                       one_shot):
    folder = project(tmp_path)
    agent = folder / SESSION / "subagents" / AGENT.name
    hook(home, event("Stop", folder))
    res = hook(home, event("SubagentStop", folder, stop_hook_active=False,
                           agent_id="a91c4e2f", agent_transcript_path=str(agent)))
    assert res.stdout == b""
    assert archive(home) == one_shot
    sid = "cc-shop-5b0d8e21-agent-a91c4e2f"
    listing = {s["session_id"]: s for s in orjson.loads(
        agenvoy("session", "list", "--json").stdout)["sessions"]}
    assert listing[sid]["parent"] == "cc-shop-5b0d8e21"
    shown = orjson.loads(agenvoy("session", "show", sid, "--json").stdout)
    assert shown["parent"] == "cc-shop-5b0d8e21" and shown["source"].startswith("claude-code")


def test_events_that_are_not_a_turn_end_import_nothing(home, tmp_path):
    folder = project(tmp_path)
    for name in ("UserPromptSubmit", "SessionStart", "Notification", "PreToolUse"):
        res = hook(home, event(name, folder, prompt="hi", source="startup"))
        assert res.stdout == b""
    assert archive(home) == []


def test_session_start_gives_the_summary_when_asked(home, tmp_path):
    folder = project(tmp_path)
    hook(home, event("Stop", folder))
    summary = {"key_decisions": ["start the backup after the database container"],
               "past_discussions": [], "current_discussion": "nightly backup 備份"}
    (home / "sessions" / "cc-shop-5b0d8e21" / "summary.json").write_bytes(orjson.dumps(summary))
    quiet = hook(home, event("SessionStart", folder, source="resume"))
    assert quiet.stdout == b""  # opt-in
    res = hook(home, event("SessionStart", folder, source="resume"), "--context")
    out = orjson.loads(res.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    assert "database container" in out["additionalContext"] and len(out[
        "additionalContext"]) <= 8000
    fresh = hook(home, orjson.dumps({**orjson.loads(event("SessionStart", folder,
                                                          source="startup")),
                                     "session_id": "00000000-new"}), "--context")
    assert "database container" in fresh.stdout.decode()  # the project's latest summary


def test_session_start_names_the_knowledge_notes(home, tmp_path):
    """As Agenvoy's system prompt does, the context tells the model which knowledge notes
    exist (names only, bounded), with or without a summary; none: no notes line."""
    folder = project(tmp_path)
    hook(home, event("Stop", folder))
    start = event("SessionStart", folder, source="startup")
    assert hook(home, start, "--context").stdout == b""  # no summary, no notes: nothing
    for name, text in (("deploy-days", "Deploys go out on Tuesdays."),
                       ("oncall", "The rota is in the wiki.")):
        assert agenvoy("notes", "add", name, "--content", text,
                       env={"AGENVOY_HOME": str(home)}).returncode == 0
    out = orjson.loads(hook(home, start, "--context").stdout)["hookSpecificOutput"]
    context = out["additionalContext"]
    assert "deploy-days" in context and "oncall" in context
    assert "Tuesdays" not in context  # names, not contents
    from agenvoy_cli.api import Memory

    memory = Memory(home)
    for i in range(300):  # many notes: the names the context gives stay bounded
        memory.add_note("t", f"note-{i:03d}-" + "x" * 20)
    memory.close()
    context = orjson.loads(hook(home, start, "--context").stdout)["hookSpecificOutput"][
        "additionalContext"]
    assert "deploy-days" in context and len(context) <= 8000 and "more" in context


@pytest.mark.parametrize("data", [b"", b"not json", b"[]", b"{}",
                                  b'{"hook_event_name": "Stop"}',
                                  b'{"hook_event_name": "Stop", "transcript_path": "/nope.jsonl"}',
                                  b'{"hook_event_name": "Stop", "transcript_path": 5}',
                                  b'{"hook_event_name": "Stop", "transcript_path": "a\\u0000b"}'])
def test_bad_input_never_fails_the_turn(home, data):
    res = hook(home, data)
    assert res.stdout == b"" and res.stderr == b""
    if data not in (b'{"hook_event_name": "Stop"}', b'{"hook_event_name": "Stop", '
                    b'"transcript_path": 5}', b'{"hook_event_name": "Stop", '
                    b'"transcript_path": "a\\u0000b"}'):
        assert (home / ".store" / "hook.log").read_text().count("\n") == 1


def test_a_fifo_as_the_transcript_is_not_waited_on(home, tmp_path):
    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)
    started = time.monotonic()
    res = hook(home, orjson.dumps({"hook_event_name": "Stop", "transcript_path": str(fifo)}))
    assert time.monotonic() - started < 30 and res.stdout == b""
    assert "not a regular file" in (home / ".store" / "hook.log").read_text()


def test_a_home_that_cannot_be_used_says_so_on_stderr_and_exits_0(tmp_path):
    bad = tmp_path / "file"
    bad.write_text("x")
    res = hook(bad, event("Stop", project(tmp_path)))
    assert res.stdout == b"" and res.stderr.startswith(b"agenvoy: ")  # no home to log in


def test_the_time_limit_stops_a_hook_that_waits(home, tmp_path):
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.home.locking import Locks

    folder = project(tmp_path)
    assert agenvoy("doctor", env={"AGENVOY_HOME": str(home)}).returncode == 0
    locks = Locks()
    with locks.hold(Layout(home).lock, 5):  # another writer holds the home
        started = time.monotonic()
        res = hook(home, event("Stop", folder), "--time-limit", "1.5",
                   env={"AGENVOY_LOCK_TIMEOUT": "60"})
        assert time.monotonic() - started < 20
    assert res.stdout == b""
    assert "time limit" in (home / ".store" / "hook.log").read_text()
    hook(home, event("Stop", folder))  # the next one finishes the job
    assert len(archive(home)) == 5


def test_codex_notify_imports_the_thread_rollout(home, tmp_path):
    codex_home = tmp_path / "codex"
    day = codex_home / "sessions" / "2025" / "10" / "02"
    day.mkdir(parents=True)
    shutil.copy(CODEX, day / CODEX.name)
    thread = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
    payload = orjson.dumps({"type": "agent-turn-complete", "thread-id": thread,
                            "turn-id": "1", "cwd": "/home/ada/src/api",
                            "input-messages": ["Why do the tests fail?"],
                            "last-assistant-message": "rate() divides by zero."}).decode()
    res = agenvoy("hook", "codex", payload, env={"AGENVOY_HOME": str(home),
                                                 "CODEX_HOME": str(codex_home)})
    assert res.returncode == 0 and res.stdout == b"", res.stderr
    other = tmp_path / "one-shot"
    assert agenvoy("import", "codex", str(day / CODEX.name), "--now",
                   env={"AGENVOY_HOME": str(other)}).returncode == 0
    assert archive(home) == archive(other) != []
    bad = agenvoy("hook", "codex", '{"type": "agent-turn-complete", "thread-id": "nope"}',
                  env={"AGENVOY_HOME": str(home), "CODEX_HOME": str(codex_home)})
    assert bad.returncode == 0 and "no rollout" in (home / ".store" / "hook.log").read_text()


def test_auto_names_a_sub_agent_after_its_parent(home, tmp_path):
    folder = project(tmp_path)
    res = agenvoy("import", "auto", str(folder.parent), "--now", "--json",
                  env={"AGENVOY_HOME": str(home)})
    assert res.returncode == 0, res.stderr
    shown = orjson.loads(agenvoy("session", "show", "cc-shop-5b0d8e21-agent-a91c4e2f",
                                 "--json", env={"AGENVOY_HOME": str(home)}).stdout)
    assert shown["parent"] == "cc-shop-5b0d8e21"


def test_a_hook_killed_at_a_side_pass_first_commit_is_finished_by_the_next_one(home,
                                                                            tmp_path):
    """kill -9 at the first commit of a transcript's sidechain pass (the main pass read
    whole): the next turn's hook, which finds the main pass unchanged, imports the
    sidechain (before, it was never imported)."""
    import signal

    transcript = tmp_path / "projects" / SIDECHAINS.parent.name / SIDECHAINS.name
    transcript.parent.mkdir(parents=True)
    shutil.copy2(SIDECHAINS, transcript)
    data = orjson.dumps({"session_id": SIDECHAINS.stem, "transcript_path": str(transcript),
                         "hook_event_name": "Stop"})
    hook(tmp_path / "reference", data)
    log = tmp_path / "commits.log"
    counted = agenvoy("import", "claude-code", str(transcript), "--now", "--sidechains",
                      "skip", env={"AGENVOY_HOME": str(tmp_path / "main-only"),
                                   "AGENVOY_FAULTS": f"point=commit,log={log}"})
    assert counted.returncode == 0, counted.stderr
    at = log.read_text().count("\n") + 1
    killed = agenvoy("hook", "claude-code", input=data, timeout=60, env={
        "AGENVOY_HOME": str(home), "AGENVOY_FAULTS": f"at={at},point=commit,fail=kill"})
    assert killed.returncode == -signal.SIGKILL
    assert not any(r[0].endswith("-side") for r in archive(home))
    hook(home, data)
    assert archive(home) == archive(tmp_path / "reference")
