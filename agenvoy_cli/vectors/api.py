"""The derived vector index: Chroma collections over embeddings we compute ourselves.

Imported only by commands that need vectors (chromadb costs ~0.5 s to import). Every access
to the local directory holds the store's exclusive lock and goes through vectors/guard.py,
which reopens this process's client when another process wrote since (chroma's embedded
client keeps the HNSW index in memory); embedding (the slow part) is done by callers outside
the lock. Vectors are always passed explicitly, so Chroma's own default embedding function
(which downloads a model) never runs. A collection records the model id and dimension it was
built with; a different model is refused with a rebuild hint, never mixed. Messages live in
one collection per session (vectors/messages.py): a search's cost is bounded by its session.

This module is the interface the layers above use; vectors/collection.py is one collection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agenvoy_cli.vectors import collection, guard
from agenvoy_cli.vectors.collection import (  # noqa: F401 - the interface, re-exported
    BATCH,
    ERRORS,
    MESSAGES,
    SYNC_THRESHOLD,
    ChromaUnavailable,
    Hit,
    IndexModelMismatch,
    client,
    collection_names,
    embedder,
    embedder_spec,
    local_model,
    message_id,
    move_aside,
    refresh_if_stale,
    server_name,
)
from agenvoy_cli.vectors.guard import read_generation  # noqa: F401 - the interface
from agenvoy_cli.vectors.location import server_url
from agenvoy_cli.vectors.messages import MessageIndex, message_index

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store

# The interface: what it re-exports from collection.py and guard.py, and its own functions.
__all__ = ["BATCH", "ERRORS", "MESSAGES", "SYNC_THRESHOLD", "ChromaUnavailable", "Hit",
           "IndexModelMismatch", "client", "collection_names", "make_index",
           "drop_index", "drop_unlisted", "embedder",
           "embedder_spec", "forget_before", "forget_changed", "forget_session",
           "index_exists", "local_model", "message_id", "move_aside",
           "open_index", "read_generation", "rebuild_index", "refresh_if_stale",
           "server_name", "wrap_embedder"]


def open_index(store: Store, name: str, *, create: bool = True,
               metadata: dict[str, Any] | None = None) -> Any:
    """A collection by name: MESSAGES is the per-session message index (vectors/messages.py,
    a MessageIndex), any other name one collection (vectors/collection.py's VectorIndex)."""
    if name == MESSAGES:
        return message_index(store, create=create)
    return collection.VectorIndex(store, name, create=create, metadata=metadata)



def index_exists(store: Store, name: str) -> bool:
    """Whether the collection exists (for MESSAGES: any session's collection, or the one
    shared collection of older versions)."""
    names = collection_names(store)
    if name == MESSAGES:
        ours = server_name(store, "")
        return any(n.startswith(MESSAGES) and n.endswith(ours) for n in names)
    return server_name(store, name) in names


def forget_before(store: Store, session_id: str, start_seq: int) -> int:
    """Drop a session's message vectors older than its trim point (SPEC invariant 3)."""
    return MessageIndex(store, create=False).forget_before(session_id, start_seq)


def forget_changed(store: Store, session_id: str, seqs: list[int],
                   from_seq: int | None = None) -> int:
    """Drop the vectors of edited or forgotten messages (seqs, and every seq >= from_seq)."""
    if not index_exists(store, MESSAGES):
        return 0
    return MessageIndex(store, create=False).forget_changed(session_id, seqs, from_seq)


def forget_session(store: Store, session_id: str) -> int:
    return MessageIndex(store, create=False).forget_session(session_id)


def drop_index(store: Store, name: str) -> bool:
    """Delete a whole collection (rebuild after an embedder change); MESSAGES: every
    session's. A directory too damaged to open is moved aside instead."""
    try:
        names = collection_names(store)
    except ChromaUnavailable:
        if server_url(store):
            raise
        with guard.exclusive(store):
            return move_aside(store) is not None
    if name == MESSAGES:
        ours = server_name(store, "")
        doomed = [n for n in names if n.startswith(MESSAGES) and n.endswith(ours)]
    else:
        doomed = [server_name(store, name)] if server_name(store, name) in names else []
    with guard.exclusive(store):
        for cname in doomed:
            client(store).delete_collection(cname)
    return bool(doomed)


def rebuild_index(index: Any, keep: set[str], create: Callable[[], Any]) -> int:
    """Drop an index's collection and add back the entries `keep` names (those its HNSW layer
    still returns: doctor --repair); `create` makes the fresh one (a session's, or
    make_index's). How many were kept."""
    store = index.store
    with store.write_lock():
        col = index.collection
        saved: dict[str, Any] = {"ids": [], "embeddings": [], "metadatas": []}
        if keep:
            try:
                saved = col.get(ids=sorted(keep), include=["embeddings", "metadatas"])
            except Exception:  # noqa: BLE001 - nothing can be kept: all re-embedded
                saved = {"ids": [], "embeddings": [], "metadatas": []}
        client(store).delete_collection(server_name(store, index.name))
        fresh = create()
        if saved["ids"]:
            fresh.add(saved["ids"], [list(v) for v in saved["embeddings"]], saved["metadatas"])
    return len(saved["ids"])


def make_index(store: Store, name: str, metadata: dict[str, Any]) -> Any:
    """The collection `name` made anew (or found) with this metadata, searched wide; its
    VectorIndex."""
    from agenvoy_cli.vectors.collection import hnsw_settings

    with store.write_lock():
        client(store).get_or_create_collection(server_name(store, name), embedding_function=None,
                                               metadata=hnsw_settings(metadata))
    return open_index(store, name, create=False)


def drop_unlisted(store: Store, prefix: str, keep: set[str]) -> None:
    """Drop this home's collections whose name starts with `prefix` and is not in `keep`
    (a RAG remove that died half-way left them). Hold the lock."""
    ours = server_name(store, "")  # "" embedded; "-<home key>" on a shared server
    wanted = {server_name(store, name) for name in keep}
    for col in client(store).list_collections():
        cname = col if isinstance(col, str) else col.name
        if cname.startswith(prefix) and cname.endswith(ours) and cname not in wanted:
            with contextlib.suppress(Exception):
                client(store).delete_collection(cname)


def wrap_embedder(store: Store, wrap: Any) -> Any:
    """Replace this process's embedder (for the store's spec) by wrap(embedder): a
    long-lived process's cache around it (the MCP server). Raises as embedder() does."""
    from agenvoy_cli.vectors.context import of

    spec = embedder_spec(store) or ""
    of(store).embedders[spec] = wrapped = wrap(embedder(store))
    return wrapped
