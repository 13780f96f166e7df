"""The vector index: Chroma access and the hooks the conversation calls into it."""

from agenvoy_cli.exports import lazy

# What the layers above use, and the room that holds it (None: the room itself).
_EXPORTS: dict[str, str | None] = {
    "api": None,
    "attribution": None,
    "IndexModelMismatch": "api",
    "KeptEmbedder": "attribution",
    "embed_within": "budget",
    "hnsw_missing": "check",
    "embedder": "collection",
    "local_model": "collection",
    "searched_wide": "collection",
    "VECTOR_HOOKS": "hooks",
    "open_store": "hooks",
    "preload": "hooks",
    "has_vectors": "location",
    "server_url": "location",
    "MessageIndex": "messages",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy(__name__, _EXPORTS)
