"""The conversation's changes carried to the vector index, and the way to open a home with them.

Kept light: append/compact import nothing heavy unless an index exists."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from agenvoy_cli.conversation.store import Store
from agenvoy_cli.home.layout import Layout
from agenvoy_cli.settings import Settings
from agenvoy_cli.vectors.context import VectorContext
from agenvoy_cli.vectors.location import has_vectors

if TYPE_CHECKING:
    from agenvoy_cli.models.embedders import Embedders


def preload() -> None:
    """Import chromadb before taking the store lock: the import (0.5-2 s) is the slow part,
    and must not keep every other process waiting."""
    import chromadb  # noqa: F401


class VectorHooks(VectorContext):
    """The vector index's side of a Store: its state (VectorContext) and the
    conversation.store.IndexHooks the Store calls when it trims or clears."""

    def active(self, store: Store) -> bool:
        return has_vectors(store)

    def preload(self) -> None:
        preload()

    def before_clear(self, store: Store) -> None:
        if has_vectors(store):
            from agenvoy_cli.vectors import api

            api.client(store)

    def after_trim(self, store: Store, session_id: str, start_seq: int) -> None:
        """history.json is already written: an unreachable index must not turn the append
        into a failure."""
        if not has_vectors(store):
            return
        from agenvoy_cli.errors import OperationFailed
        from agenvoy_cli.vectors import api

        try:
            api.forget_before(store, session_id, start_seq)
        except OperationFailed as exc:
            sys.stderr.write(f"agenvoy: warning: {exc}; vectors older than the trim point were "
                             "kept (search ignores them; `agenvoy doctor --repair` deletes them)\n")

    def after_change(self, store: Store, session_id: str, seqs: list[int],
                     from_seq: int | None = None) -> None:
        if not has_vectors(store) or not (seqs or from_seq is not None):
            return
        from agenvoy_cli.vectors import api

        api.forget_changed(store, session_id, seqs, from_seq)

    def after_clear(self, store: Store, session_id: str) -> None:
        if not has_vectors(store):
            return
        from agenvoy_cli.vectors import api

        api.forget_session(store, session_id)


def open_store(layout: Layout, settings: Settings | None = None, *,
               embedders: Embedders | None = None) -> Store:
    """A Store whose trims and clears reach the vector index (what every command uses).
    `embedders`: the holder's Embedders, shared by every Store it opens (a model then loads
    once); without it the Store makes its own on first use."""
    return Store(layout, settings, hooks=VectorHooks(embedders))
