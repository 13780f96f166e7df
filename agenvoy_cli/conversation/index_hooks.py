"""What the conversation tells a derived index about its changes.

The conversation owns history.json and the archive; the vector index lives a layer above and
must follow trims and clears (invariant 3). Rather than importing upward, the Store is handed an
`IndexHooks` by whoever opens it (`agenvoy_cli.vectors.hooks.open_store`): imports go down only.
The default does nothing, for a Store used without any derived index.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store


class IndexHooks:
    def active(self, store: Store) -> bool:
        """Whether a derived index exists (or is configured) for this home."""
        return False

    def preload(self) -> None:
        """Pay slow imports before the store lock is taken (never while holding it)."""

    def before_clear(self, store: Store) -> None:
        """Fail before anything changes when the index is configured but unreachable."""

    def after_trim(self, store: Store, session_id: str, start_seq: int) -> None:
        """history.json was trimmed: entries older than start_seq must go."""

    def after_clear(self, store: Store, session_id: str) -> None:
        """Every entry of the session must go (reset / remove)."""

    def after_change(self, store: Store, session_id: str, seqs: list[int],
                     from_seq: int | None = None) -> None:
        """The messages at these places left history.json, were edited or forgotten (and,
        with from_seq, every place from there on moved): their entries must go (a catch-up
        indexes what is in history.json again)."""


NO_INDEX = IndexHooks()
