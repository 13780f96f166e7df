"""One parser for every time option (--since, --until, --range): instants and durations.

Durations have one spelling per unit, so nothing is ambiguous: ``s`` seconds, ``m``/``min``
minutes, ``h`` hours, ``d`` days, ``w`` weeks, ``mo`` months (30 days), ``y`` years
(365 days); the long names (``minutes``, ``months`` ...) work too, and a trailing ``ago``
is allowed (``7d``, ``7d ago``, ``90 min``, ``2 weeks ago``, ``1mo``). An instant is a
duration ago, ``now``/``today``/``yesterday``, or anything python-dateutil parses (naive
means local time; ``TZ`` honoured). A date alone given to --until means through that day.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta

from agenvoy_cli.errors import BadInput

NS = 1_000_000_000
UNITS: dict[str, int] = {}
for _seconds, _names in (
        (1, "s sec secs second seconds"),
        (60, "m min mins minute minutes"),
        (3600, "h hr hrs hour hours"),
        (86400, "d day days"),
        (7 * 86400, "w wk wks week weeks"),
        (30 * 86400, "mo mon month months"),
        (365 * 86400, "y yr yrs year years")):
    for _name in _names.split():
        UNITS[_name] = _seconds
UNIT_TABLE = "s seconds, m/min minutes, h hours, d days, w weeks, mo months (30 d), y years"
_DURATION = re.compile(r"\A\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*(?:ago)?\s*\Z", re.I)


def duration(text: str, option: str) -> timedelta | None:
    """A duration (7d, 90 min, 1mo, 2 weeks ago), or None when text is not one."""
    match = _DURATION.match(text)
    if not match:
        return None
    unit = match.group(2).lower()
    if unit not in UNITS:
        raise BadInput(f"{option} {text!r}: unknown unit {match.group(2)!r} "
                       f"(units: {UNIT_TABLE})")
    return timedelta(seconds=float(match.group(1)) * UNITS[unit])


def _local_ns(moment: datetime) -> int:
    return int(time.mktime(moment.timetuple())) * NS


def instant(text: str, option: str, *, end: bool = False, now: datetime | None = None) -> int:
    """UTC unix ns of an instant. With end=True the result is exclusive and fields left out
    run to their end (a date means through that day)."""
    now = now or datetime.now()
    word = text.strip().lower()
    if word in ("now", "today", "yesterday"):
        day = now.replace(hour=0, minute=0, second=0, microsecond=0)
        if word == "yesterday":
            day -= timedelta(days=1)
        if word == "now":
            return _local_ns(now.replace(microsecond=0)) + (NS if end else 0)
        return _local_ns(day + timedelta(days=1) if end else day)
    span = duration(text, option)
    if span is not None:
        return _local_ns((now - span).replace(microsecond=0)) + (NS if end else 0)
    from dateutil import parser

    default = (datetime(now.year, 12, 31, 23, 59, 59) if end
               else datetime(now.year, 1, 1, 0, 0, 0))
    try:
        moment = parser.parse(text, default=default)
    except (ValueError, OverflowError):
        raise BadInput(f"{option} {text!r} is neither a time (2025-01-31, '2025-01-31 "
                       f"14:00', 'yesterday') nor a duration ago ({UNIT_TABLE})") from None
    ns = (int(moment.timestamp()) * NS if moment.tzinfo is not None
          else _local_ns(moment.replace(microsecond=0)))
    return ns + NS if end else ns  # through the last second named


def window(range_: str | None = None, since: str | None = None, until: str | None = None,
           now: datetime | None = None) -> tuple[int | None, int | None]:
    """(lo, hi) in UTC unix ns (hi exclusive) from --range DURATION|all, --since, --until."""
    now = now or datetime.now()
    lo: int | None = None
    if range_ and range_.strip().lower() != "all":
        span = duration(range_, "--range")
        if span is None:
            raise BadInput(f"--range {range_!r} is not a duration ({UNIT_TABLE}) or 'all'")
        lo = _local_ns((now - span).replace(microsecond=0))
    if since:
        start = instant(since, "--since", now=now)
        lo = start if lo is None else max(lo, start)
    hi = instant(until, "--until", end=True, now=now) if until else None
    if lo is not None and hi is not None and lo >= hi:
        raise BadInput("the time window is empty (--since/--range start is not before --until)")
    return lo, hi
