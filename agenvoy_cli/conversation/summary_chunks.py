"""How summarize splits the messages after the cursor into LLM calls."""

from __future__ import annotations

from collections.abc import Sequence

from agenvoy_cli.conversation.messages import Message

CHUNK_SIZE = 16
CHUNK_CHARS = 32_000  # Agenvoy v0.32 summaryChunkRunes (characters of text)


def chunk_messages(messages: Sequence[Message], size: int = CHUNK_SIZE,
                   chars: int = CHUNK_CHARS) -> list[list[Message]]:
    """Chunks of at most `size` messages and `chars` characters of text (one larger message
    is a chunk alone); a chunk that would end on a user message takes the next message(s),
    so a question is never summarized without its answer."""
    chunks: list[list[Message]] = []
    i = 0
    while i < len(messages):
        end, total = i, 0
        while end < len(messages) and end - i < size:
            n = len(messages[end].text)
            if end > i and total + n > chars:
                break
            total += n
            end += 1
        while end < len(messages) and messages[end - 1].role == "user":
            end += 1
        chunks.append(list(messages[i:end]))
        i = end
    return chunks
