"""agenvoy backfill [SESSION | --all] [--vectors]: write into the stores what they lack."""

from __future__ import annotations

from typing import Any

import click

from agenvoy_cli.commands.common import complete_session, get_store, json_option
from agenvoy_cli.contract import listing
from agenvoy_cli.errors import BadInput
from agenvoy_cli.output import ProgressBar, emit, format_option, table


@click.command("backfill")
@click.argument("session_id", metavar="[SESSION]", required=False, shell_complete=complete_session)
@click.option("--all", "all_sessions", is_flag=True, help="Every session of the home.")
@click.option("--vectors", is_flag=True, help="Also (re)build the vector index of the recent part.")
@click.option("--rebuild", is_flag=True,
              help="With --vectors: drop the vector index first (after an embedder change).")
@format_option
@json_option
@click.pass_context
def command(ctx: click.Context, session_id: str | None, all_sessions: bool, vectors: bool,
            rebuild: bool, as_json: bool, fmt: str | None = None) -> None:
    """Write every history.json message SQLite lacks into SQLite (never a duplicate; a second
    run changes nothing). First import of an existing Agenvoy home, or repair after a crash."""
    if bool(session_id) == all_sessions:
        raise BadInput("give a SESSION or --all (not both)")
    if rebuild and not vectors:
        raise BadInput("--rebuild goes with --vectors")
    store = get_store(ctx)
    store.rebuilding = all_sessions  # --all may start a new archive where one was lost
    if session_id:
        store.require(session_id)
    ids = [session_id] if session_id else store.session_ids()
    if rebuild:
        from agenvoy_cli.vectors import index as vector_index

        with store.write_lock():
            vector_index.drop_index(store, vector_index.MESSAGES)
    results = []
    bar = ProgressBar("backfill", 2, not as_json and fmt in (None, "table"), unit="sessions")
    try:
        for done, sid in enumerate(ids, 1):
            with store.write_lock():
                synced = store.sync(sid)
            row: dict[str, Any] = {"session_id": sid, "inserted": synced.inserted}
            if vectors:
                from agenvoy_cli.search.engine import index_session

                row["embedded"] = index_session(store, sid, full=True)  # also repairs
            results.append(row)
            bar(done, len(ids))
    finally:
        bar.close()
    doc = {**listing("sessions", results), "inserted": sum(r["inserted"] for r in results)}
    if vectors:
        doc["embedded"] = sum(r["embedded"] for r in results)
    emit(doc, as_json, lambda d: table(
        [tuple(r.values()) for r in d["sessions"]], list(d["sessions"][0].keys())
    ) if d["sessions"] else "no sessions", fmt=fmt, rows="sessions")
