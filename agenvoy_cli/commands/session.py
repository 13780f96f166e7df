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
from agenvoy_cli.conversation.sessions import Entry, local_rfc3339
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


HEADERS = ("session", "messages", "bytes", "last message", "summary")


def list_table(entries: list[Entry]) -> str:
    """The `session list` table: output.table's, built straight from the entries with one
    format per row when the names are plain (no tabulate: its import alone costs more than
    formatting 10,000 rows; a test compares the two)."""
    clock = local_rfc3339(zone=False)  # as human_time shows them
    names = [e[0] for e in entries]
    joined = "".join(names)
    counts, sizes = [e[1] for e in entries], [e[2] for e in entries]
    if not entries or any(e[5] for e in entries) or not joined.isascii() \
            or not joined.isprintable() or " " in joined or min(counts + sizes) < 0:
        return table([(sid, str(count), str(size), None if last is None else clock(last),
                       summary)
                      + (("DAMAGED",) if problem else ())
                      for sid, count, size, last, summary, problem in entries], list(HEADERS))
    # tabulate's "simple": left-aligned, each column at least 2 wider than its header
    times = any(e[3] is not None for e in entries)
    widths = [max(len(HEADERS[0]) + 2, max(map(len, names))),
              max(len(HEADERS[1]) + 2, len(str(max(counts)))),
              max(len(HEADERS[2]) + 2, len(str(max(sizes)))),
              max(len(HEADERS[3]) + 2, 19 if times else 1),
              max(len(HEADERS[4]) + 2, 3 if any(e[4] for e in entries) else 2)]
    fmt = "%-{}s  %-{}d  %-{}d  %-{}s  %s".format(*widths[:4])  # the last one not padded
    yes_no = ("no", "yes")
    return "\n".join(["%-{}s  %-{}s  %-{}s  %-{}s  %s".format(*widths[:4]) % HEADERS,
                      "  ".join("-" * w for w in widths),
                      *(fmt % (sid, count, size, "-" if last is None else clock(last),
                               yes_no[summary])
                        for sid, count, size, last, summary, _ in entries)])


@click.group("session")
def command() -> None:
    """List, show, reset or remove sessions."""


@command.command("list")
@format_option
@json_option
@click.pass_context
def list_cmd(ctx: click.Context, as_json: bool, fmt: str | None = None) -> None:
    """Every session of the home: messages, bytes, last message time, summary."""
    import gc

    from agenvoy_cli.conversation.sessions import as_dicts, list_all

    # Rows of plain values, no cycles: 10,000 sessions would trigger ~40 collections that
    # find nothing (~6 ms, a tenth of the listing's own cost)
    collecting = gc.isenabled()
    gc.disable()
    try:
        entries = list_all(get_store(ctx))  # from the session table: no history.json read
        if fmt == "table" or (fmt is None and not as_json):  # no documents needed
            emit(None, False, lambda _: list_table(entries) if entries else "no sessions")
            return
        emit(listing("sessions", as_dicts(entries)), as_json, fmt=fmt, rows="sessions")
    finally:
        if collecting:
            gc.enable()


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
           no_summary: bool = True, llm_command: str | None = None,
           everything: bool = False) -> None:
    from agenvoy_cli.commands.common import memory

    api = memory(ctx)
    api.store.require(session_id)  # NotFound before any question
    action = "remove" if remove else "reset"
    if not no_summary and not everything:  # the LLM's configuration is checked first
        from agenvoy_cli.models.llm import NotConfigured, load_config

        try:
            load_config(api.store.settings, llm_command)
        except NotConfigured:
            pass  # fine when the summary has seen everything; else refused
    confirm_destructive(f"{action} session {session_id!r}?", f"{action} {session_id!r}", yes)
    if remove:
        doc = api.remove_session(session_id)
    elif everything:
        doc = api.reset_all(session_id)
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
@click.option("--all", "everything", is_flag=True,
              help="Also delete summary.json and summary.meta.json (Agenvoy's ResetAll); "
                   "nothing is summarized first.")
@json_option
@click.pass_context
def reset_cmd(ctx: click.Context, session_id: str, yes: bool, no_summary: bool,
              llm_command: str | None, everything: bool, as_json: bool) -> None:
    """Delete history.json, Agenvoy's history/, pending/ and action.log, the session's archive
    rows and vectors; keep summary.json. First, as upstream does, the summary is refreshed
    with what it has not seen (the configured LLM, as `summarize`); if that fails the reset
    is aborted and nothing changes. Without an LLM configured it needs --no-summary, unless
    the summary has already seen every message."""
    _clear(ctx, session_id, yes, as_json, remove=False, no_summary=no_summary,
           llm_command=llm_command, everything=everything)


@command.command("remove")
@session_argument
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_context
def remove_cmd(ctx: click.Context, session_id: str, yes: bool, as_json: bool) -> None:
    """Delete the whole session: its directory (summary included), archive rows and vectors.
    Nothing is summarized first: the summary goes with the directory."""
    _clear(ctx, session_id, yes, as_json, remove=True)
