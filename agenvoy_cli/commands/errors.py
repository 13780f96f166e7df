"""agenvoy errors record|lookup|show|list|forget|prune: the cross-session error memory."""

from __future__ import annotations

import sys
from typing import Any, BinaryIO

import click

from agenvoy_cli.commands.common import (
    confirm_destructive,
    from_server,
    given_budget,
    json_option,
    memory,
    no_server_option,
    read_limited,
)
from agenvoy_cli.errormem.classify import ERROR_TYPES
from agenvoy_cli.errormem.records import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    OUTCOMES,
    SCORE_KIND,
    SHORT_ID,
    drafts_from_json,
    make_draft,
)
from agenvoy_cli.errormem.store import get
from agenvoy_cli.errors import AgenvoyError, BadInput
from agenvoy_cli.output import FORMATS, emit, format_option, human_time, table, warn
from agenvoy_cli.search.defaults import DEFAULT_BUDGET, check_budget


def _complete_column(ctx: click.Context, column: str, incomplete: str) -> list[Any]:
    """Values of one column of the home's records (SQLite read-only through home.sqlite, as
    every read; nothing heavy, nothing created)."""
    import sqlite3

    from click.shell_completion import CompletionItem

    from agenvoy_cli.errormem.store import column_values
    from agenvoy_cli.home import sqlite
    from agenvoy_cli.home.layout import Layout, resolve_home

    try:  # a bad home or a planted link: no completions, never a traceback
        db = Layout(resolve_home((ctx.find_root().params or {}).get("home"))).db
    except AgenvoyError:
        return []
    if not db.exists():
        return []
    try:
        conn = sqlite.connect(db, 1.0, readonly=True)
    except (AgenvoyError, sqlite3.Error):
        return []
    try:
        names = column_values(conn, column)
    except sqlite3.Error:  # no records table yet, or a damaged archive
        return []
    finally:
        conn.close()
    return [CompletionItem(n) for n in names if str(n).startswith(incomplete)]


