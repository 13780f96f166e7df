"""The CLI's fast path: send a search to the home's running HTTP server instead of loading
chromadb and the model. Standard library only (http.client, json): importing this module and
asking a server costs a few milliseconds, so `agenvoy search` through a warm server is about
as fast as `agenvoy --version` (bench/mcp_http.py).

The server announces itself in the home (Layout.http_announce: {"url", "pid", "home",
"socket", "token_file"}, mode 0600, removed on a clean exit) and listens, besides its TCP
port, on a Unix socket in the home (Layout.http_socket: 0600 in a 0700 folder), where only
the home's owner can connect: the CLI asks there without a token, whichever token the
server was given (the home's, --token-file or AGENVOY_HTTP_TOKEN). Where no socket could
be made, the CLI asks over TCP with the token it can find: AGENVOY_HTTP_TOKEN, the file
the announcement names (--token-file), the token the announcement carries (the server's
AGENVOY_HTTP_TOKEN, written there only when there is no socket), or the home's token file.
The route (ROUTE, beside /mcp) runs the same Memory method the CLI would run
locally, on the server's store thread, and returns its document; errors come back as the
CLI's own (same message, same exit code). HTTP/1.1 is spoken over a plain socket: the
standard library's http.client brings email and ssl along (~15 ms of imports, most of
what the fast path would cost beyond `agenvoy --version`).

`ask` returns None when the local path must answer: no server announced, AGENVOY_NO_SERVER
set, the announced process gone (a server killed -9 leaves its file), or no answer within
CONNECT_TIMEOUT; the last two say so in one stderr line.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import urllib.parse
from collections.abc import Callable
from typing import Any

from agenvoy_cli.errors import AgenvoyError, BadInput, CorruptStore, NotFound, StoreBusy
from agenvoy_cli.home.layout import Layout
from agenvoy_cli.settings import Settings

ROUTE = "/agenvoy/v1/call"
PING = "/agenvoy/v1/ping"
METHODS = ("search", "lookup_errors", "rag_search", "search_notes",
           "tasks")  # Memory methods the route runs
NO_SERVER_ENV = "AGENVOY_NO_SERVER"
TOKEN_ENV = "AGENVOY_HTTP_TOKEN"
CONNECT_TIMEOUT = 1.0  # seconds to connect and to answer PING (a hung server is skipped)
ANSWER_SLACK = 30.0  # seconds a search may take on the server beyond its budget
_ERRORS: dict[int, type[AgenvoyError]] = {2: BadInput, 3: NotFound, 4: CorruptStore,
                                          75: StoreBusy}


def _note(message: str) -> None:
    sys.stderr.write(f"agenvoy: note: {message}; searching locally\n")


def alive(pid: int) -> bool:
    """Whether process `pid` exists (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def announced(layout: Layout, say: Callable[[str], None] = _note) -> dict[str, Any] | None:
    """The running server's announcement, or None (no file, unreadable, or its process is
    gone: told to `say`)."""
    try:
        raw = layout.http_announce.read_bytes()
    except (OSError, AgenvoyError):
        return None
    try:
        info = json.loads(raw)
        pid, url = int(info["pid"]), str(info["url"])
    except (ValueError, KeyError, TypeError):
        return None
    if not alive(pid):
        say(f"the HTTP server announced in {layout.http_announce} (pid {pid}) is gone")
        return None
    return {**info, "pid": pid, "url": url}


def token_of(layout: Layout, info: dict[str, Any], settings: Settings) -> str | None:
    """The token for the server's TCP port (see the module's docstring), or None."""
    token = (settings.env.get(TOKEN_ENV) or "").strip() or info.get("token")
    if token:
        return str(token)
    for path in (info.get("token_file"), layout.http_token):
        if not path:
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                found = handle.read().strip()
        except (OSError, UnicodeDecodeError, AgenvoyError):
            continue
        if found:
            return found
    return None


def unix_address(path: str) -> tuple[str, int | None]:
    """(an address bind() and connect() take for the socket file PATH, a descriptor the
    caller closes after the call). sun_path holds 107 bytes; a longer path (a deep home) is
    reached on Linux through its open folder, /proc/self/fd/N/NAME."""
    if len(os.fsencode(path)) < 100 or not os.path.isdir("/proc/self/fd"):
        return path, None
    folder, name = os.path.split(path)
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    return f"/proc/self/fd/{fd}/{name}", fd


def unix_socket(path: str, use: Callable[[socket.socket, str], None]) -> socket.socket:
    """A Unix stream socket on which `use(sock, address)` (a bind or a connect) ran with an
    address for the socket file PATH (unix_address); closed when that fails."""
    address, fd = unix_address(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        use(sock, address)
    except BaseException:
        sock.close()
        raise
    finally:
        if fd is not None:
            os.close(fd)
    return sock


def _connect_unix(path: str) -> socket.socket:
    def connect(sock: socket.socket, address: str) -> None:
        sock.settimeout(CONNECT_TIMEOUT)
        sock.connect(address)

    return unix_socket(path, connect)


def _connect(layout: Layout, info: dict[str, Any], settings: Settings, quiet: bool = False
             ) -> tuple[socket.socket, str] | None:
    """(a connected socket, the Authorization header line it needs), or None (told why):
    the home's Unix socket when the server made one, else its TCP port with a token."""
    failed = ""
    if info.get("socket"):
        try:
            return _connect_unix(str(layout.http_socket)), ""
        except (OSError, AgenvoyError) as exc:
            failed = f" (its socket: {type(exc).__name__})"
    token = token_of(layout, info, settings)
    if token is None:
        if not quiet:
            _note(f"no token for the running HTTP server{failed}")
        return None
    url = urllib.parse.urlsplit(info["url"])
    # bytes, not str: a str host is IDNA-encoded (one more import)
    address = ((url.hostname or "127.0.0.1").encode("ascii"), url.port or 80)
    sock = socket.create_connection(address, timeout=CONNECT_TIMEOUT)  # type: ignore[arg-type]
    return sock, f"Authorization: Bearer {token}\r\n"


def ping(layout: Layout, info: dict[str, Any], settings: Settings) -> bool:
    """Whether the announced server answers PING (its event loop runs): what a start waits
    for before it says the server is up."""
    url = urllib.parse.urlsplit(info["url"])
    try:
        connected = _connect(layout, info, settings, quiet=True)
        if connected is None:
            return False
        with connected[0] as sock:
            head = f"Host: {url.netloc}\r\n{connected[1]}Connection: close\r\n"
            status, _ = _exchange(sock, f"GET {PING} HTTP/1.1\r\n{head}\r\n".encode())
    except (OSError, ValueError):
        return False
    return status == 200


def ask(layout: Layout, method: str, args: list[Any], kwargs: dict[str, Any],
        wait: float, settings: Settings) -> dict[str, Any] | None:
    """The server's answer to Memory.METHOD(*args, **kwargs): (doc, warnings) as
    {"doc": ..., "warnings": [...]}, or None to go local. `wait`: seconds the work itself
    may take (the search's budget); raises the CLI's error when the server refused."""
    if settings.no_server:
        return None
    info = announced(layout)
    if info is None:
        return None
    url = urllib.parse.urlsplit(info["url"])
    body = json.dumps({"method": method, "args": args, "kwargs": kwargs}).encode()
    try:
        connected = _connect(layout, info, settings)
        if connected is None:
            return None
        with connected[0] as sock:
            head = f"Host: {url.netloc}\r\n{connected[1]}"
            status, _ = _exchange(sock, f"GET {PING} HTTP/1.1\r\n{head}\r\n".encode())
            if status == 200:  # answered by the event loop: alive; now the work itself
                sock.settimeout(CONNECT_TIMEOUT + wait + ANSWER_SLACK)
                status, data = _exchange(sock, (
                    f"POST {ROUTE} HTTP/1.1\r\n{head}Content-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                ).encode() + body)
    except (OSError, ValueError) as exc:
        _note(f"the HTTP server at {info['url']} did not answer ({type(exc).__name__})")
        return None
    if status != 200:
        _note(f"the HTTP server at {info['url']} answered HTTP {status}")
        return None
    answer = json.loads(data)
    if not answer.get("ok"):
        code = int(answer.get("exit_code", 1))
        exc_type = _ERRORS.get(code, AgenvoyError)
        raise exc_type(str(answer.get("message", "the server failed")))
    return answer  # type: ignore[no-any-return]


def _exchange(sock: socket.socket, request: bytes) -> tuple[int, bytes]:
    """Send one HTTP/1.1 request, read its response: (status, body). The body is
    Content-Length bytes, or everything up to the close; ValueError when malformed."""
    sock.sendall(request)
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ValueError("connection closed before the response")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    fields = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
    length = {k.strip().lower(): v.strip() for k, v in fields.items()}.get("content-length")
    if length is None:
        while chunk := sock.recv(65536):
            rest += chunk
        return status, rest
    while len(rest) < int(length):
        chunk = sock.recv(65536)
        if not chunk:
            raise ValueError("connection closed inside the response")
        rest += chunk
    return status, rest[:int(length)]
