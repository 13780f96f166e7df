"""agenvoy forget SESSION (SEQ... | --match TEXT): remove messages everywhere they live."""

from __future__ import annotations

import click

from agenvoy_cli.api import FORGET_NOTE as NOTE
from agenvoy_cli.commands.common import (
    confirm_destructive,
    json_option,
    memory,
    session_argument,
)
from agenvoy_cli.home.layout import validate_name
from agenvoy_cli.output import emit, format_option, human_time, table, warn


def _render(doc: dict) -> str:
    rows = [(m["seq"], m["role"], human_time(m["sent_at"]),
             m["content"][:60].replace("\n", " ")) for m in doc["messages"]]
    verb = "would forget" if doc["dry_run"] else "forgot"
    return (table(rows, ["seq", "role", "sent at", "content"]) +
            f"\n{verb} {doc['count']} message(s) of {doc['session_id']} (history.json, the "
            f"archive and its search indexes, the vector index); {NOTE}")


@click.command("forget")
@session_argument
@click.argument("seqs", metavar="[SEQ]...", nargs=-1, type=click.IntRange(min=0))
@click.option("--match", metavar="TEXT",
              help="Every message containing TEXT (case-insensitive; text, tool calls, JSON).")
@click.option("--dry-run", is_flag=True, help="List the messages; change nothing.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@format_option
@json_option
@click.pass_context
def command(ctx: click.Context, session_id: str, seqs: tuple[int, ...], match: str | None,
            dry_run: bool, yes: bool, as_json: bool, fmt: str | None = None) -> None:
    """Remove messages of SESSION from history.json, the archive (both FTS indexes) and the
    vector index, e.g. a leaked secret. SEQ is a message's place, as search shows it.

    The rolling summary is not rewritten. Exit 1 when nothing matches.
    """
    validate_name(session_id)
    api = memory(ctx)
    if not dry_run:
        preview = api.forget(session_id, seqs, match, dry_run=True)
        confirm_destructive(f"forget {preview['count']} message(s) of {session_id!r}?",
                            f"forget messages of {session_id!r}", yes)
    emit(api.forget(session_id, seqs, match, dry_run=dry_run, warn=warn), as_json, _render,
         fmt=fmt, rows="messages")
