"""The relevance floor per language pair (search/relevance.py; calibrated by bench/floor.py).

The reported bug: in a session of 60 English facts (one per message, 16 filler messages
after), short Chinese questions about those facts got no result at all in semantic mode,
because one margin served both same-language and cross-language similarities.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agenvoy_cli.search import relevance
from agenvoy_cli.search.language import language
from agenvoy_cli.search.query import Query

ROOT = Path(__file__).resolve().parent.parent


def english_facts() -> list[str]:
    sets = []
    for split in ("tune", "heldout"):
        data = json.loads((ROOT / "bench" / "floor_data" / f"{split}.json").read_text("utf-8"))
        sets += [s for s in data["sets"] if s["lang"] == "en"]
    return [f["text"] for s in sets for f in s["facts"]]


EXTRA = [
    "My neighbour lends me his ladder whenever I need to clean the gutters.",
    "I keep my spare house key with my aunt who lives two streets away.",
    "Our book club meets at the library on the first Monday of each month.",
    "I had my wisdom teeth removed in February.",
    "My uncle repairs old clocks as a hobby.",
    "I'm saving up for a trip to Iceland to see the northern lights.",
    "We switched our internet provider because the connection kept dropping.",
    "My favourite film is an old black and white detective movie.",
    "I'm learning to bake sourdough bread on weekends.",
    "The car insurance renewal is due in November.",
    "I prefer window seats on trains.",
    "My colleague Marta sits next to me and loves spicy food.",
    "I got a new pair of hiking boots for the autumn.",
    "Our apartment faces the river, so mornings are foggy.",
    "I repaint the fence every other summer.",
    "My cousin works night shifts at the airport.",
    "I'm trying to drink more water during the day.",
    "The gym near the office closes at ten in the evening.",
    "I donated my old sofa to a charity shop.",
    "My niece just started kindergarten.",
]

# (short Chinese question, the fact it asks about)
QUESTIONS = [  # the first six returned nothing before the floor took languages into account
    ("我怕什麼？", "I'm afraid of flying"),
    ("我在樂團裡彈什麼？", "I play bass guitar"),
    ("我爺爺以前做什麼？", "My grandfather was a fisherman"),
    ("我的腳怎麼受傷的？", "I sprained my ankle"),
    ("我們八月要去哪裡度假？", "We booked a cabin by Lake Tahoe"),
    ("我奶奶幾歲了？", "My grandmother turned ninety-five"),
    ("我太太跟孩子說什麼語言？", "My wife speaks Portuguese"),
]


def session() -> list[dict]:
    facts = (english_facts() + EXTRA)[:60]
    assert len(facts) == 60
    msgs = [{"role": "user", "content": f} for f in facts]
    msgs += [{"role": "user" if i % 2 == 0 else "assistant", "content": f"ok, next item {i}"}
             for i in range(16)]
    return msgs


@pytest.mark.parametrize(("text", "lang"), [
    ("我哥哥住在哪裡？", "zh"), ("兄はどこに住んでいますか？", "ja"),
    ("¿Dónde vive mi hermano?", "es"),
    ("Wo wohnt mein Bruder?", "de"), ("Which city is my sibling in?", "en"),
    ("pod CrashLoopBackOff", "en"), ("¿Qué le pasó a nuestra gata?", "es"),
    ("I went to a café in Zürich", "en"), ("형은 어디에 살아요?", "ko"),
])
def test_language_of_a_query(text: str, lang: str) -> None:
    assert language(text) == lang


def test_cross_language_pairs_need_a_smaller_margin_than_one_language() -> None:
    en = ["My brother Tomas lives in Vancouver now.", "I work as a pharmacist."]
    same = relevance.pair_margin(0.042, Query.of("Where does my brother live?"), en)
    assert same == pytest.approx(0.042)
    for query in ("我哥哥住在哪裡？", "¿Dónde vive mi hermano?", "Wo wohnt mein Bruder?"):
        assert 0 < relevance.pair_margin(0.042, Query.of(query), en) < same
    # 0 still turns it off
    assert relevance.pair_margin(0.0, Query.of("我哥哥住在哪裡？"), en) == 0.0


def test_short_chinese_questions_find_their_english_fact_first(run) -> None:
    """Through the CLI: each question's fact is the first hit in semantic mode (today's
    single margin returned nothing for them)."""
    msgs = session()
    assert run("append", "facts", "--messages", "-",
               input=json.dumps(msgs)).exit_code == 0
    for query, fact in QUESTIONS:
        res = run("search", "facts", query, "--mode", "semantic", "--limit", "5", "--json")
        assert res.exit_code == 0, res.stderr
        hits = sorted((r for r in res.json()["results"] if r["hit"]), key=lambda r: r["rank"])
        assert hits, f"{query}: nothing returned"
        assert hits[0]["content"].startswith(fact), (query, hits[0]["content"])
