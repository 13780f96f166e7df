"""agenvoy web: a local viewer of the home in a browser (docs/web.md)."""

from __future__ import annotations

import click

from agenvoy_cli.commands.common import home_of, settings_of


@click.command("web")
@click.option("--listen", "bind", metavar="[HOST:]PORT", default="127.0.0.1:8766",
              show_default=True,
              help="Where to serve (default host 127.0.0.1; PORT 0: any free port).")
@click.option("--open", "open_browser", is_flag=True,
              help="Open the login link in the default browser.")
@click.option("--write", is_flag=True,
              help="Allow changes (edit an error's fix, forget a record, notes, forget "
                   "messages), each confirmed and CSRF-protected; read-only without it.")
@click.option("--token-file", type=click.Path(dir_okay=False), metavar="PATH",
              help="The token is in PATH (else AGENVOY_HTTP_TOKEN, else the home's "
                   ".store/http-token, as mcp --http). Needed beyond loopback.")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME[:PORT]",
              help="Also accept this Host (exactly) and its http(s) Origin.")
@click.pass_context
def command(ctx: click.Context, bind: str, open_browser: bool, write: bool,
            token_file: str | None, allow_hosts: tuple[str, ...]) -> None:
    """Serve a viewer of the home: sessions, a session's summary, window and archive,
    search in every mode, the context preview, errors, notes and health. Prints a login
    link (with the token); scripts send `Authorization: Bearer <token>`. Same security as
    `mcp --http`. Stops on SIGTERM/Ctrl-C (exit 0). Exit 2: bad usage (a bind beyond
    loopback without a token); 1: the port cannot be listened on."""
    from agenvoy_cli.web.server import run_web

    ctx.exit(run_web(home_of(ctx), bind, write=write, open_browser=open_browser,
                     token_file=token_file, allow_hosts=list(allow_hosts),
                     settings=settings_of(ctx)))
