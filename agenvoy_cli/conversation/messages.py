"""Chat messages: validation, the upstream time header, times and identity."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import orjson

from agenvoy_cli.conversation.shapes import check_shape, kind, surrogate_path
from agenvoy_cli.errors import BadInput

try:  # the builtin module: hashlib would first load OpenSSL (~3 ms on every append)
    from _blake2 import blake2b as _blake2b
except ImportError:  # pragma: no cover - not CPython
    from hashlib import blake2b as _blake2b

ROLES = ("user", "assistant", "system", "tool")
# what a message in another OpenAI form had in place of the fields it is stored with (the
# form read given back: the message with these over its own); kept, never sent
ORIGINAL = "original_fields"
INSTRUCTIONS = "developer"  # OpenAI's role for instructions (its current docs): a system one
HEADER_LABEL = "當前時間"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
_TIME_RE = r"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})"
# Upstream writes "---\n當前時間: <time>\n[工作目錄: <dir>\n]---\n<content>": a block
# between two --- lines at the very start that names the time (a bare line is accepted too).
# The patterns are compiled on first use (re.compile keeps them in re's cache), not at import
# (#51: the append path paid for every one).
_BLOCK = (
    r"\A[ \t\r\n]*-{3,}[ \t]*\r?\n((?:[^\n]*\n){0,8}?)[ \t]*-{3,}[ \t]*(?:\r?\n|\Z)")
_BARE = r"\A[ \t\r\n]*(?=" + HEADER_LABEL + r")[^\n]*(?:\r?\n|\Z)"
_TIME_IN = HEADER_LABEL + r"[:：][ \t]*" + _TIME_RE
_PLAIN_TIME = r"\A" + _TIME_RE + r"\Z"
_STAMP = _TIME_RE
NS = 1_000_000_000
# send_at is a signed 64-bit count of nanoseconds: 1677-09-21 to 2262-04-11 (whole years kept)
MIN_YEAR, MAX_YEAR = 1678, 2261


def _to_datetime(stamp: str) -> datetime:
    # By hand: datetime.strptime drags in _strptime, locale and calendar (ms on every append).
    return datetime(int(stamp[0:4]), int(stamp[5:7]), int(stamp[8:10]),
                    int(stamp[11:13]), int(stamp[14:16]), int(stamp[17:19]))


def parse_local_time(text: str) -> datetime:
    """'YYYY-MM-DD HH:MM:SS' in the local zone (TZ honoured); raises BadInput."""
    if not re.compile(_PLAIN_TIME).match(text.strip()):
        raise BadInput(f"time {text!r} is not in the form YYYY-MM-DD HH:MM:SS")
    try:
        moment = _to_datetime(text.strip())
    except ValueError as exc:
        raise BadInput(f"time {text!r}: {exc}") from None
    if not MIN_YEAR <= moment.year <= MAX_YEAR:
        raise BadInput(f"time {text!r} is out of range: times are stored as nanoseconds since "
                       f"1970 in 64 bits, years {MIN_YEAR} to {MAX_YEAR}")
    return moment


def local_to_ns(moment: datetime) -> int:
    """Naive local datetime -> UTC unix nanoseconds."""
    return int(time.mktime(moment.timetuple())) * NS + moment.microsecond * 1000


class LocalHours:
    """local_to_ns for the many times of one batch: mktime costs ~4 us (it stats the zone
    file on every call), so an hour whose local times all map to one offset is turned into
    unix time by arithmetic from its first second. An hour qualifies, checked once, when
    mktime puts its first second at an instant that reads as it and the UTC offset is the
    same from 4 hours before that to 4 hours after its end, read every half hour: no
    change of offset in it, and no fold (an earlier or later instant reading as one of its
    times, where mktime's answer is whichever offset it tried first) - the zone database's
    folds are at most 2 hours. Any other hour goes to mktime time after time."""

    __slots__ = ("_hour", "_base", "_seen", "_text")

    def __init__(self) -> None:
        self._hour: tuple[int, int, int, int] | None = None
        self._base = 0
        self._seen: tuple[int, int, int, int] | None = None
        self._text = ""  # _hour as a header stamp starts ("YYYY-MM-DD HH")

    def stamp_ns(self, stamp: str) -> int | None:
        """header_time(...) of a header whose time text is `stamp`, as unix ns: None when
        that is no time (a day or minute that does not exist, a year out of range)."""
        if stamp[:13] == self._text:  # the hour is a real one: only its minute and second
            minute, second = int(stamp[14:16]), int(stamp[17:19])
            return (self._base + minute * 60 + second) * NS if minute < 60 and second < 60 \
                else None
        try:
            moment = _to_datetime(stamp)
        except ValueError:
            return None
        if not MIN_YEAR <= moment.year <= MAX_YEAR:
            return None
        ns = self.ns(moment)
        if self._hour == (moment.year, moment.month, moment.day, moment.hour):
            self._text = stamp[:13]
        return ns

    def ns(self, moment: datetime) -> int:
        hour = (moment.year, moment.month, moment.day, moment.hour)
        if hour == self._hour:
            return (self._base + moment.minute * 60 + moment.second) * NS + \
                moment.microsecond * 1000
        ns = local_to_ns(moment)
        if hour == self._seen:  # a second time in this hour: worth checking the hour once
            self._check(hour)
        self._seen = hour
        return ns

    def _check(self, hour: tuple[int, int, int, int]) -> None:
        first = int(time.mktime((*hour, 0, 0, 0, 0, -1)))
        if time.localtime(first)[:6] != (*hour, 0, 0):
            return
        offset = time.localtime(first).tm_gmtoff
        if all(time.localtime(first + k * 1800).tm_gmtoff == offset for k in range(-8, 11)):
            self._hour, self._base, self._text = hour, first, ""


def ns_to_local(ns: int) -> str:
    return time.strftime(TIME_FORMAT, time.localtime(ns // NS))


def content_text(content: Any) -> str:
    """A message's text as Agenvoy's ExtractContent yields it (both programs must agree on
    it: it is the identity, the FTS text and what is embedded): a string as it is, or the
    non-empty "text" parts joined by newlines; any other part (image, audio, file) has none."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict)
                         and p.get("type") == "text" and isinstance(p.get("text"), str)
                         and p["text"] != "")
    return ""


