"""What every format reader yields: units (one future session each) made of records."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, NamedTuple

Timed = tuple[dict[str, Any], datetime | None]  # a message and its local time (None: unknown)


class Record(NamedTuple):
    """One record of a source: the bytes the read-up-to digest covers, the messages it
    becomes (none for bookkeeping records), or why it is malformed."""

    raw: bytes
    messages: list[Timed]
    error: str | None = None


@dataclass
class Unit:
    key: str  # stable name of the source (survives a new export of the same data)
    format: str
    session_id: str  # the proposed readable id
    records: Callable[[], Iterable[Record]]  # may be called twice (--strict checks first)
    meta: dict[str, Any] = field(default_factory=dict)
    size: int | None = None  # of the file, when the unit is a whole file: unchanged = skip
    mtime_ns: int | None = None
    summary: tuple[Any, Any] | None = None  # (summary.json, summary.meta.json) to restore
    history_format: str | None = None  # the format of a new session (None: the home's)
    trim: int | None = None  # messages before the trim point to restore (None: compact)


def local_time(value: Any) -> datetime | None:
    """An ISO 8601 string or unix seconds as a naive local datetime (None if neither)."""
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            moment = datetime.fromtimestamp(float(value), timezone.utc)
        elif isinstance(value, str) and value:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if moment.tzinfo is None:
                return moment.replace(microsecond=0)
        else:
            return None
    except (ValueError, OverflowError, OSError):
        return None
    return moment.astimezone().replace(tzinfo=None, microsecond=0)


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
