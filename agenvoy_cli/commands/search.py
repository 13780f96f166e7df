"""agenvoy search SESSION QUERY: semantic (default), keyword or hybrid recall."""

from __future__ import annotations

from typing import Any

import click

from agenvoy_cli.commands.common import (
    checked_session,
    from_server,
    given_budget,
    json_option,
    memory,
    no_server_option,
    one_query,
    session_argument,
)
from agenvoy_cli.output import ProgressBar, emit, format_option, human_time, warn
from agenvoy_cli.search.defaults import DEFAULT_BUDGET, DEFAULT_LIMIT, MODES, check_budget

PROGRESS_MIN = 100  # messages to embed before a progress bar is worth showing


def _line(row: dict[str, Any], marker: str = "") -> str:
    from agenvoy_cli.search.results import who  # after the answer: not on the fast path

    return f"{marker}[{human_time(row['sent_at'])} · {who(row)}] {row['content']}"


# notes the text output shows on stdout (in place of results, or below them), not on stderr
ON_STDOUT = ("nothing_searchable", "context_window", "not_related", "any_term",
             "other_script", "outside_window")


def _empty(doc: dict[str, Any]) -> str:
    # the first such note; that the time window hid every match says the most
    for note in sorted(doc.get("notes", ()), key=lambda n: n["code"] != "outside_window"):
        if note["code"] in ON_STDOUT:
            return str(note["message"])
    if doc["mode"] == "keyword":
        return f"no matches with keyword: {doc['query']}"
    return f"no message is related closely enough to: {doc['query']}"


def _any_note(doc: dict[str, Any], out: list[str]) -> None:
    codes = {n["code"]: n["message"] for n in doc.get("notes", ())}
    if "any_term" in codes:
        out.append("")
        out.append("(no message has every term; showing messages with any of them)")
    if "context_window" in codes:  # hybrid: keyword matches inside the window
        out.append("")
        out.append(f"({codes['context_window']})")


def _render_time(doc: dict[str, Any]) -> str:
    """--order time: by source (archive, recent), then time; segments apart."""
    rows = doc["results"]
    if not rows:
        return _empty(doc)
    from agenvoy_cli.search.results import grouped_lines

    out = grouped_lines(doc, _line)
    _any_note(doc, out)
    return "\n".join(out)


def _entries(group: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """One entry per hit of a segment, with the context rows nearest to it (a row between
    two hits goes to the closer one, the later on a tie: context usually leads up to a hit),
    so that each number shows one hit and the best hit is never listed under another."""
    hits = [i for i, r in enumerate(group) if r["hit"]]
    if len(hits) <= 1:
        return [group]
    owner = [min(hits, key=lambda h: (abs(h - i), -h)) for i in range(len(group))]
    return [[r for i, r in enumerate(group) if owner[i] == h] for h in hits]


def _render_rank(doc: dict[str, Any]) -> str:
    """--order rank (default): each hit with its context, best score first, numbered, the
    score shown and the matching message marked with '>'."""
    rows = doc["results"]
    if not rows:
        return _empty(doc)
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["source"], row["segment"]), []).append(row)

    def best(entry: list[dict[str, Any]]) -> float:
        return max((r["score"] for r in entry if r["score"] is not None), default=0.0)

    entries = [(source, entry) for (source, _), group in groups.items()
               for entry in _entries(group)]
    entries.sort(key=lambda e: -best(e[1]))  # stable: ties keep order
    kind = doc.get("score_kind") or "score"  # its scale: docs/json-vocabulary.md
    out: list[str] = []
    for rank, (source, entry) in enumerate(entries, 1):
        if out:
            out.append("")
        out.append(f"#{rank}  score {best(entry):.3f} ({kind})  [{source}]")
        out.extend(_line(r, "> " if r["hit"] else "  ") for r in entry)
    _any_note(doc, out)
    return "\n".join(out)


@click.command("search")
@session_argument
@click.argument("query", nargs=-1, metavar="[QUERY...]")
@click.option("-q", "--query", "query_text", metavar="TEXT",
              help="The query as one option value (safe for text starting with '-').")
