"""`agenvoy mcp --tools agenvoy|both`: Agenvoy v0.32's chat_history and error_history, through
the official SDK's clients (stdio and streamable HTTP) on a real server process, bounded in
time. Upstream's schemas are written here from agenvoy/Agenvoy v0.32.7
internal/tools/history/action/chatHistory.go and internal/tools/history/error/errorHistory.go.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import agenvoy
from tests.helpers.schemas import validate
from tests.mcp_client import BOUND, TOOLS, HttpServer, connect, connect_http, run_async, text_of

pytest.importorskip("mcp")

CHAT = {"mode": ("string", ["list", "read", "search"], "list"),
        "task_id": ("string", None, None),
        "keyword": ("string", None, None),
        "match": ("string", ["semantic", "keyword"], "semantic"),
        "time_range": ("string", ["1d", "1m", "1y", "7d"], "1d"),
        "limit": ("integer", None, 10)}
ERROR = {"mode": ("string", ["search", "read", "write"], "search"),
         "keyword": ("string", None, None),
         "limit": ("integer", None, 4),
         "hash": ("string", None, None),
         "tool_name": ("string", None, None),
         "keywords": ("array", None, None),
         "symptom": ("string", None, None),
         "cause": ("string", None, ""),
         "action": ("string", None, None),
         "outcome": ("string", ["resolved", "failed", "abandoned"], None)}
TASK = "0b6f3c1e-5d2a-4f7e-9c1a-2b3c4d5e6f70"


def shape(schema: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    return {k: (v["type"], v.get("enum"), v.get("default")) for k, v in
            schema["properties"].items()}


def action_log(home: Path, sid: str = "s") -> Path:
    """A finished run as Agenvoy v0.32 leaves it: pending/<task>.json (pendingMeta) moved to
    history/<YYYY-MM-DD-HH-MM>-<task>.json (askUser.go CleanupPending)."""
    folder = home / "sessions" / sid / "history"
    folder.mkdir(parents=True)
    meta = {"task_hash": TASK, "session_id": sid, "model": "openai@gpt-5",
            "objective": "find why the deploy failed", "completed": ["read the log"],
            "answer": [{"question": "which env?", "answer": "staging"}],
            "tool_results": [{"name": "read_file", "id": "c1", "result": "exit 137"},
                             {"name": "run_command", "id": "c2", "result": "OOM"}],
            "todos": [{"content": "raise the limit", "status": "pending"}],
            "reply": "the container ran out of memory"}
    (folder / f"2026-01-05-12-00-{TASK}.json").write_text(json.dumps(meta))
    (folder / "2026-01-04-09-30-older.json").write_text(json.dumps({"objective": "a<b & c"}))
    (folder / "2026-01-06-10-00-broken.json").write_text("{not json")
    (folder / "notes.txt").write_text("not a task")
    return folder


def error_count(home: Path) -> int:
    db = home / ".store" / "history.db"
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM error_records").fetchone()[0]


def test_vocabularies_and_upstreams_schemas() -> None:
    async def body() -> dict[str, Any]:
        out = {}
        for which in ("spec", "agenvoy", "both"):
            async with connect("--session", "s", "--tools", which) as s:
                out[which] = {t.name: t for t in (await s.list_tools()).tools}
        async with connect("--tools", "agenvoy") as s:  # not bound: session_id required
            out["unbound"] = {t.name: t for t in (await s.list_tools()).tools}
        return out

    out = run_async(body)
    assert set(out["spec"]) == TOOLS  # the default is unchanged
    current = {"chat_history", "error_history", "find_knowledge"}
    spec_memory = {"search_chat_history", "remember_error", "search_error_history", "read_error",
                   "search_notes", "read_note"}
    assert set(out["agenvoy"]) == (TOOLS - spec_memory) | current
    assert set(out["both"]) == TOOLS | current
    for tools in (out["agenvoy"], out["both"]):  # bound: upstream's schema exactly
        chat, error = tools["chat_history"].input_schema, tools["error_history"].input_schema
        assert shape(chat) == CHAT and shape(error) == ERROR
        assert "required" not in chat and "required" not in error
        assert error["properties"]["keywords"]["items"] == {"type": "string"}
    unbound = out["unbound"]["chat_history"].input_schema
    assert unbound["required"] == ["session_id"] and set(unbound["properties"]) == \
        {*CHAT, "session_id"}
    assert "session_id" not in out["unbound"]["error_history"].input_schema["properties"]


def test_bad_tools_option_is_usage_error() -> None:
    res = agenvoy("mcp", "--tools", "v9", timeout=60)
    assert res.returncode == 2 and b"--tools" in res.stderr


def test_chat_history_list_and_read_the_action_log(home: Path) -> None:
    res = agenvoy("append", "s", "--role", "user", "--content", "the deploy failed")
    assert res.returncode == 0, res.stderr
    async def no_log() -> Any:
        async with connect("--session", "s", "--tools", "agenvoy") as s:
            return await s.call_tool("chat_history", {})

    missing = run_async(no_log)  # this tool's appends write no action log
    assert missing.is_error and "no action log" in text_of(missing)
    assert missing.structured_content["error"]["kind"] == "not_found"
    action_log(home)

    async def body() -> dict[str, Any]:
        async with connect("--session", "s", "--tools", "agenvoy") as s:
            return {"list": await s.call_tool("chat_history", {"mode": "list"}),
                    "one": await s.call_tool("chat_history", {"limit": 1}),
                    "read": await s.call_tool("chat_history", {"task_id": TASK}),
                    "gone": await s.call_tool("chat_history", {"mode": "read",
                                                               "task_id": "nope"}),
                    "no_id": await s.call_tool("chat_history", {"mode": "read"}),
                    "bad": await s.call_tool("chat_history", {"mode": "peek"})}

    out = run_async(body)
    rows = json.loads(text_of(out["list"]))
    assert [r["task_id"] for r in rows] == ["broken", TASK, "older"]  # newest first
    assert "unreadable" in rows[0] and rows[2]["objective"] == "a<b & c"
    assert rows[2]["did"] is None  # toolsUsed's nil slice
    assert '"objective":"a\\u003cb \\u0026 c"' in text_of(out["list"])  # Go's escaping
    assert rows[1] == {"task_id": TASK, "at": "2026-01-05 12:00",
                       "objective": "find why the deploy failed", "model": "openai@gpt-5",
                       "did": ["read_file", "run_command"], "answered_questions": 1,
                       "todos": 1}
    doc = out["list"].structured_content
    assert doc["count"] == 3 and doc["tasks"][1]["tools"] == ["read_file", "run_command"]
    assert [r["task_id"] for r in json.loads(text_of(out["one"]))] == ["broken"]
    text = text_of(out["read"])  # mode omitted + task_id: read
    assert text.startswith(f"task {TASK} — 2026-01-05 12:00 · openai@gpt-5")
    for part in ("\n\nobjective:\nfind why the deploy failed", "\n\ncompleted:\n- read the log",
                 "\n\nasked: which env?\nanswered: staging",
                 "\n\ntodo [pending] raise the limit", "\n\ncalled read_file:\nexit 137",
                 "\n\nreplied:\nthe container ran out of memory"):
        assert part in text
    assert out["read"].structured_content["record"]["reply"].startswith("the container")
    assert out["gone"].is_error and "no finished task with id nope" in text_of(out["gone"])
    assert out["no_id"].is_error and text_of(out["no_id"]) == \
        "task_id is required when mode=read"
    assert out["bad"].is_error and "unknown mode 'peek'" in text_of(out["bad"])


def test_chat_history_search_and_error_history(home: Path) -> None:
    for n in range(40):
        res = agenvoy("append", "s", "--role", "user" if n % 2 else "assistant",
                      "--content", f"redis TTL note {n}", *(["--sender", "bob"] if n == 39
                                                            else []))
        assert res.returncode == 0, res.stderr
    record = {"tool_name": "bash", "keywords": ["permission"], "symptom": "permission denied",
              "action": "used sudo", "outcome": "resolved"}

    async def body() -> dict[str, Any]:
        env = {"AGENVOY_ERRORS_SEMANTIC": "0"}
        async with connect("--tools", "both", env=env) as s:
            out = {"found": await s.call_tool("chat_history", {
                       "session_id": "s", "keyword": "redis", "match": "keyword",
                       "time_range": "7d", "limit": 100}),
                   "default": await s.call_tool("chat_history", {
                       "session_id": "s", "mode": "search", "keyword": "redis",
                       "match": "keyword"}),
                   "no_kw": await s.call_tool("chat_history", {"session_id": "s",
                                                               "mode": "search"}),
                   "range": await s.call_tool("chat_history", {
                       "session_id": "s", "keyword": "x", "time_range": "all"}),
                   "half": await s.call_tool("error_history", {
                       "tool_name": "bash", "keywords": ["x"], "outcome": "failed"})}
            out["wrote"] = await s.call_tool("error_history", {"mode": "write", **record})
            out["search"] = await s.call_tool("error_history", {"keyword": "permission"})
            rid = out["wrote"].structured_content["records"][0]["id"]
            out["read"] = await s.call_tool("error_history", {"hash": rid[:8]})
            out["spec"] = await s.call_tool("search_error_history", {"keyword": "permission"})
            return out

    out = run_async(body)
    hits = [r for r in out["found"].structured_content["results"] if r["hit"]]
    assert len(hits) == 32  # upstream's cap: min(limit, 32)
    assert text_of(out["found"]).startswith("[")
    newest = next(r for r in hits if r["content"] == "redis TTL note 39")
    assert newest["sender"] == "bob" and " · user · bob] redis TTL note 39" in \
        text_of(out["found"])
    assert {r["sender"] for r in hits} == {"bob", None}
    assert len([r for r in out["default"].structured_content["results"] if r["hit"]]) == 8
    assert out["no_kw"].is_error and text_of(out["no_kw"]) == \
        "keyword is required when mode=search"
    assert out["range"].is_error and "time_range must be one of 1d, 1m, 1y, 7d" in \
        text_of(out["range"])
    assert out["half"].is_error and text_of(out["half"]) == \
        "symptom is required when mode=write"  # outcome given: write, requireRecord's order
    assert not out["wrote"].is_error and text_of(out["wrote"]) == "recorded"
    assert "used sudo" in text_of(out["search"]) and text_of(out["search"]) == \
        text_of(out["spec"])
    assert out["read"].structured_content["symptom"] == "permission denied"
    assert error_count(home) == 1  # the refused write changed nothing
    for key, schema in (("found", "search"), ("search", "errors-lookup"),
                        ("read", "errors-show"), ("wrote", "errors-list")):
        validate(out[key].structured_content, schema)


def test_a_spec_name_is_unknown_in_the_agenvoy_vocabulary_and_http_serves_it(home: Path):
    async def body() -> Any:
        async with connect("--session", "s", "--tools", "agenvoy") as s:
            return await s.call_tool("search_chat_history", {"keyword": "x"})

    res = run_async(body)
    assert res.is_error and "unknown tool 'search_chat_history'" in text_of(res)
    action_log(home)
    with HttpServer(home, "--tools", "agenvoy") as srv:
        async def over_http() -> Any:
            async with connect_http(srv.url, srv.token) as s:
                names = {t.name for t in (await s.list_tools()).tools}
                assert "chat_history" in names and "search_chat_history" not in names
                return await s.call_tool("chat_history", {"session_id": "s"})

        listed = run_async(over_http, 120)
    assert not listed.is_error and listed.structured_content["count"] == 3


@pytest.mark.parametrize("which", ["spec", "agenvoy", "both"])
def test_the_instructions_name_the_tools_served(which: str) -> None:
    import re
    import threading

    from tests.mcp_client import RawServer

    server = RawServer("--session", "s", "--tools", which)
    watchdog = threading.Timer(BOUND, server.proc.kill)
    watchdog.start()
    try:
        text = server.initialize()["result"]["instructions"]
        listed = server.receive(server.send("tools/list", {}) or 0)["result"]["tools"]
    finally:
        watchdog.cancel()
        server.proc.kill()
        server.proc.wait(timeout=30)
    names = {t["name"] for t in listed}
    named = set(re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", text)) - {"time_range", "task_id"}
    assert named <= names, named - names  # no tool the server does not serve
    assert ("chat_history" in named) == (which != "spec")


def test_memory_reads_the_action_log(home: Path) -> None:
    """Memory.action_log, what chat_history mode=list|read ask: None without the folder, the
    runs newest first with their records (or why one cannot be read), by task id."""
    from agenvoy_cli import Memory

    with Memory(home) as memory:
        assert memory.action_log("s") is None
        folder = action_log(home)
        runs = memory.action_log("s")
        assert runs is not None
        assert [r.task_id for r in runs] == ["broken", TASK, "older"]
        assert runs[0].record is None and runs[0].problem is not None
        assert runs[0].problem.startswith(str(folder / "2026-01-06-10-00-broken.json"))
        assert runs[1].record is not None and runs[1].record["model"] == "openai@gpt-5"
        assert [r.task_id for r in memory.action_log("s", limit=2) or []] == ["broken", TASK]
        (one,) = memory.action_log("s", task_id="older") or []
        assert one.record == {"objective": "a<b & c"} and one.at.minute == 30
        assert memory.action_log("s", task_id="nope") == []


# ------------------------------------------------------------- every tool through Memory

HANDLER_MODULES = ("handlers", "agenvoy_tools")
# the server's own store, used by two steps that read no memory: the search budget's setting
# (AGENVOY_SEARCH_BUDGET, as the CLI) and the sync of a history.json Agenvoy wrote before a
# search (server/history_watch.py, which the server's poller runs too)
STORE_USERS = {("handlers", "_budget"), ("handlers", "windowed_search")}
FILE_CALLS = {"open", "read_bytes", "read_text", "write_bytes", "write_text", "iterdir",
              "is_dir", "is_file", "exists", "stat", "glob", "rglob", "scandir", "listdir"}


def _outside_memory(sources: dict[str, str]
                    ) -> tuple[dict[str, list[str]], list[str], set[str]]:
    """For each tool of the modules' TOOLS: what its handler, or a function of these modules
    it calls, reaches other than Memory (a store, a file); the tools that never call
    ctx.memory(); and the tools seen."""
    import ast

    funcs: dict[tuple[str, str], ast.FunctionDef] = {}
    tools: dict[str, tuple[str, str]] = {}
    for module, text in sources.items():
        tree = ast.parse(text)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                funcs[(module, node.name)] = node
            target = node.target if isinstance(node, ast.AnnAssign) else \
                node.targets[0] if isinstance(node, ast.Assign) else None
            if isinstance(target, ast.Name) and target.id == "TOOLS" and \
                    isinstance(node.value, ast.Dict):
                for key, value in zip(node.value.keys, node.value.values):
                    assert isinstance(key, ast.Constant) and isinstance(value, ast.Name)
                    tools[key.value] = (module, value.id)

    def callees(module: str, func: ast.FunctionDef) -> set[tuple[str, str]]:
        out = set()
        for node in ast.walk(func):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Name):
                out.add((module, node.func.id))
            elif isinstance(node.func, ast.Attribute) and \
                    isinstance(node.func.value, ast.Name) and node.func.value.id in sources:
                out.add((node.func.value.id, node.func.attr))
        return out & funcs.keys()

    found: dict[str, list[str]] = {}
    silent = []
    for tool, start in sorted(tools.items()):
        seen, todo = set(), [start]
        while todo:
            key = todo.pop()
            if key not in seen:
                seen.add(key)
                todo.extend(callees(key[0], funcs[key]))
        bad, memory = [], False
        for module, name in sorted(seen):
            for node in ast.walk(funcs[(module, name)]):
                called = node.func if isinstance(node, ast.Call) else None
                attr = called.attr if isinstance(called, ast.Attribute) else \
                    called.id if isinstance(called, ast.Name) else None
                memory = memory or attr == "memory"
                if attr in FILE_CALLS:
                    bad.append(f"{module}.{name} calls {attr}()")
                if isinstance(node, ast.Attribute) and node.attr in ("store", "layout") and \
                        (module, name) not in STORE_USERS:
                    bad.append(f"{module}.{name} uses .{node.attr}")
        if bad:
            found[tool] = bad
        if not memory:
            silent.append(tool)
    return found, silent, set(tools)


def _handler_sources() -> dict[str, str]:
    root = Path(__file__).resolve().parent.parent / "agenvoy_cli" / "server"
    return {m: (root / f"{m}.py").read_text("utf-8") for m in HANDLER_MODULES}


def test_every_mcp_tool_goes_through_memory() -> None:
    """Each tool's handler reaches the home only through Memory (ctx.memory()), as the CLI's
    commands and the HTTP API do: none reads a file or the store's layout itself (#50)."""
    from agenvoy_cli.server import agenvoy_tools, handlers

    found, silent, tools = _outside_memory(_handler_sources())
    assert tools == {*handlers.TOOLS, *agenvoy_tools.TOOLS}  # every tool served, checked
    assert found == {} and silent == []


def test_the_memory_check_sees_a_handler_that_reads_on_its_own() -> None:
    """The check above fails on a handler that lists a folder, or reads the store, itself
    (chat_history's list/read did, before #50), and on one that never asks Memory."""
    sources = _handler_sources()
    sources["agenvoy_tools"] += (
        "\n\ndef _peek(ctx, sid):\n    return list(ctx.store.layout.action_log(sid).iterdir())"
        "\n\n\ndef peek(ctx, raw):\n    return _peek(ctx, raw['session_id'])"
        "\n\n\nTOOLS = {\n    'peek': peek,\n}\n")
    found, silent, _ = _outside_memory(sources)
    assert found == {"peek": ["agenvoy_tools._peek calls iterdir()",
                              "agenvoy_tools._peek uses .layout",
                              "agenvoy_tools._peek uses .store"]}
    assert silent == ["peek"]
