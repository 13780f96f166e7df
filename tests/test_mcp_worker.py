"""The MCP server's threads: the store thread, the embedding threads beside it, and the
background indexer (server/worker.py). In-process, over a real home and the words embedder."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from agenvoy_cli.home.layout import Layout
from agenvoy_cli.server import worker
from agenvoy_cli.server.app import build_app


def test_an_indexing_failure_does_not_take_the_server_down(
        home: Path, words, capsys: pytest.CaptureFixture[str]) -> None:
    """An exception in an indexing step (it was a half-imported numpy) used to escape the task
    group and end `serve` with "internal error: ExceptionGroup": the host then waited for an
    answer that never came. It is said once on stderr and indexing goes on."""
    app = build_app(Layout(home), "s")
    calls = []
    real = app.indexer.next_job

    def flaky() -> object:
        calls.append(1)
        if len(calls) <= 3:
            raise ImportError("cannot import name 'NDArray' from partially initialized module")
        return real()

    app.indexer.next_job = flaky  # type: ignore[method-assign]

    async def main() -> None:
        task = asyncio.ensure_future(worker.index_forever(app.thread, app.indexer, app.wake,
                                                          app.idle))
        deadline = time.monotonic() + 30
        while len(calls) < 5 and not task.done() and time.monotonic() < deadline:
            app.wake.set()
            await asyncio.sleep(0.05)
        assert not task.done(), task.exception()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(main())
    finally:
        app.stop()
    assert len(calls) >= 5
    err = capsys.readouterr().err
    assert err.count("background indexing failed") == 1, err
    assert "partially initialized module" in err


def test_no_embedding_thread_starts_before_the_heavy_imports_end(home: Path, words) -> None:
    """numpy imported by two threads at once can be seen half-initialised. chromadb (and numpy
    with it) is imported on the store thread, and a query's embedding waits for that."""
    app = build_app(Layout(home), "s")
    assert app.indexer.queries is not None
    events: list[tuple[str, str]] = []
    real_import = app.indexer.import_heavy

    def slow_import() -> None:
        events.append(("import start", threading.current_thread().name))
        time.sleep(0.3)
        real_import()
        events.append(("import end", threading.current_thread().name))

    def embed_query(text: str) -> list[float]:
        events.append(("embed", threading.current_thread().name))
        return [0.0]

    app.indexer.import_heavy = slow_import  # type: ignore[method-assign]
    app.indexer.queries.embed_query = embed_query

    async def main() -> None:
        await asyncio.gather(app.embed_query("where does he live", "semantic"),
                             app.embed_query("ttl", "hybrid"))

    try:
        asyncio.run(main())
    finally:
        app.stop()
    names = [e[0] for e in events]
    assert names[:2] == ["import start", "import end"] and names.count("embed") == 2, events
    assert events[0][1].startswith("agenvoy-store")
    assert app.indexer.imported
    import sys

    assert "chromadb" in sys.modules


def test_shutdown_ends_indexing_without_a_traceback(
        home: Path, words, capsys: pytest.CaptureFixture[str]) -> None:
    """SIGTERM stops the store thread (new jobs are refused) and sets `stopped`: the indexer
    ends quietly; the refusal is not a failure to report (the SIGTERM test saw a Traceback)."""
    app = build_app(Layout(home), "s")
    app.indexer.stopped = True
    app.stop()

    async def main() -> None:
        await asyncio.wait_for(worker.index_forever(app.thread, app.indexer, app.wake,
                                                    app.idle), 10)

    asyncio.run(main())
    assert "Traceback" not in capsys.readouterr().err


def test_a_query_embedding_goes_on_after_its_call_ran_out_of_time(home: Path, words) -> None:
    """The call's time limit (AGENVOY_HTTP_TIMEOUT) may end while the heavy imports still hold
    the store thread: the caller gets its timeout, and the query is still embedded (the work
    goes on in the server, as test_mcp_http's time-limit test expects)."""
    import anyio

    app = build_app(Layout(home), "s")
    real_import = app.indexer.import_heavy
    embedded: list[str] = []

    def slow_import() -> None:
        time.sleep(0.5)
        real_import()

    app.indexer.import_heavy = slow_import  # type: ignore[method-assign]
    app.indexer.queries.embed_query = lambda text: embedded.append(text) or [0.0]

    async def main() -> None:
        with pytest.raises(TimeoutError):
            with anyio.fail_after(0.1):
                await app.embed_query("where does he live", "semantic")
        for _ in range(100):
            if embedded:
                break
            await asyncio.sleep(0.05)

    try:
        asyncio.run(main())
    finally:
        app.stop()
    assert embedded == ["where does he live"]
