"""The few places where the conversation store must touch the derived vector index.

Kept apart so that append/compact import nothing heavy unless a vector index exists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agenvoy_cli.storage.store import Store


def has_vectors(store: Store) -> bool:
    return store.layout.chroma.is_dir()


def after_trim(store: Store, session_id: str, start_seq: int) -> None:
    """Drop the session's vectors older than the trim point (invariant 3)."""
    if not has_vectors(store):
        return
    try:
        from agenvoy_cli.storage import vectors  # noqa: F401  (provided by the search layer)
    except ImportError:
        return
    vectors.forget_before(store, session_id, start_seq)


def after_clear(store: Store, session_id: str) -> None:
    """Drop every vector of a session (reset / remove)."""
    if not has_vectors(store):
        return
    try:
        from agenvoy_cli.storage import vectors
    except ImportError:
        return
    vectors.forget_session(store, session_id)
