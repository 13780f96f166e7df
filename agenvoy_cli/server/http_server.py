"""`agenvoy mcp --http [HOST:]PORT`: the same tools over the official SDK's streamable HTTP
transport (endpoint /mcp), for any number of hosts at once, plus the CLI's fast path
(server.fastpath.ROUTE). One server per home: its background indexer is the only one.

Safe by default: 127.0.0.1 unless told; every TCP request carries the bearer token (the
home's token file, made at the first start with mode 0600, or --token-file /
AGENVOY_HTTP_TOKEN; never on the command line); a bind beyond loopback needs an explicit
token; Host/Origin matched exactly; request bodies of at most MAX_BODY; each tool call at
most REQUEST_TIMEOUT seconds (or AGENVOY_HTTP_TIMEOUT). The CLI's routes are also served on
the home's owner-only Unix socket, without a token (UnixListener). The CLI's routes are
answered without the MCP SDK: it is imported at the first request to /mcp (LazyMCP), and
Host/Origin are checked on every route before it, by our own exact match (refusal) and
again by the SDK's, once loaded, on /mcp. A refused start writes
nothing. SIGTERM/SIGINT: no new request is accepted, the ones in progress finish (for at
most GRACE seconds), the store is closed, the announcement and the socket removed, exit 0.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import os
import re
import secrets
import signal
import socket
import sys
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import orjson

from agenvoy_cli.errors import AgenvoyError, BadInput, OperationFailed, StoreBusy
from agenvoy_cli.home.files import atomic_write_bytes, atomic_write_json
from agenvoy_cli.home.layout import Layout
from agenvoy_cli.server import fastpath
from agenvoy_cli.settings import Settings

MAX_BODY = 8 * 1024 * 1024  # bytes per request (append_messages of 1000 long messages)
FAST_MAX_BODY = 256 * 1024  # bytes per fast-path request (a query and its options)
REQUEST_TIMEOUT = 300.0  # seconds a tool call may take before its caller gets an error
TIMEOUT_ENV = "AGENVOY_HTTP_TIMEOUT"  # the limit in seconds, instead (tests use ~1 s)
GRACE = 10.0  # seconds requests in progress get to finish on SIGTERM
MIN_TOKEN = 16  # characters a given token must have
_FAST_OPTIONS = {"search": {"mode", "limit", "range", "since", "until", "budget", "match"},
                 "lookup_errors": {"tool", "error_type", "limit", "semantic", "budget"},
                 "rag_search": {"mode", "limit", "match", "range", "since", "until"},
                 "search_notes": {"mode", "limit", "match", "budget", "range", "since",
                                  "until"},
                 "tasks": {"since", "until", "range_", "limit", "full", "mode", "match",
                           "budget"}}
_WARNS = {"lookup_errors", "search_notes", "tasks"}  # methods that take `warn`
_EMBEDS_QUERY = {"search": 1}  # method: the index of the query its search embeds (App)


def parse_bind(text: str) -> tuple[str, int]:
    """'PORT', 'HOST:PORT' or '[IPv6]:PORT' -> (host, port); BadInput otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise BadInput(f"--http: expected [HOST:]PORT, got {text!r}")
    return host, int(port)


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_token(layout: Layout, token_file: str | None, settings: Settings
               ) -> tuple[str | None, bool]:
    """(token, explicit): AGENVOY_HTTP_TOKEN, else --token-file, else the home's token file
    (None when it has none yet: make_token makes it once the start is accepted). Writes
    nothing but the mode of an existing home token made too open."""
    env = (settings.http_token or "").strip()
    if env or token_file:
        if env:
            token, where = env, fastpath.TOKEN_ENV
        else:
            where = f"--token-file {token_file}"
            try:
                with open(token_file, encoding="utf-8") as handle:  # type: ignore[arg-type]
                    token = handle.read().strip()
            except (OSError, UnicodeDecodeError) as exc:
                raise BadInput(f"cannot read {where}: {type(exc).__name__}") from None
        if len(token) < MIN_TOKEN or any(c.isspace() for c in token):
            raise BadInput(f"the token from {where} must be at least {MIN_TOKEN} characters, "
                           "without spaces")
        return token, True
    path = layout.http_token
    try:
        token = path.read_text(encoding="ascii").strip()
        if (path.stat().st_mode & 0o077) and token:
            os.chmod(path, 0o600)  # an owner-only secret, whatever made it readable
    except FileNotFoundError:
        token = ""
    return token or None, False


