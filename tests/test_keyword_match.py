"""Keyword mode means the words: a short query (1-3 terms after stop-words) returns only
messages holding every term, unless none does (then any term, and the document says so);
long questions rank any-term; every hit says which terms it matched; --match forces. Each
bar runs on our own home and on a home Agenvoy 1.0 created (trigram upstream index)."""

from __future__ import annotations

import pytest

from tests.agenvoy_sim_v10 import GoAgentV10
from tests.helpers.search import add, compacted, contents, find


@pytest.fixture(autouse=True, params=["own", "agenvoy-1.0"])
def first_writer(request, home):
    """Every bar on a home we create and on one Agenvoy 1.0 created first (a trigram
    messages_fts5, message_meta: #47); our own index answers keyword search on both."""
    if request.param == "agenvoy-1.0":
        GoAgentV10(home).close()
    return request.param


def codes(doc: dict) -> list[str]:
    return [n["code"] for n in doc["notes"]]


def _session(run, home) -> None:
    add(run, "s", "the Redis TTL expired again", "TTL of the cache is 60 s",
        "redis is up", "unrelated chatter")


def test_two_word_query_never_returns_a_one_word_hit(run, home):
    _session(run, home)
    doc = find(run, "s", "ttl redis")
    assert doc["match"] == "all"
    assert contents(doc) == ["the Redis TTL expired again"]
    assert [sorted(r["matched_terms"]) for r in doc["results"]] == [["redis", "ttl"]]
    assert "any_term" not in codes(doc)
    # archived as well as recent: the same rule
    compacted(run, home, pairs=12)
    doc = find(run, "s", "ttl redis")
    assert doc["match"] == "all" and contents(doc) == ["the Redis TTL expired again"]


def test_short_query_no_message_holds_every_term_falls_back_to_any(run, home):
    _session(run, home)
    doc = find(run, "s", "ttl memcached")
    assert doc["match"] == "any"
    assert set(contents(doc)) == {"the Redis TTL expired again", "TTL of the cache is 60 s"}
    assert all(r["matched_terms"] == ["ttl"] for r in doc["results"])
    assert codes(doc) == ["any_term"]
    text = run("search", "s", "ttl", "memcached", "--mode", "keyword")
    assert "any of them" in text.stdout


def test_match_option_forces_either(run, home):
    _session(run, home)
    doc = find(run, "s", "ttl redis", extra=("--match", "any"))
    assert doc["match"] == "any"
    assert contents(doc)[0] == "the Redis TTL expired again"
    assert len(contents(doc)) == 3
    assert all(r["matched_terms"] for r in doc["results"] if r["hit"])
    doc = find(run, "s", "ttl memcached", extra=("--match", "all"))
    assert doc["match"] == "all" and doc["results"] == []
    res = run("search", "s", "ttl", "--mode", "keyword", "--match", "some")
    assert res.exit_code == 2


def test_long_question_ranks_any_term_with_matched_terms(run, home):
    _session(run, home)
    doc = find(run, "s", "why did the redis cache ttl expire so quickly yesterday")
    assert doc["match"] == "any"
    assert contents(doc)[0] == "the Redis TTL expired again"
    assert "any_term" not in codes(doc)  # any-term is the rule here, not a fallback
    first = doc["results"][0]["matched_terms"]
    assert {"redis", "ttl", "expire"} <= set(first)  # "expire" by its stem
    for row in doc["results"]:
        assert row["matched_terms"], row


@pytest.mark.parametrize("query,hit", [("過期 redis", "redis 的鍵過期了"),
                                       ("鍵過期", "redis 的鍵過期了")])
def test_cjk_terms_count_as_terms(run, home, query, hit):
    add(run, "s", "redis 的鍵過期了", "redis 沒事", "過期的牛奶", "ok")
    doc = find(run, "s", query)
    assert doc["match"] == "all" and contents(doc) == [hit]
    assert doc["results"][0]["matched_terms"] == query.split()


