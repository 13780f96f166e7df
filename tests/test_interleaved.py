"""Tool results written out of their call's place (issue #49, 2): Claude Code 2.1 writes a
result between the tool_use records of one assistant message, Codex a developer message
between a call and its output. The archive keeps them as written; `context` and MCP
`get_context` feed every call and every result, in pairs an OpenAI-compatible API takes
(checked with the `openai` package's own types), and doctor says nothing false about them."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import orjson
import pytest

from tests.helpers.transfer import DATA, calls_and_results, openai_shape

CLAUDE = DATA / "claude-interleaved" / "-home-ada-src-shop" / \
    "9c41d7e2-6a3b-4f15-8e27-1b0c9d8a7f64.jsonl"
CODEX = next((DATA / "codex-interleaved").rglob("rollout-*.jsonl"))


def context(run, sid: str) -> list[dict]:
    res = run("context", sid, "--max-messages", "1000", "--json")
    assert res.exit_code == 0, res.stderr
    return res.json()["messages"]


def mcp_context(sid: str) -> str:
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.server import handlers
    from agenvoy_cli.vectors.hooks import open_store

    store = open_store(Layout(Path(os.environ["AGENVOY_HOME"])))
    try:
        text, _ = handlers.get_context(handlers.Context(store, None), {"session_id": sid,
                                                                      "max_messages": 1000})
    finally:
        store.close()
    return text


def archived(home: Path, sid: str) -> list[dict]:
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        rows = conn.execute("SELECT message FROM messages WHERE session_id = ? ORDER BY seq",
                            (sid,)).fetchall()
    return [orjson.loads(r[0]) for r in rows]


def imported(run, fmt: str, path: Path) -> str:
    res = run("import", fmt, str(path), "--now", "--json")
    assert res.exit_code == 0, res.stderr
    return res.json()["sources"][0]["session_id"]


def test_claude_code_2_1_result_between_the_tool_uses_of_one_message(run, home):
    sid = imported(run, "claude-code", CLAUDE)
    rows = archived(home, sid)
    # one assistant message per message.id, as the importer's docs say: A, B and C together
    with_calls = [m for m in rows if m.get("tool_calls")]
    assert [[c["id"] for c in m["tool_calls"]] for m in with_calls] == \
        [["toolu_01Log", "toolu_02Tpl", "toolu_03Ls"]]
    assert "Check the renderer log" in with_calls[0]["reasoning_content"]
    want = (["toolu_01Log", "toolu_02Tpl", "toolu_03Ls"],) * 2
    assert calls_and_results(rows) == want
    fed = context(run, sid)
    assert calls_and_results(fed) == want
    openai_shape(fed)
    text = mcp_context(sid)
    for marker in ("wagtail-marker", "font-family: Inter", "dejavu", "→ Bash(", "→ Read("):
        assert marker in text, marker
    res = run("doctor", sid, "--json")
    assert res.exit_code == 0
    assert not [p for p in res.json()["problems"] if p["check"] == "tool-pairs"]


def test_codex_developer_message_between_a_call_and_its_output(run, home):
    sid = imported(run, "codex", CODEX)
    rows = archived(home, sid)
    assert calls_and_results(rows) == (["call_Q1", "call_Q2"],) * 2
    fed = context(run, sid)
    assert calls_and_results(fed) == (["call_Q1", "call_Q2"],) * 2
    openai_shape(fed)
    texts = " ".join(str(m.get("content")) for m in fed)
    for marker in ("approved `rg`", "outside the sandbox", "ocelot-marker", "Success."):
        assert marker in texts, marker
    text = mcp_context(sid)
    assert "ocelot-marker" in text and "Success." in text
    res = run("doctor", sid, "--json")
    assert not [p for p in res.json()["problems"] if p["check"] == "tool-pairs"]


def _call(cid: str) -> dict:
    return {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def test_an_archive_split_by_an_older_import_is_fed_whole(run, home, tmp_path):
    """What an older version archived of the Claude Code interleaving: the message cut in
    two around A's result. Every call is fed with its result."""
    batch = [{"role": "user", "content": "go"},
             {"role": "assistant", "content": None, "tool_calls": [_call("A"), _call("B")]},
             {"role": "tool", "tool_call_id": "A", "content": "a done"},
             {"role": "assistant", "content": None, "tool_calls": [_call("C")]},
             {"role": "tool", "tool_call_id": "B", "content": "b done"},
             {"role": "tool", "tool_call_id": "C", "content": "c done"},
             {"role": "assistant", "content": "all three done"}]
    path = tmp_path / "split.json"
    path.write_bytes(orjson.dumps(batch))
    assert run("append", "s", "--messages", str(path)).exit_code == 0
    fed = context(run, "s")
    assert calls_and_results(fed) == (["A", "B", "C"],) * 2
    openai_shape(fed)
    assert fed[-1]["content"].endswith("all three done")
    res = run("doctor", "s", "--json")
    assert not [p for p in res.json()["problems"] if p["check"] == "tool-pairs"]


@pytest.mark.parametrize("cut", [2, 3, 4, 5])
def test_a_window_cut_inside_the_interleaving_stays_valid(run, home, tmp_path, cut):
    batch = [{"role": "user", "content": "go"},
             {"role": "assistant", "content": None, "tool_calls": [_call("A"), _call("B")]},
             {"role": "tool", "tool_call_id": "A", "content": "a done"},
             {"role": "system", "content": "approved"},
             {"role": "tool", "tool_call_id": "B", "content": "b done"},
             {"role": "assistant", "content": "done"}]
    path = tmp_path / "batch.json"
    path.write_bytes(orjson.dumps(batch))
    assert run("append", "s", "--messages", str(path)).exit_code == 0
    res = run("context", "s", "--max-messages", str(len(batch) - cut), "--json")
    assert res.exit_code == 0, res.stderr
    openai_shape(res.json()["messages"])


def _rows(home: Path, sid: str) -> list[tuple]:
    db = home / ".store" / "history.db"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT seq, send_at, role, content, message, gone FROM messages "
                            "WHERE session_id = ? ORDER BY seq", (sid,)).fetchall()


@pytest.mark.parametrize("fmt,source", [("claude-code", CLAUDE), ("codex", CODEX)])
def test_an_import_after_every_record_ends_as_one_import(run, home, tmp_path, monkeypatch,
                                                         fmt, source):
    """Exactly once while the file is written: an import after each record (the writer
    still at it), then one when the turn ended, leave what one import of the whole does."""
    lines = source.read_bytes().splitlines(keepends=True)
    other = tmp_path / "one-shot"
    monkeypatch.setenv("AGENVOY_HOME", str(other))
    sid = imported(run, fmt, source)
    want = _rows(other, sid)
    monkeypatch.setenv("AGENVOY_HOME", str(home))
    path = tmp_path / "p" / source.parent.name / source.name
    path.parent.mkdir(parents=True)
    for done in range(1, len(lines) + 1):
        path.write_bytes(b"".join(lines[:done]))
        res = run("import", fmt, str(path), "--json")
        assert res.exit_code == 0, res.stderr
        assert all(r[4] in {w[4] for w in want} for r in _rows(home, sid)), done  # never a part
    assert imported(run, fmt, path) == sid
    assert _rows(home, sid) == want
