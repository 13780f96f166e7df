"""A search that found nothing inside its time window: say whether the window hid matches
(issue #49: MCP's time_range defaults to the last day, and a two-day-old session answered
"no matches" with nothing to say the window had left everything out)."""

from __future__ import annotations

from collections.abc import Callable

from agenvoy_cli.search.results import SearchResult
from agenvoy_cli.search.timewindow import TimeWindow


def note_outside(result: SearchResult, again: Callable[[TimeWindow], SearchResult],
                 within: str, wider: str) -> None:
    """When `result` found nothing inside a time window, run the same search without one
    (`again`, with nothing left to embed: the first search caught up) and note how many
    matches the window left out. `within` names the window ("time_range 1d"), `wider` how
    to search without it."""
    if result.results or result.window.open:
        return
    hits = sum(1 for row in again(TimeWindow()).results if row.hit)
    if hits:
        result.note("outside_window", f"no match {within}; {hits} match(es) are outside it: "
                    f"{wider} finds them")
