"""agenvoy forget SESSION (SEQ... | --match TEXT): remove messages everywhere they live."""

from __future__ import annotations

import click

from agenvoy_cli.commands.common import (
    confirm_destructive,
    get_store,
    json_option,
    session_argument,
)
from agenvoy_cli.conversation.forget import forget_messages
from agenvoy_cli.home.layout import validate_name
from agenvoy_cli.output import emit, table

NOTE = "summary.json is not rewritten: it may still mention what was forgotten"


def _render(doc: dict) -> str:
    rows = [(m["seq"], m["role"], m["sent_at_ns"], m["content"][:60].replace("\n", " "))
            for m in doc["messages"]]
    verb = "would forget" if doc["dry_run"] else "forgot"
    return (table(rows, ["seq", "role", "sent_at_ns", "content"]) +
            f"\n{verb} {doc['count']} message(s) of {doc['session_id']}; {NOTE}")


@click.command("forget")
@session_argument
@click.argument("seqs", metavar="[SEQ]...", nargs=-1, type=click.IntRange(min=0))
@click.option("--match", metavar="TEXT",
              help="Every message containing TEXT (case-insensitive; text, tool calls, JSON).")
@click.option("--dry-run", is_flag=True, help="List the messages; change nothing.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_context
def command(ctx: click.Context, session_id: str, seqs: tuple[int, ...], match: str | None,
            dry_run: bool, yes: bool, as_json: bool) -> None:
    """Remove messages of SESSION from history.json, the archive (both FTS indexes) and the
    vector index, e.g. a leaked secret. SEQ is a message's place, as search shows it.

    The rolling summary is not rewritten. Exit 1 when nothing matches.
    """
    validate_name(session_id)
    store = get_store(ctx)
    if not dry_run:
        preview = forget_messages(store, session_id, seqs, match, dry_run=True)
        confirm_destructive(f"forget {len(preview.messages)} message(s) of {session_id!r}?",
                            f"forget messages of {session_id!r}", yes)
    result = forget_messages(store, session_id, seqs, match, dry_run=dry_run)
    doc = {"session_id": session_id, "dry_run": result.dry_run,
           "count": len(result.messages),
           "messages": [{"seq": m.seq, "role": m.role, "sent_at_ns": m.send_at,
                         "content": m.body} for m in result.messages],
           "removed_from_history": result.from_history, "notes": [NOTE]}
    emit(doc, as_json, _render)
