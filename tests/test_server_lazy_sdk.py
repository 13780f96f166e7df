"""The background server answers the CLI's route without the MCP SDK (issue #51 item 6: its
import was about two thirds of a start's 1.9 CPU-seconds); /mcp loads it on first use. The
DNS-rebinding rules hold on every route before and after: a foreign Host is refused 421, a
foreign Origin 403, whether the SDK is loaded or not.

Real parts: `agenvoy server start` (a real background process on 127.0.0.1 and the home's
Unix socket), raw HTTP requests, the official SDK's client session over /mcp. Whether the
SDK is loaded is seen from outside: pydantic_core (the SDK's schemas; nothing else on a
start needs it) is a shared library, so /proc/PID/maps lists it once it is imported; and
from the server's own ping document (`mcp_loaded`)."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import urllib.parse
from pathlib import Path

import orjson
import pytest

from tests.conftest import agenvoy
from tests.mcp_client import connect_http, run_async, text_of

pytest.importorskip("mcp")

START = 300  # seconds a start may take on a busy CI machine


@contextlib.contextmanager
def started(home: Path):
    """`agenvoy server start`: (base URL, token, pid); stopped (killed if need be) after."""
    try:
        run = agenvoy("server", "start", "--json", timeout=START)
        assert run.returncode == 0, run.stderr
        doc = orjson.loads(run.stdout)
        token = (home / ".store" / "http-token").read_text().strip()
        yield doc["url"], token, doc["pid"]
    finally:
        agenvoy("server", "stop", timeout=120)
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((home / ".store" / "server.pid").read_text()), signal.SIGKILL)


def request(base: str, method: str, path: str, body: bytes | None, token: str,
            headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    url = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        head = {"Content-Type": "application/json", "Authorization": f"Bearer {token}",
                "Accept": "application/json, text/event-stream", **(headers or {})}
        conn.request(method, path, body, head)
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        conn.close()


def sdk_in_maps(pid: int) -> bool:
    return "pydantic_core" in Path(f"/proc/{pid}/maps").read_text()


def mcp_loaded(base: str, token: str) -> bool:
    status, body = request(base, "GET", "/agenvoy/v1/ping", None, token)
    assert status == 200, body
    return orjson.loads(body)["mcp_loaded"]  # type: ignore[no-any-return]


INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "host-test", "version": "0"}}}).encode()
CALL = json.dumps({"method": "search", "args": ["s", "migration"],
                   "kwargs": {"mode": "keyword"}}).encode()


def refusals(base: str, token: str) -> None:
    """A foreign Host (421) or Origin (403) on the CLI's route, its ping and /mcp."""
    port = urllib.parse.urlsplit(base).port
    for method, path, body in (("POST", "/agenvoy/v1/call", CALL),
                               ("GET", "/agenvoy/v1/ping", None), ("POST", "/mcp", INIT)):
        for host in (f"127.0.0.1:{port}@evil.com", "evil.example", f"localhost:{port}.x"):
            status = request(base, method, path, body, token, {"Host": host})[0]
            assert status == 421, (path, host, status)
        for origin in ("http://evil.example", f"http://localhost:{port}.evil.com", "null"):
            status = request(base, method, path, body, token,
                             {"Host": f"127.0.0.1:{port}", "Origin": origin})[0]
            assert status == 403, (path, origin, status)


def _seed(home: Path) -> None:
    msgs = [{"role": "user", "content": "the database migration failed on Friday night"},
            {"role": "assistant", "content": "we rolled the migration back and retried"}]
    assert agenvoy("append", "s", "--messages", "-", input=json.dumps(msgs)).returncode == 0


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc")
def test_server_start_answers_the_cli_without_the_mcp_sdk_until_mcp_is_asked(
        home: Path) -> None:
    _seed(home)
    with started(home) as (base, token, pid):
        assert not sdk_in_maps(pid)
        assert mcp_loaded(base, token) is False
        found = agenvoy("search", "s", "migration", "--mode", "keyword", "--json")
        assert found.returncode == 0, found.stderr
        assert orjson.loads(found.stdout)["served_by"] == "server"
        refusals(base, token)  # refused before the SDK is there, without loading it
        assert not sdk_in_maps(pid) and mcp_loaded(base, token) is False

        async def session() -> None:
            async with connect_http(base + "/mcp", token) as s:
                listed = await s.list_tools()
                assert "search_chat_history" in {t.name for t in listed.tools}
                res = await s.call_tool("search_chat_history", {
                    "session_id": "s", "keyword": "migration", "mode": "keyword"})
                assert not res.is_error and "migration" in text_of(res)
        run_async(session, 180)
        assert sdk_in_maps(pid) and mcp_loaded(base, token) is True
        refusals(base, token)  # and after
        again = agenvoy("search", "s", "migration", "--mode", "keyword", "--json")
        assert orjson.loads(again.stdout)["served_by"] == "server"
