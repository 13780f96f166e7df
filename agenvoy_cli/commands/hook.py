"""agenvoy hook claude-code | codex: import at the moment another agent's turn ends.

A hook never fails nor blocks the host's turn: it always exits 0, writes nothing on stdout
(but the context SessionStart was asked for), stops at its time limit, and says any trouble
in one line of the home's .store/hook.log."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from agenvoy_cli.commands.common import get_store, settings_of
from agenvoy_cli.errors import TimeLimit

TIME_LIMIT = 20.0  # seconds; Claude Code's own limit for a hook is 60 s


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def up(signum: int, frame: Any) -> None:
        raise TimeLimit

    previous = signal.signal(signal.SIGALRM, up)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _trouble(results: list[dict[str, Any]]) -> list[str]:
    """What an import left not done, in words."""
    out = []
    for doc in results:
        for src in doc["sources"]:
            if src["status"] not in ("imported", "unchanged"):
                why = src["reasons"][0] if src["reasons"] else src["status"]
                out.append(f"{src['source']}: {src['status']}: {why}")
    return out


def quietly(ctx: click.Context, what: str, seconds: float,
            job: Callable[[Any], tuple[list[dict[str, Any]], str]]) -> None:
    """Run job(store) within the time limit; print only the context it returns; any
    trouble is a line in the hook log; exit 0 whatever happens."""
    store = None
    lines: list[str] = []
    try:
        with time_limit(seconds):
            store = get_store(ctx)
            results, text = job(store)
        lines = _trouble(results)
        if text:
            click.echo(text)
    except TimeLimit:
        lines = [f"stopped at its time limit ({seconds:g} s); the next hook or import "
                 "goes on from where it stopped"]
    except KeyboardInterrupt:
        lines = ["interrupted; the next hook or import goes on from where it stopped"]
    except BaseException as exc:  # noqa: BLE001 - a hook never fails the host's turn
        lines = [_describe(exc)]
    for line in lines:
        _log(store, f"{what}: {line}")
    ctx.exit(0)


def _describe(exc: BaseException) -> str:
    from agenvoy_cli.errors import AgenvoyError, documented

    if isinstance(exc, AgenvoyError):
        return str(exc)
    known = documented(exc)
    return str(known) if known is not None else \
        f"internal error: {type(exc).__name__}: {exc}"


def _log(store: Any, line: str) -> None:
    from agenvoy_cli.transfer.hooks import log_line

    try:
        if store is None:
            raise OSError("no home")
        log_line(store.layout, line)
    except BaseException:  # noqa: BLE001 - no home to log in: stderr, which the host keeps
        print(f"agenvoy: hook: {line}", file=sys.stderr)


@click.group("hook")
def command() -> None:
    """Import at the moment another agent's turn ends (its hook or notify program runs
    this): never fails nor blocks its turn, prints nothing (but an asked-for context), logs
    trouble to .store/hook.log."""


@command.command("claude-code")
@click.option("--context", "give_context", is_flag=True,
              help="On SessionStart, print the session's rolling summary (or its "
                   "project's latest) and the knowledge notes' names for the model.")
@click.option("--time-limit", type=click.FloatRange(0.1, 600), default=TIME_LIMIT,
              show_default=True, help="Seconds before the hook stops (what it wrote stays).")
@click.pass_context
def claude_code(ctx: click.Context, give_context: bool, time_limit: float) -> None:
    """Claude Code's hooks: the event's JSON on stdin. Stop, SubagentStop, PreCompact and
    SessionEnd import that session's transcript at once; SessionStart with --context
    prints a bounded context (JSON with additionalContext)."""
    from agenvoy_cli.transfer.hooks import MAX_INPUT

    def job(store: Any) -> tuple[list[dict[str, Any]], str]:
        import orjson

        from agenvoy_cli.transfer.hooks import claude_code_event as run
        from agenvoy_cli.transfer.hooks import parse_event

        event = parse_event(sys.stdin.buffer.read(MAX_INPUT + 1))
        results, text = run(store, event, context=give_context)
        if text:
            text = orjson.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart",
                                                        "additionalContext": text}}).decode()
        return results, text

    quietly(ctx, "claude-code", time_limit, job)


@command.command("codex")
@click.argument("payload", metavar="JSON", required=False, default="")
@click.option("--codex-home", type=click.Path(), default=None,
              help="Codex's home (its sessions/ holds the rollouts; default $CODEX_HOME, "
                   "else ~/.codex).")
@click.option("--time-limit", type=click.FloatRange(0.1, 600), default=TIME_LIMIT,
              show_default=True, help="Seconds before the hook stops (what it wrote stays).")
@click.pass_context
def codex(ctx: click.Context, payload: str, codex_home: str | None,
          time_limit: float) -> None:
    """Codex CLI's notify program: the notification's JSON is the last argument; on
    agent-turn-complete the thread's rollout is imported at once."""

    def job(store: Any) -> tuple[list[dict[str, Any]], str]:
        from agenvoy_cli.transfer.hooks import codex_notify as run

        folder = codex_home or settings_of(ctx).codex_home
        return run(store, payload, Path(folder).expanduser()), ""

    quietly(ctx, "codex", time_limit, job)
