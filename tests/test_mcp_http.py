"""`agenvoy mcp --http`: the streamable HTTP server, driven through the official SDK's client,
and the CLI's fast path through it.

Real parts throughout: a server subprocess on 127.0.0.1 (port 0: the kernel picks one) on a
real home, the default offline embedder, the SDK's streamable-HTTP client, CLI subprocesses.
Every wait is bounded (anyio.fail_after, subprocess timeouts); every server is killed in a
finally (HttpServer's context manager).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import ROOT, agenvoy
from tests.mcp_client import (
    FILLER,
    TOOLS,
    TOPICS,
    HttpServer,
    RawServer,
    connect_http,
    messages,
    text_of,
)
from tests.mcp_client import db_rows as rows
from tests.mcp_client import run_async as _run_async

pytest.importorskip("mcp")

BOUND = 120  # seconds: a whole test, model load included, on a busy 2-core machine


def run_async(body: Any, bound: float = BOUND) -> Any:
    return _run_async(body, bound)


def seed(home: Path, session: str = "main") -> None:
    path = home.parent / "seed.json"
    path.write_text(json.dumps(messages(TOPICS + FILLER)))
    assert agenvoy("append", session, "--messages", str(path),
                   env={"AGENVOY_HOME": str(home)}).returncode == 0


def post(base: str, path: str, body: bytes, token: str | None,
         headers: dict[str, str] | None = None,
         got: dict[str, str] | None = None) -> tuple[int, bytes]:
    """(status, body) of a POST; the reply's headers into `got` when given."""
    url = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        head = {"Content-Type": "application/json",
                "Accept": "application/json, text/event-stream", **(headers or {})}
        if token is not None:
            head["Authorization"] = f"Bearer {token}"
        conn.request("POST", path, body, head)
        reply = conn.getresponse()
        if got is not None:
            got.update((k.lower(), v) for k, v in reply.getheaders())
        return reply.status, reply.read()
    finally:
        conn.close()


def test_tools_append_search_context_over_http(home: Path) -> None:
    with HttpServer(home) as srv:
        async def body() -> None:
            async with connect_http(srv.url, srv.token) as s:
                listed = await s.list_tools()
                assert {t.name for t in listed.tools} == TOOLS
                res = await s.call_tool("append_messages", {
                    "session_id": "main", "messages": messages(TOPICS + FILLER)})
                assert not res.is_error, text_of(res)
                assert res.structured_content["appended"] == len(TOPICS + FILLER)
                found = await s.call_tool("search_chat_history", {
                    "session_id": "main", "keyword": "Mochi", "mode": "keyword"})
                assert "Mochi" in text_of(found)
                sem = await s.call_tool("search_chat_history", {
                    "session_id": "main", "keyword": "when is the database migration",
                    "mode": "semantic", "time_range": "all", "budget": 60})
                assert not sem.is_error, text_of(sem)
                assert any("migration" in r["content"]
                           for r in sem.structured_content["results"])
                ctx = await s.call_tool("get_context", {"session_id": "main",
                                                        "max_messages": 4})
                got = ctx.structured_content["messages"]
                assert [m["content"].rsplit("\n", 1)[-1] for m in got] == \
                    [c for _, c in FILLER[-4:]]
        run_async(body)
    assert "Bearer" not in srv.logged() and srv.token not in srv.logged()


