"""The derived vector index: Chroma collections over embeddings we compute ourselves.

Imported only by commands that need vectors (chromadb costs ~0.5 s to import). Chroma's
embedded client is not multi-process safe, so every access holds the store's write lock;
embedding (the slow part) is done by callers outside the lock. Vectors are always passed
explicitly, so Chroma's own default embedding function (which downloads a model) never runs.
A collection records the model id and dimension it was built with; a different model is
refused with a rebuild hint, never mixed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agenvoy_cli.errors import AgenvoyError, CorruptStore, OperationFailed
from agenvoy_cli.vectors.location import server_url

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.models.embedders import Embedder

MESSAGES = "agenvoy_messages"
ERRORS = "agenvoy_errors"
BATCH = 1000
# Chroma persists its HNSW index every sync_threshold additions (default 1000) and replays
# the rest from its log when a process first touches the collection: 0.4 s at 10,000
# vectors with the default, 0.05 s with 100, for no measurable cost when adding.
SYNC_THRESHOLD = 100

_clients: dict[str, Any] = {}
_embedders: dict[str, Any] = {}


class IndexModelMismatch(AgenvoyError):
    exit_code = CorruptStore.exit_code


def embedder_spec(store: Store) -> str | None:
    spec = os.environ.get("AGENVOY_EMBEDDER") or store.settings.section("agenvoy").get("embedder")
    return spec or None


def embedder(store: Store) -> Embedder:
    """The configured embedder (AGENVOY_EMBEDDER or config agenvoy.embedder), cached."""
    from agenvoy_cli.models.embedders import EmbedderError, get_embedder

    spec = embedder_spec(store) or ""
    if spec not in _embedders:
        try:
            _embedders[spec] = get_embedder(spec or None)
        except EmbedderError as exc:
            raise OperationFailed(f"embedder: {exc}") from None
    return _embedders[spec]


def client(store: Store) -> Any:
    """Chroma client: a server when AGENVOY_CHROMA_URL is set, else the embedded directory."""
    url = server_url(store)
    key = url or str(store.layout.chroma)
    if not url and not store.layout.chroma.is_dir() and key in _clients:
        # The directory was deleted under a cached client. chromadb shares one
        # system per path inside a process, so only close() lets a new client
        # start afresh instead of reading tables that are gone.
        stale = _clients.pop(key)
        with contextlib.suppress(Exception):
            stale.close()
    if key not in _clients:
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False)
        try:
            if url:
                from urllib.parse import urlparse

                parsed = urlparse(url)
                _clients[key] = chromadb.HttpClient(
                    host=parsed.hostname or "127.0.0.1", port=parsed.port or 8000,
                    ssl=parsed.scheme == "https", settings=settings)
                _clients[key].heartbeat()
            else:
                from agenvoy_cli.home.files import ensure_dir

                ensure_dir(store.layout.chroma)
                _clients[key] = chromadb.PersistentClient(path=key, settings=settings)
        except Exception as exc:  # noqa: BLE001 - chromadb raises many kinds
            where = url or key
            raise OperationFailed(f"vector index unavailable at {where}: {exc}") from None
    return _clients[key]


def scoped(store: Store, name: str) -> str:
    """The collection's name on the Chroma side. An embedded directory belongs to one home;
    on a server shared by several homes each home gets its own collections (two homes'
    session "main" must never meet), keyed by the home's path."""
    if not server_url(store):
        return name
    from agenvoy_cli.conversation.messages import _blake2b

    key = _blake2b(str(store.layout.home.resolve()).encode(), digest_size=6).hexdigest()
    return f"{name}-{key}"


def index_exists(store: Store, name: str) -> bool:
    if not (server_url(store) or store.layout.chroma.is_dir()):
        return False
    names = {c if isinstance(c, str) else c.name for c in client(store).list_collections()}
    return scoped(store, name) in names


@dataclass
class Hit:
    id: str
    distance: float
    metadata: dict[str, Any]


