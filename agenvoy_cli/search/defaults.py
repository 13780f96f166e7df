"""A search's modes and defaults, and the --budget check: what `agenvoy search` needs to
parse its command line, in a module that imports nothing else (the CLI's fast path
decides to ask the running server before it imports the search engine)."""

from __future__ import annotations

import math

MODES = ("semantic", "keyword", "hybrid")
DEFAULT_LIMIT = 8
DEFAULT_BUDGET = 3.0  # seconds a search may spend embedding before it (CLI default)


def check_budget(budget: float | None) -> float | None:
    from agenvoy_cli.errors import BadInput

    if budget is not None and (not math.isfinite(budget) or budget < 0):
        raise BadInput(f"--budget must be a number of seconds >= 0, got {budget!r}")
    return budget
