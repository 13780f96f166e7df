"""agenvoy-cli: the memory layer of an AI agent, on Agenvoy's on-disk layout."""

__version__ = "0.1.0"