class VectorIndex:
    """One Chroma collection bound to one embedder. Hold the store's write lock to use it."""

    def __init__(self, store: Store, name: str, *, create: bool = True) -> None:
        self.store = store
        self.name = name
        api = client(store)
        try:
            if create:
                emb = embedder(store)
                meta = {"hnsw:space": "cosine", "hnsw:sync_threshold": SYNC_THRESHOLD,
                        "hnsw:batch_size": SYNC_THRESHOLD, "model_id": emb.model_id,
                        "dim": emb.dim}
                self.collection = api.get_or_create_collection(
                    scoped(store, name), embedding_function=None, metadata=meta)
            else:
                self.collection = api.get_collection(scoped(store, name),
                                                     embedding_function=None)
        except AgenvoyError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise OperationFailed(f"vector index {name}: {exc}") from None
        self._checked = False

    @property
    def embedder(self) -> Embedder:
        """The embedder, checked against the model the collection was built with (only
        adding and querying need it: deleting never loads a model)."""
        emb = embedder(self.store)
        if not self._checked:
            have = self.collection.metadata or {}
            if have.get("model_id") != emb.model_id or have.get("dim") != emb.dim:
                raise IndexModelMismatch(
                    f"vector index {self.name!r} was built with {have.get('model_id')} "
                    f"({have.get('dim')}-d) but the embedder is {emb.model_id} ({emb.dim}-d); "
                    "rebuild it with `agenvoy backfill --all --vectors --rebuild` "
                    "(or set AGENVOY_EMBEDDER back)")
            self._checked = True
        return emb

    def add(self, ids: Sequence[str], vectors: Sequence[Sequence[float]],
            metadatas: Sequence[dict[str, Any]]) -> None:
        """Vectors computed by self.embedder (outside the lock, by the caller)."""
        _ = self.embedder  # refuses a collection built with another model
        for i in range(0, len(ids), BATCH):
            self.collection.upsert(ids=list(ids[i:i + BATCH]),
                                   embeddings=[list(v) for v in vectors[i:i + BATCH]],
                                   metadatas=list(metadatas[i:i + BATCH]))

    def query(self, vector: Sequence[float], n: int,
              where: dict[str, Any] | None = None) -> list[Hit]:
        _ = self.embedder
        count = self.collection.count()
        if count == 0 or n <= 0:
            return []
        res = self.collection.query(query_embeddings=[list(vector)], n_results=min(n, count),
                                    where=where, include=["metadatas", "distances"])
        return [Hit(i, d, m or {}) for i, d, m in
                zip(res["ids"][0], res["distances"][0], res["metadatas"][0])]

    def get(self, where: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
        """id -> metadata of every entry (optionally filtered)."""
        out: dict[str, dict[str, Any]] = {}
        offset = 0
        while True:
            res = self.collection.get(where=where, include=["metadatas"], limit=BATCH * 10,
                                      offset=offset)
            for i, m in zip(res["ids"], res["metadatas"]):
                out[i] = m or {}
            if len(res["ids"]) < BATCH * 10:
                return out
            offset += len(res["ids"])

    def delete(self, ids: Iterable[str]) -> int:
        ids = list(ids)
        for i in range(0, len(ids), BATCH):  # by id lists: a `where` delete is very slow
            self.collection.delete(ids=ids[i:i + BATCH])
        return len(ids)


def message_id(session_id: str, seq: int) -> str:
    return f"{session_id}:{seq}"


def _message_index(store: Store) -> VectorIndex | None:
    if not index_exists(store, MESSAGES):
        return None
    return VectorIndex(store, MESSAGES, create=False)


def forget_before(store: Store, session_id: str, start_seq: int) -> int:
    """Drop a session's message vectors older than its trim point (SPEC invariant 3)."""
    index = _message_index(store)
    if index is None:
        return 0
    stale = [i for i, m in index.get({"session_id": session_id}).items()
             if int(m.get("seq", -1)) < start_seq]
    return index.delete(stale)


def forget_session(store: Store, session_id: str) -> int:
    index = _message_index(store)
    if index is None:
        return 0
    return index.delete(index.get({"session_id": session_id}))


def drop_index(store: Store, name: str) -> bool:
    """Delete a whole collection (rebuild after an embedder change)."""
    if not index_exists(store, name):
        return False
    client(store).delete_collection(scoped(store, name))
    return True
