"""What the conversation tells a derived index about its changes.

The conversation owns history.json and the archive; the vector index lives a layer above and
must follow trims and clears (invariant 3). Rather than importing upward, the Store is handed
hooks by whoever opens it (`agenvoy_cli.vectors.hooks.open_store`): imports go down only. Their
type is the `IndexHooks` Protocol in conversation/store.py (the Store is what they are told
about); `NoIndex` here is the default, for a Store used without any derived index.
"""

from __future__ import annotations


class NoIndex:
    """The hooks of a Store with no derived index: nothing to keep in line."""

    def active(self, store: object) -> bool:
        return False

    def preload(self) -> None:
        pass

    def before_clear(self, store: object) -> None:
        pass

    def after_trim(self, store: object, session_id: str, start_seq: int) -> None:
        pass

    def after_clear(self, store: object, session_id: str) -> None:
        pass

    def after_change(self, store: object, session_id: str, seqs: list[int],
                     from_seq: int | None = None) -> None:
        pass


NO_INDEX = NoIndex()
