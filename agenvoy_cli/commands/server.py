"""agenvoy server start|stop|status: the home's background server (server/lifecycle.py)."""

from __future__ import annotations

from typing import Any

import click

from agenvoy_cli.commands.common import home_of, json_option, settings_of
from agenvoy_cli.output import emit


def _render(doc: dict[str, Any]) -> str:
    if doc.get("running"):
        verb = "started" if doc.get("started") else "running"
        return f"{verb}: pid {doc['pid']}, {doc['url']}/mcp (log {doc['log']})"
    stale = f" (removed a stale pid file: {doc['pid_file']})" if doc.get("stale") else ""
    return f"not running{stale}"


@click.group("server")
def command() -> None:
    """The home's background server: `agenvoy mcp --http` run detached, one per home, with
    its pid file (.store/server.pid) and log (.store/server.log) in the home. While it runs,
    `search`, `notes search`, `rag search`, `session tasks` and `errors lookup` are answered
    by it with the models warm; with `agenvoy.server: "auto"` in config.json (or
    AGENVOY_SERVER=auto) the first of them that would load the models starts it. See
    docs/server.md."""


@command.command("start")
@click.option("--foreground", is_flag=True,
              help="Run here until SIGTERM or the idle timeout (for a systemd unit or a "
                   "launchd agent), instead of in the background.")
@click.option("--http", "bind", metavar="[HOST:]PORT", default="127.0.0.1:0",
              show_default=True,
              help="Where MCP hosts reach it (as `mcp --http`; port 0: any free one). The CLI "
                   "uses the home's Unix socket.")
@click.option("--idle-timeout", type=click.FloatRange(min=0), metavar="SECONDS",
              help="Stop after this many seconds without a request; 0: never (default "
                   "AGENVOY_SERVER_IDLE, else 1800).")
@json_option
@click.pass_context
def start(ctx: click.Context, foreground: bool, bind: str, idle_timeout: float | None,
          as_json: bool) -> None:
    """Start the home's background server (nothing to do when it runs: exit 0). Waits until
    it answers. Exit 75: another server serves this home (`--foreground`); 1: it could not
    start (the reason is the last line of its log)."""
    from agenvoy_cli.server import lifecycle
    from agenvoy_cli.server.http_server import parse_bind

    layout, settings = home_of(ctx), settings_of(ctx)
    parse_bind(bind)  # a bad one is exit 2 here, not a failed start in the background
    idle = settings.server_idle if idle_timeout is None else idle_timeout
    if foreground:
        ctx.exit(lifecycle.serve(layout, settings, idle, bind))
    doc = lifecycle.start(layout, settings, idle, bind)
    emit(doc, as_json, _render)


@command.command("stop")
@json_option
@click.pass_context
def stop(ctx: click.Context, as_json: bool) -> None:
    """Stop the home's background server (SIGTERM: requests in progress finish) and wait
    until it is gone. Not running is not an error (exit 0)."""
    from agenvoy_cli.server import lifecycle

    doc = lifecycle.stop(home_of(ctx))
    emit(doc, as_json, lambda d: f"stopped (pid {d['pid']})" if d["stopped"]
         else "not running" + (" (removed a stale pid file)" if d["stale_removed"] else ""))


@command.command("status")
@json_option
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Whether the home's background server runs: its pid, URL and log. Exit 0 either way
    (`running` in --json says which)."""
    from agenvoy_cli.server import lifecycle

    emit(lifecycle.status(home_of(ctx)), as_json, _render)
