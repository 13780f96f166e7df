"""agenvoy context SESSION: the messages to send to the LLM this turn."""

from __future__ import annotations

import click

from agenvoy_cli.commands.common import get_store, json_option, session_argument
from agenvoy_cli.conversation.messages import content_text
from agenvoy_cli.output import emit, warn


def _render(doc: dict) -> str:
    blocks = []
    for message in doc["messages"]:
        blocks.append(f"[{message['role']}]\n{content_text(message.get('content'))}")
    return "\n\n".join(blocks)


@click.command("context")
@session_argument
@click.option("-n", "--max-messages", type=click.IntRange(min=0),
              help="How many recent messages (default: max_history_messages, 16).")
@json_option
@click.pass_context
def command(ctx: click.Context, session_id: str, max_messages: int | None, as_json: bool) -> None:
    """Print the rolling summary (as a system message) and the last N messages of SESSION."""
    messages = get_store(ctx).context(session_id, max_messages, warn=warn)
    emit({"session_id": session_id, "messages": messages}, as_json, _render)
