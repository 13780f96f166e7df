"""Model clients: the LLM (chat completions) and the embedding providers."""

from agenvoy_cli.exports import lazy

# What the layers above use, and the room that holds it (None: the room itself).
_EXPORTS: dict[str, str | None] = {
    "Embedder": "base",
    "EmbedderError": "base",
    "Embedders": "embedders",
    "get_embedder": "embedders",
    "Client": "llm",
    "HOW_TO_CONFIGURE": "llm",
    "LLMConfig": "llm",
    "LLMError": "llm",
    "NotConfigured": "llm",
    "load_config": "llm",
    "make_client": "llm",
    "one_blas_thread": "usem3_fast",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy(__name__, _EXPORTS)
