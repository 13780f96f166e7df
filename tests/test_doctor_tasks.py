"""doctor checks the finished tasks' vector collection (search/task_corpus.py TASKS) as it
checks the messages' and the notes': how many tasks have a vector, which were lost or made
of another text, which path a search takes; `--repair` embeds them again. A 1.0 home
Agenvoy wrote (tests/agenvoy_sim_v10.py), real Chroma, the built-in model."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.helpers.schemas import validate
from tests.helpers.tasks import home_with_tasks

SID = "s"
TASKS = [  # (hash, session, objective, reply)
    ("a1", SID, "Rotate the Redis password on the cache server", "Rotated it; clients are back."),
    ("a2", SID, "Summarise the deployment checklist", "Five steps: freeze, tag, build, ship."),
    ("a3", SID, "Find a recipe for sourdough bread", "A 75% hydration loaf, cold proof."),
    ("b1", "other", "Book a table for dinner on Friday", "Booked a table for four at 19:30."),
    ("a4", SID, "Renew the TLS certificates", "Renewed both with certbot."),
]


@pytest.fixture
def tasks_home(home):
    now = int(time.time())
    go = home_with_tasks(home, [(h, sid, objective, {"reply": reply, "end_at": now - 100 + n})
                                for n, (h, sid, objective, reply) in enumerate(TASKS)])
    yield go
    go.close()


def doctor(run, *args: str) -> tuple[int, dict[str, Any]]:
    res = run("doctor", *args, "--json")
    doc = res.json()
    # vector_paths[].vectors (a count named as a list) predates this check and breaks the
    # vocabulary: the rest of the document is held to it
    validate({**doc, "vector_paths": []}, "doctor")
    return res.exit_code, doc


def embed_all(run) -> None:
    res = run("session", "tasks", "--all-sessions", "redis", "--mode", "semantic", "--json")
    assert res.exit_code == 0 and res.json()["unindexed_count"] == 0, res.stderr


def task_index(home) -> tuple[Any, Any]:
    from agenvoy_cli.api import Memory
    from agenvoy_cli.search.task_corpus import TASKS as NAME
    from agenvoy_cli.vectors import api as vectors

    store = Memory(home).store
    return store, vectors.open_index(store, NAME, create=False)


def row_id(home, task_hash: str) -> str:
    import sqlite3

    conn = sqlite3.connect(home / ".store" / "history.db")
    try:
        return str(conn.execute("SELECT id FROM action_history WHERE task_hash = ?",
                                (task_hash,)).fetchone()[0])
    finally:
        conn.close()


def test_a_healthy_home_with_task_vectors(run, tasks_home, home):
    embed_all(run)
    code, doc = doctor(run)
    assert code == 0 and doc["problems"] == [], doc["problems"]
    assert doc["tasks"] == {"task_count": 5, "vector_count": 5, "pending_count": 0,
                            "lost_count": 0, "stale_count": 0, "other_text_count": 0,
                            "path": "exact"}
    assert any(p["collection"] == "agenvoy_tasks" and p["path"] == "exact"
               for p in doc["vector_paths"])
    text = run("doctor").stdout
    assert "tasks: 5 of 5 task(s) have a vector (searched exact)" in text, text


def test_a_deleted_task_vector_is_found_and_repaired(run, tasks_home, home):
    embed_all(run)
    store, index = task_index(home)
    with store.write_lock():
        index.delete([row_id(home, "a2")])  # a later task of its session has its vector
    code, doc = doctor(run)
    assert code == 1 and doc["remaining"] == 1
    [problem] = doc["problems"]
    assert problem["check"] == "tasks" and "1 task(s) lost their vector" in problem["detail"]
    assert doc["tasks"]["lost_count"] == 1 and doc["tasks"]["vector_count"] == 4
    assert "tasks: 1 task(s) lost their vector" in run("doctor").stdout
    code, doc = doctor(run, "--repair")
    assert "embedded 1 task(s)" in doc["problems"][0]["repaired"]
    code, doc = doctor(run)
    assert code == 0 and doc["tasks"]["vector_count"] == 5 and doc["problems"] == []


def test_a_vector_made_of_another_text_is_found_and_repaired(run, tasks_home, home):
    embed_all(run)
    store, index = task_index(home)
    key = row_id(home, "a1")
    with store.write_lock():
        index.collection.update(ids=[key], metadatas=[{"task": int(key), "session": SID,
                                                       "hash": "0000000000000000"}])
    code, doc = doctor(run)
    assert code == 1 and doc["tasks"]["other_text_count"] == 1
    assert "made of another text" in doc["problems"][0]["detail"]
    doctor(run, "--repair")
    code, doc = doctor(run)
    assert code == 0 and doc["problems"] == [] and doc["tasks"]["other_text_count"] == 0
    found = run("session", "tasks", SID, "redis password", "--mode", "semantic", "--json",
                "--budget", "0").json()
    assert found["tasks"][0]["task_hash"] == "a1" and found["unindexed_count"] == 0


def test_tasks_not_embedded_yet_or_replaced_are_not_problems(run, tasks_home, home):
    code, doc = doctor(run)  # 1.0 tasks, never searched by meaning: no collection
    assert code == 0 and doc["problems"] == []
    assert doc["tasks"] == {"task_count": 5, "vector_count": 0, "pending_count": 5,
                            "lost_count": 0, "stale_count": 0, "other_text_count": 0,
                            "path": None}
    text = run("doctor").stdout
    assert "ok:" in text and "tasks: 0 of 5 task(s) have a vector" in text
    embed_all(run)
    tasks_home.finish_task(SID, "a5", "Plan the team offsite", reply="Booked a venue.",
                           end_at=int(time.time()))  # the newest: embedded by the next search
    tasks_home.finish_task(SID, "a1", "Rotate the Redis password again", reply="Done.",
                           end_at=int(time.time()))  # replaced: a new row, the old one's vector
    code, doc = doctor(run)
    assert code == 0 and doc["remaining"] == 0
    assert doc["tasks"]["pending_count"] == 2 and doc["tasks"]["stale_count"] == 1
    assert [p["note"] for p in doc["problems"]] == [True]


def test_a_home_without_1_0_tasks_says_nothing_of_them(run, home):
    assert run("append", "s", "--role", "user", "--content", "hello").exit_code == 0
    code, doc = doctor(run)
    assert code == 0 and doc["tasks"] is None and doc["problems"] == []
    assert "task" not in run("doctor").stdout


def test_the_tasks_repair_under_injected_faults(run, tasks_home, home):
    """A full or failing disk during the tasks' repair (the catch-up's writes) is said, never
    an internal error, and leaves what the next repair finishes."""
    from agenvoy_cli.models.embedders import DEFAULT_SPEC
    from tests.helpers import fault_sweep as fs

    model = {"AGENVOY_EMBEDDER": DEFAULT_SPEC}  # the one the vectors were made with
    embed_all(run)
    store, index = task_index(home)
    with store.write_lock():
        index.delete([row_id(home, "a2"), row_id(home, "a3")])
    store.close()
    failed = []
    for failure in ("enospc", "eio"):
        for at in (1, 2, 3):
            res = fs.run(home, "doctor", "--repair",
                         env={**model, "AGENVOY_FAULTS": f"at={at},fail={failure}"})
            said = (res.stdout + res.stderr).decode()
            assert "internal error" not in said and res.returncode in (0, 1), said
            assert "damaged" not in said, said
            failed += [said] if res.returncode == 1 else []
    assert any("no space left" in s or "input/output error" in s.lower() for s in failed), failed
    fs.ok(home, "doctor", "--repair", env=model)
    code, doc = doctor(run)
    assert code == 0 and doc["tasks"]["vector_count"] == 5 and doc["problems"] == []