def make_token(layout: Layout) -> str:
    """The home's token file, made now: 32 random bytes, mode 0600."""
    token = secrets.token_urlsafe(32)
    atomic_write_bytes(layout.http_token, token.encode() + b"\n")  # mode 0600 (home.files)
    return token


class UnixListener(NamedTuple):
    """The fast path's socket in the home (Layout.http_socket)."""

    sock: socket.socket
    name: str  # its getsockname(): uvicorn's scope["server"] is (name, None) on it
    path: Path
    inode: int


def _listen_unix(layout: Layout) -> UnixListener | None:
    """Listen on the home's socket for the CLI's fast path: 0600 in a 0700 folder, so only
    the home's owner connects, and a request there needs no token. None where no socket
    can be made (said on stderr: the CLI then asks over TCP with a token)."""
    try:
        path = layout.http_socket
        os.makedirs(path.parent.parent, mode=0o700, exist_ok=True)
        path.parent.mkdir(mode=0o700, exist_ok=True)
        os.chmod(path.parent, 0o700)
        if os.path.lexists(path):
            path.unlink()  # a killed server's: no live one is announced (checked before)

        def listen(sock: socket.socket, address: str) -> None:
            sock.bind(address)
            os.chmod(path, 0o600)
            sock.listen(128)

        sock = fastpath.unix_socket(str(path), listen)
        return UnixListener(sock, sock.getsockname(), path, os.stat(path).st_ino)
    except (OSError, AgenvoyError) as exc:
        sys.stderr.write(f"agenvoy: note: no socket for the CLI's fast path ({exc}); CLI "
                         "searches on this machine need the token\n")
        return None


class BearerAuth:
    """ASGI: every HTTP request needs `Authorization: Bearer <token>`; else 401, before
    anything else runs (nothing is read or changed). On the home's socket (`local`, its
    name) the CLI's routes need none (only the home's owner can connect) and nothing else
    is served."""

    def __init__(self, app: Any, token: str, local: str | None = None) -> None:
        self.app, self.token, self.local = app, token.encode(), local

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.local is not None and \
                tuple(scope.get("server") or ()) == (self.local, None):
            if scope.get("path") in (fastpath.ROUTE, fastpath.PING):
                await self.app(scope, receive, send)
                return
            body = b'{"error":"only the CLI\'s routes are served on this socket"}'
            await send({"type": "http.response.start", "status": 404, "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            scheme, _, value = given.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(value.strip(),
                                                                      self.token):
                body = b'{"error":"unauthorized: a valid bearer token is required"}'
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b'Bearer realm="agenvoy"'),
                    (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class Allowed(NamedTuple):
    """The Host and Origin values a request may carry (exact matches only)."""

    hosts: frozenset[str]
    origins: frozenset[str]


def allowed_names(host: str, port: int, allowed: list[str]) -> Allowed:
    """Host must be `name:PORT` of this server (127.0.0.1, localhost, [::1] on loopback;
    the bind address otherwise) or a name --allow-host gave (as given, or with this port: a
    TLS reverse proxy forwards its own name), Origin the http(s) URL of one of them."""
    names = {"127.0.0.1", "localhost", "[::1]"} if loopback(host) else {
        f"[{host}]" if ":" in host else host}
    hosts = {f"{name}:{port}" for name in names}
    origins = {f"http://{name}:{port}" for name in names}
    for name in allowed:
        given = {name} if _has_port(name) else {name, f"{name}:{port}"}
        hosts |= given
        origins |= {f"{scheme}://{h}" for h in given for scheme in ("http", "https")}
    return Allowed(frozenset(hosts), frozenset(origins))


def security(host: str, port: int, allowed: list[str]) -> Any:
    """allowed_names as the SDK's DNS-rebinding settings, given exact values only: its
    `name:*` patterns match by prefix (`Host: 127.0.0.1:PORT@evil.com` passed). Imports the
    SDK (its pydantic models)."""
    from mcp.server.transport_security import TransportSecuritySettings

    names = allowed_names(host, port, allowed)
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=sorted(names.hosts),
                                     allowed_origins=sorted(names.origins))


