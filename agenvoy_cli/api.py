"""The Python API: one home, opened once, for agents written in Python.

    from agenvoy_cli import Memory

    with Memory() as memory:                      # $AGENVOY_HOME or ~/.config/agenvoy
        memory.append("s1", [{"role": "user", "content": "deploy failed again"}])
        messages = memory.context("s1")["messages"]           # what to send to the model
        hits = memory.search("s1", "deploy", mode="keyword")["results"]
        hint = memory.lookup_errors("permission denied", tool="bash")["hint"]
        chunks = memory.rag_search("retry policy", ["notes"])["results"]

Every method returns the document the matching command prints with ``--json`` (the same
names, docs/json-vocabulary.md; without ``schema_version``), and raises the exceptions of
``agenvoy_cli.errors`` (``BadInput``, ``NotFound``, ``StoreBusy``, ...; ``exit_code`` and
``kind`` say which). The CLI's commands call these methods themselves, so the two never
disagree. One Memory may be used from several threads; many processes may share a home
(the same locks as the CLI). Heavy parts (chromadb, the embedding model) load on the first
call that needs them and stay loaded for the life of the Memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agenvoy_cli.contract import listing

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store

Warn = Callable[[str], None]


class Memory:
    """An Agenvoy home: conversation memory, error memory and document RAG."""

    def __init__(self, home: str | os.PathLike[str] | None = None, *,
                 store: Store | None = None) -> None:
        """Open `home` (default: $AGENVOY_HOME, else ~/.config/agenvoy); nothing is created
        until something is written. `store` wraps an already open Store (the CLI does)."""
        if store is None:
            from agenvoy_cli.home.layout import Layout, resolve_home
            from agenvoy_cli.vectors.hooks import open_store

            store = open_store(Layout(resolve_home(None if home is None else str(home))))
            self._owned = True
        else:
            self._owned = False
        self.store = store

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Release the home (only a Memory that opened it closes it)."""
        if self._owned:
            self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- conversation ---------------------------------------------------------------------

    def append(self, session_id: str, messages: Sequence[dict[str, Any]], *,
               time: datetime | None = None, compact: bool = True) -> dict[str, Any]:
        """Append OpenAI-style messages to a session (history.json, then SQLite), all or
        nothing. `time` is the local time for messages without a time header (now)."""
        from agenvoy_cli.home.layout import validate_name

        validate_name(session_id)
        result = self.store.append(session_id, list(messages), time, compact=compact)
        return {"session_id": result.session_id, "appended": result.appended,
                "message_count": result.messages, "bytes": result.bytes,
                "compaction": result.compaction.as_dict() if result.compaction else None}

    def context(self, session_id: str, max_messages: int | None = None, *,
                warn: Warn | None = None) -> dict[str, Any]:
        """The messages to send to the model this turn: the rolling summary (as a system
        message) and the last `max_messages` (max_history_messages, 16)."""
        messages = self.store.context(session_id, max_messages, warn=warn)
        return {"session_id": session_id, **listing("messages", messages)}

    def search(self, session_id: str, query: str, *, mode: str = "semantic",
               limit: int = 8, range: str = "all", since: str | None = None,
               until: str | None = None, progress: Callable[[int, int], None] | None = None,
               budget: float | None = None, notice: Callable[..., Any] | None = None
               ) -> dict[str, Any]:
        """Search a session: semantic (default), keyword or hybrid; `range`, `since`,
        `until` take what the CLI's options take (7d, 1mo, '2025-01-31', 'yesterday').
        `budget`: at most this many seconds embedding new messages first (None: all of
        them); what is left is searched by keyword. The human notes are under "notes"."""
        from agenvoy_cli.search.engine import search, time_window

        window = time_window(range, since, until)
        result = search(self.store, session_id, query, mode, limit=limit, window=window,
                        progress=progress, budget=budget, notice=notice)
        return {**result.as_dict(), "notes": list(result.notes)}

    # -- error memory ---------------------------------------------------------------------

    def lookup_errors(self, query: str = "", *, tool: str | None = None,
                      error_type: str | None = None, limit: int | None = None,
                      semantic: bool | None = None, warn: Warn | None = None,
                      budget: float | None = None) -> dict[str, Any]:
        """Error records related to an error text (best first), and the hint to inject into
        the agent's next turn ("" when nothing is known). Renews the records' expiry.
        `budget`: at most this many seconds embedding records that lack a vector first."""
        from agenvoy_cli.errormem import memory as errormem

        options: dict[str, Any] = {"tool": tool, "error_type": error_type,
                                   "semantic": semantic, "budget": budget}
        if limit is not None:
            options["limit"] = limit
        if warn is not None:
            options["warn"] = warn
        result = errormem.lookup(self.store, query, **options)
        return {**listing("records", [h.as_dict() for h in result.hits]),
                "hint": result.hint, "mode": result.mode,
                "unindexed_count": result.unindexed_count}

    # -- document RAG ---------------------------------------------------------------------

    def rag_databases(self) -> dict[str, Any]:
        """Every RAG database with its file and chunk counts, size and last sync."""
        from agenvoy_cli import rag

        return listing("databases", rag.list_databases(self.store))

    def rag_search(self, query: str, databases: Sequence[str] | None = None, *,
                   mode: str = "hybrid", limit: int = 8) -> dict[str, Any]:
        """Search the named RAG databases (None: all of them): hybrid, keyword, semantic."""
        from agenvoy_cli import rag

        result = rag.search(self.store, None if databases is None else list(databases),
                            query, mode, limit=limit)
        return {**result.as_dict(), "notes": list(result.notes)}
