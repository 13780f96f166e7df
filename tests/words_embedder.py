"""A deterministic stand-in for an embedding model (tests and model-free benches): a hashed
bag of words, CJK by character. No meaning, but fast and stable."""

from __future__ import annotations

import hashlib
import math
import re


class WordsEmbedder:
    model_id = "test/hashed-words"
    dim = 512

    def __init__(self) -> None:
        self.texts: list[str] = []  # everything embedded, for assertions

    @property
    def calls(self) -> int:
        return len(self.texts)

    def vec(self, text: str) -> list[float]:
        v = [0.0] * self.dim
        for word in re.findall(r"[\u4e00-\u9fff]|\w+", text.lower()):
            v[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / norm for x in v]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return [self.vec(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.vec(text)


CURRENT: WordsEmbedder | None = None  # the instance a test installed (use_words)


def current() -> WordsEmbedder:
    """The embedder of AGENVOY_EMBEDDER=python:tests.words_embedder:current: the instance
    the running test installed, so it can count what was embedded."""
    return CURRENT if CURRENT is not None else WordsEmbedder()


SPEC = "python:tests.words_embedder:current"
SLOW_SPEC = "python:tests.words_embedder:SlowWordsEmbedder"
SLOW_WORD = "slowly"  # a query with this word takes SLOW_SECONDS to embed
SLOW_SECONDS = 4.0


class SlowWordsEmbedder(WordsEmbedder):
    """WordsEmbedder whose query embedding takes SLOW_SECONDS for a query with SLOW_WORD,
    then touches the file $AGENVOY_TEST_SLOW_MARK (a deliberately slow tool call that says
    when it finished)."""

    def embed_query(self, text: str) -> list[float]:
        if SLOW_WORD in text:
            import os
            import time
            from pathlib import Path

            time.sleep(SLOW_SECONDS)
            Path(os.environ["AGENVOY_TEST_SLOW_MARK"]).write_text("done")
        return self.vec(text)


def use(monkeypatch, emb: WordsEmbedder) -> WordsEmbedder:
    """Swap the model through the supported setting (AGENVOY_EMBEDDER) for this test."""
    import sys

    monkeypatch.setattr(sys.modules[__name__], "CURRENT", emb)
    monkeypatch.setenv("AGENVOY_EMBEDDER", SPEC)
    return emb