@click.option("--mode", type=click.Choice(MODES), default="semantic", show_default=True,
              help="semantic: vectors over the recent part; keyword: every term, archive + "
                   "recent; hybrid: keyword ranking fused with vectors.")
@click.option("--range", "range_", metavar="DURATION", default="all", show_default=True,
              help="Only messages from the last DURATION: 30m, 12h, 7d, 2w, 1mo, 1y "
                   "(m is minutes, mo months).")
@click.option("--since", metavar="TIME",
              help="Only messages at or after TIME: a date/time, 'yesterday', or a "
                   "duration ago (90m, 7d ago, 1mo).")
@click.option("--until", metavar="TIME",
              help="Only messages at or before TIME (a date alone means through that day).")
@click.option("--limit", type=click.IntRange(min=1, max=1000), default=DEFAULT_LIMIT,
              show_default=True, help="Hits per source (archive, recent).")
@click.option("--match", type=click.Choice(["all", "any"]), default=None,
              help="keyword: every term (default for 1-3 terms; any term when no message "
                   "has every term) or any term (default for longer queries and for "
                   "questions: a '?' last or what/when/where/who/why/how/which first).")
@click.option("--budget", type=float, default=DEFAULT_BUDGET, show_default=True,
              metavar="SECONDS",
              help="At most this long embedding new messages first (semantic, hybrid); "
                   "what is left is searched by keyword (JSON: unindexed_count). "
                   "Env AGENVOY_SEARCH_BUDGET.")
@click.option("--order", type=click.Choice(["rank", "time"]), default="rank", show_default=True,
              help="Text output: rank (best hit first, numbered, with its score; the hit "
                   "marked '>') or time (by source, oldest first).")
@format_option
@json_option
@no_server_option
@click.pass_context
def command(ctx: click.Context, session_id: str, query: tuple[str, ...],
            query_text: str | None, mode: str, range_: str, since: str | None,
            until: str | None, limit: int, match: str | None, budget: float, order: str,
            as_json: bool, fmt: str | None = None, no_server: bool = False) -> None:
    """Search SESSION's memory for QUERY (several words are joined).

    keyword finds messages holding every term of a short query (1-3 terms after stop-words;
    any term when no message has them all, or for a longer query or one phrased as a
    question; --match forces either;
    any order, case-insensitive; Chinese by any substring of two or more characters), in two
    groups: [archive] (trimmed out of
    history.json, from SQLite) and [recent] (history.json). semantic and hybrid leave out the
    context window (the last max_history_messages; when every message is in it, semantic
    finds nothing and hybrid answers its keyword matches) and show each hit with 2 messages
    before and 1 after. A semantic or hybrid search first embeds messages not yet indexed, for at
    most --budget seconds; messages left without a vector are still searched by keyword.
    No match is not an error (exit 0). A query that starts with '-' goes in -q/--query
    (or after --)."""
    checked_session(session_id)
    text = one_query(query, query_text)
    budget = given_budget(ctx, budget)
    check_budget(budget)
    doc = from_server(ctx, no_server, "search", [session_id, text], {
        "mode": mode, "limit": limit, "range": range_, "since": since, "until": until,
        "budget": budget, "match": match}, wait=budget, models=mode != "keyword")
    if doc is None:  # the local path: the search engine is imported only now
        from agenvoy_cli.search.catchup import notice_line

        bar = ProgressBar("indexing", PROGRESS_MIN, unit="messages")
        try:
            doc = memory(ctx).search(session_id, text, mode=mode, limit=limit, range=range_,
                                     since=since, until=until, progress=bar, budget=budget,
                                     notice=notice_line(session_id, budget), match=match)
        finally:
            bar.close()
        doc = {**doc, "served_by": "local"}
    else:
        doc = {**doc, "served_by": "server"}
    for note in doc["notes"]:
        if note["code"] not in ON_STDOUT and note["code"] != "unsearchable":  # warned
            warn(f"agenvoy: note: {note['message']}")
    emit(doc, as_json, _render_rank if order == "rank" else _render_time,
         fmt=fmt, rows="results")
