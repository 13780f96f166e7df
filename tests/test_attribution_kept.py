"""Attribution vectors kept: the vectors of messages' own texts that semantic search's
attribution check needs are stored in the message vectors' entries, so a second cold
search of the same messages embeds nothing but the query; they go wherever the message
vectors go (changed, trimmed, rebuilt, reset). Counted in embedder calls."""

from __future__ import annotations

import json

from agenvoy_cli.vectors.attribution import OWN_TEXT
from tests.helpers.search import add, find, vector_ids

FACTS = [("Where does your sister live these days?", "In Lisbon, near the old harbour."),
         ("And your brother?", "He moved to Oslo for a job in shipping."),
         ("What race are you training for?", "The Berlin marathon in September.")]


def _session(run) -> None:
    turns = [t for pair in FACTS for t in pair]
    turns += [f"filler line {i} about nothing much" for i in range(24)]
    add(run, "s", *turns)


def _search(run, words, query: str = "Lisbon harbour sister") -> list[str]:
    words.texts.clear()
    doc = find(run, "s", query, mode="semantic", extra=("--budget", "60"))
    assert doc["results"], doc
    return list(words.texts)


def test_second_search_embeds_nothing_but_the_query(run, home, words):
    _session(run)
    first = _search(run, words)
    assert first, "the first search embeds the session and the attribution texts"
    assert _search(run, words) == []  # nothing but the query (embed_query is not counted)
    _search(run, words, "Oslo shipping brother")  # other hits: their texts are kept too
    assert _search(run, words, "Oslo shipping brother") == []
    assert _search(run, words) == []


def test_kept_vectors_follow_the_message_vectors(run, home, words):
    _session(run)
    _search(run, words)
    assert _search(run, words) == []
    # a changed message: its entry is re-added, so its kept vector cannot survive
    path = home / "sessions" / "s" / "history.json"
    history = json.loads(path.read_text())
    old = history[1]["content"]
    history[1]["content"] = old.replace("old harbour", "old harbour and the river")
    path.write_text(json.dumps(history))
    assert run("backfill", "s", "--vectors").exit_code == 0  # the edit re-embedded
    assert OWN_TEXT not in vector_ids(home)["s:1"]  # a new entry: nothing kept from before
    again = _search(run, words)
    assert [t for t in again if "the river" in t] == [history[1]["content"].split("---\n")[-1]]
    assert _search(run, words) == []
    # rebuilt: nothing kept any more
    assert run("backfill", "s", "--vectors", "--rebuild").exit_code == 0
    rebuilt = _search(run, words)
    assert rebuilt and all("\n" not in t for t in rebuilt), rebuilt  # attribution texts only
    # reset: the session's entries (and what they kept) are cleared
    assert run("session", "reset", "s", "--yes", "--no-summary").exit_code == 0
    _session(run)
    assert any("\n" not in t and "Lisbon" in t for t in _search(run, words))
