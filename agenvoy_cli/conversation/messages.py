"""Chat messages: validation, the upstream time header, times and identity."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from agenvoy_cli.errors import BadInput

try:  # the builtin module: hashlib would first load OpenSSL (~3 ms on every append)
    from _blake2 import blake2b as _blake2b
except ImportError:  # pragma: no cover - not CPython
    from hashlib import blake2b as _blake2b

ROLES = ("user", "assistant", "system", "tool")
HEADER_LABEL = "當前時間"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
_TIME_RE = r"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})"
# Upstream writes "---\n當前時間: <time>\n[工作目錄: <dir>\n]---\n<content>": a block
# between two --- lines at the very start that names the time (a bare line is accepted too).
_BLOCK = re.compile(
    r"\A[ \t\r\n]*-{3,}[ \t]*\r?\n((?:[^\n]*\n){0,8}?)[ \t]*-{3,}[ \t]*(?:\r?\n|\Z)")
_BARE = re.compile(r"\A[ \t\r\n]*(?=" + HEADER_LABEL + r")[^\n]*(?:\r?\n|\Z)")
_TIME_IN = re.compile(HEADER_LABEL + r"[:：][ \t]*" + _TIME_RE)
_PLAIN_TIME = re.compile(r"\A" + _TIME_RE + r"\Z")
NS = 1_000_000_000


def _to_datetime(stamp: str) -> datetime:
    # By hand: datetime.strptime drags in _strptime, locale and calendar (ms on every append).
    return datetime(int(stamp[0:4]), int(stamp[5:7]), int(stamp[8:10]),
                    int(stamp[11:13]), int(stamp[14:16]), int(stamp[17:19]))


def parse_local_time(text: str) -> datetime:
    """'YYYY-MM-DD HH:MM:SS' in the local zone (TZ honoured); raises BadInput."""
    if not _PLAIN_TIME.match(text.strip()):
        raise BadInput(f"time {text!r} is not in the form YYYY-MM-DD HH:MM:SS")
    try:
        return _to_datetime(text.strip())
    except ValueError as exc:
        raise BadInput(f"time {text!r}: {exc}") from None


def local_to_ns(moment: datetime) -> int:
    """Naive local datetime -> UTC unix nanoseconds."""
    return int(time.mktime(moment.timetuple())) * NS + moment.microsecond * 1000


def ns_to_local(ns: int) -> str:
    return time.strftime(TIME_FORMAT, time.localtime(ns // NS))


def content_text(content: Any) -> str:
    """The text of a content value: a string, or the text parts joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _header(text: str) -> tuple[str | None, int]:
    """(time text, end of the header) of a content's leading time header."""
    head = text[:2000]
    if HEADER_LABEL not in head:
        return None, 0
    for pattern in (_BLOCK, _BARE):
        match = pattern.match(head)
        if match:
            found = _TIME_IN.search(match.group(0))
            if found:
                return found.group(1), match.end()
    return None, 0


def header_time(text: str) -> datetime | None:
    stamp, _ = _header(text)
    if stamp is None:
        return None
    try:
        return _to_datetime(stamp)
    except ValueError:
        return None


def strip_header(text: str) -> str:
    """Content without the leading time header, for display and indexing."""
    stamp, end = _header(text)
    return text[end:] if stamp is not None else text


def header_for(moment: datetime) -> str:
    return f"---\n{HEADER_LABEL}: {moment.strftime(TIME_FORMAT)}\n---\n"


def validate_message(obj: Any, index: int, max_bytes: int) -> dict[str, Any]:
    """A message as it will be stored; raises BadInput naming the message index."""
    where = f"message {index}"
    if not isinstance(obj, dict):
        raise BadInput(f"{where}: expected a JSON object, got {type(obj).__name__}")
    role = obj.get("role")
    if role not in ROLES:
        raise BadInput(f"{where}: role {role!r} is not one of {', '.join(ROLES)}")
    if "content" not in obj:
        raise BadInput(f"{where}: missing 'content'")
    content = obj["content"]
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        if not content:
            raise BadInput(f"{where}: 'content' is an empty list")
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                raise BadInput(f"{where}: content part {j} is not a {{\"type\": \"text\"}} part")
            if not isinstance(part.get("text"), str):
                raise BadInput(f"{where}: content part {j} has no string 'text'")
        text = content_text(content)
    else:
        raise BadInput(f"{where}: 'content' must be a string or a list of text parts")
    if not text.strip():
        raise BadInput(f"{where}: content is empty")
    if "\x00" in text:
        raise BadInput(f"{where}: content contains a NUL character")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise BadInput(f"{where}: content is {size} bytes, over max_history_bytes ({max_bytes})")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput(f"{where}: content is not valid UTF-8 (lone surrogate)") from None
    return dict(obj)


def with_header(message: dict[str, Any], moment: datetime) -> dict[str, Any]:
    """The message with a time header, unless it already carries one."""
    content = message["content"]
    if header_time(content_text(content)) is not None:
        return message
    out = dict(message)
    if isinstance(content, str):
        out["content"] = header_for(moment) + content
    else:
        first = dict(content[0])
        first["text"] = header_for(moment) + first["text"]
        out["content"] = [first, *content[1:]]
    return out


def message_hash(role: str, text: str) -> str:
    """Identity used to align history.json with SQLite rows (also rows the Go daemon wrote)."""
    data = f"{role}\x00{text}".encode("utf-8", "surrogatepass")
    return _blake2b(data, digest_size=16).hexdigest()


class Message(NamedTuple):
    """One message with its place in the session's full history."""

    seq: int
    send_at: int
    role: str
    text: str  # content text, header included (what upstream stores in `content`)
    raw: dict[str, Any]

    @property
    def hash(self) -> str:
        return message_hash(self.role, self.text)

    @property
    def body(self) -> str:
        return strip_header(self.text)

    @property
    def time(self) -> str:
        return ns_to_local(self.send_at)


def assign_times(messages: Sequence[dict[str, Any]], prev_ns: int | None,
                 fallback_ns: int) -> list[int]:
    """send_at of each message: its header time, else the previous one's + 1 ns.

    With no previous time, a message before the first header takes that header's
    time minus its distance; with no header at all, `fallback_ns` (+ distance).
    """
    headers = [header_time(content_text(m.get("content"))) for m in messages]
    out: list[int] = []
    for i, moment in enumerate(headers):
        if moment is not None:
            prev_ns = local_to_ns(moment)
        elif prev_ns is not None:
            prev_ns += 1
        else:
            nxt = next(((j, h) for j, h in enumerate(headers[i:], i) if h is not None), None)
            prev_ns = local_to_ns(nxt[1]) - (nxt[0] - i) if nxt else fallback_ns
        out.append(prev_ns)
    return out
