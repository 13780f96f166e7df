"""agenvoy compact SESSION | --all: trim history.json, keeping everything in the archive."""

from __future__ import annotations

import click

from agenvoy_cli.commands.common import complete_session, json_option, memory
from agenvoy_cli.errors import BadInput
from agenvoy_cli.output import emit, format_option, table


@click.command("compact")
@click.argument("session_id", metavar="[SESSION]", required=False, shell_complete=complete_session)
@click.option("--all", "all_sessions", is_flag=True, help="Every session of the home.")
@click.option("--max-bytes", type=click.IntRange(min=1024),
              help="Limit to compact against (default: max_history_bytes).")
@format_option
@json_option
@click.pass_context
def command(ctx: click.Context, session_id: str | None, all_sessions: bool,
            max_bytes: int | None, as_json: bool, fmt: str | None = None) -> None:
    """Trim SESSION's history.json from the oldest end to 80% of the limit, cutting only
    after an assistant message. SQLite keeps every message."""
    if bool(session_id) == all_sessions:
        raise BadInput("give a SESSION or --all (not both)")
    doc = memory(ctx).compact(session_id, max_bytes)
    if session_id:
        emit(doc, as_json, lambda d: f"{d['session_id']}: removed {d['removed']}, kept "
             f"{d['kept']}, {d['bytes_before']} -> {d['bytes_after']} bytes"
             + (f" ({d['note']})" if d["note"] else ""), fmt=fmt)
    else:
        emit(doc, as_json, lambda d: table(
            [(r["session_id"], r["removed"], r["kept"], r["bytes_before"], r["bytes_after"],
              r["note"]) for r in d["sessions"]],
            ["session", "removed", "kept", "bytes before", "bytes after", "note"],
        ) if d["sessions"] else "no sessions", fmt=fmt, rows="sessions")
