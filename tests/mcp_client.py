"""Talk to `agenvoy mcp` the way an agent host does: the official SDK's stdio client.

Shared by the MCP tests (tests/test_mcp*.py and the notes tests) and bench/mcp.py. Every wait
is bounded by the caller's anyio.fail_after (run_async: BOUND unless told); the server is a
real subprocess on a real home.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
BOUND = 90  # seconds: a whole test, model load included, on a busy 2-core machine


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment (AGENVOY_HOME, TZ) for the server process."""
    keep = {k: v for k, v in os.environ.items()
            if k.startswith(("AGENVOY_", "OMP_", "PYTHON")) or k in ("TZ", "HOME", "PATH")}
    return {**keep, **(extra or {})}


@asynccontextmanager
async def connect(*args: str, env: dict[str, str] | None = None,
                  errlog: Any = None) -> AsyncIterator[Any]:
    """An initialized ClientSession on `python -m agenvoy_cli mcp ARGS`."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "agenvoy_cli", "mcp", *args],
                                   env=server_env(env), cwd=str(ROOT))
    async with stdio_client(params, errlog=errlog or sys.stderr) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


class RawServer:
    """The server over bare pipes (newline-delimited JSON-RPC), to watch how it exits."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agenvoy_cli", "mcp", *args], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=server_env(env), cwd=ROOT)
        self.next_id = 0

    def send(self, method: str, params: dict[str, Any] | None = None, *,
             notify: bool = False) -> int | None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        if not notify:
            self.next_id += 1
            msg["id"] = self.next_id
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()
        return None if notify else self.next_id

    def receive(self, want_id: int) -> dict[str, Any]:
        """The response to request want_id (notifications in between are skipped). The
        caller bounds the wait (a watchdog kills the process)."""
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise EOFError("the server closed its stdout")
            msg = json.loads(line)
            if msg.get("id") == want_id:
                return msg

    def initialize(self) -> dict[str, Any]:
        rid = self.send("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "clientInfo": {"name": "raw-test", "version": "0"}})
        assert rid is not None
        reply = self.receive(rid)
        self.send("notifications/initialized", notify=True)
        return reply

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        rid = self.send("tools/call", {"name": name, "arguments": arguments})
        assert rid is not None
        return self.receive(rid)


class HttpServer:
    """`agenvoy mcp --http 127.0.0.1:0` as a subprocess: its URL and token are read from the
    announcement it writes in the home. Use as a context manager (killed on exit)."""

    def __init__(self, home: Path, *args: str, env: dict[str, str] | None = None,
                 bound: float = 60) -> None:
        self.home = home
        self.log = home.parent / f"http-server-{os.getpid()}-{id(self)}.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agenvoy_cli", "mcp", "--http", "127.0.0.1:0",
             "--log-file", str(self.log), *args], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=server_env({"AGENVOY_HOME": str(home), **(env or {})}), cwd=ROOT)
        announce = home / ".store" / "http.json"
        import time

        deadline = time.monotonic() + bound
        while True:
            if announce.exists():
                try:
                    info = json.loads(announce.read_text())
                    if info.get("pid") == self.proc.pid:
                        break
                except ValueError:
                    pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the HTTP server did not start: {self.logged()}")
            time.sleep(0.05)
        self.url = info["url"] + "/mcp"
        self.base = info["url"]
        given = (env or {}).get("AGENVOY_HTTP_TOKEN")
        if not given and "--token-file" in args:
            given = Path(args[args.index("--token-file") + 1]).read_text().strip()
        self.token = given or (home / ".store" / "http-token").read_text().strip()

    def logged(self) -> str:
        try:
            return self.log.read_text()
        except OSError:
            return ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def __enter__(self) -> HttpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


@asynccontextmanager
async def connect_http(url: str, token: str | None) -> AsyncIterator[Any]:
    """An initialized ClientSession over the SDK's streamable HTTP client."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with create_mcp_http_client(headers=headers) as client, \
            streamable_http_client(url, http_client=client) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


# What both MCP test files (stdio and HTTP) send and check.
TOOLS = {"search_chat_history", "remember_error", "search_error_history", "read_error",
         "list_rag", "search_rag", "search_notes", "read_note", "save_note",
         "append_messages", "get_context"}

TOPICS = [
    ("user", "My cat Mochi hides under the bed whenever the vacuum cleaner starts."),
    ("assistant", "Poor Mochi. Try running the vacuum while she is in another room."),
    ("user", "We decided the database migration runs on Saturday at 02:00."),
    ("assistant", "Saturday 02:00 it is; I will prepare the rollback script."),
    ("user", "The staging server certificate expires on the 14th."),
    ("assistant", "I will renew the staging certificate before the 14th."),
]
FILLER = [("user", f"Filler question number {n} about nothing in particular.") if n % 2 == 0
          else ("assistant", f"Filler answer number {n}, equally uneventful.")
          for n in range(20)]


def run_async(body: Any, bound: float = BOUND) -> Any:
    async def bounded() -> Any:
        with anyio.fail_after(bound):
            return await body()
    return anyio.run(bounded)


def messages(pairs: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"role": r, "content": c} for r, c in pairs]


def db_rows(home: Path, sql: str, args: tuple = ()) -> list[tuple]:
    db = home / ".store" / "history.db"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, args).fetchall()
