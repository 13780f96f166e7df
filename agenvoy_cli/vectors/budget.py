"""Embedding what lacks a vector within a search's budget (error records, knowledge notes:
the catch-up a semantic lookup or search does before it asks the index)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store

T = TypeVar("T")


def embed_within(store: Store, todo: Sequence[T], batch: int, budget: float | None,
                 step: Callable[[list[T]], None], warn: Callable[[str], None],
                 failure: str) -> int:
    """step(batch) over `todo` until `budget` seconds of it have passed (None: all); the
    model is loaded first, outside the budget. How many were done; a failure is said with
    `failure` (what is left is found by keyword) and ends the catch-up."""
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors.collection import _one_line
    from agenvoy_cli.vectors.hooks import preload

    done = 0
    try:
        preload()
        vectors.embedder(store).embed_query("warm")  # the model load is not the budget's
        deadline = None if budget is None else time.monotonic() + budget
        while done < len(todo) and (deadline is None or time.monotonic() < deadline):
            chunk = list(todo[done:done + batch])
            step(chunk)
            done += len(chunk)
    except Exception as exc:  # noqa: BLE001 - a search never fails because of vectors
        warn(f"agenvoy: warning: {failure} ({_one_line(exc)})")
    return done
