"""What Agenvoy 1.0 keeps beside the conversation in history.db, read here and never written:
the persona of each session (`session`: name, self_id, model, ...) and the finished tasks
(`action_history`: one row per task with its objective, the tools' results, the reply, the
model and when it ended). A home without those tables (v0.28-v0.32) has no persona and no
task; home/generation.py says which tables the home has.

Tasks are memory of what the agent *did*: `session tasks WORDS` finds them by every word
(substrings of the objective, the tools' results or the reply) in a time window, newest
first (`find`). They are not mixed into the conversation's rankings (a task is one record
with fields, not a message with neighbours, and its words are mostly tool output), but they
are a corpus of their own of the retrieval pipeline (search/task_corpus.py: `session tasks
--mode`), which reads them here (`every`): its text is the objective and the reply.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agenvoy_cli.contract import moment
from agenvoy_cli.home import generation

PERSONA_FIELDS = ("name", "self_id", "model", "reasoning")
# end_at's unit is not stated by upstream: seconds (time.Now().Unix(), as its other records),
# told apart from milliseconds and nanoseconds by size (inferred: docs/upstream.md)
_MS_FROM = 10**11
_NS_FROM = 10**14


def personas(conn: sqlite3.Connection | None, only: str | None = None
             ) -> dict[str, dict[str, str]]:
    """session id -> its 1.0 persona (name, self_id, model, reasoning); {} on older homes."""
    if conn is None or not generation.of(conn).persona:
        return {}
    sql = f"SELECT session_id, {', '.join(PERSONA_FIELDS)} FROM session"
    rows = conn.execute(sql + (" WHERE session_id = ?" if only is not None else ""),
                        () if only is None else (only,)).fetchall()
    return {r[0]: dict(zip(PERSONA_FIELDS, r[1:])) for r in rows}


def end_ns(value: int) -> int:
    """A task's end_at in unix nanoseconds."""
    if value >= _NS_FROM:
        return value
    if value >= _MS_FROM:
        return value * 1_000_000
    return value * 1_000_000_000


def _from_ns(value: int, unit_of: int) -> int:
    """A bound in ns, in the unit the stored values use (judged by a stored value)."""
    if unit_of >= _NS_FROM:
        return value
    if unit_of >= _MS_FROM:
        return value // 1_000_000
    return value // 1_000_000_000


@dataclass
class Task:
    session_id: str
    task_hash: str
    end_at: int  # ns
    model: str
    objective: str
    tool_results: str
    reply: str
    matched_terms: list[str]

    def as_dict(self, full: bool = False) -> dict[str, Any]:
        doc: dict[str, Any] = {"session_id": self.session_id, "task_hash": self.task_hash,
                               **moment("ended", self.end_at), "model": self.model,
                               "objective": self.objective, "reply": self.reply}
        if full:
            doc["tool_results"] = self.tool_results
        doc["matched_terms"] = self.matched_terms
        return doc


def _like(term: str) -> str:
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def find(conn: sqlite3.Connection | None, session_id: str | None, terms: Sequence[str], *,
         since_ns: int | None = None, until_ns: int | None = None, limit: int = 20
         ) -> list[Task]:
    """Finished tasks holding every term (case-insensitive substrings of the objective, the
    tools' results or the reply: exact words in any order, Chinese by any substring) that
    ended in [since, until), newest first. [] on a home without action_history."""
    if conn is None or not generation.of(conn).tasks:
        return []
    where, args = ["1"], []  # type: list[str], list[Any]
    if session_id is not None:
        where.append("session_id = ?")
        args.append(session_id)
    sample = conn.execute("SELECT max(end_at) FROM action_history").fetchone()[0]
    if sample is None:
        return []
    if since_ns is not None:
        where.append("end_at >= ?")
        args.append(_from_ns(since_ns, sample))
    if until_ns is not None:
        where.append("end_at < ?")
        args.append(_from_ns(until_ns, sample))
    folded = [t.casefold() for t in terms if t.strip()]
    for term in folded:
        # lower() folds ASCII only; the casefold check below is the rule, this narrows
        where.append("(lower(objective) || char(10) || lower(tool_results) || char(10) || "
                     "lower(reply)) LIKE ? ESCAPE '\\'")
        args.append(_like(term.lower()) if term.isascii() else _like(term))
    rows = conn.execute(
        "SELECT session_id, task_hash, end_at, model, objective, tool_results, reply "
        f"FROM action_history WHERE {' AND '.join(where)} ORDER BY end_at DESC, id DESC",
        args)
    out: list[Task] = []
    for sid, task_hash, end_at, model, objective, results, reply in rows:
        text = f"{objective}\n{results}\n{reply}".casefold()
        if all(t in text for t in folded):
            out.append(Task(sid, task_hash, end_ns(end_at), model, objective, results, reply,
                            [t for t in terms if t.strip()]))
            if len(out) >= limit:
                break
    return out


def every(conn: sqlite3.Connection | None, session_id: str | None = None
          ) -> dict[int, Task]:
    """Every finished task (of one session, None: of all) by its row id; {} on a home
    without action_history. The tools' results are not read (the corpus does not use
    them)."""
    if conn is None or not generation.of(conn).tasks:
        return {}
    sql = ("SELECT id, session_id, task_hash, end_at, model, objective, reply "
           "FROM action_history")
    rows = conn.execute(sql + (" WHERE session_id = ?" if session_id is not None else ""),
                        () if session_id is None else (session_id,))
    return {i: Task(sid, task_hash, end_ns(end_at), model, objective, "", reply, [])
            for i, sid, task_hash, end_at, model, objective, reply in rows}


def ids(conn: sqlite3.Connection | None) -> set[int]:
    """Every finished task's row id (of every session)."""
    if conn is None or not generation.of(conn).tasks:
        return set()
    return {i for (i,) in conn.execute("SELECT id FROM action_history")}


def tool_results(conn: sqlite3.Connection, task_ids: Sequence[int]) -> dict[int, str]:
    """The tools' results of some tasks, by row id (`--full`)."""
    if not task_ids:
        return {}
    marks = ",".join("?" * len(task_ids))
    return dict(conn.execute(f"SELECT id, tool_results FROM action_history WHERE id IN "
                             f"({marks})", list(task_ids)).fetchall())
