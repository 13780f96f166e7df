"""agenvoy context SESSION: the messages to send to the LLM this turn."""

from __future__ import annotations

import click

from agenvoy_cli.commands.common import json_option, memory, session_argument
from agenvoy_cli.conversation.messages import display_text
from agenvoy_cli.output import emit, format_option, warn


def _render(doc: dict) -> str:
    blocks = []
    for message in doc["messages"]:
        blocks.append(f"[{message['role']}]\n{display_text(message)}")
    return "\n\n".join(blocks)


@click.command("context")
@session_argument
@click.option("-n", "--max-messages", type=click.IntRange(min=0),
              help="How many recent messages (default: max_history_messages, 16).")
@format_option
@json_option
@click.pass_context
def command(ctx: click.Context, session_id: str, max_messages: int | None, as_json: bool,
        fmt: str | None = None) -> None:
    """Print the rolling summary (as a system message) and the last N messages of SESSION."""
    doc = memory(ctx).context(session_id, max_messages, warn=warn)
    emit(doc, as_json, _render,
         fmt=fmt, rows="messages")
