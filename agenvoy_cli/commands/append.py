"""agenvoy append SESSION: one message from options, or a batch from a file or stdin."""

from __future__ import annotations

import sys
from typing import Any

import click
import orjson

from agenvoy_cli.commands.common import json_option, memory, read_limited, session_argument
from agenvoy_cli.conversation.messages import INSTRUCTIONS, ROLES, parse_local_time
from agenvoy_cli.errors import BadInput
from agenvoy_cli.home.layout import validate_name
from agenvoy_cli.output import emit, warn


def read_input(source: str) -> str:
    """Text of a file or of stdin ('-'), strictly UTF-8."""
    where = "stdin" if source == "-" else source
    try:
        if source == "-":
            data = read_limited(sys.stdin.buffer, where)
        else:
            with open(source, "rb") as handle:
                data = read_limited(handle, where)
    except OSError as exc:
        raise BadInput(f"cannot read {source}: {exc.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{where} is not valid UTF-8 (byte {exc.start})") from None


def parse_batch(text: str) -> list[Any]:
    """A JSON array of messages, a single message object, or JSON Lines."""
    stripped = text.strip()
    if not stripped:
        raise BadInput("no messages in the input (empty)")
    if stripped[0] == "[":
        try:
            data = orjson.loads(stripped)
        except orjson.JSONDecodeError as exc:
            raise BadInput(f"malformed JSON: {exc}") from None
        if not isinstance(data, list):
            raise BadInput("expected a JSON array of messages")
        return data
    items = []
    for number, line in enumerate(stripped.splitlines(), 1):
        if not line.strip():
            continue
        try:
            items.append(orjson.loads(line))
        except orjson.JSONDecodeError as exc:
            if number == 1 and len(stripped.splitlines()) > 1:
                try:
                    return [orjson.loads(stripped)]  # one pretty-printed object
                except orjson.JSONDecodeError:
                    pass
            raise BadInput(f"malformed JSON on line {number}: {exc}") from None
    return items


@click.command("append")
@session_argument
@click.option("--role", type=click.Choice((*ROLES, INSTRUCTIONS)),
              help="Role of a single message (developer is stored as system).")
@click.option("--content", help="Content of a single message ('-' reads stdin).")
@click.option("--messages", "messages_file", metavar="FILE",
              help="JSON array or JSON Lines of messages ('-' reads stdin).")
@click.option("--time", "when", metavar="'YYYY-MM-DD HH:MM:SS'",
              help="Local time for the header of messages that have none (default: now).")
@click.option("--no-compact", is_flag=True, help="Do not compact even when over the limit.")
@click.option("--sender", metavar="NAME", default="",
              help="Who sent the messages: `sender` (Agenvoy v0.32's format) or the header's "
                   "傳送者 line.")
@json_option
@click.pass_context
def command(ctx: click.Context, session_id: str, role: str | None, content: str | None,
            messages_file: str | None, when: str | None, no_compact: bool, sender: str,
            as_json: bool) -> None:
    """Append messages to SESSION: history.json first, then SQLite, under the store lock.

    A batch is all or nothing: one invalid message changes nothing (exit 2).
    """
    validate_name(session_id)
    if messages_file is not None:
        if role or content is not None:
            raise BadInput("use either --messages or --role/--content, not both")
        batch = parse_batch(read_input(messages_file))
    else:
        if not role or content is None:
            raise BadInput("give --role and --content, or --messages FILE")
        if content == "-":
            content = read_input("-")
        batch = [{"role": role, "content": content}]
    moment = parse_local_time(when) if when else None
    doc = memory(ctx).append(session_id, batch, time=moment, compact=not no_compact,
                             sender=sender, warn=warn)
    emit(doc, as_json, lambda d: (
        f"appended {d['appended']} message(s) to {d['session_id']}: "
        f"{d['message_count']} in history.json, {d['bytes']} bytes"
        + (f" (compacted: {d['compaction']['removed']} removed)" if d["compaction"] else "")))