def test_concurrent_clients_lose_and_duplicate_nothing(home: Path) -> None:
    clients, rounds = 4, 6
    acked: list[str] = []
    with HttpServer(home) as srv:
        async def one(n: int) -> None:
            async with connect_http(srv.url, srv.token) as s:
                for r in range(rounds):
                    texts = [f"client {n} round {r} part {p} marker" for p in range(2)]
                    res = await s.call_tool("append_messages", {
                        "session_id": "shared", "messages": [
                            {"role": "user", "content": texts[0]},
                            {"role": "assistant", "content": texts[1]}]})
                    assert not res.is_error, text_of(res)
                    acked.extend(texts)
                    found = await s.call_tool("search_chat_history", {
                        "session_id": "shared", "keyword": f"client {n} round {r}",
                        "mode": "keyword", "time_range": "all", "limit": 32})
                    assert not found.is_error, text_of(found)
                    assert f"client {n} round {r} part 0" in text_of(found)

        async def body() -> None:
            async with anyio.create_task_group() as tg:
                for n in range(clients):
                    tg.start_soon(one, n)
        run_async(body)
    stored = [c.rsplit("\n", 1)[-1] for (c,) in rows(
        home, "SELECT content FROM messages WHERE session_id = 'shared'")]
    assert sorted(stored) == sorted(acked)  # 0 lost, 0 duplicated
    assert len(acked) == clients * rounds * 2
    doctor = agenvoy("doctor")
    assert doctor.returncode == 0, doctor.stderr


def test_missing_or_wrong_token_is_refused_and_changes_nothing(home: Path) -> None:
    seed(home)
    before = rows(home, "SELECT count(*) FROM messages")
    history = home / "sessions" / "main" / "history.json"
    stat = history.stat()
    call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "append_messages", "arguments": {"session_id": "main", "messages": [
            {"role": "user", "content": "must not land"}]}}}).encode()
    fast = json.dumps({"method": "search", "args": ["main", "Mochi"],
                       "kwargs": {"mode": "keyword"}}).encode()
    with HttpServer(home) as srv:
        for token in (None, "wrong-token-of-some-length", srv.token + "x"):
            assert post(srv.base, "/mcp", call, token)[0] == 401
            assert post(srv.base, "/agenvoy/v1/call", fast, token)[0] == 401

        async def body() -> None:
            with pytest.raises(Exception):  # noqa: B017 - the SDK's error for a 401
                async with connect_http(srv.url, "not-the-token-at-all"):
                    pass
        run_async(body, 60)
        status, data = post(srv.base, "/agenvoy/v1/call", fast, srv.token)
        assert status == 200 and json.loads(data)["ok"]
        assert srv.token not in srv.logged()
    assert rows(home, "SELECT count(*) FROM messages") == before
    assert history.stat().st_mtime_ns == stat.st_mtime_ns


def test_bind_beyond_loopback_needs_an_explicit_token(home: Path, tmp_path: Path) -> None:
    res = agenvoy("mcp", "--http", "0.0.0.0:0", timeout=60)
    assert res.returncode == 2
    assert b"token" in res.stderr and res.stderr.count(b"\n") == 1
    assert not (home / ".store" / "http.json").exists()
    assert agenvoy("mcp", "--http", "nonsense", timeout=60).returncode == 2
    short = tmp_path / "short-token"
    short.write_text("abc\n")
    assert agenvoy("mcp", "--http", "0", "--token-file", str(short),
                   timeout=60).returncode == 2


def test_a_refused_start_writes_nothing(home: Path, tmp_path: Path) -> None:
    """Every start refused with exit 2 leaves the home as it was: not created when missing,
    no token file made, no log file, no announcement."""
    from tests.helpers.home import snapshot

    short = tmp_path / "short-token"
    short.write_text("abc\n")
    log = tmp_path / "server.log"
    refused = [(["0.0.0.0:0"], {}), (["0.0.0.0:0", "--log-file", str(log)], {}),
               (["nonsense"], {}), (["0", "--token-file", str(short)], {}),
               (["0", "--token-file", str(tmp_path / "missing")], {}),
               (["0"], {"AGENVOY_HTTP_TIMEOUT": "soon"}),
               (["[::1]:0"], {"AGENVOY_HTTP_TOKEN": "x"}),
               (["0", "--allow-host", "evil.com:*"], {}),
               (["0", "--allow-host", "https://memory.example.org"], {}),
               (["0", "--allow-host", "a.org/path"], {})]
    for created in (False, True):
        if created:
            seed(home)
        before = snapshot(home) if created else None
        for args, env in refused:
            res = agenvoy("mcp", "--http", *args, env=env, timeout=60)
            assert res.returncode == 2, (args, res.stderr)
            assert res.stderr.count(b"\n") == 1, res.stderr
            if created:
                assert snapshot(home) == before, (args, res.stderr)
            else:
                assert not home.exists(), (args, sorted(home.rglob("*")))
        assert not log.exists()


