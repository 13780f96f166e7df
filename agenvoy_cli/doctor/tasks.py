"""doctor's check of Agenvoy 1.0's finished tasks and their vectors (search/task_corpus.py):
our own Chroma collection TASKS, made of action_history's rows, which Agenvoy writes.

A search by meaning brings the collection in line itself (its catch-up, within its
budget), so what doctor says is what that catch-up would find, and what it cannot tell
apart from a task not yet embedded:
- a task without a vector while a later task of its session has one lost its vector (the
  catch-up embeds a session's tasks in row order, so it leaves no gap): a problem;
- a vector whose content hash (metadata) is not its task's text's was made of another
  text, or its metadata is damaged: a problem (its task is found by keyword meanwhile);
- a collection built with another model than the embedder's: a problem (remade whole);
- a vector of a task Agenvoy replaced or removed is said, not counted: it is never ranked
  and the next search by meaning deletes it;
- tasks finished since the last search by meaning (the newest of their session) are
  pending: counted in the summary only. A lost vector of a session's newest task looks so.
`--repair` runs the catch-up to the end (every task embedded: minutes at thousands). The
HNSW layer of the collection is checked with the other collections (doctor/vectors.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.doctor.report import Report

CHECK = "tasks"


@dataclass
class Found:
    """What the check found (hold the lock)."""

    tasks: int
    vectors: int = 0
    pending: int = 0
    lost: list[int] = field(default_factory=list)
    other_text: list[int] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    path: str | None = None
    model: tuple[str, str] | None = None  # (built with, the embedder's) when they differ

    def as_dict(self) -> dict[str, Any]:
        return {"task_count": self.tasks, "vector_count": self.vectors,
                "pending_count": self.pending, "lost_count": len(self.lost),
                "stale_count": len(self.stale), "other_text_count": len(self.other_text),
                "path": self.path}


def inspect(store: Store) -> Found | None:
    """The tasks against their vectors; None on a home without 1.0 tasks (nor vectors of
    them). Loads no model."""
    from agenvoy_cli.conversation import tasks as task_store
    from agenvoy_cli.search.task_corpus import TASKS, digest
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors.exact import path_of
    from agenvoy_cli.vectors.location import has_vectors

    tasks = task_store.every(store.db_readonly(), None)
    exists = has_vectors(store) and vectors.index_exists(store, TASKS)
    if not tasks and not exists:
        return None
    found = Found(len(tasks))
    if not exists:
        found.pending = len(tasks)
        return found
    index = vectors.open_index(store, TASKS, create=False)
    built = (index.collection.metadata or {}).get("model_id")
    current = vectors.embedder(store).model_id
    if built != current:
        found.model = (str(built), current)
    have = index.get()
    found.vectors, found.path = len(have), path_of(store, len(have))
    found.stale = sorted(k for k in have if not k.isdigit() or int(k) not in tasks)
    newest: dict[str, int] = {}  # session -> its latest task with a vector
    for key, task in tasks.items():
        meta = have.get(str(key))
        if meta is None:
            continue
        newest[task.session_id] = max(newest.get(task.session_id, key), key)
        if meta.get("hash") != digest(task) or meta.get("task") != key:
            found.other_text.append(key)
    for key, task in sorted(tasks.items()):
        if str(key) not in have:
            if key < newest.get(task.session_id, -1):
                found.lost.append(key)
            else:
                found.pending += 1
    return found


def check(doctor: Report) -> dict[str, Any] | None:
    """Report what inspect finds; the summary for `doctor --json` ("tasks")."""
    found = inspect(doctor.store)
    if found is None:
        return None
    said = []
    if found.model is not None:
        said.append(f"the tasks' vector index was built with {found.model[0]}, the embedder "
                    f"is {found.model[1]}: it must be remade")
    if found.lost:
        said.append(f"{len(found.lost)} task(s) lost their vector (a later task of their "
                    "session has one); found by keyword only until embedded again")
    if found.other_text:
        said.append(f"{len(found.other_text)} task vector(s) were made of another text than "
                    "their task's (content hash) or their metadata is damaged; those tasks "
                    "are found by keyword only until embedded again")
    repair = _repairer(doctor.store)
    for i, detail in enumerate(said):  # one repair fixes them all: run once, said first
        doctor.report(None, CHECK, detail,
                      repair if i == 0 else (lambda: "repaired with the line above"))
    if found.stale and not said:
        doctor.report(None, CHECK, f"{len(found.stale)} task vector(s) belong to no task "
                      "(Agenvoy replaced or removed it): never ranked, deleted by the next "
                      "search by meaning", repair, note=True)
    return found.as_dict()


def _repairer(store: Store) -> Any:
    def repair() -> str:
        """The catch-up to the end (no budget), over every session's tasks."""
        from agenvoy_cli.search.corpus import Found as Searched
        from agenvoy_cli.search.task_corpus import TasksCorpus, checked

        warned: list[str] = []
        corpus = TasksCorpus(store, None, warned.append)
        checked(store).pop(corpus._key(), None)  # check again, whatever a search kept
        before = inspect(store)
        todo = 0 if before is None else len(before.lost) + len(before.other_text) + \
            before.pending if before.model is None else before.tasks
        left = corpus.catch_up(None, Searched("semantic")) or 0
        done = f"embedded {todo - left} task(s)"
        if before is not None and before.stale:
            done += f", deleted {len(before.stale)} vector(s) of tasks gone"
        return done + (f"; {left} still without a vector ({' '.join(warned)})" if left else "")
    return repair


def summary_line(doc: dict[str, Any] | None) -> str | None:
    """doctor's text line for the summary (None: a home without 1.0 tasks)."""
    if doc is None:
        return None
    path = f" (searched {doc['path']})" if doc["path"] else ""
    line = f"tasks: {doc['vector_count'] - doc['stale_count']} of {doc['task_count']} " \
        f"task(s) have a vector{path}"
    if doc["pending_count"]:
        line += f"; {doc['pending_count']} finished since the last search by meaning " \
            "(embedded by the next one)"
    if doc["lost_count"]:
        line += f"; {doc['lost_count']} task(s) lost their vector"
    return line
