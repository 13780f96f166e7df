"""Hybrid fusion's keyword weight for a query whose best keyword hit holds little of it (a
whole dialogue turn as the query): higher when its best hit stands out (the query's rare
words: a name, a product) than when the keyword ranking is flat (words any message holds).
Tuned on bench/zh_memory.py's tune split (docs/benchmarks.md)."""

from __future__ import annotations

from agenvoy_cli.search import fusion

TURN = "剛開完會。\n欸，我在記帳，筆電那筆修理費是多少"
MEMORIES = ["我的筆電鍵盤進水，送修要等兩個禮拜，維修費三千八。", "今天捷運好擠。"]


def test_low_coverage_weight_follows_whether_the_best_keyword_hit_stands_out():
    flat = fusion.weights(TURN, MEMORIES, 0.08, [8.32, 8.30])
    sharp = fusion.weights(TURN, MEMORIES, 0.08, [19.3, 4.9])
    assert flat.keyword == fusion.LOW_COVERAGE_FLAT < sharp.keyword == fusion.LOW_COVERAGE_SHARP
    assert fusion.weights(TURN, MEMORIES, 0.08, [7.6]).keyword == fusion.LOW_COVERAGE_SHARP
    # enough coverage, or no keyword hit at all: the default weights, whatever the scores
    assert fusion.weights(TURN, MEMORIES, 0.5, [8.32, 8.30]).keyword == fusion.FUSION_W_KEYWORD
    assert fusion.weights(TURN, MEMORIES, None).keyword == fusion.FUSION_W_KEYWORD
    # a Chinese turn over English memories: no keyword weight at all, as before
    assert fusion.weights(TURN, ["The laptop keyboard got wet."], 0.08, [19.3, 4.9]).keyword \
        == fusion.SCRIPT_MISMATCH


def test_a_keyword_hit_that_stands_out_outvotes_the_vector_ranking_a_flat_one_does_not():
    """The keyword ranking's first hit (seq 10) is the vector ranking's eighth; the vector
    ranking's first (seq 50) has no keyword hit. Standing out: keyword's first wins
    (0.6/6 + 1/13 > 1/6); flat: vector's first wins (0.5/6 + 1/13 < 1/6), as every
    low-coverage query did before (one weight, 0.5)."""
    keyword = [(10, 8.32), (20, 8.30), (30, 8.29)]
    vector = [(50, 0.91), (60, 0.90), (70, 0.89), (80, 0.88), (90, 0.87), (100, 0.86),
              (110, 0.85), (10, 0.84)]
    scores = [s for _, s in keyword]
    for stood_out, first in ((True, 10), (False, 50)):
        w = fusion.weights(TURN, MEMORIES, 0.08, [19.3, 4.9] if stood_out else scores)
        fused = fusion.fuse(keyword, vector, w_keyword=w.keyword, w_vector=w.vector,
                            neighbour=0.0)
        assert fused[0][0] == first, (stood_out, fused[:3])
