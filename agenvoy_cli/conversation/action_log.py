"""Agenvoy v0.32's action log, read here and never written: the finished runs it keeps in
sessions/<id>/history/<YYYY-MM-DD-HH-MM>-<task id>.json (a run's pending/<task>.json, moved
there when it ends; askUser.go CleanupPending), one JSON object each (objective, tool
results and attempts, answers, todos, the reply, the model). The folder is the layout's
(home/layout.py action_log); what a run says is told by the MCP tool chat_history
(server/agenvoy_tools.py, mode=list|read) through Memory.action_log.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

NAME_LAYOUT = "%Y-%m-%d-%H-%M"  # a task file's name: YYYY-MM-DD-HH-MM-<task id>.json
NAME_LEN = len("2006-01-02-15-04")


@dataclass(frozen=True)
class Run:
    """A finished run: its file, task id and when it ended (the name's local minute), and
    its record, or why it cannot be read (`problem`; the record is then None)."""

    path: Path
    task_id: str
    at: datetime
    record: dict[str, Any] | None = None
    problem: str | None = None


def runs(folder: Path) -> list[Run] | None:
    """The finished runs of an action log folder, newest first (upstream's entriesOf: names
    sorted descending), records not read; None when there is no such folder."""
    if not folder.is_dir():
        return None
    out = []
    for path in folder.iterdir():
        stem = path.stem
        if path.suffix != ".json" or not path.is_file() or len(stem) <= NAME_LEN + 1:
            continue
        try:
            at = datetime.strptime(stem[:NAME_LEN], NAME_LAYOUT)
        except ValueError:
            continue
        out.append(Run(path, stem[NAME_LEN + 1:], at))
    return sorted(out, key=lambda r: str(r.path), reverse=True)


def read(run: Run) -> Run:
    """The run with its record read (or the problem: a file that is not a JSON object)."""
    try:
        data = orjson.loads(run.path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        return Run(run.path, run.task_id, run.at, problem=f"{run.path}: {exc}")
    if not isinstance(data, dict):
        return Run(run.path, run.task_id, run.at, problem=f"{run.path}: not a JSON object")
    return Run(run.path, run.task_id, run.at, record=data)
