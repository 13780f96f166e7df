"""agenvoy session list|show|tasks|reset|remove."""

from __future__ import annotations

import json
from typing import Any

import click

from agenvoy_cli.commands.common import (
    complete_session,
    confirm_destructive,
    from_server,
    json_option,
    memory,
    no_server_option,
    session_argument,
)
from agenvoy_cli.output import emit, format_option, human_time, plain_table, table, warn

HEADERS = ("session", "messages", "bytes", "last message", "summary")


def list_table(sessions: list[dict[str, Any]]) -> str:
    """The `session list` table (times as human_time shows them: the local date and time of
    day, which the documents' RFC 3339 strings already carry). Cells made text here, in one
    pass (10,000 sessions: bench/scale.py's `session list` target, <= 2x an append)."""
    yes_no = ("no", "yes")
    sourced = any(d.get("source") for d in sessions)  # a column once `import` brought one
    named = any(d.get("persona") for d in sessions)  # Agenvoy 1.0's persona: name, model
    headers = HEADERS + (("source",) if sourced else ()) + (("name", "model") if named else ())
    if not any(d["problem"] for d in sessions):
        text = plain_table([(d["session_id"], str(d["message_count"]), str(d["bytes"]),
                             "-" if (at := d["last_message_at"]) is None
                             else f"{at[:10]} {at[11:19]}", yes_no[d["has_summary"]])
                            + ((d.get("source") or "-",) if sourced else ())
                            + (_persona_cells(d) if named else ())
                            for d in sessions], headers)
        if text is not None:
            return text
    return table([(d["session_id"], d["message_count"], d["bytes"],
                   None if d["last_message_at"] is None
                   else f"{d['last_message_at'][:10]} {d['last_message_at'][11:19]}",
                   d["has_summary"]) + ((d.get("source") or "-",) if sourced else ())
                  + (_persona_cells(d) if named else ())
                  + (("DAMAGED",) if d["problem"] else ())
                  for d in sessions], list(headers))


def _persona_cells(doc: dict[str, Any]) -> tuple[str, str]:
    persona = doc.get("persona") or {}
    name = persona.get("name") or "-"
    if persona.get("self_id"):
        name += f" (@{persona['self_id']})"
    return name, persona.get("model") or "-"


@click.group("session")
def command() -> None:
    """List, show, reset or remove sessions."""


@command.command("list")
@format_option
@json_option
@click.pass_context
def list_cmd(ctx: click.Context, as_json: bool, fmt: str | None = None) -> None:
    """Every session of the home: messages, bytes, last message time, summary, and the
    source an `import` brought it from (a column once one did)."""
    doc = memory(ctx).sessions()  # from the session table: no history.json read
    if fmt == "table" or (fmt is None and not as_json):
        emit(None, False, lambda _: list_table(doc["sessions"]) if doc["sessions"]
             else "no sessions")
        return
    emit(doc, as_json, fmt=fmt, rows="sessions")


