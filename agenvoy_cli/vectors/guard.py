"""Many processes, one local Chroma directory: the generation file.

chromadb's embedded client keeps each collection's HNSW index in memory and writes it back
from there. A process whose copy is older than the directory (another process wrote since it
loaded) answers stale queries and, when it writes, saves its stale index over the other's
work: vectors present in Chroma's SQLite but absent from HNSW ("Error finding id"), for good
(chroma#961, #3792). Holding the store lock around each call serialises the calls but not the
in-memory copies.

So every access to the local directory (a) holds the store's exclusive lock and (b) first
compares `.store/chroma.generation` with the token this process last saw: if another process
wrote since, the client is closed and reopened, which reloads from disk only the collections
used next (with one collection per session, that is bounded by the session). Every writer
writes a new token *before* it changes anything, so a writer that dies half-way still tells
the others to reload. Reading the token is one small file read (~10 µs) per access.

A Chroma server (AGENVOY_CHROMA_URL) keeps one copy in one process: no token is needed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenvoy_cli.home.faults import hit, os_error
from agenvoy_cli.home.files import FILE_MODE, ensure_dir
from agenvoy_cli.vectors.context import Directory, VectorContext, directory

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store

def paths(store: Store) -> tuple[str, str]:
    """(the local Chroma directory, the generation file), checked once per Store."""
    hooks = store.hooks
    if isinstance(hooks, VectorContext):
        return hooks.paths(store.layout)
    return str(store.layout.chroma_dir), str(store.layout.store / "chroma.generation")


def local(store: Store) -> Directory:
    """This process's view of the store's local Chroma directory."""
    return directory(paths(store)[0])


def generation_file(store: Store) -> Path:
    return Path(paths(store)[1])


def read_generation(store: Store) -> str:
    """The current token ("" when no process ever wrote vectors here). Read once per hold of
    the store lock: every writer holds it exclusively to write a new token, so none can
    change it while this holder holds it (a warm search asked ~24 times, ~30 us each)."""
    ctx = store.hooks if isinstance(store.hooks, VectorContext) else None
    hold = None if ctx is None else store.locks.holding(ctx.lock_key(store.layout))
    if ctx is not None and hold is not None and ctx.token is not None and ctx.token[0] is hold:
        return ctx.token[1]
    try:
        with open(paths(store)[1], "rb") as token:
            found = token.read().decode("ascii")
    except (FileNotFoundError, UnicodeDecodeError):
        found = ""
    if ctx is not None and hold is not None:
        ctx.token = (hold, found)
    return found


def _remember(store: Store, token: str | None) -> None:
    """After this holder's own write of the token (None: it may or may not be written)."""
    hooks = store.hooks
    if isinstance(hooks, VectorContext):
        hold = store.locks.holding(hooks.lock_key(store.layout))
        hooks.token = None if hold is None or token is None else (hold, token)


def bump(store: Store) -> str:
    """A new token, written before a change (hold the store lock). Not fsynced: after a
    crash the token may be lost, but so is every client that saw the old one."""
    path = generation_file(store)
    token = secrets.token_hex(8)
    _remember(store, None)
    ensure_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        hit("write", tmp, lambda code: os_error(code, tmp))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            hit("write", tmp)
            os.write(fd, token.encode("ascii"))
        finally:
            os.close(fd)
        hit("rename", path, lambda code: os_error(code, tmp))
        os.replace(tmp, path)
    except BaseException:  # a full disk leaves no .chroma.generation.<pid>.tmp behind
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    local(store).seen = token
    _remember(store, token)
    return token


def is_current(store: Store) -> bool:
    """Whether this process's client reflects the directory (call under the lock)."""
    return local(store).seen == read_generation(store)


def opened(store: Store) -> None:
    """A client was just opened on the directory: it reflects the current generation."""
    local(store).seen = read_generation(store)


def forget(store: Store) -> None:
    local(store).seen = None


def refresh_if_stale(store: Store, close: Callable[[], Any]) -> bool:
    """Close this process's client when another process wrote since it was opened (the
    next access reopens it). Returns whether it was closed."""
    if local(store).seen is None or is_current(store):
        return False
    close()
    local(store).seen = None
    return True


@contextlib.contextmanager
def exclusive(store: Store) -> Iterator[None]:
    """The store's exclusive lock (re-entrant in one process), for every Chroma access."""
    with store.write_lock():
        yield
