"""The vector index: Chroma access and the hooks the conversation calls into it."""