def refusal(allowed: Allowed, headers: list[tuple[bytes, bytes]], json_post: bool
            ) -> tuple[int, bytes] | None:
    """(status, body) refusing a request, or None: the SDK's checks (TransportSecurity-
    Middleware.validate_request, same statuses and texts) without the SDK, for every route:
    a JSON body where one is posted (400), Host exactly allowed (421; DNS rebinding), Origin
    absent or exactly allowed (403)."""
    def first(name: bytes) -> str | None:
        for key, value in headers:
            if key.lower() == name:
                return value.decode("latin-1")
        return None

    if json_post and not (first(b"content-type") or "").lower().startswith(
            "application/json"):
        return 400, b"Invalid Content-Type header"
    if first(b"host") not in allowed.hosts:
        return 421, b"Invalid Host header"
    origin = first(b"origin")
    if origin and origin not in allowed.origins:
        return 403, b"Invalid Origin header"
    return None


_HOST_NAME = re.compile(r"\A(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])"
                        r"(?::[0-9]{1,5})?\Z")


def check_allowed_hosts(names: list[str]) -> list[str]:
    """--allow-host values: a host name or address, an optional :PORT; nothing else (a
    `*` would turn the SDK's prefix matching back on)."""
    for name in names:
        if not _HOST_NAME.match(name):
            raise BadInput(f"--allow-host {name!r}: expected a host name or address, with an "
                           "optional :PORT (no scheme, path or wildcard)")
    return names


def _has_port(name: str) -> bool:
    """'host:8443' or '[::1]:8443' (an IPv6 literal's own colons are inside brackets)."""
    head, sep, tail = name.rpartition(":")
    return bool(sep) and tail.isdigit() and (not head.startswith("[") or head.endswith("]"))


def request_timeout(settings: Settings) -> float:
    """REQUEST_TIMEOUT, or AGENVOY_HTTP_TIMEOUT seconds (BadInput when not a number > 0)."""
    from agenvoy_cli.settings import number_setting

    raw = settings.env.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return REQUEST_TIMEOUT
    return float(number_setting(raw, TIMEOUT_ENV, float, above=0, unit="of seconds"))


def fast_call(app: Any, method: str, args: list[Any], kwargs: dict[str, Any]
              ) -> dict[str, Any]:
    """On the store thread: the Memory method the CLI would run locally, and its warnings."""
    from agenvoy_cli.api import Memory

    warnings: list[str] = []
    if method in _WARNS:
        kwargs = {**kwargs, "warn": warnings.append}
    doc = getattr(Memory(store=app.store, relevance=app.relevance), method)(*args, **kwargs)
    if method == "search" and kwargs.get("mode", "semantic") != "keyword":
        app.indexer.touched(args[0])  # keep the session indexed, as a tool call does
    return {"ok": True, "doc": doc, "warnings": warnings}


async def _respond(send: Any, status: int, body: bytes,
                   kind: bytes = b"application/json") -> None:
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", kind), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Any, limit: int) -> bytes | None:
    """The request's body; None when it passes `limit` bytes or the client left."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        body += message.get("body", b"")
        if len(body) > limit:
            return None
        if not message.get("more_body", False):
            return bytes(body)


def _fast_request(body: bytes) -> tuple[str, list[Any], dict[str, Any]]:
    """(method, args, kwargs) of a fast-path request; ValueError when malformed."""
    try:
        payload = orjson.loads(body)
        method, args, kwargs = payload["method"], payload["args"], payload["kwargs"]
    except (ValueError, KeyError, TypeError):
        raise ValueError("bad fast-path request") from None
    if method not in _FAST_OPTIONS or not isinstance(args, list) or \
            not isinstance(kwargs, dict) or set(kwargs) - _FAST_OPTIONS[method]:
        raise ValueError(method)
    return method, args, kwargs


async def fast_answer(app: Any, method: str, args: list[Any], kwargs: dict[str, Any]
                      ) -> dict[str, Any]:
    """The fast route's answer: the Memory method's document, or the CLI's error."""
    app.calls += 1
    app.idle.clear()
    try:
        with anyio.fail_after(app.timeout):
            if method in _EMBEDS_QUERY and len(args) > _EMBEDS_QUERY[method]:
                await app.embed_query(args[_EMBEDS_QUERY[method]],
                                      kwargs.get("mode", "semantic"))
            answer: dict[str, Any] = await app.thread.run(fast_call, app, method, args, kwargs)
    except AgenvoyError as exc:
        answer = {"ok": False, "exit_code": exc.exit_code, "message": str(exc)}
    except TimeoutError:
        answer = {"ok": False, "exit_code": 1,
                  "message": f"the server took more than {app.timeout:g} s"}
    finally:
        app.calls -= 1
        if not app.calls:
            app.idle.set()
    app.wake.set()
    return answer