def test_token_file_is_owner_only_and_second_server_refused(home: Path) -> None:
    with HttpServer(home) as srv:
        token_file = home / ".store" / "http-token"
        assert token_file.stat().st_mode & 0o777 == 0o600
        assert (home / ".store" / "http.json").stat().st_mode & 0o777 == 0o600
        second = agenvoy("mcp", "--http", "127.0.0.1:0", timeout=60)
        assert second.returncode == 75, second.stderr
        assert str(srv.proc.pid).encode() in second.stderr
        assert srv.proc.poll() is None


def test_oversized_body_is_refused(home: Path) -> None:
    with HttpServer(home) as srv:
        big = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "' + \
            b"x" * (9 * 1024 * 1024) + b'"}'
        assert post(srv.base, "/mcp", big, srv.token)[0] == 413
        fast = b'{"method": "search", "args": ["main", "' + b"y" * 300_000 + b'"]}'
        assert post(srv.base, "/agenvoy/v1/call", fast, srv.token)[0] == 413
        assert post(srv.base, "/mcp", b"{}", srv.token,
                    {"Host": "evil.example:80"})[0] == 421  # DNS rebinding
        assert srv.proc.poll() is None


INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "host-test", "version": "0"}}}).encode()


def test_host_and_origin_match_exactly(home: Path) -> None:
    """DNS rebinding: the SDK matched `name:*` patterns by prefix, so `Host:
    127.0.0.1:PORT@evil.com` and `Origin: http://localhost:x.evil.com` passed and were
    served. Host is `name:PORT` exactly (or a name --allow-host gave), Origin that URL."""
    with HttpServer(home, "--allow-host", "memory.example.org") as srv:
        port = urllib.parse.urlsplit(srv.base).port
        good = [{"Host": f"127.0.0.1:{port}"}, {"Host": f"localhost:{port}"},
                {"Host": f"[::1]:{port}"}, {"Host": "memory.example.org"},
                {"Host": f"memory.example.org:{port}"},
                {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"},
                {"Host": f"localhost:{port}", "Origin": f"http://127.0.0.1:{port}"},
                {"Host": "memory.example.org", "Origin": "https://memory.example.org"}]
        bad_host = [f"127.0.0.1:{port}@evil.com", f"localhost:{port}.evil.com",
                    f"127.0.0.1:{port + 1}", "127.0.0.1", "localhost:", "evil.com",
                    "memory.example.org.evil.com", f"memory.example.org:{port}@evil.com",
                    f"LOCALHOST:{port}x"]
        bad_origin = ["http://localhost:x.evil.com", f"http://localhost:{port}.evil.com",
                      f"http://127.0.0.1:{port}@evil.com", "http://localhost:1",
                      "https://memory.example.org.evil.com", "http://evil.com", "null"]
        for path, body in (("/mcp", INIT), ("/agenvoy/v1/call", b"{}")):
            for headers in good:
                status = post(srv.base, path, body, srv.token, headers)[0]
                assert status not in (403, 421), (path, headers, status)
            for host in bad_host:
                status = post(srv.base, path, body, srv.token, {"Host": host})[0]
                assert status == 421, (path, host, status)
            for origin in bad_origin:
                status = post(srv.base, path, body, srv.token,
                              {"Host": f"127.0.0.1:{port}", "Origin": origin})[0]
                assert status == 403, (path, origin, status)
        assert srv.proc.poll() is None


def test_a_json_rpc_batch_is_refused_and_changes_nothing(home: Path) -> None:
    """The transport takes one JSON-RPC message per request (the batch limit is 1): a batch
    of tool calls gets 400 and a JSON-RPC error, and none of its calls runs."""
    seed(home)
    before = rows(home, "SELECT count(*) FROM messages")
    history = home / "sessions" / "main" / "history.json"
    stat = history.stat()

    def call(rid: int, text: str) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
            "name": "append_messages", "arguments": {"session_id": "main", "messages": [
                {"role": "user", "content": text}]}}}
    with HttpServer(home) as srv:
        got: dict[str, str] = {}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "batch-test", "version": "0"}}}
        assert post(srv.base, "/mcp", json.dumps(init).encode(), srv.token, got=got)[0] == 200
        session = {"mcp-session-id": got["mcp-session-id"],
                   "mcp-protocol-version": "2025-06-18"}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert post(srv.base, "/mcp", json.dumps(note).encode(), srv.token, session)[0] == 202
        batch = json.dumps([call(2, "batched one"), call(3, "batched two")]).encode()
        status, data = post(srv.base, "/mcp", batch, srv.token, session)
        assert status == 400 and json.loads(data)["error"]["code"] < 0
        assert rows(home, "SELECT count(*) FROM messages") == before
        assert history.stat().st_mtime_ns == stat.st_mtime_ns
        # the same session still works: it was the batch that was refused
        one = json.dumps(call(4, "one at a time")).encode()
        assert post(srv.base, "/mcp", one, srv.token, session)[0] == 200
        assert srv.proc.poll() is None
    assert rows(home, "SELECT count(*) FROM messages")[0][0] == before[0][0] + 1