def is_blank(text: str) -> bool:
    """Agenvoy writes no SQLite row for such a message (strings.TrimSpace == "")."""
    return not text.strip()


def tool_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The message's tool calls that are objects, whatever else its `tool_calls` holds (a
    history.json another program wrote is read as it is, never refused)."""
    calls = message.get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def call_function(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call's `function` object ({} when it has none or something else)."""
    fn = call.get("function")
    return fn if isinstance(fn, dict) else {}


def calls_text(message: dict[str, Any]) -> str:
    """The searchable text of tool calls: `name(arguments)` per call."""
    out = []
    for call in tool_calls(message):
        fn = call_function(call)
        out.append(f"{fn.get('name') or ''}({fn.get('arguments') or ''})")
    return "\n".join(out)


CALL_WIDTH = 80  # characters of a call's arguments shown in text output


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def call_line(call: dict[str, Any], width: int = CALL_WIDTH) -> str:
    """A tool call for people: `→ Bash(mix phx.server)`, the arguments in short (one value
    alone, else key=value pairs), on one line of at most `width` characters of them."""
    fn = call_function(call)
    name = fn.get("name") if isinstance(fn.get("name"), str) and fn["name"] else "?"
    raw = fn.get("arguments")
    try:
        value = orjson.loads(raw) if isinstance(raw, str) else raw
    except orjson.JSONDecodeError:
        value = raw
    if isinstance(value, dict):
        items = list(value.items())
        shown = _shown(items[0][1]) if len(items) == 1 else \
            ", ".join(f"{k}={_shown(v)}" for k, v in items)
    else:
        shown = "" if value is None else _shown(value)
    shown = " ".join(shown.split())
    if len(shown) > width:
        shown = shown[:width - 1] + "…"
    return f"→ {name}({shown})"


def display_text(message: dict[str, Any]) -> str:
    """A message's text for people (context, get_context): its content text, then a
    `→ name(arguments)` line per tool call (a call alone would show as nothing)."""
    text = content_text(message.get("content"))
    calls = [call_line(c) for c in tool_calls(message)]
    return "\n".join([text, *calls] if text else calls)


def search_body(text: str, message: dict[str, Any] | None) -> str:
    """What keyword search and embeddings see: the text without its header, then the tool
    calls (so function.arguments are findable)."""
    body = strip_header(text)
    extra = calls_text(message) if message else ""
    return f"{body}\n{extra}" if body and extra else body or extra


_OWN_HEAD = f"---\n{HEADER_LABEL}: "  # header_for's form, then the time and "\n---\n"
_OWN_END = len(_OWN_HEAD) + 19


def _header(text: str) -> tuple[str | None, int]:
    """(time text, end of the header) of a content's leading time header."""
    if text.startswith(_OWN_HEAD) and text[_OWN_END:_OWN_END + 5] == "\n---\n" and \
            re.compile(_STAMP).fullmatch(text, len(_OWN_HEAD), _OWN_END):
        # the form this tool writes (as the patterns below read it): every import and
        # append pays this once per message, several times (bench/import_memory.py)
        return text[len(_OWN_HEAD):_OWN_END], _OWN_END + 5
    head = text[:2000]
    if HEADER_LABEL not in head:
        return None, 0
    for pattern in (_BLOCK, _BARE):
        match = re.compile(pattern).match(head)
        if match:
            found = re.compile(_TIME_IN).search(match.group(0))
            if found:
                return found.group(1), match.end()
    return None, 0