def test_rag_keyword_same_rule(run, home, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "both.md").write_text("# Cache\n\nThe Redis TTL expired again.\n")
    (docs / "ttl.md").write_text("# Other\n\nA TTL of 60 seconds.\n")
    (docs / "redis.md").write_text("# Third\n\nRedis is up.\n")
    res = run("rag", "create", "docs", "--path", str(docs), "--no-vectors", "--json")
    assert res.exit_code == 0, res.stderr

    def rag(*args: str) -> dict:
        out = run("rag", "search", "docs", *args, "--mode", "keyword", "--json")
        assert out.exit_code == 0, out.stderr
        return out.json()

    doc = rag("ttl redis")
    assert doc["match"] == "all" and [r["relpath"] for r in doc["results"]] == ["both.md"]
    assert doc["results"][0]["matched_terms"] == ["ttl", "redis"]
    doc = rag("ttl memcached")
    assert doc["match"] == "any" and doc["notes"]
    assert sorted(r["relpath"] for r in doc["results"]) == ["both.md", "ttl.md"]
    assert all(r["matched_terms"] == ["ttl"] for r in doc["results"])
    doc = rag("why would the redis ttl expire every minute")
    assert doc["match"] == "any" and doc["results"][0]["relpath"] == "both.md"
    assert {"redis", "ttl", "expire"} <= set(doc["results"][0]["matched_terms"])
    # the notes: {code, message} as in conversation search (docs/json-vocabulary.md)
    assert codes(rag("ttl memcached")) == ["any_term"]
    doc = rag("!!! ()")
    assert doc["match"] == "none" and codes(doc) == ["nothing_searchable"]
    assert codes(rag("ttl redis")) == []
    res = run("rag", "search", "docs", "ttl memcached", "--mode", "keyword")
    assert "(no chunk has every term" in res.stdout and "every term" not in res.stderr
    # semantic on a database kept without vectors: keyword results, and the note says why
    doc = rag_mode(run, "redis", "semantic")
    assert codes(doc) == ["no_vectors"] and "--no-vectors" in doc["notes"][0]["message"]
    res = run("rag", "search", "docs", "redis", "--mode", "semantic")
    assert "agenvoy: note: 'docs' has no vectors" in res.stderr


def rag_mode(run, query: str, mode: str, *extra: str) -> dict:
    out = run("rag", "search", "docs", query, "--mode", mode, *extra, "--json")
    assert out.exit_code == 0, out.stderr
    return out.json()