def _complete_tool(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    return _complete_column(ctx, "tool_name", incomplete)


def _complete_id(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    return _complete_column(ctx, "id", incomplete)


def _complete_choice(values: tuple[str, ...]) -> Any:
    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
        from click.shell_completion import CompletionItem

        return [CompletionItem(v) for v in values if v.startswith(incomplete)]

    return complete


def _semantic_option(func: Any) -> Any:
    return click.option(
        "--semantic/--no-semantic", default=None,
        help="Use the vector index (default: automatic; AGENVOY_ERRORS_SEMANTIC=0 turns "
             "it off). --no-semantic never loads the embedding model.")(func)


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


@click.group("errors")
def command() -> None:
    """Cross-session memory of tool failures and their fixes.

    An agent records what failed and how it ended; the next time a tool fails, in any
    session, `lookup` returns the related records and a hint for the agent's next turn:
    a resolved record's action must be applied, a failed or abandoned one avoided.
    Records expire after 90 days (AGENVOY_ERROR_TTL_DAYS); every lookup hit renews them.
    """


@command.command("record")
@click.option("--tool", "tool_name", metavar="NAME", shell_complete=_complete_tool,
              help="The tool that failed.")
@click.option("-k", "--keyword", "keywords", multiple=True, metavar="K",
              help="A keyword (repeatable; trimmed, lower-cased, de-duplicated).")
@click.option("--symptom", metavar="TEXT", help="What the failure looked like.")
@click.option("--cause", metavar="TEXT", help="Why it happened (optional).")
@click.option("--action", metavar="TEXT", help="What was done about it.")
@click.option("--outcome", metavar="OUTCOME",
              shell_complete=_complete_choice(OUTCOMES),
              help="resolved, failed or abandoned.")
@click.option("--from-json", "source", type=click.File("rb"), metavar="FILE|-",
              help='The tool-call arguments as JSON: {"tool_name","keywords","symptom",'
                   '"cause","action","outcome"} (or a list of them).')
@_semantic_option
@format_option
@json_option
@click.pass_context
def record_cmd(ctx: click.Context, tool_name: str | None, keywords: tuple[str, ...],
               symptom: str | None, cause: str | None, action: str | None,
               outcome: str | None, source: BinaryIO | None, semantic: bool | None,
               as_json: bool, fmt: str | None = None) -> None:
    """Remember a tool failure and how it ended.

    The failure (tool, symptom, cause, keywords), the action taken and its outcome.

    An error type is derived from symptom + cause and added as keyword error_type:<t>.
    Prints the record id (one per line for a list)."""
    fields = (tool_name, keywords, symptom, cause, action, outcome)
    if source is not None:
        if any(fields):
            raise BadInput("--from-json replaces the field options; give one or the other")
        name = "stdin" if source is sys.stdin.buffer or source.name == "<stdin>" else source.name
        drafts = drafts_from_json(read_limited(source, name), name, warn)
    else:
        missing = [opt for opt, value in (("--tool", tool_name), ("--keyword", keywords),
                                          ("--symptom", symptom), ("--action", action),
                                          ("--outcome", outcome)) if not value]
        if missing:
            raise BadInput(f"missing {', '.join(missing)} (or give --from-json FILE|-)")
        drafts = [make_draft(tool_name, list(keywords), symptom, cause, action,
                                      outcome)]
    emit(memory(ctx).record_errors(drafts, semantic=semantic, warn=warn), as_json,
         lambda d: "\n".join(r["id"] for r in d["records"]), fmt=fmt, rows="records")


def _read_query(words: tuple[str, ...], text: str | None) -> str:
    if text is not None:
        if words:
            raise BadInput("give the query as QUERY or as --query, not both")
        return text
    if words == ("-",):
        return read_limited(sys.stdin.buffer, "stdin").decode("utf-8", "replace")
    return " ".join(words)


@command.command("lookup")
@click.argument("query", nargs=-1, metavar="[QUERY...|-]")
@click.option("-q", "--query", "query_text", metavar="TEXT",
              help="The query as one option value (safe for error text starting with '-').")
@click.option("--tool", metavar="NAME", shell_complete=_complete_tool,
              help="The tool that failed: only its records are returned (as upstream).")
@click.option("--type", "error_type", metavar="TYPE",
              shell_complete=_complete_choice(ERROR_TYPES),
              help="Error type to match (default: classified from QUERY).")
@click.option("-n", "--limit", type=click.IntRange(1, MAX_LIMIT),
              default=DEFAULT_LIMIT, show_default=True, help="At most N records.")
@click.option("--format", "fmt", type=click.Choice([*FORMATS, "hint"]), default=None,
              help="table (the default), json (as --json), jsonl or csv (one record per "
                   "line or row), hint (only the text to inject into the agent's next turn).")
@_semantic_option
@click.option("--budget", type=float, default=DEFAULT_BUDGET, show_default=True,
              metavar="SECONDS",
              help="At most this long embedding records that have no vector yet; the rest "
                   "are matched by keywords (JSON: unindexed_count). Env "
                   "AGENVOY_SEARCH_BUDGET.")
@json_option
@no_server_option
@click.pass_context
def lookup_cmd(ctx: click.Context, query: tuple[str, ...], query_text: str | None,
               tool: str | None, error_type: str | None, limit: int, fmt: str | None,
               semantic: bool | None, budget: float, as_json: bool,
               no_server: bool = False) -> None:
    """Records related to an error text or keywords, best first.

    QUERY is the error text or keywords (`-` reads it from stdin; text that starts with
    '-' goes after `--` or in --query). Every record returned has its expiry renewed.
    Nothing found: nothing on stdout, exit 0."""
    text = _read_query(query, query_text)
    budget = given_budget(ctx, budget)
    check_budget(budget)
    def loads_model() -> bool:  # asked only under `server = auto` with no server running
        from agenvoy_cli.errormem.ranking import loads_model

        return loads_model(memory(ctx).store, text, tool=tool, error_type=error_type,
                           semantic=semantic)

    doc = from_server(ctx, no_server, "lookup_errors", [text], {
        "tool": tool, "error_type": error_type, "limit": limit, "semantic": semantic,
        "budget": budget}, wait=budget, models=loads_model)
    doc = {**doc, "served_by": "server"} if doc is not None else {
        **memory(ctx).lookup_errors(text, tool=tool, error_type=error_type, limit=limit,
                                    semantic=semantic, warn=warn, budget=budget),
        "served_by": "local"}
    if fmt == "hint" and not as_json:
        if doc["hint"]:
            click.echo(doc["hint"])
    elif not doc["records"] and not as_json and fmt in (None, "table"):
        warn("no related error records")
    else:
        emit(doc, as_json, lambda d: table(
            [(r["id"][:SHORT_ID], f"{r['score']:.2f}", r["tool_name"], r["outcome"],
              r["error_type"] or "-", _clip(r["symptom"], 50), _clip(r["action"], 50))
             for r in d["records"]],
            ["id", f"score ({SCORE_KIND})", "tool", "outcome", "type", "symptom", "action"]),
             fmt=fmt, rows="records")


@command.command("show")
@click.argument("record_id", metavar="ID", shell_complete=_complete_id)
@json_option
@click.pass_context
def show_cmd(ctx: click.Context, record_id: str, as_json: bool) -> None:
    """One record (ID or a unique prefix of at least 6 digits)."""
    emit(memory(ctx).error(record_id), as_json, lambda d: table(
        [(k, ", ".join(v) if isinstance(v, list) else human_time(v) if k.endswith("_at")
          else ("-" if v in (None, "") else v))
         for k, v in d.items() if not k.endswith("_ns") and k != "schema_version"],
        ["field", "value"]))


@command.command("list")
@click.option("--tool", metavar="NAME", shell_complete=_complete_tool, help="Only this tool.")
@click.option("--outcome", metavar="OUTCOME",
              shell_complete=_complete_choice(OUTCOMES), help="Only this outcome.")
@click.option("--type", "error_type", metavar="TYPE",
              shell_complete=_complete_choice(ERROR_TYPES),
              help="Only this error type.")
@click.option("-n", "--limit", type=click.IntRange(1), help="At most N records (newest).")
@format_option
@json_option
@click.pass_context
def list_cmd(ctx: click.Context, tool: str | None, outcome: str | None,
             error_type: str | None, limit: int | None, as_json: bool,
        fmt: str | None = None) -> None:
    """Live records, newest first (listing does not renew them)."""
    doc = memory(ctx).errors(tool=tool, outcome=outcome, error_type=error_type, limit=limit)
    emit(doc, as_json, lambda d: table(
        [(r["id"][:SHORT_ID], human_time(r["created_at"]),
          human_time(r["expires_at"])[:10], r["tool_name"], r["outcome"],
          r["error_type"] or "-", r["hit_count"], _clip(r["symptom"], 50))
         for r in d["records"]],
        ["id", "created", "expires", "tool", "outcome", "type", "hits", "symptom"],
    ) if d["records"] else "no error records", fmt=fmt, rows="records")


@command.command("forget")
@click.argument("record_id", metavar="ID", shell_complete=_complete_id)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_context
def forget_cmd(ctx: click.Context, record_id: str, yes: bool, as_json: bool) -> None:
    """Delete one record (and its vector)."""
    api = memory(ctx)
    rec = get(api.store, record_id)  # unknown id: exit 3 before any question
    confirm_destructive(f"forget error record {rec.short_id} ({rec.tool_name}: "
                        f"{_clip(rec.symptom, 60)})?", f"forget {rec.short_id}", yes)
    emit(api.forget_error(rec.id, warn=warn), as_json, lambda d: f"forgot {d['record_id']}")


@command.command("prune")
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@format_option
@json_option
@click.pass_context
def prune_cmd(ctx: click.Context, dry_run: bool, as_json: bool, fmt: str | None = None) -> None:
    """Remove expired records and their vectors.

    Expired records are never returned, pruned or not: this only frees the space."""
    doc = memory(ctx).prune_errors(dry_run=dry_run, warn=warn)
    verb = "would remove" if dry_run else "removed"
    emit(doc, as_json, lambda d: f"{verb} {d['count']} expired error record(s)", fmt=fmt,
         rows="records")
