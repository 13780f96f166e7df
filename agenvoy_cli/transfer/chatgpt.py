"""ChatGPT's data export: conversations.json, a list of conversations, each a tree of
messages (mapping {id: {message, parent, children}}) whose shown branch ends at
current_node. One session per conversation; each message's own create_time is its time
(the conversation's when it has none). An assistant message sent to a tool (recipient)
becomes a tool call, the tool's answer its tool message; "thoughts" become the next
answer's reasoning_content. Parts a provider does not take are turned into ones it does:
an image asset becomes an image_url with the bytes when the export folder has the file,
else a text part naming it; the original parts are kept in `original_parts`."""

from __future__ import annotations

import base64
import bisect
import hashlib
import os
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from agenvoy_cli.transfer.inputs import MAX_RECORD_BYTES, open_input
from agenvoy_cli.transfer.records import (
    ReadFailure,
    Record,
    Timed,
    Unit,
    moment_ns,
    raw_bytes,
    slug,
    text_parts,
)
from agenvoy_cli.transfer.stream import Malformed, elements

ROLES = {"user": "user", "assistant": "assistant", "system": "system", "tool": "tool"}
MAX_IMAGE_BYTES = 20 << 20  # an image file inlined as a data URL at most
MAX_ASSET_FILES = 200_000  # entries of the export folder looked at for assets
ASSET_DEPTH = 3  # folders below it (an export keeps assets at most a few levels down)
_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
         ".gif": "image/gif", ".webp": "image/webp"}


