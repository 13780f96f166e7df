"""The two history formats of history.json entries (`history_format`: header, sendat) and
what they have in common.

- header (the spec; Agenvoy through v0.31): the time is a `---\\n當前時間: T\\n---\\n` block at
  the start of the content (a `傳送者: NAME` line in it for a sender);
- sendAt (Agenvoy v0.32+): `{"role", "content", "sendAt": unix ns, "sender"}`, no header; on
  every append Agenvoy rewrites the whole file through that record (normalise: the header
  moved into sendAt/sender and stripped, every other key dropped).
The same message in either format is the same message: `HeaderIdentity.key` and `record_key`
give the identities a message had in the other format (conversation/alignment.py matches
by them); `model_message` is what a provider is sent (no sendAt/sender keys, the time
shown the way the generation shows it).
"""

from __future__ import annotations

import re
import time
from collections.abc import Container
from datetime import datetime
from typing import Any

import orjson

from agenvoy_cli.conversation.messages import (
    HEADER_LABEL,
    ORIGINAL,
    RECORD_KEYS,
    TIME_FORMAT,
    content_text,
    hash_prefix,
    header_time,
    identity_key,
    is_blank,
    local_to_ns,
    message_hash_from,
    message_identity,
)
from agenvoy_cli.errors import BadInput

SEND_AT, SENDER = "sendAt", "sender"
SENDER_LABEL = "傳送者"
_FOLDED = {k.lower(): k for k in RECORD_KEYS}
FORMATS = ("header", "sendat")
FORMAT_ENV = "AGENVOY_HISTORY_FORMAT"
MAX_SENDER = 256
MARK = b'"sendAt":'  # a key: inside a JSON string the quote before ':' would be escaped
# Agenvoy v0.32.7 internal/session/history/record.go (RE2's \s is [\t\n\f\r ])
_S = r"[\t\n\f\r ]"
_LEGACY = r"(?:當前時間|工作目錄|傳送者|當前 chat ID|當前 channel)"
# The patterns are compiled on first use (re.compile keeps them in re's cache), not at import.
_PREFIX = r"\A" + _S + r"*(?:sendAt|sender|channelId)" + _S + r"*:[^\n]*\n"
_LEGACY_BLOCK = r"\A" + _S + r"*-{3,}\n?(?:" + _LEGACY + r"[^\n]*\n?)+-{3,}\n?"
_LEGACY_LINE = r"\A" + _S + r"*" + _LEGACY + _S + r"*[:：][^\n]*\n?"
_LEGACY_SENDER = SENDER_LABEL + r":" + _S + r"*([^\n]*)"
_CONTROL = r"[\x00-\x1f\x7f]"


def strip_prefix(content: str) -> str:
    """Agenvoy's StripPrefix: the legacy block or lines, then a `sendAt:` line."""
    own = re.compile(_OWN_BLOCK).match(content)
    if own and not re.compile(_MAY_PREFIX).match(content, own.end()):
        return content[own.end():]  # header_block's own form, nothing after it to strip
    content = re.compile(_LEGACY_BLOCK).sub("", content, count=1)
    while True:
        trimmed = re.compile(_LEGACY_LINE).sub("", content, count=1)
        if trimmed == content:
            break
        content = trimmed
    return re.compile(_PREFIX).sub("", content, count=1)


def send_at(message: dict[str, Any]) -> int | None:
    value = message.get(SEND_AT)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else None


def sender(message: dict[str, Any]) -> str:
    """The sender: the sendAt format's key, else the header's 傳送者 line."""
    value = message.get(SENDER)
    if isinstance(value, str) and value:
        return value
    content = message.get("content")
    if isinstance(content, str) and SENDER_LABEL in content[:2000]:
        head = re.compile(_LEGACY_BLOCK).match(content[:2000])
        found = re.compile(_LEGACY_SENDER).search(head.group(0)) if head else None
        if found:
            return found.group(1).strip()
    return ""


def time_ns(message: dict[str, Any]) -> int | None:
    """A message's time: sendAt when present, else its header's (local) time."""
    ns = send_at(message)
    if ns is not None:
        return ns
    moment = header_time(content_text(message.get("content")))
    return local_to_ns(moment) if moment is not None else None


