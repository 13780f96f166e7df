"""What a file or folder looks like: the format whose reader takes it, or what it is in
words ("a Codex rollout", "binary data"), for `import auto` and for refusing a file that
does not fit the format asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import orjson

from agenvoy_cli.transfer.inputs import MAX_RECORD_BYTES, check_regular, lines, open_input
from agenvoy_cli.transfer.stream import JsonStream, Malformed

NAMES = {"claude-code": "a Claude Code transcript", "codex": "a Codex rollout",
         "chatgpt": "a ChatGPT export (conversations.json)",
         "openai": "OpenAI-style messages", "agenvoy": "an agenvoy export"}
JSONL = ("claude-code", "codex", "openai", "agenvoy")  # an empty file fits them: not yet written
_HEAD = 1 << 16
_CODEX = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
_CLAUDE_KEYS = ("sessionId", "uuid", "parentUuid", "leafUuid", "messageId")


class Looks(NamedTuple):
    format: str | None  # the reader that takes it (None: none)
    what: str  # in words

    @property
    def empty(self) -> bool:
        return self.what == "an empty file"


def _line_format(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return None
    kind = entry.get("type")
    kind = kind if isinstance(kind, str) else None
    if kind == "session" and entry.get("format") == "agenvoy-export":
        return "agenvoy"
    if kind in _CODEX and "payload" in entry:
        return "codex"
    if kind is not None and any(k in entry for k in _CLAUDE_KEYS):
        return "claude-code"
    if isinstance(entry.get("role"), str):
        return "openai"
    for holder in (entry, entry.get("body")):
        if isinstance(holder, dict) and isinstance(holder.get("messages"), list):
            return "openai"
    return None


def _element_format(item: Any) -> str | None:
    if isinstance(item, dict) and "mapping" in item:
        return "chatgpt"
    if isinstance(item, dict) and (isinstance(item.get("role"), str)
                                   or isinstance(item.get("messages"), list)):
        return "openai"
    return None


def looks(path: Path, limit: int = MAX_RECORD_BYTES) -> Looks:
    """What a file is (ReadFailure when it cannot be looked at: not a regular file, ...)."""
    check_regular(path)
    with open_input(path) as handle:
        head = handle.read(_HEAD)
    text = head.lstrip()
    if not text:
        return Looks(None, "an empty file")
    if b"\x00" in head:
        return Looks(None, "binary data")
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not a character cut at the end of the head
            return Looks(None, "binary data (not UTF-8 text)")
    if text.startswith(b"["):
        with open_input(path) as handle:
            try:
                first = next(JsonStream(handle, limit=limit).array(), None)
            except Malformed as exc:
                return Looks(None, f"a JSON array that does not parse ({exc})")
        found = _element_format(first)
        if found:
            return Looks(found, NAMES[found])
        return Looks(None, "a JSON array of something else" if first is not None else
                     "an empty JSON array")
    if text.startswith(b"{"):
        if text[1:].lstrip(b" \t\r").startswith(b"\n"):  # an object over several lines
            return _object(path, limit)
        with open_input(path) as handle:
            for _, line in zip(range(20), lines(handle, limit)):
                try:
                    found = _line_format(orjson.loads(line.data or b""))
                except orjson.JSONDecodeError:
                    continue
                if found:
                    return Looks(found, NAMES[found])
        return Looks(None, "JSON of no known shape")
    return Looks(None, "text that is not JSON")


def _object(path: Path, limit: int) -> Looks:
    with open_input(path) as handle:
        stream = JsonStream(handle, limit=limit)
        try:
            for key in stream.members():
                if key in ("messages", "body"):
                    return Looks("openai", NAMES["openai"])
                if key == "mapping":
                    return Looks(None, "one ChatGPT conversation (the export's "
                                 "conversations.json holds a list of them)")
        except Malformed as exc:
            return Looks(None, f"a JSON object that does not parse ({exc})")
    return Looks(None, "a JSON object without messages")


def folder_format(path: Path) -> str | None:
    """The format of a folder read as a whole: another home or one of its session folders
    (agenvoy), a ChatGPT export folder; None: read its files one by one."""
    if (path / "history.json").is_file():
        return "agenvoy"
    if (path / "sessions").is_dir() and ((path / ".store").is_dir() or any(
            (p / "history.json").is_file() for p in (path / "sessions").iterdir()
            if p.is_dir())):
        return "agenvoy"
    if (path / "conversations.json").is_file():
        return "chatgpt"
    return None


def refusal(fmt: str, path: Path, found: Looks) -> str | None:
    """Why a file given for `fmt` does not fit it (None: it fits)."""
    if found.format == fmt or (found.empty and fmt in JSONL):
        return None
    hint = f"`agenvoy import {found.format}`" if found.format else None
    tail = f" (import it with {hint}, or `agenvoy import auto`)" if hint else ""
    return f"{path}: looks like {found.what}, not {NAMES[fmt]}{tail}"

