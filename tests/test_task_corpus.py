"""Agenvoy 1.0's finished tasks as a corpus of the retrieval pipeline (search/task_corpus.py):
`session tasks WORDS --mode keyword|semantic|hybrid` on a 1.0 home Agenvoy wrote
(tests/agenvoy_sim_v10.py), with real FTS5, real Chroma and the built-in model."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.helpers.embedded import documents_embedded
from tests.helpers.schemas import validate
from tests.helpers.tasks import home_with_tasks

SID = "s"
DAY = 86_400

TASKS = [  # (hash, session, objective, reply, tool output, days ago)
    ("a1", SID, "Rotate the Redis password on the cache server",
     "Rotated the password and restarted the cache; clients reconnected.",
     "redis-cli CONFIG SET requirepass " + "x" * 3000, 2),
    ("a2", SID, "Summarise the deployment checklist for the release",
     "Wrote a five-step checklist: freeze, tag, build, canary, announce.", "", 10),
    ("a3", SID, "Find a good recipe for sourdough bread",
     "Suggested a 75% hydration loaf with an overnight cold proof.", "", 1),
    ("a4", SID, "Renew the TLS certificates of the web servers",
     "Renewed both certificates with certbot; they expire in 90 days.", "", 30),
    ("b1", "other", "Book a table for dinner on Friday",
     "Booked a table for four at 19:30.", "", 0),
]


def ok(res) -> Any:
    assert res.exit_code == 0, res.stdout + res.stderr
    return res.json()


@pytest.fixture
def tasks_home(home):
    now = int(time.time())
    go = home_with_tasks(home, [(h, sid, objective, {"reply": reply, "tool_results": tools,
                                                     "end_at": now - ago * DAY})
                                for h, sid, objective, reply, tools, ago in TASKS])
    yield go
    go.close()


def hashes(doc: dict[str, Any]) -> list[str]:
    return [t["task_hash"] for t in doc["tasks"]]


def search(run, *args: str) -> dict[str, Any]:
    return ok(run("session", "tasks", *args, "--json"))


def test_each_mode_ranks_the_related_task_first(run, tasks_home):
    for mode in ("keyword", "semantic", "hybrid"):
        doc = search(run, SID, "redis", "password", "--mode", mode)
        assert hashes(doc)[0] == "a1", mode
        validate(doc, "session-tasks")
        top = doc["tasks"][0]
        assert top["rank"] == 1 and top["score_kind"] == {
            "keyword": "bm25", "semantic": "cosine", "hybrid": "rrf"}[mode]
        assert doc["mode"] == mode and "match" in doc and "unindexed_count" in doc
    # by meaning: no word of the query is in the task
    doc = search(run, SID, "how do I bake a loaf of bread at home", "--mode", "semantic")
    assert hashes(doc)[:1] == ["a3"]
    assert search(run, SID, "certbot", "--mode", "keyword")["tasks"][0]["matched_terms"] == \
        ["certbot"]


def test_unrelated_questions_get_nothing_by_meaning(run, tasks_home):
    for question in ("What is the capital of France?",
                     "who won the chess world championship in 1972"):
        doc = search(run, SID, question, "--mode", "semantic")
        assert doc["tasks"] == [], question
        assert [n["code"] for n in doc["notes"]] == ["not_related"]


def test_the_tools_output_is_not_ranked_but_still_filtered(run, tasks_home):
    assert hashes(search(run, SID, "requirepass")) == ["a1"]  # today's word filter
    assert search(run, SID, "requirepass", "--mode", "keyword")["tasks"] == []


def test_time_window_session_and_full(run, tasks_home):
    # four subjects, one per task: any of them, as asked (the keyword floor needs half)
    doc = search(run, SID, "checklist certificates sourdough password", "--mode", "keyword",
                 "--range", "7d", "--match", "any")
    assert set(hashes(doc)) == {"a1", "a3"}
    doc = search(run, SID, "checklist certificates sourdough password", "--mode", "hybrid",
                 "--until", "5 days ago")
    assert set(hashes(doc)) <= {"a2", "a4"} and hashes(doc)
    assert hashes(search(run, "--all-sessions", "dinner", "--mode", "keyword")) == ["b1"]
    assert search(run, SID, "dinner", "--mode", "keyword")["tasks"] == []
    full = search(run, SID, "redis", "--mode", "hybrid", "--full")["tasks"][0]
    assert full["tool_results"].startswith("redis-cli")


def test_vectors_follow_agenvoys_changes(run, tasks_home, home):
    assert hashes(search(run, SID, "redis password", "--mode", "semantic"))[0] == "a1"
    # Agenvoy replaces a task (INSERT OR REPLACE: a new row id) and adds one
    tasks_home.finish_task(SID, "a1", "Migrate the mailing list to a new provider",
                           reply="Moved 2,000 subscribers to the new provider.",
                           end_at=int(time.time()))
    doc = search(run, SID, "move the newsletter subscribers", "--mode", "semantic")
    assert hashes(doc)[0] == "a1" and doc["unindexed_count"] == 0
    assert "Redis" not in doc["tasks"][0]["objective"]
    doc = search(run, SID, "rotate the redis password", "--mode", "semantic", "--budget", "0")
    assert "Redis" not in " ".join(t["objective"] for t in doc["tasks"])


def test_budget_zero_finds_by_keyword_and_says_so(run, tasks_home):
    doc = search(run, SID, "redis password", "--mode", "hybrid", "--budget", "0")
    assert hashes(doc)[0] == "a1" and doc["unindexed_count"] == 4
    assert "unindexed" in [n["code"] for n in doc["notes"]]


def test_bad_input(run, tasks_home):
    for args in (("--mode", "semantic"), ("x", "--mode", "semantic", "--match", "all"),
                 ("x", "--mode", "hybrid", "--budget", "-1"), ("x", "--mode", "fuzzy")):
        res = run("session", "tasks", SID, *args)
        assert res.exit_code == 2 and res.stderr.count("\n") == 1, (args, res.stderr)


def test_text_output_and_the_python_api(run, tasks_home):
    res = run("session", "tasks", SID, "redis", "password", "--mode", "hybrid")
    assert res.exit_code == 0 and "(rrf)" in res.stdout.splitlines()[0]
    assert "Rotate the Redis password" in res.stdout
    from agenvoy_cli import Memory

    with Memory() as mem:
        doc = mem.tasks(None, "book a table for dinner", mode="semantic")
        assert hashes(doc)[:1] == ["b1"] and doc["session_id"] is None
        assert mem.tasks(SID, "dinner")["tasks"] == []  # today's filter: one session


def test_a_new_embedder_remakes_the_task_vectors(run, tasks_home, monkeypatch):
    from tests.words_embedder import WordsEmbedder  # noqa: F401 - importable for the spec

    assert hashes(search(run, SID, "redis password", "--mode", "semantic"))[0] == "a1"
    monkeypatch.setenv("AGENVOY_EMBEDDER", "python:tests.words_embedder:current")
    doc = search(run, SID, "redis password", "--mode", "hybrid")
    assert hashes(doc)[0] == "a1" and doc["unindexed_count"] == 0
    assert "no_vectors" not in [n["code"] for n in doc["notes"]]


def test_a_home_older_than_1_0_has_no_task_in_any_mode(run, home):
    from tests.agenvoy_sim_v032 import GoAgentV032

    old = GoAgentV032(home)
    old.say(SID, "user", "hello")
    old.close()
    for mode in ("keyword", "semantic", "hybrid"):
        doc = search(run, SID, "redis password", "--mode", mode)
        assert doc["tasks"] == [] and doc["layout"]["tasks_table"] is False
    assert "keeps none" in run("session", "tasks", SID, "redis", "--mode", "hybrid").stdout


def test_the_floor_takes_the_stored_task_vectors(run, tasks_home, monkeypatch):
    """The floor weighs the top tasks' index vectors: a task's stored vector was made of
    exactly its embedded text, so a search embeds no task text again (at 600 tasks it was
    1.7 s of a 2.0 s search), and answers as when it did."""
    first = search(run, SID, "redis", "password", "--mode", "semantic")  # catches up
    texts = documents_embedded(monkeypatch)
    again = search(run, SID, "redis", "password", "--mode", "semantic")
    assert hashes(again) == hashes(first) and hashes(again)[0] == "a1"
    assert [t["score"] for t in again["tasks"]] == [t["score"] for t in first["tasks"]]
    unrelated = search(run, SID, "What is the capital of France?", "--mode", "semantic")
    assert unrelated["tasks"] == []
    assert texts == [], texts


def test_keyword_mode_gives_nothing_for_a_near_miss(run, tasks_home):
    """A task's objective is its first line: the notes' title rule kept any task whose
    objective shared one word with a question about another subject ("renew" a passport
    appointment -> the TLS renewal). Keyword mode now needs half of the question's content
    words in the best task (TASK_COVERAGE); a paraphrase of the task keeps it."""
    for question in ("Did you renew my passport appointment?",
                     "Can you find a pizza dough recipe for the party?",
                     "What is the release date of the new phone?"):
        doc = search(run, SID, question, "--mode", "keyword")
        assert doc["tasks"] == [], (question, hashes(doc))
        assert doc["match"] == "any"
        assert "not_related" in [n["code"] for n in doc["notes"]]
    for question, want in (("When do the renewed TLS certificates expire?", "a4"),
                           ("Which sourdough bread recipe did you find?", "a3"),
                           ("did we rotate the redis password", "a1")):
        assert hashes(search(run, SID, question, "--mode", "keyword"))[:1] == [want], question
    # a short query whose every term is in a task is not floored, nor --match any (asked)
    assert hashes(search(run, SID, "certbot", "--mode", "keyword")) == ["a4"]
    assert hashes(search(run, SID, "Did you renew my passport appointment?", "--mode",
                         "keyword", "--match", "any")) == ["a4"]


def test_a_warm_holder_does_not_read_every_task_vector_again(tasks_home, home, monkeypatch):
    """The catch-up's check (every task vector's metadata, every task's text hashed) is kept
    with the holder's Store while the generation token and the database are unchanged: a
    warm semantic search reads no metadata again; Agenvoy finishing a task is seen."""
    from agenvoy_cli.api import Memory
    from agenvoy_cli.vectors.collection import VectorIndex as Index

    memory = Memory(home)
    first = memory.tasks(SID, "redis password", mode="semantic", limit=5)
    assert first["tasks"][0]["task_hash"] == "a1" and first["unindexed_count"] == 0
    reads: list[Any] = []
    get = Index.get

    def counted(self, *args, **kwargs):
        reads.append(self.name)
        return get(self, *args, **kwargs)

    monkeypatch.setattr(Index, "get", counted)
    memory.tasks(SID, "redis password", mode="semantic", limit=5)  # checks, finds it done
    reads.clear()
    for _ in range(2):
        again = memory.tasks(SID, "redis password", mode="semantic", limit=5)
        assert again["tasks"] == first["tasks"] and again["unindexed_count"] == 0
    assert reads == []
    tasks_home.finish_task(SID, "c1", "Rotate the Redis password on the queue server",
                           reply="Rotated the Redis password of queue-02.",
                           end_at=int(time.time()))
    doc = memory.tasks(SID, "redis password of the queue server", mode="semantic", limit=5)
    assert doc["tasks"][0]["task_hash"] == "c1" and doc["unindexed_count"] == 0
    assert reads  # the database changed: checked again