def header_time(text: str) -> datetime | None:
    stamp, _ = _header(text)
    if stamp is None:
        return None
    try:
        moment = _to_datetime(stamp)
    except ValueError:
        return None
    return moment if MIN_YEAR <= moment.year <= MAX_YEAR else None


def strip_header(text: str) -> str:
    """Content without the leading time header, for display and indexing."""
    stamp, end = _header(text)
    return text[end:] if stamp is not None else text


def header_for(moment: datetime) -> str:
    return f"---\n{HEADER_LABEL}: {moment.strftime(TIME_FORMAT)}\n---\n"


def stored_form(message: dict[str, Any]) -> dict[str, Any]:
    """The message with OpenAI's `developer` role as the system role it is stored with
    (as the Codex import always did); the role it had kept in ORIGINAL."""
    if message.get("role") != INSTRUCTIONS:
        return message
    return {**message, "role": "system", ORIGINAL: {"role": INSTRUCTIONS}}


def validate_message(obj: Any, index: int, max_bytes: int) -> dict[str, Any]:
    """A message as it will be stored; raises BadInput naming the message index. Every
    OpenAI-style message is accepted: content a string, null/absent (with tool_calls), or
    parts of any type; any other field is kept as it is."""
    where = f"message {index}"
    if not isinstance(obj, dict):
        raise BadInput(f"{where}: expected a JSON object, got {kind(obj)}")
    obj = stored_form(obj)
    role = obj.get("role")
    if role not in ROLES:
        raise BadInput(f"{where}: role {role!r} is not one of {', '.join(ROLES)}")
    content = obj.get("content")
    if "content" not in obj and not obj.get("tool_calls"):
        raise BadInput(f"{where}: missing 'content'")
    _check_content(content, where)
    check_shape(obj, where)
    text = content_text(content)
    carries = (obj.get("tool_calls") or role == "tool" or obj.get("reasoning_content")
               or (isinstance(content, list) and any(p["type"] != "text" for p in content)))
    if is_blank(text) and not carries:
        raise BadInput(f"{where}: content is empty")
    if "\x00" in text:
        raise BadInput(f"{where}: content contains a NUL character")
    _check_size(obj, text, where, max_bytes)
    return dict(obj)


def _check_content(content: Any, where: str) -> None:
    """content is a string, null, or a non-empty list of typed parts (text ones with
    their text)."""
    if isinstance(content, list):
        if not content:
            raise BadInput(f"{where}: 'content' is an empty list")
        for j, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise BadInput(f"{where}: content part {j} is not an object with a 'type'")
            if part["type"] == "text" and not isinstance(part.get("text"), str):
                raise BadInput(f"{where}: content part {j} has no string 'text'")
    elif content is not None and not isinstance(content, str):
        raise BadInput(f"{where}: 'content' must be a string, null or a list of parts")


def _check_size(obj: dict[str, Any], text: str, where: str, max_bytes: int) -> None:
    """The text and the whole message as JSON within max_history_bytes (and the message
    writable as JSON)."""
    # at most 4 bytes a character: a text that short needs no encoding to be within the bound
    size = len(text.encode("utf-8", "surrogatepass")) if 4 * len(text) > max_bytes else 0
    if size > max_bytes:
        raise BadInput(f"{where}: content is {size} bytes, over max_history_bytes ({max_bytes})")
    try:
        size = len(orjson.dumps(obj))
    except TypeError:  # check_shape left nothing else orjson refuses
        raise BadInput(f"{where}: {surrogate_path(obj)} is not valid UTF-8 (a lone "
                       "surrogate)") from None
    if size > max_bytes:
        raise BadInput(f"{where}: the message is {size} bytes as JSON, over "
                       f"max_history_bytes ({max_bytes})")


def message_hash(role: str, text: str) -> str:
    """Identity used to align history.json with SQLite rows (also rows the Go daemon wrote)."""
    data = f"{role}\x00{text}".encode("utf-8", "surrogatepass")
    return _blake2b(data, digest_size=16).hexdigest()


def hash_prefix(role: str, head: str) -> bytes:
    """The start of message_hash(role, head + ...)'s data (for message_hash_from); more of
    the head may follow it encoded as UTF-8 (surrogatepass), as message_hash encodes."""
    return f"{role}\x00{head}".encode("utf-8", "surrogatepass")