def test_a_tool_call_over_the_time_limit_answers_an_error_and_the_server_goes_on(
        home: Path, tmp_path: Path) -> None:
    """AGENVOY_HTTP_TIMEOUT=1 and a search whose query takes 4 s to embed: the caller gets a
    tool error before the work ends (the mark is not there yet); the work finishes in the
    server, which then answers the next call."""
    from tests.words_embedder import SLOW_SPEC, SLOW_WORD

    seed(home)
    mark = tmp_path / "slow-done"
    env = {"AGENVOY_EMBEDDER": SLOW_SPEC, "AGENVOY_HTTP_TIMEOUT": "1",
           "AGENVOY_TEST_SLOW_MARK": str(mark)}
    res = agenvoy("mcp", "--http", "0", env={"AGENVOY_HTTP_TIMEOUT": "soon"}, timeout=60)
    assert res.returncode == 2 and b"AGENVOY_HTTP_TIMEOUT" in res.stderr
    with HttpServer(home, env=env) as srv:
        async def body() -> None:
            async with connect_http(srv.url, srv.token) as s:
                slow = await s.call_tool("search_chat_history", {
                    "session_id": "main", "keyword": f"Mochi {SLOW_WORD}",
                    "mode": "semantic", "time_range": "all", "budget": 0})
                assert slow.is_error and "no answer within 1 s" in text_of(slow)
                assert slow.structured_content["error"]["kind"] == "timeout"
                assert not mark.exists()  # answered before the work ended
                while not mark.exists():  # the work goes on (bounded by run_async)
                    await anyio.sleep(0.1)
                while True:  # the rest of the slow search may still hold the store thread
                    after = await s.call_tool("search_chat_history", {
                        "session_id": "main", "keyword": "Mochi", "mode": "keyword"})
                    if not after.is_error:
                        break
                    assert after.structured_content["error"]["kind"] == "timeout"
                assert "Mochi" in text_of(after)
        run_async(body)
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(60) == 0, srv.logged()


