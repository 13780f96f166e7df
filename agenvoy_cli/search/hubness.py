"""How much of a message's similarity to a query is the message's, not the query's.

Some messages sit near every question (short small talk, lists of technical words): they
top the ranking of a question the session cannot answer. A message's hubness is its mean
cosine similarity to its HUB_K nearest reference questions (reference/queries.txt: the
floor's tune questions, six languages; search/relevance.py subtracts a share of it, as CSLS does
for cross-lingual retrieval). The reference vectors ship per built-in model
(reference/<spec>.npz, written by tools/gen_reference.py), so nothing is embedded for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

HUB_K = 40  # nearest reference questions averaged (bench/floor_hub.py chose it on tune)
KNOWN_MAX = 200_000  # hubness values a Reference remembers
REFERENCE = Path(__file__).resolve().parent / "reference"


class Reference:
    """One model's vectors of the reference questions (unit length)."""

    def __init__(self, model_id: str, vectors: Any) -> None:
        from agenvoy_cli.models.usem3_fast import one_blas_thread

        self.model_id = model_id
        self.vectors = vectors
        self._one_thread = one_blas_thread()  # found once: it reads /proc/self/maps
        # a message's hubness by its vector: a warm server's searches of one session share
        # their background sample (a few MB at the bound)
        self._known: dict[int, float] = {}

    @classmethod
    def load(cls, spec: str) -> Reference | None:
        """The shipped vectors of a built-in model (by its spec, models/profiles.py); None
        when missing or unreadable (the floor then decides by the margin)."""
        found = shipped_vectors(f"{spec}.npz")
        return None if found is None else cls(*found)

    def hubness(self, vectors: Sequence[Sequence[float]]) -> list[float]:
        """Each vector's mean cosine similarity to its HUB_K nearest reference questions."""
        import numpy as np

        if not len(vectors):
            return []
        mat = np.asarray(vectors, dtype=np.float32)
        keys = [hash(row.tobytes()) for row in mat]
        todo = [i for i, key in enumerate(keys) if key not in self._known]
        if todo:
            new = mat[todo]
            norms = np.linalg.norm(new, axis=1, keepdims=True)
            with self._one_thread:  # a small product: threads would cost more than they save
                sims = (new / np.where(norms > 0, norms, 1.0)) @ self.vectors.T
            k = min(HUB_K, sims.shape[1])
            if len(self._known) + len(todo) > KNOWN_MAX:
                self._known.clear()
            self._known.update(zip([keys[i] for i in todo],
                                   np.sort(sims, axis=1)[:, -k:].mean(axis=1).tolist()))
        return [self._known[key] for key in keys]


class ShippedBackground:
    """One built-in model's vectors of the shipped background (reference/background.txt:
    everyday messages on no one topic; tools/gen_reference.py embeds them as documents), what
    the floor compares a query with when a session has too few messages to sample its own."""

    def __init__(self, model_id: str, vectors: Any, texts: Sequence[str]) -> None:
        self.model_id = model_id
        self.vectors = vectors
        self.texts = texts

    @classmethod
    def load(cls, spec: str) -> ShippedBackground | None:
        """None when a file is missing, unreadable or the two disagree in length."""
        found = shipped_vectors(f"background-{spec}.npz")
        try:
            lines = (REFERENCE / "background.txt").read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            return None
        texts = [t for t in lines if t.strip()]
        if found is None or len(found[1]) != len(texts):
            return None
        return cls(found[0], found[1], texts)


def shipped_vectors(name: str) -> tuple[str, Any] | None:
    """A shipped vector file's model id and vectors (float32; None: missing, unreadable,
    empty)."""
    import zipfile

    import numpy as np

    try:
        with np.load(REFERENCE / name, allow_pickle=False) as data:
            vectors = data["vectors"].astype(np.float32)
            model_id = str(data["model_id"])
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):
        return None
    return (model_id, vectors) if vectors.ndim == 2 and len(vectors) else None


class QueryKind:
    """One built-in model's linear verdict on a query by its vector alone: general knowledge
    ("the capital of Canada", "誰寫了紅樓夢？": a logit above 0) or about the user's own life,
    people and plans (below 0). A logistic regression fitted on tune questions only
    (bench/small_floor.py fit-kind; the split: bench/small_floor_data/README.md), shipped as
    reference/kind-<spec>.npz; search/relevance.py asks a general question for a higher lift
    in a session of a few dozen messages."""

    def __init__(self, model_id: str, weights: Any, bias: float) -> None:
        self.model_id = model_id
        self.weights = weights
        self.bias = bias

    @classmethod
    def load(cls, spec: str) -> QueryKind | None:
        """None when missing or unreadable (the floor then weighs every query alike)."""
        import zipfile

        import numpy as np

        try:
            with np.load(REFERENCE / f"kind-{spec}.npz", allow_pickle=False) as data:
                weights = data["weights"].astype(np.float32)
                bias, model_id = float(data["bias"]), str(data["model_id"])
        except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):
            return None
        return cls(model_id, weights, bias) if weights.ndim == 1 and len(weights) else None

    def logit(self, vector: Sequence[float]) -> float:
        """Above 0: a general-knowledge question (the query's vector by this model)."""
        import numpy as np

        got = np.asarray(vector, dtype=np.float32)
        if got.shape != self.weights.shape:
            return 0.0
        return float(got @ self.weights) + self.bias
