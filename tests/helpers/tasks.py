"""A 1.0 home Agenvoy wrote (tests/agenvoy_sim_v10.py) with finished tasks, for the tests of
the task corpus and of doctor's task check."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.agenvoy_sim_v10 import GoAgentV10


def home_with_tasks(home: Any, tasks: Sequence[tuple[str, str, str, dict[str, Any]]]
                    ) -> GoAgentV10:
    """Each session says hello, then each (hash, session, objective, finish_task's keywords)
    is finished in order. The caller closes the agent."""
    go = GoAgentV10(home)
    for sid in dict.fromkeys(sid for _, sid, _, _ in tasks):
        go.say(sid, "user", "hello")
    for task_hash, sid, objective, kwargs in tasks:
        go.finish_task(sid, task_hash, objective, **kwargs)
    return go
