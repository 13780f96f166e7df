"""The few places where the conversation store must touch the derived vector index.

Kept apart (and light) so that append/compact import nothing heavy unless an index exists.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agenvoy_cli.storage.store import Store


def server_url(store: Store) -> str | None:
    """The Chroma server to use (AGENVOY_CHROMA_URL or config agenvoy.chroma_url), if any."""
    return os.environ.get("AGENVOY_CHROMA_URL") or store.settings.section("agenvoy").get(
        "chroma_url") or None


def has_vectors(store: Store) -> bool:
    return bool(server_url(store)) or store.layout.chroma.is_dir()


def preload() -> None:
    """Import chromadb before taking the store lock: the import (0.5-2 s) is the slow part,
    and must not keep every other process waiting."""
    import chromadb  # noqa: F401


def before_clear(store: Store) -> None:
    """Fail before anything changes when the index is configured but unreachable."""
    if has_vectors(store):
        from agenvoy_cli.storage import vectors

        vectors.client(store)


def after_trim(store: Store, session_id: str, start_seq: int) -> None:
    """Drop the session's vectors older than the trim point (invariant 3). history.json is
    already written: an unreachable index must not turn the append into a failure."""
    if not has_vectors(store):
        return
    from agenvoy_cli.errors import OperationFailed
    from agenvoy_cli.storage import vectors

    try:
        vectors.forget_before(store, session_id, start_seq)
    except OperationFailed as exc:
        sys.stderr.write(f"agenvoy: warning: {exc}; vectors older than the trim point were kept "
                         "(search ignores them; `agenvoy doctor --repair` deletes them)\n")


def after_clear(store: Store, session_id: str) -> None:
    """Drop every vector of a session (reset / remove)."""
    if not has_vectors(store):
        return
    from agenvoy_cli.storage import vectors

    vectors.forget_session(store, session_id)
