"""Root command group: --home, --debug; subcommands are imported only when used."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from agenvoy_cli import __version__
from agenvoy_cli.errors import INTERRUPTED, AgenvoyError

COMMANDS: dict[str, tuple[str, str]] = {
    # name: (module, short help) — the help text lives here so `--help` imports nothing.
    "append": ("append", "Append messages to a session (history.json + SQLite)."),
    "context": ("context", "Print what the LLM is fed this turn: summary + last N messages."),
    "compact": ("compact", "Trim history.json to 80% of max_history_bytes (archive kept)."),
    "search": ("search", "Search a session's memory: semantic, keyword or hybrid."),
    "summarize": ("summarize", "Update rolling summaries through an LLM (cron-ready)."),
    "errors": ("errors", "Cross-session memory of tool failures and their fixes."),
    "backfill": ("backfill", "Write into SQLite (and the vector index) what it lacks."),
    "session": ("session", "List, show, reset or remove sessions."),
    "doctor": ("doctor", "Check (and --repair) the invariants of a home."),
    "forget": ("forget", "Remove messages everywhere they live (e.g. a leaked secret)."),
    "rag": ("rag", "Named document databases: create, add, sync, search."),
    "mcp": ("mcp", "Serve the memory to agents as a stdio MCP server (warm, indexing ahead)."),
}


class LazyGroup(click.Group):
    """Imports a command's module only when that command runs, so `append` stays light."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        try:
            module = importlib.import_module(f"agenvoy_cli.commands.{entry[0]}")
        except ModuleNotFoundError as exc:
            if exc.name == f"agenvoy_cli.commands.{entry[0]}":
                return None  # not built yet
            raise
        return module.command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(self, args: Any = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        """Like click's, but a usage error is one line on stderr, as every other error."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
            click.echo(f"agenvoy: error: {exc.format_message()}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"agenvoy: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("agenvoy: aborted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except AgenvoyError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"agenvoy: error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("agenvoy: interrupted", err=True)
            ctx.exit(INTERRUPTED)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as exc:  # noqa: BLE001 - one line, not a traceback, unless --debug
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"agenvoy: internal error: {type(exc).__name__}: {exc} "
                       "(run with --debug for the traceback)", err=True)
            ctx.exit(1)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", type=click.Path(file_okay=False), envvar="AGENVOY_HOME",
              help="Agenvoy home (default ~/.config/agenvoy; env AGENVOY_HOME).")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(__version__, "-V", "--version", prog_name="agenvoy")
@click.pass_context
def cli(ctx: click.Context, home: str | None, debug: bool) -> None:
    """agenvoy — the memory layer of an AI agent, on Agenvoy's on-disk layout."""
    ctx.ensure_object(dict)
    ctx.obj["home"] = home
    ctx.obj["debug"] = debug


def main() -> None:
    try:
        cli.main(prog_name="agenvoy", windows_expand_args=False)
    except KeyboardInterrupt:
        click.echo("agenvoy: interrupted", err=True)
        sys.exit(INTERRUPTED)
