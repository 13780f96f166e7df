"""Model clients: the LLM (chat completions) and the embedding providers."""
