"""Hybrid fusion's keyword weight (search/fusion.py): a query whose best keyword hit holds
little of it (a paraphrase, a whole dialogue turn) weighs the keyword ranking half, so an
incidental keyword match does not outvote the vector ranking's first; a query its best hit
covers keeps the full weight. Checked on bench/zh_memory.py's split and LoCoMo
(docs/benchmarks.md, "Fusion on data it was not tuned on")."""

from __future__ import annotations

from agenvoy_cli.search import fusion
from agenvoy_cli.search.query import Query

TURN = Query.of("剛開完會。\n欸，我在記帳，筆電那筆修理費是多少")
MEMORIES = ["我的筆電鍵盤進水，送修要等兩個禮拜，維修費三千八。", "今天捷運好擠。"]


def test_keyword_weight_follows_coverage_and_script():
    assert fusion.weights(TURN, MEMORIES, 0.08).keyword == fusion.LOW_COVERAGE_WEIGHT == 0.5
    assert fusion.weights(TURN, MEMORIES, 0.5).keyword == fusion.FUSION_W_KEYWORD == 1.0
    assert fusion.weights(TURN, MEMORIES, None).keyword == fusion.FUSION_W_KEYWORD
    # a Chinese turn over English memories: no keyword weight at all
    assert fusion.weights(TURN, ["The laptop keyboard got wet."], 0.08).keyword \
        == fusion.SCRIPT_MISMATCH == 0.0


def test_an_incidental_keyword_match_does_not_outvote_the_vector_ranking():
    """The keyword ranking's first hit (seq 10) is the vector ranking's eighth; the vector
    ranking's first (seq 50) has no keyword hit. Covered query (weight 1): keyword's first
    wins (1/6 + 1/13 > 1/6); low coverage (weight 0.5): vector's first wins
    (0.5/6 + 1/13 < 1/6)."""
    keyword = [(10, 8.32), (20, 8.30), (30, 8.29)]
    vector = [(50, 0.91), (60, 0.90), (70, 0.89), (80, 0.88), (90, 0.87), (100, 0.86),
              (110, 0.85), (10, 0.84)]
    for cover, first in ((0.5, 10), (0.08, 50)):
        w = fusion.weights(TURN, MEMORIES, cover)
        fused = fusion.fuse([fusion.Ranking("keyword", keyword, w.keyword),
                             fusion.Ranking("vector", vector, w.vector)], neighbour=0.0)
        assert fused[0][0] == first, (cover, fused[:3])