def test_sigterm_mid_request_exits_cleanly(home: Path) -> None:
    acked: list[str] = []
    with HttpServer(home) as srv:
        async def appender(n: int, s: Any) -> None:
            for r in range(1000):
                text = f"sigterm client {n} message {r}"
                try:
                    res = await s.call_tool("append_messages", {
                        "session_id": "term", "messages": [{"role": "user",
                                                            "content": text}]})
                except Exception:  # noqa: BLE001 - the server went away: stop
                    return
                if res.is_error:
                    return
                acked.append(text)
                if len(acked) == 8:
                    srv.proc.send_signal(signal.SIGTERM)

        async def body() -> None:
            async with connect_http(srv.url, srv.token) as s:
                with anyio.move_on_after(60):
                    async with anyio.create_task_group() as tg:
                        for n in range(4):
                            tg.start_soon(appender, n, s)
        try:
            run_async(body, 90)
        except Exception:  # noqa: BLE001, S110 - the client's session may end with the server
            pass
        assert srv.proc.wait(60) == 0, srv.logged()
    assert len(acked) >= 8
    stored = [c.rsplit("\n", 1)[-1] for (c,) in rows(
        home, "SELECT content FROM messages WHERE session_id = 'term'")]
    assert set(acked) <= set(stored) and len(stored) == len(set(stored))
    assert not (home / ".store" / "http.json").exists()  # announcement removed
    assert "agenvoy: stopped" in srv.logged()
    assert agenvoy("doctor").returncode == 0


def test_stdio_server_leaves_indexing_to_the_http_server(home: Path) -> None:
    with HttpServer(home) as srv:
        raw = RawServer(env={"AGENVOY_HOME": str(home)})
        try:
            raw.initialize()
        finally:
            raw.proc.terminate()
            _, err = raw.proc.communicate(timeout=60)
        assert f"left to the HTTP server (pid {srv.proc.pid}".encode() in err


# ----------------------------------------------------------------------------- the CLI fast path


def cli(*args: str, env: dict[str, str] | None = None, importtime: bool = False
        ) -> subprocess.CompletedProcess:
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *flags, "-m", "agenvoy_cli", *args],
                          capture_output=True, timeout=180, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def as_local(stdout: bytes) -> str:
    """A served --json document as the local path prints it: only served_by differs."""
    text = stdout.decode()
    assert text.count('"served_by": "server"') == 1, text
    return text.replace('"served_by": "server"', '"served_by": "local"')


@pytest.fixture(scope="module")
def indexed(module_env: Path) -> Path:
    """The seeded home, all indexed (made once; each test takes a copy): a document states
    how much was (unindexed_count), and the server's background indexer would otherwise
    change that between two runs."""
    home = module_env / "indexed"
    seed(home)
    assert cli("search", "main", "x", "--mode", "semantic", "--budget", "60",
               env={"AGENVOY_HOME": str(home)}).returncode == 0
    return home


@pytest.mark.parametrize("mode", ["semantic", "hybrid", "keyword"])
def test_cli_search_through_the_server_prints_the_local_document(home: Path, indexed: Path,
                                                                  mode: str) -> None:
    import shutil

    shutil.copytree(indexed, home, symlinks=True)
    query = ["-q", "when is the database migration", "--mode", mode, "--json"]
    with HttpServer(home):
        served = cli("search", "main", *query, importtime=True)
        local = cli("search", "main", *query, "--no-server")
        forced = cli("search", "main", *query, env={"AGENVOY_NO_SERVER": "1"},
                     importtime=True)
    assert served.returncode == local.returncode == forced.returncode == 0, served.stderr
    assert as_local(served.stdout) == local.stdout.decode() == forced.stdout.decode()
    assert json.loads(local.stdout)["served_by"] == "local"
    assert json.loads(served.stdout)["results"]
    imported = [ln for ln in served.stderr.decode().splitlines() if "import time:" in ln]
    assert imported and not any("chromadb" in ln or "onnxruntime" in ln for ln in imported)
    if mode != "keyword":  # proof that the forced one really ran locally
        assert "chromadb" in forced.stderr.decode()


def _served_without_a_token(home: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "AGENVOY_HTTP_TOKEN"}
    return subprocess.run([sys.executable, "-m", "agenvoy_cli", "--home", str(home), "search",
                           "main", "-q", "Mochi vacuum", "--mode", "keyword", "--json"],
                          capture_output=True, timeout=180, cwd=ROOT, env=env)