class LazyMCP:
    """ASGI for /mcp: the SDK's streamable-HTTP app, built (the SDK imported, off the event
    loop) at the first request there, its session manager run until the server stops. A
    start, and the CLI's route, never pay the SDK's import (~1.2 CPU-seconds of pydantic
    schemas)."""

    def __init__(self, build: Any) -> None:
        self.build = build  # () -> the SDK's Starlette app
        self.web: Any = None
        self.lock: anyio.Lock | None = None
        self.group: Any = None  # the server's task group: the session manager runs in it

    def attach(self, group: Any) -> None:
        self.lock, self.group = anyio.Lock(), group

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.web is None:
            assert self.lock is not None
            async with self.lock:
                if self.web is None:
                    await anyio.to_thread.run_sync(_import_sdk)
                    web = self.build()
                    await self.group.start(self._lifespan, web)
                    self.web = web
        await self.web(scope, receive, send)

    @staticmethod
    async def _lifespan(web: Any, *, task_status: Any) -> None:
        async with web.router.lifespan_context(web):  # the SDK's session manager
            task_status.started()
            await anyio.sleep_forever()


def _import_sdk() -> None:
    import mcp.server.lowlevel  # noqa: F401
    import mcp.server.streamable_http_manager  # noqa: F401


class Routes:
    """ASGI: the CLI's route and ping, answered here without the SDK, and /mcp (LazyMCP).
    Every request's Host and Origin are checked first (refusal), on every route, whether
    the SDK is loaded or not."""

    def __init__(self, app: Any, allowed: Allowed, mcp: LazyMCP) -> None:
        self.app, self.allowed, self.mcp = app, allowed, mcp

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return  # no lifespan (uvicorn runs with lifespan off), no websockets
        path, method = scope.get("path", ""), scope.get("method", "")
        refused = refusal(self.allowed, scope.get("headers") or [],
                          path == fastpath.ROUTE and method == "POST")
        if refused is not None:
            await _respond(send, refused[0], refused[1], b"text/plain; charset=utf-8")
        elif path in ("/mcp", "/mcp/"):
            await self.mcp(scope, receive, send)
        elif path not in (fastpath.ROUTE, fastpath.PING):
            await _respond(send, 404, b'{"error":"not found"}')
        elif method != ("POST" if path == fastpath.ROUTE else "GET"):
            await _respond(send, 405, b'{"error":"method not allowed"}')
        elif path == fastpath.PING:
            await _respond(send, 200, orjson.dumps(
                {"ok": True, "mcp_loaded": "mcp.server.lowlevel" in sys.modules}))
        else:
            await self._call(receive, send)

    async def _call(self, receive: Any, send: Any) -> None:
        body = await _read_body(receive, FAST_MAX_BODY)
        if body is None:
            await _respond(send, 413, orjson.dumps(
                {"ok": False, "exit_code": 2, "message": "request too large"}))
            return
        try:
            method, args, kwargs = _fast_request(body)
        except ValueError:
            await _respond(send, 400, orjson.dumps(
                {"ok": False, "exit_code": 2, "message": "bad fast-path request"}))
            return
        await _respond(send, 200, orjson.dumps(await fast_answer(self.app, method, args,
                                                                 kwargs)))


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto given explicitly: asyncio sets TCP_NODELAY on an accepted connection only when
    # the socket says IPPROTO_TCP; with proto 0 every reply on a kept-alive connection
    # waited ~40 ms for the client's delayed ACK (bench/mcp_http.py part 1)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise OperationFailed(f"cannot listen on {host}:{port}: {exc.strerror or exc}"
                              ) from None
    return sock


