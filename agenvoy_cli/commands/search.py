"""agenvoy search SESSION QUERY: semantic (default), keyword or hybrid recall."""

from __future__ import annotations

from typing import Any

import click

from agenvoy_cli.commands.common import checked_session, get_store, json_option, session_argument
from agenvoy_cli.output import ProgressBar, emit, warn
from agenvoy_cli.search.catchup import DEFAULT_BUDGET, check_budget, notice_line
from agenvoy_cli.search.engine import DEFAULT_LIMIT, MODES, RANGES, search, time_window

PROGRESS_MIN = 100  # messages to embed before a progress bar is worth showing


def _render(doc: dict[str, Any]) -> str:
    rows = doc["results"]
    if not rows:
        if doc.get("match") == "none":
            return f"nothing searchable in: {doc['query']}"
        return f"no matches with keyword: {doc['query']}"
    labelled = doc["mode"] != "semantic"
    out: list[str] = []
    label = segment = None
    for row in rows:
        if labelled and row["source"] != label:
            if out:
                out.append("")
            label = row["source"]
            out.append(f"[{label}]")
        elif row["segment"] != segment and out:
            out.append("")
        segment = row["segment"]
        out.append(f"[{row['time']} · {row['role']}] {row['content']}")
    if doc.get("match") == "any" and doc["mode"] == "keyword":
        out.append("")
        out.append("(no message has every term; showing messages with any of them)")
    return "\n".join(out)


@click.command("search")
@session_argument
@click.argument("query", nargs=-1, required=True)
@click.option("--mode", type=click.Choice(MODES), default="semantic", show_default=True,
              help="semantic: vectors over the recent part; keyword: every term, archive + "
                   "recent; hybrid: keyword ranking fused with vectors.")
@click.option("--range", "range_", type=click.Choice(list(RANGES)), default="all",
              show_default=True, help="Only messages from the last day, week, 30 days, year.")
@click.option("--since", metavar="TIME",
              help="Only messages at or after TIME (anything dateutil parses, or 7d/12h ago).")
@click.option("--until", metavar="TIME",
              help="Only messages at or before TIME (a date alone means through that day).")
@click.option("--limit", type=click.IntRange(min=1, max=1000), default=DEFAULT_LIMIT,
              show_default=True, help="Hits per source (archive, recent).")
@click.option("--budget", type=float, default=DEFAULT_BUDGET, show_default=True,
              metavar="SECONDS", envvar="AGENVOY_SEARCH_BUDGET",
              help="At most this long embedding new messages first (semantic, hybrid); "
                   "what is left is searched by keyword (JSON: unindexed_count). "
                   "Env AGENVOY_SEARCH_BUDGET.")
@json_option
@click.pass_context
def command(ctx: click.Context, session_id: str, query: tuple[str, ...], mode: str, range_: str,
            since: str | None, until: str | None, limit: int, budget: float,
            as_json: bool) -> None:
    """Search SESSION's memory for QUERY (several words are joined).

    keyword finds messages holding every term (any order, case-insensitive; Chinese by any
    substring of two or more characters), in two groups: [archive] (trimmed out of
    history.json, from SQLite) and [recent] (history.json). semantic and hybrid leave out the
    context window (the last max_history_messages) and show each hit with 2 messages before
    and 1 after. A semantic or hybrid search first embeds messages not yet indexed, for at
    most --budget seconds; messages left without a vector are still searched by keyword.
    No match is not an error (exit 0). Put -- before a query that starts with '-'."""
    checked_session(session_id)
    check_budget(budget)
    window = time_window(range_, since, until)
    store = get_store(ctx)
    bar = ProgressBar("indexing", PROGRESS_MIN, unit="messages")
    try:
        result = search(store, session_id, " ".join(query), mode, limit=limit, window=window,
                        progress=bar, budget=budget, notice=notice_line(session_id, budget))
    finally:
        bar.close()
    for note in result.notes:
        warn(f"agenvoy: note: {note}")
    emit(result.as_dict(), as_json, _render)
