"""Message vectors: one Chroma collection per session.

A search filtered by session inside one shared collection costs what the whole home holds
(Chroma's metadata filter and its HNSW walk both grow with the collection: measured 0.21 CPU-s
at 50 sessions x 1k vectors against 0.03 for 1k alone); a collection per session, searched by
id list, costs what the session holds (docs/vectors.md). MessageIndex keeps the interface of
one index (ids "session:seq", metadata with session_id and seq, `where` filters naming the
session) and routes each call to its session's collection. The one shared collection of
older versions is moved over the first time a process opens the message index.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from agenvoy_cli.errors import OperationFailed
from agenvoy_cli.output import warn
from agenvoy_cli.vectors import context, guard
from agenvoy_cli.vectors.collection import (
    BATCH,
    MESSAGES,
    ChromaUnavailable,
    Hit,
    VectorIndex,
    before_write,
    client,
    collection_names,
    directory,
    embedder,
    hnsw_settings,
    message_id,
    server_name,
    server_url,
    writing,
)
from agenvoy_cli.vectors.range_query import query_then_filter

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.models.base import Embedder

def collection_for(session_id: str) -> str:
    """A session's collection (Chroma allows only [a-zA-Z0-9._-] in names: hashed)."""
    from hashlib import blake2b as _blake2b

    return f"{MESSAGES}-{_blake2b(session_id.encode(), digest_size=8).hexdigest()}"


def session_of(vector_id: str) -> str:
    return vector_id.rsplit(":", 1)[0]


def _split_where(where: dict[str, Any] | None
                 ) -> tuple[str | None, int | None, int | None, dict[str, Any] | None]:
    """(session_id, lo, hi, the rest) of a where filter: the session picks the collection,
    a seq range [lo, hi) becomes an id list (index lookups, not a metadata scan)."""
    if not where:
        return None, None, None, None
    clauses = where["$and"] if set(where) == {"$and"} else [{k: v} for k, v in where.items()]
    sid, lo, hi, rest = None, None, None, []
    for clause in clauses:
        (key, value), = clause.items() if len(clause) == 1 else ((None, None),)
        if key == "session_id" and (isinstance(value, str) or set(value) == {"$eq"}):
            sid = value if isinstance(value, str) else value["$eq"]
        elif key == "seq" and isinstance(value, dict) and set(value) <= {"$gte", "$lt"}:
            lo = max(lo or 0, int(value.get("$gte", 0)))
            if "$lt" in value:
                hi = int(value["$lt"]) if hi is None else min(hi, int(value["$lt"]))
        else:
            rest.append(clause)
    if lo is not None and hi is None:  # an open range stays a filter
        rest.append({"seq": {"$gte": lo}})
        lo = None
    rest_where = None if not rest else rest[0] if len(rest) == 1 else {"$and": rest}
    return sid, lo, hi, rest_where


