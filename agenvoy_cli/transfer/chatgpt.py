"""ChatGPT's data export: conversations.json, a list of conversations, each a tree of
messages (mapping {id: {message, parent, children}}) whose shown branch ends at
current_node. One session per conversation; create_time is the time; parts that are not
text (images, files) are kept as parts; an assistant message sent to a tool (recipient)
becomes a tool call, the tool's answer its tool message."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from agenvoy_cli.transfer.records import Record, Timed, Unit, local_time, slug, text_parts
from agenvoy_cli.transfer.stream import elements

ROLES = {"user": "user", "assistant": "assistant", "system": "system", "tool": "tool"}


def branch(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    """The nodes from the root to current_node (the branch the user last saw)."""
    mapping = conversation.get("mapping") or {}
    node_id = conversation.get("current_node")
    if node_id not in mapping:  # no current node: the newest leaf
        leaves = [k for k, v in mapping.items() if not v.get("children")]
        node_id = leaves[-1] if leaves else None
    path, seen = [], set()
    while node_id is not None and node_id in mapping and node_id not in seen:
        seen.add(node_id)
        path.append(mapping[node_id])
        node_id = mapping[node_id].get("parent")
    return path[::-1]


def _content(content: dict[str, Any]) -> str | list[dict[str, Any]] | None:
    kind = content.get("content_type")
    if kind in ("text", "multimodal_text"):
        parts = []
        for part in content.get("parts") or []:
            if isinstance(part, str):
                if part.strip():
                    parts.append({"type": "text", "text": part})
            elif isinstance(part, dict):
                parts.append({"type": str(part.get("content_type") or "part"),
                              **{k: v for k, v in part.items() if k != "content_type"}})
        return text_parts(parts)
    if kind in ("code", "execution_output"):
        return content.get("text") or None
    text = content.get("text") or content.get("result") or content.get("content")
    if isinstance(text, str) and text.strip():
        return text
    return None


def messages(conversation: dict[str, Any]) -> Iterator[tuple[bytes, list[Timed]]]:
    default = local_time(conversation.get("create_time"))
    call: str | None = None
    for node in branch(conversation):
        message = node.get("message")
        raw = orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
        if not isinstance(message, dict):
            yield raw, []
            continue
        role = ROLES.get(str((message.get("author") or {}).get("role")))
        meta = message.get("metadata") or {}
        content = _content(message.get("content") or {})
        moment = local_time(message.get("create_time")) or default
        recipient = message.get("recipient") or "all"
        if role is None or content is None or meta.get("is_visually_hidden_from_conversation"):
            yield raw, []
            continue
        if role == "assistant" and recipient != "all":
            call = str(node.get("id") or message.get("id"))
            text = content if isinstance(content, str) else orjson.dumps(content).decode()
            yield raw, [({"role": "assistant", "content": None, "tool_calls": [
                {"id": call, "type": "function", "function": {
                    "name": recipient, "arguments": orjson.dumps({"input": text}).decode()}}]},
                moment)]
            continue
        if role == "tool":
            if call is not None:
                yield raw, [({"role": "tool", "tool_call_id": call, "content": content},
                             moment)]
                call = None
            else:  # a tool's output no call asked for (an image generator, a browser)
                name = (message.get("author") or {}).get("name") or "tool"
                yield raw, [({"role": "assistant", "name": name, "content": content}, moment)]
            continue
        call = None
        yield raw, [({"role": role, "content": content}, moment)]


def units(path: Path, session: str | None,
          progress_bytes: Callable[[int], None] | None = None) -> Iterator[Unit]:
    with open(path, "rb") as handle:
        for index, (conversation, read) in enumerate(elements(handle)):
            if progress_bytes is not None:
                progress_bytes(read)
            if not isinstance(conversation, dict):
                yield _bad(path, index, "not a conversation object")
                continue
            cid = str(conversation.get("conversation_id") or conversation.get("id") or "")
            if not cid:
                cid = hashlib.blake2b(orjson.dumps(conversation.get("title")) + str(
                    conversation.get("create_time")).encode(), digest_size=8).hexdigest()
            try:
                done = [Record(raw, msgs) for raw, msgs in messages(conversation)]
            except (AttributeError, TypeError, ValueError) as exc:
                yield _bad(path, index, f"conversation {cid}: {exc}")
                continue
            title = str(conversation.get("title") or "")
            name = slug(title, 24)
            sid = session or f"chatgpt-{name + '-' if name else ''}{cid[:8]}"
            yield Unit(f"chatgpt:{cid}", "chatgpt", sid, partial(list, done),
                       {"title": title, "path": str(path.resolve())})


def _bad(path: Path, index: int, reason: str) -> Unit:
    key = f"chatgpt:{path.resolve()}#{index}"
    return Unit(key, "chatgpt", "chatgpt-malformed",
                lambda: [Record(b"", [], f"conversation {index}: {reason}")])