@pytest.mark.parametrize("deployment", ["home token", "token file", "token in env",
                                        "deep home"])
def test_cli_search_goes_through_the_server_in_every_deployment(
        home: Path, tmp_path: Path, deployment: str) -> None:
    """The fast path whichever token the server was given: with --token-file (required
    beyond loopback) every CLI search said "no token for the running HTTP server; searching
    locally". The CLI asks on the home's socket (owner-only), which needs no token; the
    announcement names no token."""
    if deployment == "deep home":
        home = tmp_path / ("d" * 60) / ("e" * 60) / "home"  # socket path > 107 bytes
        home.parent.mkdir(parents=True)
    seed(home)
    secret = "s3cret-token-" + "x" * 30
    token_file = tmp_path / "token"
    token_file.write_text(secret + "\n")
    args = ["--token-file", str(token_file)] if deployment == "token file" else []
    env = {"AGENVOY_HTTP_TOKEN": secret} if deployment == "token in env" else {}
    with HttpServer(home, *args, env=env) as srv:
        res = _served_without_a_token(home)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["served_by"] == "server", res.stderr
        assert b"locally" not in res.stderr, res.stderr
        sock = home / ".store" / "run" / "http.sock"
        assert sock.stat().st_mode & 0o777 == 0o600
        assert sock.parent.stat().st_mode & 0o777 == 0o700
        announced = json.loads((home / ".store" / "http.json").read_text())
        assert announced["socket"] == str(sock) and "token" not in announced
        assert secret not in (home / ".store" / "http.json").read_text()
        if deployment == "token file":  # no socket (removed): TCP with the file it names
            assert announced["token_file"] == str(token_file)
            sock.unlink()
            res = _served_without_a_token(home)
            assert json.loads(res.stdout)["served_by"] == "server", res.stderr
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(60) == 0, srv.logged()
    assert not sock.exists()  # removed on a clean stop (killed: the next start replaces it)


def test_the_socket_serves_only_the_cli_routes(home: Path) -> None:
    import socket

    seed(home)
    with HttpServer(home) as srv:
        port = urllib.parse.urlsplit(srv.base).port

        def ask(request: bytes) -> bytes:
            with socket.socket(socket.AF_UNIX) as conn:
                conn.settimeout(30)
                conn.connect(str(home / ".store" / "run" / "http.sock"))
                conn.sendall(request)
                out = b""
                while chunk := conn.recv(65536):
                    out += chunk
                return out
        head = f"Host: 127.0.0.1:{port}\r\nConnection: close\r\n"
        assert ask(f"GET /agenvoy/v1/ping HTTP/1.1\r\n{head}\r\n".encode()).startswith(
            b"HTTP/1.1 200")
        mcp = (f"POST /mcp HTTP/1.1\r\n{head}Content-Type: application/json\r\n"
               f"Content-Length: {len(INIT)}\r\n\r\n").encode() + INIT
        assert ask(mcp).startswith(b"HTTP/1.1 404")
        evil = head.replace(f"127.0.0.1:{port}", f"127.0.0.1:{port}@evil.com")
        assert ask(f"GET /agenvoy/v1/ping HTTP/1.1\r\n{evil}\r\n".encode()).startswith(
            b"HTTP/1.1 421")
        assert post(srv.base, "/agenvoy/v1/call", b"{}", None)[0] == 401  # TCP: the token