@command.command("show")
@session_argument
@json_option
@click.pass_context
def show_cmd(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """One session, with its archive row count, trim point, and the model, tools and
    tool_choice of the requests it was imported from."""
    emit(memory(ctx).session(session_id), as_json, lambda d: table(
        [(k, human_time(v) if k.endswith("_at") else v) for k, v in d.items()
         if k not in ("trim_point", "requests", "persona", "layout") and not k.endswith("_ns")]
        + [(f"persona {k}", v) for k, v in (d.get("persona") or {}).items()]
        + [("layout", f"Agenvoy {d['layout']['version']}" if d.get("layout") else "-")]
        + [("trim point", f"{human_time(d['trim_point']['start_at'], 'never trimmed')} "
                          f"(seq {d['trim_point']['start_seq']})")]
        + request_rows(d.get("requests") or []),
        ["field", "value"]))


def request_rows(requests: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """model, tools (their names) and tool_choice of imported requests, each value once
    (a batch line keeps them in its body); the whole of them is in --json."""
    rows = []
    for key in ("model", "tools", "tool_choice"):
        seen: list[str] = []
        for request in requests:
            body = request.get("body")
            value = (body if isinstance(body, dict) else request).get(key, request.get(key))
            if value is None:
                continue
            text = _tool_names(value) if key == "tools" else \
                value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            if text not in seen:
                seen.append(text)
        if seen:
            rows.append((f"request {key}", "; ".join(seen)))
    return rows


def _tool_names(tools: Any) -> str:
    names = []
    for tool in tools if isinstance(tools, list) else []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        name = (fn if isinstance(fn, dict) else tool if isinstance(tool, dict) else {}).get("name")
        names.append(str(name) if name else "?")
    return ", ".join(names) or "none"


def _clear(ctx: click.Context, session_id: str, yes: bool, as_json: bool, remove: bool,
           no_summary: bool = True, llm_command: str | None = None,
           everything: bool = False) -> None:
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


@command.command("tasks")
@click.argument("session_id", metavar="[SESSION]", required=False,
                shell_complete=complete_session)
@click.argument("query", nargs=-1, metavar="[WORDS...]")
@click.option("--all-sessions", is_flag=True, help="Every session's tasks (no SESSION).")
@click.option("--range", "range_", metavar="DURATION", default="all", show_default=True,
              help="Only tasks that ended in the last DURATION: 30m, 12h, 7d, 2w, 1mo, 1y.")
@click.option("--since", metavar="TIME", help="Only tasks that ended at or after TIME.")
@click.option("--until", metavar="TIME", help="Only tasks that ended at or before TIME.")
@click.option("--limit", type=click.IntRange(min=1, max=1000), default=20, show_default=True,
              help="At most this many tasks, newest first.")
@click.option("--full", is_flag=True, help="Include each task's tool results.")
@click.option("--mode", type=click.Choice(["hybrid", "keyword", "semantic"]), default=None,
              help="Rank the tasks related to WORDS, best first, by their objective and "
                   "reply: keyword (no model), semantic (meaning) or both fused (default: "
                   "every word, newest first).")
@click.option("--match", type=click.Choice(["all", "any"]), default=None,
              help="--mode keyword: every term or any term (default: every term for 1-3 "
                   "terms).")
@click.option("--budget", type=float, default=3.0, show_default=True, metavar="SECONDS",
              envvar="AGENVOY_SEARCH_BUDGET",
              help="--mode semantic/hybrid: at most this long embedding tasks that have no "
                   "vector yet; the rest are found by keyword.")
@json_option
@no_server_option
@click.pass_context
def tasks_cmd(ctx: click.Context, session_id: str | None, query: tuple[str, ...],
              all_sessions: bool, range_: str, since: str | None, until: str | None,
              limit: int, full: bool, mode: str | None, match: str | None, budget: float,
              as_json: bool, no_server: bool = False) -> None:
    """What the agent did: Agenvoy 1.0's finished tasks (objective, reply, model, when it
    ended) holding every one of WORDS (any order, any case; Chinese by any substring) in
    the objective, the tools' results or the reply, newest first; with --mode, the tasks
    related to WORDS by their objective and reply, best first (as `notes search`). A home
    older than Agenvoy 1.0 keeps no tasks: the list is empty."""
    from agenvoy_cli.errors import BadInput
    from agenvoy_cli.search.defaults import check_budget

    if all_sessions:
        if session_id is not None:
            query = (session_id, *query)
        session_id = None
    elif session_id is None:
        raise BadInput("give a SESSION or --all-sessions")
    if match is not None and mode != "keyword":
        raise BadInput("--match goes with --mode keyword")
    check_budget(budget)
    options: dict[str, Any] = {"since": since, "until": until, "range_": range_,
                               "limit": limit, "full": full, "mode": mode, "match": match,
                               "budget": budget}
    doc = from_server(ctx, no_server, "tasks", [session_id, " ".join(query)], options,
                      wait=budget, models=mode in ("semantic", "hybrid"))
    doc = {**doc, "served_by": "server"} if doc is not None else {
        **memory(ctx).tasks(session_id, " ".join(query), warn=warn, **options),
        "served_by": "local"}
    if mode is not None and not as_json:
        for note in doc["notes"]:
            warn(f"agenvoy: note: {note['message']}")
    emit(doc, as_json, _tasks_text)


def _tasks_text(doc: dict[str, Any]) -> str:
    if not doc["tasks"]:
        layout = doc.get("layout") or {}
        if layout.get("tasks_table"):
            return "no matching task"
        return "no tasks: this home's layout keeps none (Agenvoy 1.0 records them)"
    lines = []
    for t in doc["tasks"]:
        score = f"{t['score']:.3f} ({t['score_kind']})  " if "score" in t else ""
        lines.append(f"{score}{human_time(t['ended_at'])}  {t['session_id']}  "
                     f"{t['task_hash']}  [{t['model']}]")
        lines.append(f"  objective: {' '.join(t['objective'].split())[:300]}")
        if t["reply"]:
            lines.append(f"  reply: {' '.join(t['reply'].split())[:300]}")
    return "\n".join(lines)


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
