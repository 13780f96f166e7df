"""agenvoy backfill [SESSION | --all] [--vectors]: write into the stores what they lack."""

from __future__ import annotations

import click

from agenvoy_cli.commands.common import complete_session, json_option, memory
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
    bar = ProgressBar("backfill", 2, not as_json and fmt in (None, "table"),
                      unit="messages" if vectors else "sessions")
    try:
        doc = memory(ctx).backfill(session_id, vectors=vectors, rebuild=rebuild, progress=bar)
    finally:
        bar.close()
    emit(doc, as_json, lambda d: table(
        [tuple(r.values()) for r in d["sessions"]], list(d["sessions"][0].keys())
    ) if d["sessions"] else "no sessions", fmt=fmt, rows="sessions")
