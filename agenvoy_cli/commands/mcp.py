"""agenvoy mcp: the memory as a stdio MCP server for agent hosts."""

from __future__ import annotations

import click

from agenvoy_cli.home.layout import Layout, resolve_home, validate_name


@click.command("mcp")
@click.option("--session", "session_id", metavar="ID",
              help="Bind to this session: tools default to it, and it is kept indexed.")
@click.pass_context
def command(ctx: click.Context, session_id: str | None) -> None:
    """Serve the memory over MCP on stdin/stdout (for Claude Desktop, Cursor, agents...).

    Tools: search_chat_history, remember_error, search_error_history, read_error, list_rag,
    search_rag (upstream Agenvoy's names and parameters), append_messages, get_context;
    each session's rolling summary is a resource. The embedder and the vector index stay
    loaded, and new messages (also those other processes append) are embedded in the
    background, so searches rarely wait. Stops on EOF or SIGTERM (exit 0)."""
    if session_id is not None:
        validate_name(session_id)
    from agenvoy_cli.server.app import run  # the MCP SDK is imported only here

    home = (ctx.find_root().obj or {}).get("home")
    ctx.exit(run(Layout(resolve_home(home)), session_id))
