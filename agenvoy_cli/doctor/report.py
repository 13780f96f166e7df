"""What doctor found and what it repaired: the findings of one run, which every check adds to
(doctor/checks.py runs the checks, doctor/vectors.py and doctor/conversation.py hold some)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agenvoy_cli.conversation.store import Store


@dataclass
class Problem:
    session_id: str | None
    check: str
    detail: str
    repaired: str | None = None
    note: bool = False  # said, not a problem that remains (nothing on disk can repair it)

    def as_dict(self) -> dict[str, Any]:
        doc = {"session_id": self.session_id, "check": self.check, "detail": self.detail,
               "repaired": self.repaired}
        return {**doc, "note": True} if self.note else doc


class Report:
    """One doctor run over a home: its findings, repaired when `repair`."""

    def __init__(self, store: Store, repair: bool) -> None:
        self.store = store
        self.repair = repair
        self.problems: list[Problem] = []
        self.vectors_usable = False  # set by the home-level vector check
        # per collection checked: how it is searched ("exact" or "hnsw", vectors/exact.py)
        self.vector_paths: list[dict[str, Any]] = []

    def report(self, sid: str | None, check: str, detail: str,
               fix: Callable[[], str] | None = None, *, note: bool = False) -> None:
        problem = Problem(sid, check, detail, note=note)
        if self.repair and fix is not None:
            problem.repaired = fix()
        self.problems.append(problem)
