"""`agenvoy web`: serve the viewer until SIGTERM/SIGINT, with `mcp --http`'s process model
and checks (server.http_server): every check before anything is written, loopback unless
told, the home's token (or --token-file / AGENVOY_HTTP_TOKEN, required beyond loopback),
Host and Origin matched exactly. It does not announce itself (the CLI's searches never go
through it) and runs no background indexer: it reads the home as the CLI does."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from agenvoy_cli.errors import BadInput
from agenvoy_cli.home.layout import Layout
from agenvoy_cli.server import fastpath
from agenvoy_cli.server.http_server import (
    _listen,
    check_allowed_hosts,
    load_token,
    loopback,
    make_token,
    parse_bind,
    security,
    stop_on_signal,
)
from agenvoy_cli.settings import Settings

DEFAULT_LISTEN = "127.0.0.1:8766"  # beside mcp --http's usual 8765
GRACE = 5  # seconds requests in progress get to finish on SIGTERM


def run_web(layout: Layout, bind: str, *, write: bool, open_browser: bool,
            token_file: str | None, allow_hosts: list[str], settings: Settings) -> int:
    host, port = parse_bind(bind.removeprefix("http://"))
    check_allowed_hosts(allow_hosts)
    token, explicit = load_token(layout, token_file, settings)
    if not loopback(host) and not explicit:
        raise BadInput(f"refusing to listen on {host} (beyond loopback) without an explicit "
                       f"token: give --token-file PATH or {fastpath.TOKEN_ENV}")
    import uvicorn

    from agenvoy_cli.api import Memory
    from agenvoy_cli.home.config import load_settings
    from agenvoy_cli.vectors.hooks import open_store
    from agenvoy_cli.web.app import build
    from agenvoy_cli.web.guard import Guard

    sock = _listen(host, port)
    try:
        token = token or make_token(layout)
        store = open_store(layout, load_settings(layout, settings))
    except BaseException:
        sock.close()
        raise
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}"
    state: dict[str, Any] = {"url": url, "pid": os.getpid(), "write": write,
                             "started": time.strftime("%Y-%m-%d %H:%M:%S"), "requests": 0}
    memory = Memory(store=store)
    app = Guard(build(memory, token, write, state), token, security(host, port, allow_hosts))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                           lifespan="off", timeout_graceful_shutdown=GRACE,
                                           server_header=False))
    stop_on_signal(server)
    login = f"{url}/login?token={token}"
    sys.stderr.write(f"agenvoy: serving {url}/ for {layout.home} (pid {os.getpid()}, "
                     f"{'read-write' if write else 'read-only'})\n"
                     f"agenvoy: open {login}\n")
    sys.stderr.flush()
    if open_browser:
        import webbrowser

        webbrowser.open(login)
    try:
        server.run(sockets=[sock])
    finally:
        store.close()
        sys.stderr.write("agenvoy: stopped\n")
        sys.stderr.flush()
    return 0
