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
