"""What every format reader yields: units (one future session each) made of records, and
the bounds every value read is checked against before use."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

import orjson

from agenvoy_cli.conversation.messages import MAX_YEAR, MIN_YEAR, content_text, strip_header

Timed = tuple[dict[str, Any], int | None]  # a message and its time (UTC unix ns; None: unknown)
NS = 1_000_000_000
MAX_DEPTH = 200  # the nesting named in a refusal (orjson writes at most 254 levels)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# send_at is a signed 64-bit count of nanoseconds: whole years of it, as `append --time` takes
MIN_NS = int((datetime(MIN_YEAR, 1, 1, tzinfo=timezone.utc) - _EPOCH).total_seconds()) * NS
MAX_NS = int((datetime(MAX_YEAR + 1, 1, 1, tzinfo=timezone.utc) - _EPOCH).total_seconds()) * NS - 1


class Record(NamedTuple):
    """One record of a source: the bytes the read-up-to digest covers, the messages it
    becomes (none for bookkeeping records), or why it is skipped. `start`: for a message
    written over several records, the number (1-based) of its first record: an older import
    that stopped inside it archived it incomplete, and this one completes that row."""

    raw: bytes
    messages: list[Timed]
    error: str | None = None
    start: int = 0


@dataclass(frozen=True)
class Learnt:
    """What a reader found out beside its records, returned for the engine to fold into the
    unit (engine.fold, the one writer of a unit's meta and report while it is read), in the
    order read: `dropped` keys leave the meta, `meta` is set in it, each value of `lists`
    joins the list under its key once (the list made when absent), `report` is set in the
    result (claude-code's `open`, `sidechain`; codex's `open`)."""

    meta: Mapping[str, Any] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()
    lists: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    report: Mapping[str, Any] = field(default_factory=dict)


Item = Record | Learnt  # what a reader yields


# in a cursor's meta: the key of a resume_only unit this source's read found work for, until
# that unit is done (engine.import_unit drops it then): a run that fails before that unit's
# first commit leaves nothing else to say so, and the next run finds this source unchanged
# and reads none of it. Absent (older cursors, normal runs once done): nothing is owed.
OWED = "pass_owed"
# In a cursor's meta: the number of the first record of the last message, when the reader
# took it as complete only because the file was settled (--now, a quiet file) while its
# writer may still add blocks to it (#49: a Stop hook that fires before Claude Code
# flushed them). The next import reads again from there, so the rest merges into it.
OPEN_FROM = "settled_message_from"


class ReadFailure(Exception):
    """The source cannot be read on from here (what came before it stays imported)."""


@dataclass
class Unit:
    key: str  # stable name of the source (survives a new export of the same data)
    format: str
    session_id: str  # the proposed readable id
    # its reader (may be called twice: --strict checks first): records, and what it learnt
    # beside them (Learnt) for the engine to fold into meta and report; it writes neither
    records: Callable[..., Iterable[Item]]
    meta: dict[str, Any] = field(default_factory=dict)  # kept with the cursor
    size: int | None = None  # of the file, when the unit is a whole file: unchanged = skip
    mtime_ns: int | None = None
    summary: tuple[Any, Any] | None = None  # (summary.json, summary.meta.json) to restore
    history_format: str | None = None  # the format of a new session (None: the home's)
    trim: int | None = None  # messages before the trim point to restore (None: compact)
    report: dict[str, Any] = field(default_factory=dict)  # told in the result (and Learnt's)
    # whether an archived message is an incomplete form of a complete one (see Record.start)
    part_of: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None
    rescan: bool = False  # its older reader lost blocks: rows before the cursor checked once
    # records(skip=n) passes the first n records unparsed: its cursors always sit between
    # two messages (the reader holds an open one back), so nothing before them is needed
    skips: bool = False
    parent: str | None = None  # the key of the unit whose session started this one
    # imported only to finish what an earlier run began (its cursor is there and the file
    # changed since it was read whole, or its parent's cursor names it as OWED): a pass
    # whose need the reader could not tell
    resume_only: bool = False


def moment_ns(value: Any) -> int | None:
    """An ISO 8601 string or unix seconds as UTC unix nanoseconds; None when it is neither,
    or outside what the archive can hold (years MIN_YEAR..MAX_YEAR). A string without a
    zone is local time."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or not MIN_NS / NS <= value <= MAX_NS / NS:
            return None
        return int(value * 1_000_000) * 1000  # microseconds: as exact as a float's
    if not isinstance(value, str) or not value or len(value) > 64:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if not MIN_YEAR <= moment.year <= MAX_YEAR:
        return None
    if moment.tzinfo is None:
        try:
            seconds = int(time.mktime(moment.timetuple()))
        except (OverflowError, ValueError):
            return None
        ns = seconds * NS + moment.microsecond * 1000
    elif moment.year < 2200:  # microseconds since 1970 fit a float's 53 bits exactly
        ns = round(moment.timestamp() * 1_000_000) * 1000
    else:
        ns = (moment - _EPOCH) // timedelta(microseconds=1) * 1000
    return ns if MIN_NS <= ns <= MAX_NS else None


def part_of(old: dict[str, Any], full: dict[str, Any]) -> bool:
    """Whether an archived assistant message is what an older import made of the first
    records of `full` (each of its text, reasoning and tool calls a prefix of full's)."""
    if old.get("role") != "assistant" or full.get("role") != "assistant":
        return False
    calls = old.get("tool_calls") or []
    if calls != (full.get("tool_calls") or [])[:len(calls)]:
        return False
    if not str(full.get("reasoning_content") or "").startswith(
            str(old.get("reasoning_content") or "")):
        return False
    text = strip_header(content_text(old.get("content"))).strip()
    return strip_header(content_text(full.get("content"))).strip().startswith(text)


def slug(text: str, size: int = 32) -> str:
    words = re.findall(r"[A-Za-z0-9]+", text.lower())
    return "-".join(words)[:size].strip("-")


def text_parts(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]] | None:
    """Parts as an OpenAI content: a string when they are all text, else the parts."""
    if not parts:
        return None
    if all(p.get("type") == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def problem(value: Any) -> str | None:
    """Why a value read cannot be stored as JSON (None: it can): nested too deep, a string
    that is not valid UTF-8 (a lone surrogate), an integer beyond 64 bits. The common case
    costs one orjson encoding; the walk that names the reason runs only on failure."""
    try:
        orjson.dumps(value)
        return None
    except (TypeError, RecursionError):
        pass
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels"
            children = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in children:
                stack.append((key, depth))
                stack.append((child, depth + 1))
            continue
        why = _scalar_problem(item)
        if why:
            return why
    return "it cannot be written as JSON"


def _scalar_problem(item: Any) -> str | None:
    """Why a value that holds no other cannot be stored as JSON (None: it can)."""
    if isinstance(item, str):
        try:
            item.encode("utf-8")
        except UnicodeEncodeError:
            return "a string holds a lone surrogate (not valid UTF-8)"
    elif isinstance(item, int) and not isinstance(item, bool):
        if not -(2**63) <= item < 2**64:
            return f"a number does not fit in 64 bits ({str(item)[:24]}...)"
    elif isinstance(item, float):
        if not math.isfinite(item):
            return "a number is not finite"
    elif item is not None and not isinstance(item, bool):
        return f"a value of type {type(item).__name__}"
    return None


def storable(value: Any, depth: int = 0) -> Any:
    """A value read, made fit to store as JSON (a source's metadata): a lone surrogate
    replaced, a number beyond 64 bits written as text, what is nested too deep left out."""
    if problem(value) is None:
        return value
    if depth > MAX_DEPTH // 4:
        return "[nested too deep]"
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, int) and not isinstance(value, bool):
        return value if -(2**63) <= value < 2**64 else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {storable(k, depth): storable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(v, depth + 1) for v in value]
    return value if value is None or isinstance(value, bool) else repr(value)


def raw_bytes(value: Any) -> bytes:
    """The bytes a parsed record is digested as (keys sorted, so a re-export in another key
    order is the same record); a value orjson refuses (a lone surrogate, a huge number) in
    the json module's escaped form."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        pass
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=True).encode()
    except (TypeError, ValueError, RecursionError):
        return repr(value).encode("utf-8", "surrogatepass")


def decode_error(exc: Exception) -> str:
    """orjson's or json's refusal of a line, said plainly."""
    text = str(exc)
    if "depth limit" in text or isinstance(exc, RecursionError):
        return "nested too deep to read (over 1,000 levels)"
    return text
