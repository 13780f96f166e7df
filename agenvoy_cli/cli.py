"""Root command group: --home, --debug; subcommands are imported only when used."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from agenvoy_cli.errors import INTERRUPTED, AgenvoyError, documented
from agenvoy_cli.output import fail, reader_gone, wants_json
from agenvoy_cli.version import __version__

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
    "notes": ("notes", "The operator's knowledge notes: add, list, show, search, edit."),
    "import": ("import_history", "Import Claude Code, Codex, ChatGPT, OpenAI or agenvoy history."),
    "export": ("export", "Export sessions as lossless JSON Lines or Markdown."),
    "hook": ("hook", "Import when another agent's turn ends (Claude Code hooks, Codex notify)."),
    "mcp": ("mcp", "Serve the memory to agents as a stdio MCP server (warm, indexing ahead)."),
    "web": ("web", "A local viewer of the home in the browser (read-only unless --write)."),
    "server": ("server", "The home's background server (warm searches): start, stop, status."),
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

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        result = super().resolve_command(ctx, args)  # imports the command's module
        interrupts_raise()
        return result

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(self, args: Any = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        """Like click's, but a usage error is one line on stderr, as every other error (and
        the error document on stdout when the command line asks for JSON); a bare group
        (`agenvoy`, `agenvoy rag`) prints its help and exits 0."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        argv = list(sys.argv[1:] if args is None else args)
        as_json = wants_json(argv)
        extra.setdefault("obj", {})["json_errors"] = as_json
        try:
            code = super().main(argv, prog_name, complete_var, False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.ctx.get_help() if exc.ctx else self.get_help(click.Context(self)))
            sys.exit(0)
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
            if isinstance(exc, click.NoSuchOption) and exc.ctx and any(
                    p.name == "query_text" for p in exc.ctx.command.params):
                hint = (f" (a query that starts with '-' goes in -q/--query TEXT, or after "
                        f"--; see '{exc.ctx.command_path} --help')")
            fail(f"{exc.format_message()}{hint}", exc.exit_code, "usage", as_json)
            sys.exit(_code(argv, exc.exit_code))
        except click.ClickException as exc:
            fail(exc.format_message(), exc.exit_code, "usage", as_json)
            sys.exit(_code(argv, exc.exit_code))
        except click.Abort:
            fail("aborted", 1, "failed", as_json, prefix="")
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except AgenvoyError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            fail(str(exc), exc.exit_code, exc.kind, _json_errors(ctx))
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            fail("interrupted", INTERRUPTED, "interrupted", _json_errors(ctx), prefix="")
            ctx.exit(INTERRUPTED)
        except BrokenPipeError:  # stdout's reader left: quiet, as Unix tools are
            ctx.exit(reader_gone())
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as exc:  # noqa: BLE001 - one line, not a traceback, unless --debug
            if ctx.obj and ctx.obj.get("debug"):
                raise
            store = (ctx.obj or {}).get("store")
            home = store.layout.home if store is not None else None
            known = documented(exc, home)  # OSError/SQLite no layer mapped: a documented code
            if known is not None:
                fail(str(known), known.exit_code, known.kind, _json_errors(ctx))
                ctx.exit(known.exit_code)
            fail(f"{type(exc).__name__}: {exc} (run with --debug for the traceback)", 1,
                 "internal", _json_errors(ctx), prefix="internal error")
            ctx.exit(1)


def _code(argv: list[str], code: int) -> int:
    """A hook (`agenvoy hook ...`, run by another agent) never fails its host's turn: even
    a command line it cannot parse (a bad AGENVOY_HOME) exits 0, the line on stderr."""
    return 0 if "hook" in argv[:3] else code


def manual_page() -> str | None:
    """Where agenvoy(1) is: beside the package in a source tree (an editable install, which
    installs no data files), else under the environment's share/man (pip, pipx: the wheel
    puts it there), else under the user's (pip install --user)."""
    import site
    import sysconfig

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    places = [os.path.join(here, "man"),
              os.path.join(sysconfig.get_path("data"), "share", "man", "man1"),
              os.path.join(sys.prefix, "share", "man", "man1"),
              os.path.join(site.getuserbase(), "share", "man", "man1")]
    return next((os.path.join(p, "agenvoy.1") for p in places
                 if os.path.isfile(os.path.join(p, "agenvoy.1"))), None)


