"""agenvoy mcp: the memory as an MCP server for agent hosts (stdio, or streamable HTTP)."""

from __future__ import annotations

import click

from agenvoy_cli.commands.common import home_of, settings_of
from agenvoy_cli.home.layout import validate_name


@click.command("mcp")
@click.option("--session", "session_id", metavar="ID",
              help="Bind to this session: tools default to it, and it is kept indexed.")
@click.option("--http", "bind", metavar="[HOST:]PORT",
              help="Serve over streamable HTTP at http://HOST:PORT/mcp (default host "
                   "127.0.0.1) for many hosts at once, with a bearer token; see docs/http.md.")
@click.option("--token-file", type=click.Path(dir_okay=False), metavar="PATH",
              help="--http: the bearer token is in PATH (else AGENVOY_HTTP_TOKEN, else the "
                   "home's .store/http-token, made at the first start). Needed beyond "
                   "loopback.")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME[:PORT]",
              help="--http: also accept this Host (exactly; with the server's port too when "
                   "none is given) and its http(s) Origin, e.g. a TLS reverse proxy's name.")
@click.option("--log-file", type=click.Path(dir_okay=False), metavar="PATH",
              help="--http: append stderr (start, stop, warnings) to PATH.")
@click.option("--tools", "vocabulary", type=click.Choice(["spec", "agenvoy", "both"]),
              default="spec", show_default=True,
              help="Tool names: spec (search_chat_history, remember_error, "
                   "search_error_history, read_error: agents written for Agenvoy up to "
                   "v0.31), agenvoy (v0.32's chat_history and error_history in their place: "
                   "agents prompted with today's Agenvoy tools; chat_history list/read "
                   "read Agenvoy's action log), both (a host serving agents of either "
                   "kind). RAG tools, append_messages and get_context are in every one.")
@click.pass_context
def command(ctx: click.Context, session_id: str | None, bind: str | None,
            token_file: str | None, allow_hosts: tuple[str, ...], log_file: str | None,
            vocabulary: str = "spec") -> None:
    """Serve the memory over MCP on stdin/stdout (for Claude Desktop, Cursor, agents...),
    or with --http over streamable HTTP for any number of hosts and machines.

    Tools: search_chat_history, remember_error, search_error_history, read_error,
    search_notes, read_note (upstream Agenvoy's names and parameters), list_rag,
    search_rag, save_note, append_messages, get_context; --tools agenvoy puts Agenvoy
    v0.32's chat_history, error_history and find_knowledge in place of the first six
    (--tools both: all). Each session's rolling summary is a resource. The embedder and
    the vector index stay loaded, and new messages (also those other processes append) are
    embedded in the background, so searches rarely wait. While an HTTP server runs,
    `agenvoy search`, `errors lookup` and `rag search` go through it. Stops on EOF (stdio)
    or SIGTERM (exit 0). Exit 2: bad usage (a bind beyond loopback without a token); 1: the port
    cannot be listened on; 75: an HTTP server already serves this home."""
    if session_id is not None:
        validate_name(session_id)
    layout, settings = home_of(ctx), settings_of(ctx)
    if bind is None:
        if token_file or log_file or allow_hosts:
            raise click.UsageError("--token-file, --allow-host and --log-file need --http")
        from agenvoy_cli.server.app import run  # the MCP SDK is imported only here

        ctx.exit(run(layout, session_id, vocabulary, settings))
    from agenvoy_cli.server.http_server import run_http

    ctx.exit(run_http(layout, session_id, bind, token_file, log_file, list(allow_hosts),
                      vocabulary, settings))
