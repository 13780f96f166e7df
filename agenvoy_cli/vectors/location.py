"""Where a home's vectors live: a Chroma server, or the local persistent directory.

Light on purpose (no chromadb): append and compact ask it before deciding to import anything."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store


def server_url(store: Store) -> str | None:
    """The Chroma server to use (AGENVOY_CHROMA_URL or config agenvoy.chroma_url), if any."""
    return store.settings.chroma_url


def has_vectors(store: Store) -> bool:
    return bool(server_url(store)) or store.layout.chroma_dir.is_dir()
