"""Time windows of a search: --range (as upstream), --since, --until."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from agenvoy_cli import timespec

RANGES: dict[str, timedelta | None] = {
    "1d": timedelta(days=1), "7d": timedelta(days=7), "1m": timedelta(days=30),
    "1y": timedelta(days=365), "all": None,
}


@dataclass(frozen=True)
class TimeWindow:
    """send_at bounds in UTC ns: lo inclusive, hi exclusive; None is open."""

    lo: int | None = None
    hi: int | None = None

    def __contains__(self, ns: int) -> bool:
        return (self.lo is None or ns >= self.lo) and (self.hi is None or ns < self.hi)

    @property
    def open(self) -> bool:
        return self.lo is None and self.hi is None

    def as_dict(self) -> dict[str, int | None]:
        return {"from": self.lo, "to": self.hi}


def time_window(range_: str = "all", since: str | None = None, until: str | None = None,
                now: datetime | None = None) -> TimeWindow:
    """--range DURATION|all combined with --since/--until (the one parser: timespec)."""
    return TimeWindow(*timespec.window(range_, since, until, now))
