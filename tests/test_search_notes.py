"""The JSON explains what the text explains: every note a search prints is in `notes` as
{"code", "message"} (docs/json-vocabulary.md), through the CLI and the MCP tool."""

from __future__ import annotations

import json

import orjson

from tests.conftest import agenvoy
from tests.helpers.search import add, find


def codes(doc: dict) -> list[str]:
    # besides `uncalibrated`: the stand-in model has no calibration profile (#50)
    return [n["code"] for n in doc["notes"] if n["code"] != "uncalibrated"]


def _many(run, n: int = 40) -> None:
    add(run, "s", *[f"message {i} about topic{i % 7} and more words" for i in range(n)])


def test_everything_in_the_context_window(run, home, words):
    add(run, "s", "only one message")
    for mode in ("semantic", "hybrid"):
        doc = find(run, "s", "message", mode=mode)
        # hybrid answers with the keyword matches inside the window (issue #40)
        assert len(doc["results"]) == (mode == "hybrid"), doc
        assert codes(doc) == ["context_window"], doc
        assert "context window" in doc["notes"][0]["message"]
    text = run("search", "s", "message")
    assert "all 1 messages are in the context window" in text.stdout
    assert "context window" not in text.stderr  # said once, where the results would be


def test_nothing_related_closely_enough(run, home, words, monkeypatch):
    _many(run)
    monkeypatch.setenv("AGENVOY_SEARCH_FLOOR", "2")  # no message clears it
    doc = find(run, "s", "topic3", mode="semantic")
    assert doc["results"] == [] and codes(doc) == ["not_related"]
    assert run("search", "s", "topic3").stdout.startswith("no message is related closely")


def test_unindexed_and_budget_spent(run, home, words):
    _many(run)
    doc = find(run, "s", "topic3", mode="semantic", extra=("--budget", "0"))
    assert codes(doc) == ["unindexed"] and doc["unindexed_count"] == 40
    assert doc["results"]  # found by keyword meanwhile
    doc = find(run, "s", "topic3", mode="semantic", extra=("--budget", "0.000001"))
    assert codes(doc) == ["budget_spent"] and doc["unindexed_count"] > 0
    assert "budget" in doc["notes"][0]["message"]


def test_unarchived_and_nothing_searchable(run, home):
    add(run, "s", "archived words", "ok")
    path = home / "sessions" / "s" / "history.json"
    history = json.loads(path.read_text())
    history.append({"role": "user", "content": "written by another agent, words"})
    path.write_text(json.dumps(history))
    doc = find(run, "s", "words")
    assert "unarchived" in codes(doc)
    assert "written by another agent, words" in [r["content"] for r in doc["results"]]
    doc = find(run, "s", "???")
    assert doc["match"] == "none" and codes(doc) == ["nothing_searchable"]


def test_mcp_search_returns_the_same_notes(home):
    from tests.mcp_client import connect, run_async

    batch = [{"role": "user", "content": "the Redis TTL expired"},
             {"role": "assistant", "content": "TTL of the cache is 60 s"}]
    assert agenvoy("append", "s", "--messages", "-", input=orjson.dumps(batch)).returncode == 0
    cli = orjson.loads(agenvoy("search", "s", "ttl memcached", "--mode", "keyword",
                               "--json").stdout)

    async def body():
        async with connect("--session", "s") as s:
            res = await s.call_tool("search_chat_history", {
                "keyword": "ttl memcached", "mode": "keyword", "time_range": "all"})
            return res.structured_content

    doc = run_async(body)
    assert codes(doc) == codes(cli) == ["any_term"]
    assert doc["notes"] == cli["notes"] and doc["match"] == "any"


def test_keyword_in_another_script_than_the_memories_says_so(run, home, words):
    """Issue #40: a Chinese keyword search over English memories found nothing and said
    nothing; it says why and points at semantic search (which matches across languages)."""
    add(run, "s", "My sister Anna lives in Lisbon.", "Noted.")
    doc = find(run, "s", "我姐姐住在哪裡", mode="keyword")
    assert doc["results"] == [] and codes(doc) == ["other_script"], doc
    assert "--mode semantic" in doc["notes"][0]["message"]
    text = run("search", "s", "--mode", "keyword", "我姐姐住在哪裡")
    assert "--mode semantic" in text.stdout, text.stdout
    same = find(run, "s", "where is Porto", mode="keyword")  # same script: the usual answer
    assert same["results"] == [] and codes(same) == [], same