def test_cli_errors_lookup_and_rag_search_through_the_server(home: Path) -> None:
    assert agenvoy("errors", "record", "--tool", "fetch_page", "--keyword", "timeout",
                   "--symptom", "fetch_page timed out after 30s", "--action",
                   "retried with a longer timeout", "--outcome", "resolved").returncode == 0
    with HttpServer(home):
        served = cli("errors", "lookup", "fetch_page timeout", "--json")
        local = cli("errors", "lookup", "fetch_page timeout", "--json", "--no-server")
        rag_served = cli("rag", "search", "--all", "anything", "--json")
        rag_local = cli("rag", "search", "--all", "anything", "--json", "--no-server")
    assert served.returncode == local.returncode == 0, served.stderr

    def steady(doc: dict[str, Any]) -> dict[str, Any]:  # a lookup renews: times and hits move
        moving = ("expires_at", "last_hit_at", "hit_count")
        return {**doc, "records": [{k: v for k, v in r.items() if not k.startswith(moving)}
                                   for r in doc["records"]]}
    assert steady(json.loads(as_local(served.stdout))) == steady(json.loads(local.stdout))
    assert json.loads(served.stdout)["records"][0]["hit_count"] == 1  # renewed once
    assert json.loads(local.stdout)["records"][0]["hit_count"] == 2  # ... and once more
    assert rag_served.returncode == rag_local.returncode
    assert as_local(rag_served.stdout) == rag_local.stdout.decode()
    assert rag_served.stderr == rag_local.stderr


def test_cli_errors_come_back_as_the_local_ones(home: Path) -> None:
    seed(home)
    with HttpServer(home):
        served = cli("search", "nosuch", "Mochi", "--json")
        local = cli("search", "nosuch", "Mochi", "--json", "--no-server")
    assert served.returncode == local.returncode == 3
    assert served.stderr == local.stderr and served.stdout == local.stdout


def test_cli_goes_local_when_the_server_was_killed(home: Path) -> None:
    seed(home)
    query = ["-q", "Mochi vacuum", "--mode", "semantic", "--json"]
    assert cli("search", "main", "x", "--mode", "semantic", "--budget", "60").returncode == 0
    with HttpServer(home) as srv:
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait(30)
        after = cli("search", "main", *query)
    local = cli("search", "main", *query, "--no-server")
    assert after.returncode == 0, after.stderr
    assert after.stdout == local.stdout
    notes = [ln for ln in after.stderr.decode().splitlines() if "locally" in ln]
    assert len(notes) == 1 and str(srv.proc.pid) in notes[0]


def test_cli_module_for_the_fast_path_imports_nothing_heavy() -> None:
    code = ("import sys; import agenvoy_cli.cli, agenvoy_cli.commands.search, "
            "agenvoy_cli.commands.common, agenvoy_cli.server.fastpath; "
            "heavy = [m for m in ('chromadb', 'onnxruntime', 'numpy', 'mcp', 'uvicorn') "
            "if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60,
                         cwd=ROOT)
    assert res.returncode == 0, res.stdout + res.stderr


def test_announced_server_that_does_not_answer_is_skipped(home: Path) -> None:
    """A live pid whose port answers nothing (a hung server): one note, the local path."""
    import socket

    seed(home)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(0)  # accepts into the backlog, never answers
    try:
        announce = home / ".store" / "http.json"
        announce.write_text(json.dumps({"url": f"http://127.0.0.1:{sock.getsockname()[1]}",
                                        "pid": os.getpid(), "home": str(home)}))
        (home / ".store" / "http-token").write_text("t" * 40)
        res = cli("search", "main", "-q", "Mochi", "--mode", "keyword", "--json")
    finally:
        sock.close()
    assert res.returncode == 0
    assert json.loads(res.stdout)["results"]
    assert [ln for ln in res.stderr.decode().splitlines() if "locally" in ln]


def test_an_accepted_connection_sends_without_waiting_for_the_peers_ack() -> None:
    """The listening socket says IPPROTO_TCP, so asyncio (which uvicorn serves on) turns on
    TCP_NODELAY for each accepted connection; without it every reply on a kept-alive
    connection waited ~40 ms for the client's delayed ACK."""
    import asyncio
    import socket

    from agenvoy_cli.server.http_server import _listen

    sock = _listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    seen: list[int] = []

    async def main() -> None:
        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            conn = writer.get_extra_info("socket")
            seen.append(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accepted, sock=sock)
        async with server:
            _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.05)
            writer.close()

    asyncio.run(main())
    assert seen and seen[0] != 0
