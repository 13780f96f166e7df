"""The vector layer's state, on objects a caller can see.

- `Directory`: this process's view of one Chroma directory (or one Chroma server): its client,
  the generation token the client reflects (vectors/guard.py), the collection names read under
  a token, an epoch bumped whenever the client is closed (collection handles must then be
  fetched again) and the collections checked whole at an epoch (vectors/range_query.py).
- `VectorContext`: one per Store, the vector index's side of it: the Store holds it as its
  index hooks (vectors/hooks.py VectorHooks is a VectorContext; `open_store` makes one per
  Store), a typed object the Store was handed, never an attribute the index sets on it. It
  holds the Embedders it takes models from (models/embedders.py: shared by every Store its
  holder opens, so a model loads once), the embedders by spec (the MCP server wraps its cache
  around one), the message index kept while the directory is unchanged (vectors/messages.py)
  and the sessions the catch-up found fully indexed, with the state it found them in
  (search/catchup.py: a long-lived holder, the MCP server, skips the check while nothing
  changed), and the collections searched exactly, as matrices read under a generation token
  (vectors/exact.py).

The directories themselves are one per process by nature, not per Store: chromadb keeps one
System per directory per process (SharedSystemClient, reference-counted), whatever client
objects are made, so whether the copy in memory is current is a fact about the process. Two
registries on one directory would each hold a reference to the same System: one could not
reload it (the other's reference keeps it alive) and would believe the stale copy fresh. So
`_directories` (tests/test_architecture.py's KNOWN_STATE) is the one registry, reached only
through `directory()`, and `close_all()` is what a test calls to start as a new process would.
A registry handed down by whoever opens Stores (as the Embedders are) would be right only as
long as every opener of the process handed down the same one: a program's second Memory, or a
test's Store beside in-process commands, would bring the stale copy back without a sign. A
second Embedders costs a second model load; a second registry costs wrong answers.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.models.embedders import Embedders


class Directory:
    """What this process's chromadb System for one directory (or server URL) is."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.client: Any = None
        self.seen: str | None = None  # the generation token the open client reflects
        self.names: tuple[str, list[str]] | None = None  # (token, collection names)
        self.epoch = 0
        self.checked: dict[str, int] = {}  # collection -> epoch it was checked whole at

    def close(self) -> None:
        """Close the client (the next access opens a new one, reading the directory anew)."""
        self.names = None
        stale, self.client = self.client, None
        if stale is not None:
            with contextlib.suppress(Exception):
                stale.close()
        self.epoch += 1


_directories: dict[str, Directory] = {}  # chroma dir or server URL -> its Directory


def directory(key: str) -> Directory:
    """The process's Directory for a Chroma directory path or server URL."""
    found = _directories.get(key)
    if found is None:
        found = _directories.setdefault(key, Directory(key))
    return found


def close_all() -> None:
    """Close every client of this process (a damaged open, or a test starting afresh)."""
    for found in list(_directories.values()):
        found.close()
        found.seen = None


class VectorContext:
    """The vector layer's state for one Store."""

    def __init__(self, models: Embedders | None = None) -> None:
        self._models = models  # where local models come from (shared with the holder's Stores)
        self.embedders: dict[str, Any] = {}  # spec -> embedder ("" the default)
        self.message_index: tuple[Any, Any] | None = None  # (directory state, MessageIndex)
        # session -> the state (generation token, database stamp) it was found fully indexed in
        self.caught_up: dict[str, tuple[Any, ...]] = {}
        # collection -> its vectors as one matrix, searched exactly (vectors/exact.py)
        self.exact: dict[str, Any] = {}
        # kept vector text (base64) -> its vector, the last DECODED_KEPT read (attribution.py)
        self.decoded: OrderedDict[str, Any] = OrderedDict()
        # (session, seq) -> (text, role) of archived messages, and None -> the database's
        # change stamp they were read under (search/candidates.py _archived)
        self.archived: dict[Any, Any] = {}
        self._paths: tuple[Any, str, str, str] | None = None  # (home, chroma dir,
        # generation file, lock file)
        # (the store lock's current hold, the generation token read under it): no writer
        # can change the token while this holder holds the lock (vectors/guard.py)
        self.token: tuple[object, str] | None = None

    def paths(self, layout: Layout) -> tuple[str, str]:
        """(Chroma's directory, the generation file) of this Store's home, checked as the
        layout checks them (no links, layout.py) once per Store: a warm search asks ~50 times
        (~3 ms CPU of stat calls and paths). A client is opened on the directory with its
        contents checked again (collection.py client)."""
        return self._checked(layout)[1:3]

    def lock_key(self, layout: Layout) -> str:
        """The store lock's key in the Store's Locks (str of its path), as paths()."""
        return self._checked(layout)[3]

    def _checked(self, layout: Layout) -> tuple[Any, str, str, str]:
        if self._paths is None or self._paths[0] != layout.home:
            chroma, gen = layout.chroma_dir, layout.store / "chroma.generation"
            self._paths = (layout.home, str(chroma), str(gen), str(layout.lock))
        return self._paths

    @property
    def models(self) -> Embedders:
        """The holder's Embedders, or one of this Store's own made on first use: every Store
        is opened with a VectorContext, and append, context and keyword search must not
        import the model clients (tests/test_docs.py's import probe; models/http.py brings
        the HTTP stack)."""
        if self._models is None:
            from agenvoy_cli.models.embedders import Embedders

            self._models = Embedders()
        return self._models


def of(store: Store) -> VectorContext:
    """The store's VectorContext: the index hooks it was opened with (vectors/hooks.py
    open_store). A Store opened without them has no vector index to use."""
    hooks = store.hooks
    if not isinstance(hooks, VectorContext):
        raise TypeError("this Store was opened without the vector index "
                        "(open it with agenvoy_cli.vectors.hooks.open_store)")
    return hooks