def _show_manual(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """--man: agenvoy(1) through man(1), wherever the package was installed from."""
    if not value or ctx.resilient_parsing:
        return
    import shutil
    import subprocess

    page, man = manual_page(), shutil.which("man")
    if page is None:
        fail("the manual page is not installed with this copy of agenvoy-cli (it is "
             "man/agenvoy.1 in the source tree)", 1, "failed", False)
        ctx.exit(1)
    if man is None:
        fail(f"no man(1) on this machine to show {page}", 1, "failed", False)
        ctx.exit(1)
    ctx.exit(subprocess.call([man, "-l", str(page)]))


def _json_errors(ctx: click.Context) -> bool:
    return bool(ctx.obj and (ctx.obj.get("json_errors") or ctx.obj.get("json")))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", type=click.Path(file_okay=False),
              help="Agenvoy home (default ~/.config/agenvoy; env AGENVOY_HOME).")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.option("--json", "as_json", is_flag=True,
              help="Every command prints exactly one JSON document (same as its --json).")
@click.version_option(__version__, "-V", "--version", prog_name="agenvoy")
@click.option("--man", is_flag=True, expose_value=False, is_eager=True,
              callback=_show_manual,
              help="Show the manual page (agenvoy(1)) from wherever this copy came from.")
@click.pass_context
def cli(ctx: click.Context, home: str | None, debug: bool, as_json: bool) -> None:
    """agenvoy — the memory layer of an AI agent, on Agenvoy's on-disk layout."""
    ctx.ensure_object(dict)
    if "settings" not in ctx.obj:  # the environment, read once for the whole command
        from agenvoy_cli.environment import environment
        from agenvoy_cli.settings import Settings

        ctx.obj["settings"] = Settings(environment())
    ctx.obj["home"] = home
    ctx.obj["debug"] = debug
    ctx.obj["json"] = as_json


def leave_now(code: int) -> None:
    """After Ctrl-C, once the command's cleanups ran (its context closed: the store): exit
    at once. The interpreter's own teardown with chromadb loaded (and a model call left
    running in its thread, models/local.py interruptible) took 1.9-3.4 s after the "kept"
    line at load 22-25 (issue #51 item 5); leaving here, as a kill would, loses nothing:
    every write is whole and a batch still in the model was never added. Only for the
    program (main), never a host running the CLI in-process."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def interrupts_raise() -> None:
    """From here on Ctrl-C raises KeyboardInterrupt (cleanups run; exit 130 in invoke).
    Before, __main__'s start-up handler exits at once: an interrupt inside imports and
    click's parsing would print a traceback, click's "Aborted!" (exit 1), or worse."""
    import _signal
    import gc

    if not gc.isenabled():  # __main__ turned it off for the start-up imports
        gc.freeze()
        gc.enable()
    handler = _signal.getsignal(_signal.SIGINT)
    # run as `python -m agenvoy_cli`, __main__.py's module is named "__main__"
    if getattr(handler, "__module__", None) in ("agenvoy_cli.__main__", "__main__") and \
            getattr(handler, "__name__", None) == "interrupted_at_start":
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)


def arm_faults(spec: str | None) -> None:
    """The fault injector of the home's writes (home/faults.py), for tests that run the
    real program: armed from AGENVOY_FAULTS, read here once at the process's entry."""
    if not spec:
        return
    from agenvoy_cli.home import faults

    try:
        faults.arm(faults.parse(spec))
    except ValueError as exc:
        click.echo(f"agenvoy: {exc}", err=True)
        sys.exit(2)


def main() -> None:
    from agenvoy_cli.environment import environment, start_program
    from agenvoy_cli.settings import Settings

    # Everything the CLI creates is private, Chroma's files included (chromadb creates its
    # own with the process umask).
    os.umask(0o077)
    start_program()
    arm_faults(Settings(environment()).faults)
    try:
        try:
            cli.main(prog_name="agenvoy", windows_expand_args=False)
        finally:  # what is still buffered, written while an error can still be handled
            sys.stdout.flush()
    except SystemExit as done:
        if done.code == INTERRUPTED:
            leave_now(INTERRUPTED)
        raise
    except KeyboardInterrupt:
        click.echo("agenvoy: interrupted", err=True)
        sys.exit(INTERRUPTED)
    except BrokenPipeError:  # stdout's reader left (help text, a final flush): quiet
        sys.exit(reader_gone())