def test_rag_match_forces_either(run, home, tmp_path):
    """`agenvoy rag search --match all|any`: every term even for a long question, any term
    even for a short query; forced, no any_term note."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "both.md").write_text("# Cache\n\nThe Redis TTL expired this morning.\n")
    (docs / "ttl.md").write_text("# Other\n\nA TTL of 60 seconds.\n")
    (docs / "redis.md").write_text("# Third\n\nRedis is up.\n")
    assert run("rag", "create", "docs", "--path", str(docs), "--no-vectors").exit_code == 0
    doc = rag_mode(run, "ttl redis", "keyword", "--match", "any")
    assert doc["match"] == "any" and codes(doc) == []
    assert [r["relpath"] for r in doc["results"]][0] == "both.md"
    assert sorted(r["relpath"] for r in doc["results"]) == ["both.md", "redis.md", "ttl.md"]
    long = "was the redis ttl expired this morning"  # 4 terms: any term unless forced
    assert rag_mode(run, long, "keyword")["match"] == "any"
    doc = rag_mode(run, long, "keyword", "--match", "all")
    assert doc["match"] == "all" and [r["relpath"] for r in doc["results"]] == ["both.md"]
    assert doc["results"][0]["matched_terms"] == ["redis", "ttl", "expired", "morning"]
    # stop-words are not terms: a short query with "the" finds the chunk without it
    assert [r["relpath"] for r in rag_mode(run, "the ttl seconds", "keyword")["results"]
            ] == ["ttl.md"]
    doc = rag_mode(run, "ttl memcached", "keyword", "--match", "all")
    assert doc["match"] == "all" and doc["results"] == [] and codes(doc) == []
    res = run("rag", "search", "docs", "ttl", "--match", "some")
    assert res.exit_code == 2 and "--match" in res.stderr


def test_error_lookup_by_keyword_same_rule(run, home):
    def record(symptom: str) -> None:
        res = run("errors", "record", "--tool", "cache", "-k", "cache", "--symptom", symptom,
                  "--action",
                  "restarted it", "--outcome", "resolved", "--no-semantic")
        assert res.exit_code == 0, res.stderr

    record("the redis ttl expired before the job ended")
    record("a ttl of zero on the session store")
    record("redis refused the connection")

    def lookup(query: str) -> dict:
        res = run("errors", "lookup", query, "--no-semantic", "--json", "-n", "16")
        assert res.exit_code == 0, res.stderr
        return res.json()

    doc = lookup("ttl redis")
    assert doc["match"] == "all" and doc["count"] == 1
    assert sorted(doc["records"][0]["matched_terms"]) == ["redis", "ttl"]
    doc = lookup("ttl memcached")
    assert doc["match"] == "any" and doc["count"] == 2
    assert all(r["matched_terms"] == ["ttl"] for r in doc["records"])


@pytest.mark.parametrize("question", ["What is the redis ttl?", "what redis ttl",
                                      "redis ttl?", "redis ttl 嗎？"])
def test_a_short_question_is_natural_language_and_ranks_any_term(run, home, question):
    """A question (a question mark, or an English interrogative first) is a natural-language
    question whatever its length: messages with every term first, then any term, `match`
    "any" and no fallback note; the same words typed as keywords stay every-term."""
    _session(run, home)
    doc = find(run, "s", question)
    assert doc["match"] == "any"
    assert contents(doc)[0] == "the Redis TTL expired again"
    assert set(contents(doc)) == {"the Redis TTL expired again", "TTL of the cache is 60 s",
                                  "redis is up"}
    assert "any_term" not in codes(doc)
    assert all(r["matched_terms"] for r in doc["results"])
    assert find(run, "s", question, extra=("--match", "all"))["match"] == "all"
    assert contents(find(run, "s", "redis ttl")) == ["the Redis TTL expired again"]


def test_rag_and_error_lookup_take_a_short_question_as_any_term(run, home, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "both.md").write_text("# Cache\n\nThe Redis TTL expired again.\n")
    (docs / "ttl.md").write_text("# Other\n\nA TTL of 60 seconds.\n")
    assert run("rag", "create", "docs", "--path", str(docs), "--no-vectors").exit_code == 0
    doc = rag_mode(run, "why did the redis ttl expire?", "keyword")
    assert doc["match"] == "any" and codes(doc) == []
    assert [r["relpath"] for r in doc["results"]] == ["both.md", "ttl.md"]
    assert rag_mode(run, "redis ttl", "keyword")["match"] == "all"
    for symptom in ("the redis ttl expired before the job ended",
                    "a ttl of zero on the session store", "redis refused the connection"):
        res = run("errors", "record", "--tool", "cache", "-k", "cache", "--symptom", symptom,
                  "--action", "restarted it", "--outcome", "resolved", "--no-semantic")
        assert res.exit_code == 0, res.stderr
    res = run("errors", "lookup", "redis ttl?", "--no-semantic", "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert doc["match"] == "any" and doc["count"] == 3
    assert sorted(doc["records"][0]["matched_terms"]) == ["redis", "ttl"]
    res = run("errors", "lookup", "redis ttl", "--no-semantic", "--json")
    assert res.json()["match"] == "all" and res.json()["count"] == 1


def test_a_contraction_of_stop_words_matches_nothing(run, home):
    # "What's" is "what" + "s" to FTS: both stop-words, as "That's" and "I'm" are
    add(run, "s", "That's a big change; what made you decide?", "I'm so sorry, that's a loss.",
        "the Redis TTL expired again", "unrelated chatter")
    doc = find(run, "s", "What's the boiling point of tungsten in kelvin?")
    assert contents(doc) == [], contents(doc)
    doc = find(run, "s", "What's the Redis TTL doing?")
    assert contents(doc) == ["the Redis TTL expired again"]
    assert [sorted(r["matched_terms"]) for r in doc["results"]] == [["Redis", "TTL"]]


def test_a_stop_word_in_other_punctuation_matches_nothing(run, home):
    # Spanish opens a question with "¿", French quotes with «»: "¿A" is the FTS token "a",
    # a stop-word; before, it matched every English message holding the article
    add(run, "s", "Could you format that as a list?", "I'm allergic to penicillin.",
        "a note about the build")
    doc = find(run, "s", "¿A qué medicamento soy alérgico?")
    assert doc["results"] == [], contents(doc)
    doc = find(run, "s", "«The» list, and/or the note?")
    assert sorted(c for c in contents(doc)) == ["Could you format that as a list?",
                                                "a note about the build"], contents(doc)
    assert all(set(r["matched_terms"]) <= {"list", "note"} for r in doc["results"]), doc