def message_hash_from(prefix: bytes, text: str) -> str:
    """message_hash(role, head + text), prefix being hash_prefix(role, head): a header
    before a long text without joining them (the text encoded once, never copied)."""
    digest = _blake2b(prefix, digest_size=16)
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _canonical(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def identity_key(role: str, text: str, message: dict[str, Any] | None) -> str:
    """The identity of a message: role + text, as Agenvoy's rows can be compared with ours.
    A blank message (Agenvoy never archives one) is told apart by what it carries instead:
    its content parts and tool calls, in the form that survives Agenvoy re-writing the file
    (map keys sorted, unknown fields dropped)."""
    if not is_blank(text) or message is None:
        return message_hash(role, text)
    calls = [(c.get("id"), call_function(c).get("name"), call_function(c).get("arguments"))
             for c in tool_calls(message)]
    carried = {"content": _canonical(message.get("content") or None), "calls": calls,
               "tool_call_id": message.get("tool_call_id") or None}
    return message_hash(role, "\x00" + orjson.dumps(carried, option=orjson.OPT_SORT_KEYS)
                        .decode())


def message_identity(message: dict[str, Any]) -> str:
    return identity_key(str(message.get("role")), content_text(message.get("content")), message)


# the keys of an entry as Agenvoy v0.32 rewrites it (its Record; history_format.py names them)
RECORD_KEYS = frozenset(("role", "content", "sendAt", "sender"))


def identities(part: Sequence[dict[str, Any]]) -> tuple[list[str], int]:
    """(message_identity of each message, how many of them are not records: a key beyond
    RECORD_KEYS), in one pass over a batch with the same code whatever a message's format
    (big_sync.archived_prefix, for a file we wrote and one Agenvoy v0.32 rewrote alike).
    A string content with words (nearly every message) is hashed here as message_hash
    does, in this frame; any other message by message_identity."""
    keys: list[str] = []
    add = keys.append
    digest = _blake2b
    odd = 0
    for message in part:
        content = message.get("content")
        role = message.get("role")
        if type(content) is str and type(role) is str and content and not content.isspace():
            # identity_key(role, content, message) of a text that is not blank (is_blank:
            # strip() leaves nothing exactly when every character is a space)
            add(digest(f"{role}\x00{content}".encode("utf-8", "surrogatepass"),
                       digest_size=16).hexdigest())
            # role and content are there: a record when any other key is sendAt or sender
            if len(message) != 2 + ("sendAt" in message) + ("sender" in message):
                odd += 1
        else:
            add(message_identity(message))
            if not message.keys() <= RECORD_KEYS:
                odd += 1
    return keys, odd


class Message(NamedTuple):
    """One message with its place in the session's full history."""

    seq: int
    send_at: int
    role: str
    text: str  # content text, header included (what upstream stores in `content`)
    raw: dict[str, Any]

    @property
    def hash(self) -> str:
        return identity_key(self.role, self.text, self.raw)

    @property
    def body(self) -> str:
        return search_body(self.text, self.raw)

    @property
    def time(self) -> str:
        return ns_to_local(self.send_at)


def _own_time(message: dict[str, Any], hours: LocalHours) -> int | None:
    """sendAt (unix ns) when the message has it, else its header time (header_time's, as
    unix ns)."""
    ns = message.get("sendAt")
    if isinstance(ns, int) and not isinstance(ns, bool) and ns > 0:
        return ns
    stamp, _ = _header(content_text(message.get("content")))
    return None if stamp is None else hours.stamp_ns(stamp)


def assign_times(messages: Sequence[dict[str, Any]], prev_ns: int | None,
                 fallback_ns: int) -> list[int]:
    """send_at of each message: its header time, else the previous one's + 1 ns.

    With no previous time, a message before the first header takes that header's
    time minus its distance; with no header at all, `fallback_ns` (+ distance).
    """
    hours = LocalHours()
    headers = [_own_time(m, hours) for m in messages]
    out: list[int] = []
    for i, moment in enumerate(headers):
        if moment is not None:
            prev_ns = moment
        elif prev_ns is not None:
            prev_ns += 1
        else:
            nxt = next(((j, h) for j, h in enumerate(headers[i:], i) if h is not None), None)
            prev_ns = fallback_ns if nxt is None else nxt[1] - (nxt[0] - i)
        out.append(prev_ns)
    return out


def provider_window(messages: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The last `limit` messages, as a provider accepts them: a window that would start with
    a tool result is widened back to the assistant message that made the call; a tool
    result whose call is not in history.json at all (trimmed) is dropped."""
    if limit <= 0:
        return []
    start = max(0, len(messages) - limit)
    while start > 0 and messages[start].get("role") == "tool":
        start -= 1
    while start < len(messages) and messages[start].get("role") == "tool":
        start += 1
    return messages[start:]