def _log_to(path: str) -> None:
    """--log-file: stderr (our lines, uvicorn's, tracebacks) appended to PATH."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", closefd=False)  # noqa: SIM115


def run_http(layout: Layout, bound: str | None, bind: str, token_file: str | None,
             log_file: str | None, allow_hosts: list[str], vocabulary: str = "spec",
             settings: Settings | None = None, idle: float | None = None) -> int:
    """Serve until SIGTERM/SIGINT, or `idle` seconds without a request (`agenvoy server`;
    None: never); 0 after a clean stop (`settings`: the CLI's)."""
    # Every check first (before the SDK and uvicorn are imported: a refusal is quick), and
    # a refused start writes nothing (no home, token or log file).
    settings = settings or Settings.from_environment()
    host, port = parse_bind(bind)
    check_allowed_hosts(allow_hosts)
    timeout = request_timeout(settings)
    token, explicit = load_token(layout, token_file, settings)
    if not loopback(host) and not explicit:
        raise BadInput(f"refusing to listen on {host} (beyond loopback) without an explicit "
                       f"token: give --token-file PATH or {fastpath.TOKEN_ENV}")
    other = fastpath.announced(layout)
    if other is not None and other["pid"] != os.getpid():
        raise StoreBusy(f"an HTTP server already serves this home (pid {other['pid']}, "
                        f"{other['url']})")
    import uvicorn

    from agenvoy_cli.server.app import App, build_app

    sock = _listen(host, port)
    try:
        token = token or make_token(layout)
        if log_file:
            _log_to(log_file)
    except BaseException:
        sock.close()
        raise
    port = sock.getsockname()[1]
    app: App = build_app(layout, bound, vocabulary, settings)
    unix = _listen_unix(layout)
    app.timeout = timeout

    def build_mcp() -> Any:
        return app.server.streamable_http_app(
            streamable_http_path="/mcp", json_response=True,
            transport_security=security(host, port, allow_hosts),
            max_request_body_size=MAX_BODY, host=host)

    mcp = LazyMCP(build_mcp)
    routes = Routes(app, allowed_names(host, port, allow_hosts), mcp)
    activity = Activity(BearerAuth(routes, token, unix.name if unix else None))
    config = uvicorn.Config(activity,
                            log_level="warning", access_log=False,
                            lifespan="off", timeout_graceful_shutdown=int(GRACE),
                            server_header=False)
    server = uvicorn.Server(config)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}"
    announcement: dict[str, Any] = {"url": url, "pid": os.getpid(), "home": str(layout.home)}
    if unix is not None:
        announcement["socket"] = str(unix.path)
    elif explicit and settings.http_token:
        announcement["token"] = token  # no socket, and the CLI cannot read our environment
    if token_file and not (settings.http_token or "").strip():
        announcement["token_file"] = os.path.abspath(token_file)  # where, never the token
    stop_on_signal(server)

    async def serve() -> None:
        from agenvoy_cli.server.worker import index_forever

        async with anyio.create_task_group() as tg:
            mcp.attach(tg)
            tg.start_soon(index_forever, app.thread, app.indexer, app.wake, app.idle)
            if idle:
                tg.start_soon(_stop_when_idle, activity, server, idle)
            await server.serve(sockets=[sock] if unix is None else [sock, unix.sock])
            tg.cancel_scope.cancel()

    try:
        atomic_write_json(layout.http_announce, announcement)
        sys.stderr.write(f"agenvoy: serving {url}/mcp for {layout.home} (pid {os.getpid()})\n")
        anyio.run(serve)
    finally:
        app.indexer.stopped = True
        app.stop()
        _unannounce(layout)
        if unix is not None:
            _remove_socket(unix)
        sys.stderr.write("agenvoy: stopped\n")
        sys.stderr.flush()
    return 0


class Activity:
    """The outermost ASGI layer: how many HTTP requests are in progress and when the last
    one ended, for the idle timeout (a client's open stream counts as use)."""

    def __init__(self, app: Any) -> None:
        import time

        self.app = app
        self.busy = 0
        self.clock = time.monotonic
        self.last = self.clock()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        self.busy += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.busy -= 1
            self.last = self.clock()


async def _stop_when_idle(activity: Activity, server: Any, idle: float) -> None:
    """Stop the server (as SIGTERM does) once no request came for `idle` seconds."""
    while not server.should_exit:
        await anyio.sleep(min(1.0, idle / 4))
        if activity.busy == 0 and activity.clock() - activity.last >= idle:
            sys.stderr.write(f"agenvoy: no request for {idle:g} s: stopping\n")
            server.should_exit = True


def _remove_socket(unix: UnixListener) -> None:
    with contextlib.suppress(OSError):
        if os.lstat(unix.path).st_ino == unix.inode:  # still ours
            unix.path.unlink()


def stop_on_signal(server: Any) -> None:
    """SIGTERM or SIGINT stops `server` whenever it comes: before uvicorn has put its own
    handlers in place (a signal then was lost, and the process served on), and after, when
    uvicorn raises again the signal it caught once it has stopped (then it changes nothing,
    and the process leaves through its cleanup with exit 0)."""
    def stop(*_: Any) -> None:
        server.should_exit = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)


def _unannounce(layout: Layout) -> None:
    try:
        info = orjson.loads(layout.http_announce.read_bytes())
        if info.get("pid") == os.getpid():
            layout.http_announce.unlink()
    except (OSError, ValueError, AgenvoyError):
        pass