def local(ns: int) -> str:
    return time.strftime(TIME_FORMAT, time.localtime(ns // 1_000_000_000))


def validate(message: dict[str, Any], where: str) -> None:
    """sendAt a non-negative integer, sender a name (no control characters, <= 256); no
    case variant of a record key (`SendAt`, `Sender`, `Content`...): Go's encoding/json
    matches keys case-insensitively, so Agenvoy's next rewrite would read it as the key."""
    for key in message:
        if key not in RECORD_KEYS and key.lower() in _FOLDED:
            raise BadInput(f"{where}: key {key!r} is a case variant of "
                           f"{_FOLDED[key.lower()]!r} (Agenvoy reads keys case-insensitively); "
                           f"write it as {_FOLDED[key.lower()]!r}")
    if SEND_AT in message:
        value = message[SEND_AT]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value >= 2**63:
            raise BadInput(f"{where}: 'sendAt' must be a non-negative integer (unix ns), "
                           f"got {value!r}")
    if SENDER in message:
        check_sender(message[SENDER], where)


def check_sender(value: Any, where: str = "sender") -> str:
    if not isinstance(value, str):
        raise BadInput(f"{where}: 'sender' must be a string")
    if re.compile(_CONTROL).search(value):
        raise BadInput(f"{where}: 'sender' contains a control character")
    if len(value) > MAX_SENDER:
        raise BadInput(f"{where}: 'sender' is {len(value)} characters, over {MAX_SENDER}")
    return value


# -- which format a session uses --------------------------------------------------------------
def uses_send_at(data: bytes) -> bool:
    """Whether (part of) a history.json has an entry with sendAt."""
    return MARK in data


def new_session_format(settings: Any) -> str:
    """agenvoy.history_format in config.json, or AGENVOY_HISTORY_FORMAT: header (default)
    or sendat."""
    raw = settings.history_format or "header"
    value = str(raw).strip().lower()
    if value not in FORMATS:
        raise BadInput(f"history format {raw!r} is not one of {', '.join(FORMATS)} "
                       f"({FORMAT_ENV} / config.json agenvoy.history_format)")
    return value


def header_block(moment: datetime, who: str = "") -> str:
    return _block(stamp_of(moment), who)


def stamp_of(moment: datetime) -> str:
    """moment.strftime(TIME_FORMAT), ~5x faster (every imported or appended message has
    one): the same digits for a four-digit year; another year goes through strftime."""
    if 1000 <= moment.year <= 9999:
        return (f"{moment.year}-{moment.month:02d}-{moment.day:02d} "
                f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}")
    return moment.strftime(TIME_FORMAT)


def _block(stamp: str, who: str) -> str:
    line = f"{SENDER_LABEL}: {who}\n" if who else ""
    return f"---\n{HEADER_LABEL}: {stamp}\n{line}---\n"


def _tool_json(message: dict[str, Any], content: Any) -> bool:
    """A tool result whose content is JSON: kept parseable (a header in front of it would
    make the model, and any program reading the result, see text that is not JSON) when it
    has no time of its own (`append`'s batch): it takes the time of the message before it,
    its call's. One with a time of its own (an import) keeps the header in this format,
    the only place for that time; the sendAt format keeps both apart."""
    if message.get("role") != "tool" or not isinstance(content, str):
        return False
    head = content.lstrip()[:1]
    if head not in ("{", "["):
        return False
    try:
        orjson.loads(content)
    except orjson.JSONDecodeError:
        return False
    return True


def in_format(message: dict[str, Any], moment: datetime, fmt: str, who: str = "") -> dict[str, Any]:
    """The message as this session writes it: a header, or sendAt/sender (kept last, so the
    file's tail tells the format)."""
    who = who or (message.get(SENDER) if isinstance(message.get(SENDER), str) else "") or ""
    at = send_at(message)
    out = dict(message)  # (a copy, then pops: ~3x faster than a filtering comprehension)
    out.pop(SEND_AT, None)
    out.pop(SENDER, None)
    if fmt == "sendat":
        out[SEND_AT] = at if at is not None else local_to_ns(moment)
        if who:
            out[SENDER] = who
        return out
    if at is not None:
        moment = datetime.fromtimestamp(at // 1_000_000_000)
    return _with_header(out, moment, who, at)


def _with_header(out: dict[str, Any], moment: datetime, who: str, at: int | None
                 ) -> dict[str, Any]:
    """The message (its sendAt `at` dropped) with its header block where its text is."""
    content = out.get("content")
    text = content_text(content)
    if isinstance(content, list) and content and is_blank(text):
        # no text to carry the header (an image alone): a text part first holds it, where
        # Agenvoy v0.32's Record.WithPrefix puts a prefix; its normalise leaves lists alone
        out["content"] = [{"type": "text", "text": header_block(moment, who)}, *content]
        return out
    if at is not None and content in (None, "") and (out.get("tool_calls") or
                                                     out.get("role") == "tool"):
        # a tool call, or an empty result, given its own time (sendAt, e.g. by an import):
        # the header is its content, or it would take the previous message's time
        out["content"] = header_block(moment, who)
        return out
    if is_blank(text) or header_time(text) is not None or (at is None and
                                                           _tool_json(out, content)):
        return out
    block = header_block(moment, who)
    if isinstance(content, str):
        out["content"] = block + content
    elif isinstance(content, list):  # a non-blank text: some text part holds it
        k = next(j for j, p in enumerate(content) if isinstance(p, dict)
                 and p.get("type") == "text" and p.get("text"))
        first = dict(content[k])
        first["text"] = block + first["text"]
        out["content"] = [*content[:k], first, *content[k + 1:]]
    return out


# -- one message, either format -----------------------------------------------------------------
def is_record(message: dict[str, Any]) -> bool:
    """An entry as Agenvoy v0.32 rewrites it (no key beyond role/content/sendAt/sender)."""
    return message.keys() <= RECORD_KEYS


_TWO = tuple(f"{i:02d}".encode() for i in range(60))
_HOUR_FORMAT = TIME_FORMAT.removesuffix("%M:%S")
assert _HOUR_FORMAT + "%M:%S" == TIME_FORMAT


class HeaderIdentity:
    """The identity a message Agenvoy v0.32's rewrite left had in the header format we write
    (cheap, no archive read; with its sender's line first when it has a sender), for the
    many messages of one rewritten file (a walk holds one): the local time of each sendAt
    is formatted as header_block does, time.strftime once an hour of them. An hour is
    formatted by arithmetic only when its first and last second read as that one local hour
    at one UTC offset (else, a zone's change or a leap second in it, second by second), so
    the text is strftime's; and a wrong text could only fail to match the archived
    identity, never match another. The header is built as the bytes message_hash would
    hash (the parts of a role's, a sender's, kept): no text is joined."""

    __slots__ = ("_lo", "_hi", "_hour", "_seen", "_starts", "_ends")

    def __init__(self) -> None:
        self._lo = self._hi = self._seen = -1
        self._hour = b""
        self._starts: dict[str, bytes] = {}  # role -> its identity's data up to the time
        self._ends: dict[str, bytes] = {}  # sender ("": none) -> the header after the time

    def stamp(self, sec: int) -> bytes:
        """time.strftime(TIME_FORMAT, time.localtime(sec)), encoded."""
        if self._lo <= sec < self._hi:
            minute, second = divmod(sec - self._lo, 60)
            return b"".join((self._hour, _TWO[minute], b":", _TWO[second]))
        now = time.localtime(sec)
        lo = sec - now.tm_min * 60 - now.tm_sec
        if lo == self._seen:  # a second message in this hour: worth checking the hour once
            first, last = time.localtime(lo), time.localtime(lo + 3599)
            if first[:4] == last[:4] == now[:4] and (first.tm_min, first.tm_sec) == (0, 0) \
                    and (last.tm_min, last.tm_sec) == (59, 59) \
                    and first.tm_gmtoff == last.tm_gmtoff == now.tm_gmtoff:
                self._lo, self._hi = lo, lo + 3600
                self._hour = time.strftime(_HOUR_FORMAT, now).encode()
        self._seen = lo
        return time.strftime(TIME_FORMAT, now).encode()

    def key(self, message: dict[str, Any], known: Container[str],
            record: bool = False) -> str | None:
        """That identity if it is in `known`, else None; record: None too unless
        is_record(message). One identity when the first one matches."""
        ns = message.get(SEND_AT)
        content = message.get("content")
        # (what JSON gives: exact types; a blank one is told by what it carries: record_key)
        if type(ns) is not int or ns <= 0 or type(content) is not str or not content or \
                content.isspace():
            return None
        # content and sendAt present: only role and sender may be there too (is_record)
        if record and len(message) != 2 + ("role" in message) + (SENDER in message):
            return None
        role = str(message.get("role"))
        start = self._starts.get(role)
        if start is None:  # _block(stamp, who), split at the time
            start = self._starts[role] = hash_prefix(role, f"---\n{HEADER_LABEL}: ")
        sec = ns // 1_000_000_000
        if self._lo <= sec < self._hi:  # stamp(), inline: once per message
            minute, second = divmod(sec - self._lo, 60)
            start = b"".join((start, self._hour, _TWO[minute], b":", _TWO[second]))
        else:
            start += self.stamp(sec)
        who = message.get(SENDER)
        if who and type(who) is str:  # with the sender's line first; identity_key: not blank
            end = self._ends.get(who)
            if end is None:
                end = self._ends[who] = f"\n{SENDER_LABEL}: {who}\n---\n".encode(
                    "utf-8", "surrogatepass")
            key = message_hash_from(start + end, content)
            if key in known:
                return key
        key = message_hash_from(start + b"\n---\n", content)
        return key if key in known else None


def record_key(message: dict[str, Any]) -> str:
    """The identity of what Agenvoy v0.32's rewrite leaves of a message: role and the text
    without its header; a blank one by its content alone (tool-call fields dropped)."""
    role = str(message.get("role"))
    content = message.get("content")
    if isinstance(content, str):
        content = strip_prefix(content)
    text = content_text(content)
    if not is_blank(text):
        return identity_key(role, text, None)
    return identity_key(role, text, {"role": role, "content": content})


# where strip_prefix may change a content: it starts (after blanks) as one of its patterns
_MAY_PREFIX = _S + r"*(?:-{3}|" + _LEGACY + r"|sendAt|sender|channelId)"
# header_block's own block (no sender): what _LEGACY_BLOCK removes of it, in one match
_OWN_BLOCK = r"---\n" + HEADER_LABEL + r": \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n---\n"


def record_hash(message: dict[str, Any], ident: str) -> str:
    """record_key(message), or "" when that is ident, the message's own identity (a text
    without a prefix to strip: most messages): what the archive keeps beside a row's identity
    (messages.record_hash), so that the walk (big_sync.archived_prefix) knows the message in
    the rewrite's format by the plain identity of what the file holds."""
    content = message.get("content")
    if isinstance(content, str):
        if content and not content.isspace() and not re.compile(_MAY_PREFIX).match(content):
            return ""  # a text strip_prefix leaves as it is: identity_key(role, text) both
    elif isinstance(content, list) and not is_blank(content_text(content)):
        return ""  # the rewrite leaves a list alone: its text is the identity both
    key = record_key(message)
    return "" if key == ident else key


def plain_key(message: dict[str, Any]) -> str:
    return message_identity(message)


# -- what a provider is sent ------------------------------------------------------------------
def prefix(message: dict[str, Any]) -> str:
    """Record.Prefix: `sendAt: YYYY-MM-DD HH:MM:SS, sender: NAME` (either part absent)."""
    parts = []
    ns = send_at(message)
    if ns is not None:
        parts.append(f"sendAt: {local(ns)}")
    who = message.get(SENDER)
    if isinstance(who, str) and who:
        parts.append(f"sender: {who}")
    return ", ".join(parts)


# kept, never sent to a provider
ARCHIVE_ONLY = (SEND_AT, SENDER, "original_parts", ORIGINAL)


def model_message(message: dict[str, Any]) -> dict[str, Any]:
    """The message a provider accepts: no sendAt/sender keys, nor what an import turned into
    a form a provider takes (original_parts, original_fields); a sendAt-format message shows
    its time the way Agenvoy v0.32 does (Record.WithPrefix), a header message keeps its
    header."""
    if SEND_AT not in message and SENDER not in message and "original_parts" not in message \
            and ORIGINAL not in message:
        return message
    out = {k: v for k, v in message.items() if k not in ARCHIVE_ONLY}
    head = prefix(message)
    content = out.get("content")
    if not head:
        return out
    if isinstance(content, str):
        out["content"] = f"{head}\n{content}"
    elif isinstance(content, list):
        k = next((j for j, p in enumerate(content)
                  if isinstance(p, dict) and p.get("type") == "text"), None)
        if k is None:
            out["content"] = [{"type": "text", "text": head}, *content]
        else:
            first = dict(content[k])
            first["text"] = f"{head}\n{first.get('text') or ''}"
            out["content"] = [*content[:k], first, *content[k + 1:]]
    elif content is None and not out.get("tool_calls"):
        out["content"] = head
    return out