class MessageIndex:
    """Every session's message vectors, one collection each, behind one index's interface."""

    name = MESSAGES

    def __init__(self, store: Store, *, create: bool = True) -> None:
        self.store = store
        self._sessions: dict[str, VectorIndex | None] = {}
        self.unsearchable = 0
        migrate(store)

    @property
    def embedder(self) -> Embedder:
        return embedder(self.store)

    def session(self, session_id: str, *, create: bool = False) -> VectorIndex | None:
        """The session's collection; None when it has none and create is False."""
        have = self._sessions.get(session_id)
        if have is not None or (session_id in self._sessions and not create):
            return have
        try:
            index = VectorIndex(self.store, collection_for(session_id), create=create,
                                metadata={"session_id": session_id})
        except ChromaUnavailable:
            raise
        except OperationFailed:
            if create:
                raise
            index = None  # no such collection
        self._sessions[session_id] = index
        return index

    def sessions(self) -> list[VectorIndex]:
        ours = server_name(self.store, "")
        out = []
        for cname in collection_names(self.store):
            if cname.startswith(MESSAGES + "-") and cname.endswith(ours):
                out.append(VectorIndex(self.store, cname[:len(cname) - len(ours)] if ours
                                       else cname, create=False))
        return out

    # -- the interface of one index ---------------------------------------------------------
    def add(self, ids: Sequence[str], vectors: Sequence[Sequence[float]],
            metadatas: Sequence[dict[str, Any]]) -> None:
        groups: dict[str, list[int]] = defaultdict(list)
        for i, meta in enumerate(metadatas):
            groups[str(meta["session_id"])].append(i)
        for sid, rows in groups.items():
            index = self.session(sid, create=True)
            assert index is not None
            index.add([ids[i] for i in rows], [vectors[i] for i in rows],
                      [metadatas[i] for i in rows])

    def query(self, vector: Sequence[float], n: int, where: dict[str, Any] | None = None,
              ids: Sequence[str] | None = None) -> list[Hit]:
        sid, lo, hi, rest = _split_where(where)
        if sid is None:
            raise ValueError("a message search names its session in `where`")
        self.unsearchable = 0
        index = self.session(sid)
        if index is None or n <= 0:
            return []
        hits = None
        if index.path() == "exact":  # every condition on the kept metadata
            rng = ([{"seq": {"$gte": lo}}] if lo is not None else []) + \
                ([{"seq": {"$lt": hi}}] if hi is not None else [])
            conds = rng + ([rest] if rest else [])
            full = None if not conds else conds[0] if len(conds) == 1 else {"$and": conds}
            hits = index.query(vector, n, where=full, ids=ids)
        elif ids is None:
            hits = query_then_filter(index, vector, n, lo, hi, rest)
        if hits is not None:
            pass
        elif ids is None and lo is not None and hi is not None:
            with guard.exclusive(self.store):
                col = index.collection
                wanted = [message_id(sid, s) for s in range(lo, hi)]
                present = [i for p in range(0, len(wanted), BATCH * 10)
                           for i in col.get(ids=wanted[p:p + BATCH * 10], include=[])["ids"]]
                if not present:
                    return []
                # the whole collection in range (the common case): no filter at all
                ids = None if len(present) == col.count() else present
                hits = index.query(vector, min(n, len(present)), where=rest, ids=ids)
        else:
            hits = index.query(vector, n, where=rest, ids=ids)
        self.unsearchable = index.unsearchable
        return hits

    def get(self, where: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
        sid, lo, hi, rest = _split_where(where)
        if lo is not None and hi is not None:
            rng = [{"seq": {"$gte": lo}}, {"seq": {"$lt": hi}}]
            rest = {"$and": ([rest] if rest else []) + rng}
        if sid is not None:
            index = self.session(sid)
            return index.get(rest) if index is not None else {}
        out: dict[str, dict[str, Any]] = {}
        for index in self.sessions():
            out.update(index.get(rest))
        return out

    def delete(self, ids: Iterable[str]) -> int:
        groups: dict[str, list[str]] = defaultdict(list)
        for vid in ids:
            groups[session_of(vid)].append(vid)
        done = 0
        for sid, mine in groups.items():
            index = self.session(sid)
            if index is not None:
                done += index.delete(mine)
        return done

    @property
    def collection(self) -> _Router:
        return _Router(self)

    # -- what the conversation asks for (invariant 3) -----------------------------------------
    def forget_before(self, session_id: str, start_seq: int) -> int:
        index = self.session(session_id)
        if index is None:
            return 0
        stale = [i for i, m in index.get().items() if int(m.get("seq", -1)) < start_seq]
        return index.delete(stale)

    def forget_changed(self, session_id: str, seqs: list[int], from_seq: int | None) -> int:
        index = self.session(session_id)
        if index is None:
            return 0
        drop = set(seqs)
        return index.delete([i for i, m in index.get().items()
                             if int(m.get("seq", -1)) in drop
                             or (from_seq is not None and int(m.get("seq", -1)) >= from_seq)])

    def forget_session(self, session_id: str) -> int:
        index = self.session(session_id)
        if index is None:
            return 0
        count = index.count()
        with guard.exclusive(self.store):
            client(self.store).delete_collection(server_name(self.store, index.name))
        self._sessions.pop(session_id, None)
        return count


def entries(store: Store, session_id: str, ids: Sequence[str], *, embeddings: bool = False
            ) -> dict[str, Any]:
    """Chroma's `get(ids=...)` of a session's entries (ids, metadatas and, asked, embeddings),
    from the kept matrix when the session's collection is searched exactly (vectors/exact.py:
    a warm search reads nothing from Chroma after its query), else from Chroma. Hold the lock."""
    from agenvoy_cli.vectors import exact

    empty: dict[str, Any] = {"ids": [], "metadatas": [], "embeddings": None}
    index = message_index(store, create=False).session(session_id)
    if index is None or not ids:
        return empty
    with guard.exclusive(store):
        col = index.collection
        if index.path() == "exact":
            found = exact.vectors_of(exact.loaded(store, index.name, col), ids)
            return {"ids": list(found), "metadatas": [m for _, m in found.values()],
                    "embeddings": [v for v, _ in found.values()] if embeddings else None}
        got: dict[str, Any] = col.get(ids=list(ids), include=["embeddings", "metadatas"]
                                      if embeddings else ["metadatas"])
        return got


class _Router:
    """`index.collection.get(ids=..., where=...)` as the catch-up calls it, per session."""

    def __init__(self, owner: MessageIndex) -> None:
        self.owner = owner

    def get(self, ids: Sequence[str] | None = None, where: dict[str, Any] | None = None,
            **kwargs: Any) -> dict[str, Any]:
        sid = session_of(ids[0]) if ids else _split_where(where)[0]
        if sid is None:
            raise ValueError("name the session (ids or where)")
        _, _, _, rest = _split_where(where)
        index = self.owner.session(sid)
        if index is None:
            return {"ids": [], "metadatas": [], "embeddings": None}
        with guard.exclusive(self.owner.store):
            return index.collection.get(ids=list(ids) if ids else None, where=rest, **kwargs)


def migrate(store: Store) -> int:
    """Move the one shared collection of older versions into per-session collections (once;
    under the lock). Vectors Chroma cannot hand back are left to the catch-up."""
    legacy = server_name(store, MESSAGES)
    if legacy not in collection_names(store):
        return 0
    moved = 0
    with guard.exclusive(store):
        api = client(store)
        try:
            old = api.get_collection(legacy, embedding_function=None)
        except Exception:  # noqa: BLE001 - another process finished it meanwhile
            return 0
        base = {k: v for k, v in (old.metadata or {}).items()}
        total = old.count()
        if total:
            warn(f"agenvoy: note: moving {total} message vector(s) to one collection per "
                 "session (once)")
        offset = 0
        while offset < total:
            try:
                page = old.get(include=["embeddings", "metadatas"], limit=BATCH * 5,
                               offset=offset)
            except Exception:  # noqa: BLE001 - an inconsistent page: re-embedded later
                offset += BATCH * 5
                continue
            if not page["ids"]:
                break
            offset += len(page["ids"])
            groups: dict[str, list[int]] = defaultdict(list)
            for i, meta in enumerate(page["metadatas"]):
                if meta and "session_id" in meta:
                    groups[str(meta["session_id"])].append(i)
            for sid, rows in groups.items():
                col = api.get_or_create_collection(
                    server_name(store, collection_for(sid)), embedding_function=None,
                    metadata=hnsw_settings({**base, "session_id": sid}))
                guard.bump(store)
                with writing(store, sid):
                    before_write("upsert")
                    col.upsert(ids=[page["ids"][i] for i in rows],
                               embeddings=[list(page["embeddings"][i]) for i in rows],
                               metadatas=[page["metadatas"][i] for i in rows])
                moved += len(rows)
        api.delete_collection(legacy)
    return moved




def message_index(store: Store, *, create: bool = True) -> MessageIndex:
    """The store's message index, kept while the local Chroma directory is as this process
    last saw it (a search opens it twice: ~4 ms each): same client, same generation token
    (every writer, this process included, writes a new one first; so a collection created
    or deleted by anyone means a fresh index). Not kept with a Chroma server (no token)."""
    if server_url(store):
        return MessageIndex(store, create=create)
    with guard.exclusive(store):
        if os.path.isdir(guard.paths(store)[0]):
            client(store)  # reopens now if another process wrote since
        ctx = context.of(store)
        key = (directory(store).epoch, guard.read_generation(store))
        kept = ctx.message_index
        if kept is not None and kept[0] == key:
            return kept[1]  # type: ignore[no-any-return]
        index = MessageIndex(store, create=create)
        ctx.message_index = ((directory(store).epoch, guard.read_generation(store)), index)
        return index