class Assets:
    """The files of an export folder by name, to find an asset pointer's file
    (file-service://file-abc -> file-abc-<name>.png; sediment://file_0.. -> file_0..-<id>.png)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._names: list[tuple[str, str]] | None = None

    def _index(self) -> list[tuple[str, str]]:
        if self._names is None:
            found: list[tuple[str, str]] = []
            seen = 0
            if self.folder is not None:
                top = len(self.folder.parts)
                for root, dirs, names in os.walk(self.folder):
                    dirs[:] = sorted(dirs) if len(Path(root).parts) - top < ASSET_DEPTH else []
                    found.extend((n, os.path.join(root, n)) for n in names
                                 if n.startswith(("file-", "file_")))
                    seen += len(names) + len(dirs)
                    if seen > MAX_ASSET_FILES:
                        break
            self._names = sorted(found)
        return self._names

    def find(self, pointer: str) -> Path | None:
        ident = pointer.rsplit("://", 1)[-1].rsplit("/", 1)[-1]
        if not ident.startswith(("file-", "file_")):
            return None
        names = self._index()
        at = bisect.bisect_left(names, (ident, ""))
        while at < len(names) and names[at][0].startswith(ident):
            name = names[at][0]
            if name[len(ident):][:1] in ("-", ".", ""):
                return Path(names[at][1])
            at += 1
        return None


def _asset(part: dict[str, Any], assets: Assets) -> dict[str, Any]:
    """An asset pointer as a part a provider accepts."""
    pointer = part.get("asset_pointer")
    kind = str(part.get("content_type") or "asset")
    if isinstance(pointer, str) and kind == "image_asset_pointer":
        path = assets.find(pointer)
        mime = _MIME.get(path.suffix.lower()) if path is not None else None
        if path is not None and mime is not None:
            try:
                with open_input(path) as handle:
                    data = handle.read(MAX_IMAGE_BYTES + 1)
            except (OSError, ReadFailure):
                data = b""
            if data and len(data) <= MAX_IMAGE_BYTES:
                url = f"data:{mime};base64,{base64.b64encode(data).decode()}"
                return {"type": "image_url", "image_url": {"url": url}}
    size = [f"{part[k]}" for k in ("width", "height") if isinstance(part.get(k), int)]
    about = [" x ".join(size)] if len(size) == 2 else []
    if isinstance(part.get("size_bytes"), int):
        about.append(f"{part['size_bytes']:,} bytes")
    what = kind.removesuffix("_asset_pointer").replace("_", " ")
    detail = f" ({', '.join(about)})" if about else ""
    return {"type": "text", "text": f"[{what} {pointer}{detail}: not in the export]"}


def _made(part: dict[str, Any], assets: Assets) -> dict[str, Any]:
    """The part a non-string part becomes: its asset, its text, or its kind in brackets."""
    text = part.get("text")
    if "asset_pointer" in part:
        return _asset(part, assets)
    if isinstance(text, str) and text.strip():
        return {"type": "text", "text": text}
    kind_name = str(part.get("content_type") or "part")
    return {"type": "text", "text": f"[{kind_name.replace('_', ' ')}]"}


def _text_content(content: dict[str, Any], assets: Assets
                  ) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    parts: list[dict[str, Any]] = []
    originals: list[dict[str, Any]] = []
    raw_parts = content.get("parts")
    for part in raw_parts if isinstance(raw_parts, list) else []:
        if isinstance(part, str):
            if part.strip():
                parts.append({"type": "text", "text": part})
        elif isinstance(part, dict):
            originals.append({"index": len(parts), "part": part})
            parts.append(_made(part, assets))
    return text_parts(parts), originals


def _content(content: dict[str, Any], assets: Assets
             ) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """(content, the original parts that were turned into others)."""
    kind = content.get("content_type")
    if kind in ("text", "multimodal_text"):
        return _text_content(content, assets)
    if kind in ("code", "execution_output"):
        text = content.get("text")
        return (text or None) if isinstance(text, str) else None, []
    text = content.get("text") or content.get("result") or content.get("content")
    if isinstance(text, str) and text.strip():
        return text, []
    return None, []


def _thoughts(content: dict[str, Any]) -> str:
    out: list[str] = []
    items = content.get("thoughts")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            out.extend(str(item[k]) for k in ("summary", "content")
                       if isinstance(item.get(k), str) and item[k].strip())
    return "\n".join(out)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def branch(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    """The nodes from the root to current_node (the branch the user last saw)."""
    mapping = conversation.get("mapping")
    mapping = mapping if isinstance(mapping, dict) else {}
    node_id = conversation.get("current_node")
    if not isinstance(node_id, str) or node_id not in mapping:  # no current node: newest leaf
        leaves = [k for k, v in mapping.items() if isinstance(v, dict) and not v.get("children")]
        node_id = leaves[-1] if leaves else None
    path, seen = [], set()
    while isinstance(node_id, str) and node_id in mapping and node_id not in seen:
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            break
        path.append(node)
        node_id = node.get("parent")
    return path[::-1]


class _Turns:
    """The messages of a branch's nodes, in order: a call's id carried to its output, and
    thoughts to the assistant message they lead to."""

    def __init__(self, assets: Assets, default: int | None) -> None:
        self.assets, self.default = assets, default
        self.call: str | None = None
        self.reasoning: list[str] = []

    def of(self, node: dict[str, Any], message: dict[str, Any]) -> list[Timed]:
        author = _dict(message.get("author"))
        role = ROLES.get(str(author.get("role")))
        meta = _dict(message.get("metadata"))
        body = _dict(message.get("content"))
        moment = moment_ns(message.get("create_time")) or self.default
        recipient = message.get("recipient") or "all"
        if body.get("content_type") == "thoughts":
            thought = _thoughts(body)
            if thought:
                self.reasoning.append(thought)
            return []
        content, originals = _content(body, self.assets)
        if role is None or content is None or meta.get("is_visually_hidden_from_conversation"):
            return []
        extra: dict[str, Any] = {"original_parts": originals} if originals else {}
        if role == "assistant" and self.reasoning:
            extra["reasoning_content"] = "\n".join(self.reasoning)
            self.reasoning = []
        if role == "assistant" and recipient != "all":
            return [(self._called(node, message, recipient, content, extra), moment)]
        if role == "tool":
            return [(self._output(author, content, extra), moment)]
        self.call = None
        return [({"role": role, "content": content, **extra}, moment)]

    def _called(self, node: dict[str, Any], message: dict[str, Any], recipient: Any,
                content: Any, extra: dict[str, Any]) -> dict[str, Any]:
        """An assistant message to a tool (its recipient): a call."""
        self.call = str(node.get("id") or message.get("id"))
        text = content if isinstance(content, str) else orjson.dumps(content).decode()
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": self.call, "type": "function", "function": {
                "name": str(recipient), "arguments": orjson.dumps({"input": text}).decode()}}],
            **extra}

    def _output(self, author: dict[str, Any], content: Any, extra: dict[str, Any]
                ) -> dict[str, Any]:
        if self.call is None:  # a tool's output no call asked for (an image generator, a
            # browser)
            return {"role": "assistant", "name": author.get("name") or "tool",
                    "content": content, **extra}
        out = {"role": "tool", "tool_call_id": self.call, "content": content, **extra}
        self.call = None
        return out


def messages(conversation: dict[str, Any], assets: Assets | None = None
             ) -> Iterator[tuple[bytes, list[Timed]]]:
    turns = _Turns(assets or Assets(None), moment_ns(conversation.get("create_time")))
    for node in branch(conversation):
        message = node.get("message")
        raw = raw_bytes(message)
        yield raw, turns.of(node, message) if isinstance(message, dict) else []


def units(path: Path, session: str | None,
          progress_bytes: Callable[[int], None] | None = None,
          limit: int = MAX_RECORD_BYTES) -> Iterator[Unit]:
    """A unit per conversation; a stream that cannot be read on raises ReadFailure after the
    units before it."""
    assets = Assets(path.resolve().parent)
    with open_input(path) as handle:
        try:
            for index, (conversation, read) in enumerate(elements(handle, limit=limit)):
                if progress_bytes is not None:
                    progress_bytes(read)
                yield conversation_unit(path, index, conversation, session, assets)
        except Malformed as exc:
            raise ReadFailure(str(exc)) from None


def conversation_unit(path: Path, index: int, conversation: Any, session: str | None,
                      assets: Assets) -> Unit:
    if not isinstance(conversation, dict):
        return _bad(path, index, "not a conversation object")
    ident = conversation.get("conversation_id") or conversation.get("id")
    cid: str = ident if isinstance(ident, str) and ident else ""
    if not cid:
        cid = hashlib.blake2b(raw_bytes(conversation.get("title")) + str(
            conversation.get("create_time")).encode(), digest_size=8).hexdigest()
    try:
        done = [Record(raw, msgs) for raw, msgs in messages(conversation, assets)]
    except (AttributeError, TypeError, ValueError, RecursionError) as exc:
        return _bad(path, index, f"conversation {cid}: {exc}")
    title = conversation.get("title")
    title = title if isinstance(title, str) else ""
    name = slug(title, 24)
    sid = session or f"chatgpt-{name + '-' if name else ''}{slug(cid, 8) or 'x'}"
    return Unit(f"chatgpt:{cid}", "chatgpt", sid, partial(list, done),
                {"title": title, "path": str(path.resolve())})


def _bad(path: Path, index: int, reason: str) -> Unit:
    key = f"chatgpt:{path.resolve()}#{index}"
    return Unit(key, "chatgpt", "chatgpt-malformed",
                lambda: [Record(b"", [], f"conversation {index}: {reason}")])
