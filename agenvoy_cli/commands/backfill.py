"""agenvoy backfill [SESSION | --all] [--vectors]: write into the stores what they lack."""

from __future__ import annotations

import shlex

import click

from agenvoy_cli.commands.common import complete_session, json_option, memory
from agenvoy_cli.errors import BadInput
from agenvoy_cli.output import ProgressBar, emit, format_option, table, warn


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
    unit = "messages" if vectors else "sessions"
    bar = ProgressBar("backfill", 2, not as_json and fmt in (None, "table"), unit=unit)
    done = [0]

    def progress(n: int, total: int) -> None:
        done[0] = n
        bar(n, total)

    try:
        doc = memory(ctx).backfill(session_id, vectors=vectors, rebuild=rebuild,
                                   progress=progress)
    except KeyboardInterrupt:
        bar.close()
        again = "agenvoy backfill " + (shlex.quote(session_id) if session_id else "--all") + \
            (" --vectors" if vectors else "")
        warn(f"agenvoy: {done[0]} {unit} were done and are kept; run `{again}` to do the rest")
        raise
    finally:
        bar.close()
    emit(doc, as_json, lambda d: table(
        [tuple(r.values()) for r in d["sessions"]], list(d["sessions"][0].keys())
    ) if d["sessions"] else "no sessions", fmt=fmt, rows="sessions")
