"""agenvoy session list|show|reset|remove."""

from __future__ import annotations

from typing import Any

import click

from agenvoy_cli.commands.common import (
    confirm_destructive,
    get_store,
    json_option,
    session_argument,
)
from agenvoy_cli.contract import listing, moment
from agenvoy_cli.conversation.store import Store
from agenvoy_cli.output import emit, format_option, human_time, table, warn


def describe(store: Store, session_id: str, *, detail: bool) -> dict[str, Any]:
    from agenvoy_cli.conversation import sessions

    info = sessions.listing(store, only=session_id)[0]
    if detail:
        start_seq, start_at = store.trim_point(session_id)
        info["row_count"] = sessions.archive_rows(store.db_readonly(), session_id)
        info["trim_point"] = {"start_seq": start_seq, **moment("start", start_at or None)}
        info["path"] = str(store.layout.session_dir(session_id))
    return info


def _wall_clock(local: str | None) -> str:
    """human_time of an RFC 3339 time already in this machine's zone (what listing gives):
    its date and time, without parsing it again."""
    return "-" if local is None else f"{local[:10]} {local[11:19]}"


HEADERS = ("session", "messages", "bytes", "last message", "summary")


def list_table(sessions: list[dict[str, Any]]) -> str:
    """The `session list` table: output.table's, built from string cells with one format
    per row when the listing is long and plain (10,000 sessions: ~6x cheaper)."""
    rows = [(s["session_id"], str(s["message_count"]), str(s["bytes"]),
             _wall_clock(s["last_message_at"]), "yes" if s["has_summary"] else "no")
            for s in sessions]
    names = "".join(r[0] for r in rows)
    if len(rows) <= 50 or any(s["problem"] for s in sessions) or not names.isascii() \
            or not names.isprintable() or " " in names:
        return table([row + (("DAMAGED",) if s["problem"] else ())
                      for row, s in zip(rows, sessions)], list(HEADERS))
    # tabulate's "simple": left-aligned, each column at least 2 wider than its header
    widths = [max(len(h) + 2, max(map(len, col))) for h, col in zip(HEADERS, zip(*rows))]
    fmt = "  ".join(f"%-{w}s" for w in widths[:-1]) + "  %s"  # no padding: rstripped
    return "\n".join([fmt % HEADERS, "  ".join("-" * w for w in widths),
                      *(fmt % row for row in rows)])


@click.group("session")
def command() -> None:
    """List, show, reset or remove sessions."""


@command.command("list")
@format_option
@json_option
@click.pass_context
def list_cmd(ctx: click.Context, as_json: bool, fmt: str | None = None) -> None:
    """Every session of the home: messages, bytes, last message time, summary."""
    store = get_store(ctx)
    with store.read_lock():
        from agenvoy_cli.conversation.sessions import listing as session_listing

        sessions = session_listing(store)  # from the session table: no history.json read
    emit(listing("sessions", sessions), as_json, lambda d: list_table(d["sessions"])
         if d["sessions"] else "no sessions", fmt=fmt, rows="sessions")


@command.command("show")
@session_argument
@json_option
@click.pass_context
def show_cmd(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """One session, with its archive row count and trim point."""
    store = get_store(ctx)
    with store.read_lock():
        store.require(session_id)
        info = describe(store, session_id, detail=True)
    emit(info, as_json, lambda d: table(
        [(k, human_time(v) if k.endswith("_at") else v) for k, v in d.items()
         if k != "trim_point" and not k.endswith("_ns")]
        + [("trim point", f"{human_time(d['trim_point']['start_at'], 'never trimmed')} "
                          f"(seq {d['trim_point']['start_seq']})")],
        ["field", "value"]))


def _clear(ctx: click.Context, session_id: str, yes: bool, as_json: bool, remove: bool,
           no_summary: bool = True, llm_command: str | None = None) -> None:
    from agenvoy_cli.commands.common import memory

    api = memory(ctx)
    api.store.require(session_id)  # NotFound before any question
    action = "remove" if remove else "reset"
    if not no_summary:  # the LLM's configuration is checked before anything is asked
        from agenvoy_cli.models.llm import NotConfigured, load_config

        try:
            load_config(api.store.settings, llm_command)
        except NotConfigured:
            pass  # fine when the summary has seen everything; else refused
    confirm_destructive(f"{action} session {session_id!r}?", f"{action} {session_id!r}", yes)
    if remove:
        doc = api.remove_session(session_id)
    else:
        doc = api.reset_session(session_id, summarize=not no_summary, llm_command=llm_command,
                                warn=warn)
    emit(doc, as_json, lambda d: f"{d['action']} {d['session_id']}: "
         f"{d['deleted']} archive row(s) deleted"
         + (", summary kept" if d["has_summary"] else ""))


@command.command("reset")
@session_argument
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--no-summary", is_flag=True,
              help="Do not fold the messages the summary has not seen into summary.json first "
                   "(they are then lost from the context).")
@click.option("--llm-command", metavar="CMD",
              help="Summarize through CMD instead of an endpoint (as `summarize`).")
@json_option
@click.pass_context
def reset_cmd(ctx: click.Context, session_id: str, yes: bool, no_summary: bool,
              llm_command: str | None, as_json: bool) -> None:
    """Delete history.json, Agenvoy's history/, pending/ and action.log, the session's archive
    rows and vectors; keep summary.json. First, as upstream does, the summary is refreshed
    with what it has not seen (the configured LLM, as `summarize`); if that fails the reset
    is aborted and nothing changes. Without an LLM configured it needs --no-summary, unless
    the summary has already seen every message."""
    _clear(ctx, session_id, yes, as_json, remove=False, no_summary=no_summary,
           llm_command=llm_command)


@command.command("remove")
@session_argument
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_context
def remove_cmd(ctx: click.Context, session_id: str, yes: bool, as_json: bool) -> None:
    """Delete the whole session: its directory (summary included), archive rows and vectors.
    Nothing is summarized first: the summary goes with the directory."""
    _clear(ctx, session_id, yes, as_json, remove=True)
