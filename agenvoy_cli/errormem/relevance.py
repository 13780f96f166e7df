"""The hint bar: whether an error record describes the failure an agent just met.

A lookup ranks the records a query finds (errormem/ranking.py); only those that clear this
bar are returned, hinted and renewed. It judges one (error, record) pair at a time from
what the two texts say about the failure — not from the tool alone, and not from how many
records the memory holds (a memory of two records must not hint either for any error):

0. two texts naming different subjects of one kind (the module, header, package, command,
   file or host the failure is about: errormem/signature.py `subjects`) are different
   errors, whatever else they share (#50: `pip install requests` is the wrong fix for a
   missing 'yaml'); then

1. the signatures (errormem/signature.py: the words saying how it failed, without quoted
   names, paths, hosts, numbers and boilerplate) overlap by at least SIGNATURE_ALONE
   (weighted Jaccard, words every error uses counting half): the same failure in other
   words' clothing (`No module named 'requests'` from another script); or the record's
   signature lies inside the error's (RECORD_INSIDE of it) and covers ERROR_COVERED of it
   (`read timeout` recorded, `GET https://x: read timeout while fetching` met); or
2. the error holds every one of the record's specific keywords (phrases and identifiers
   such as `merge conflict`, `e0382`, `localhost:8080`; a record with none: all its
   keywords), as whole words; or
3. with the built-in model, it holds at least KEYWORD_SHARE of them and the signatures
   read alike: their vectors' cosine is at least the model's profile's `hint_wording`
   (models/profiles.py). A model without one,
   or no vectors: 1 and 2 decide.

The thresholds were chosen in two passes (docs/benchmarks.md): the first on the tune split
of bench/hint_data, reported through the CLI on the report split, where it kept too few
related hints; the second (rule 2, and the cosine 0.88 -> 0.87, the middle of the range
0.86-0.88 where tune + report hold 74/80 related and 77/81 unrelated lookups) on tune and
report together, reported on a held-out set captured before it (bench/hint_bench.py
--split held-out).
The model runs outside the store lock: the caller asks for verdicts between its locked
reads and its renewal.

The bar is a `Relevance` of the search pipeline (search/relevance.py): a lookup hands it the
error text as a `Query` and its ranked records as a `Pool` of `RecordCandidate`s (a record's
symptom is the candidate's text; its keywords ride along), and `decide` returns the records
that describe the same failure, with each verdict as the evidence. Unlike a search's floor,
which asks whether the best of a ranking stands out from the rest of a session, it judges
each candidate on its own: it needs no background sample (`needs` asks for nothing), and a
memory of two records must hint neither for an unrelated error. `ErrorJudge` is the judge of
one error text, which `decide` makes once per lookup.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agenvoy_cli.errormem.signature import (
    COMMON,
    other_subject,
    signature,
    subjects,
    weighted_overlap,
    weighted_share,
)
from agenvoy_cli.search.query import Query
from agenvoy_cli.search.relevance import Candidate, Decision, Needs, Pool

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store

SIGNATURE_ALONE = 0.7
RECORD_INSIDE, ERROR_COVERED = 0.9, 0.5  # a short record's signature inside a longer error
KEYWORD_SHARE = 0.5
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


def keyword_share(query: str, keywords: list[str], specific: bool = True) -> float:
    """Share of the record's specific keywords (else of all its keywords) the error holds,
    each as whole words (`http` is not in `https`)."""
    strong = ([k for k in keywords if specific_keyword(k)] if specific else []) or keywords
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


@dataclass(frozen=True)
class RecordCandidate(Candidate):
    """An error record as a lookup hands it to the bar: key its id, text its symptom."""

    keywords: tuple[str, ...] = ()  # its recorded keywords, without the error_type: ones


def wording_threshold(model_id: str) -> float | None:
    """The signatures' cosine the bar asks of this model (None: not calibrated for it)."""
    from agenvoy_cli.models.profiles import profile

    found = profile(model_id)
    return found.hint_wording if found is not None else None


class ErrorJudge:
    """The bar for one error text: its signature computed once; with a calibrated model
    (`embed`: text -> vector, `model_id`), the signatures' vectors too."""

    def __init__(self, query: str, *, embed: Any = None, model_id: str = "") -> None:
        self.query = query
        self.signature = signature(query)
        self.subjects = subjects(query)
        self.wording = wording_threshold(model_id) if embed is not None else None
        self._embed = embed
        self._vectors: dict[str, Any] = {}  # text -> vector, for this lookup

    def _vector(self, text: str) -> Any:
        import numpy as np

        if text not in self._vectors:
            self._vectors[text] = np.asarray(self._embed(text), dtype=np.float32)
        return self._vectors[text]

    def _cosine(self, words: list[str]) -> float:
        return float(self._vector(" ".join(self.signature)) @ self._vector(" ".join(words)))

    def wording_cosine(self, symptom: str) -> float:
        """Cosine of the two texts' error lines, their specifics masked."""
        from agenvoy_cli.errormem.signature import masked

        return float(self._vector(masked(self.query)[:2000]) @
                     self._vector(masked(symptom)[:2000]))

    def judge(self, symptom: str, keywords: list[str]) -> Verdict:
        """Whether a record of this symptom and these keywords describes this failure."""
        other = other_subject(self.subjects, subjects(symptom))
        if other is not None:
            return Verdict(False, f"another {other[0]}:{other[1]}")
        theirs = signature(symptom)
        overlap = weighted_overlap(self.signature, theirs)
        if overlap >= SIGNATURE_ALONE:
            return Verdict(True, f"signature:{overlap:.2f}")
        inside = weighted_share(theirs, self.signature)
        if inside >= RECORD_INSIDE and weighted_share(self.signature, theirs) >= ERROR_COVERED:
            return Verdict(True, f"signature inside:{inside:.2f}")
        share = keyword_share(self.query, keywords)
        if share >= 1.0:
            return Verdict(True, "keywords:all")
        if share < KEYWORD_SHARE or self.wording is None or not self.signature or not theirs:
            return Verdict(False, f"signature:{overlap:.2f}")
        try:
            cosine = self._cosine(theirs)
        except Exception:  # noqa: BLE001 - no vector now: the words alone decided above
            return Verdict(False, f"signature:{overlap:.2f}")
        return Verdict(cosine >= self.wording, f"keywords+wording:{cosine:.2f}")


class HintBar:
    """The hint bar as a Relevance (search/relevance.py) over an error lookup's records:
    without `embed` (or with a model it is not calibrated for) the words alone decide."""

    def __init__(self, *, embed: Any = None, model_id: str = "") -> None:
        self.embed = embed
        self.model_id = model_id

    @classmethod
    def for_store(cls, store: Store, semantic: bool) -> HintBar:
        """The bar of a lookup in this home: with the home's embedder when the lookup is
        semantic (and the model is one the bar is calibrated for)."""
        if not semantic:
            return cls()
        from agenvoy_cli.vectors import api as vectors

        emb = vectors.embedder(store)
        return cls(embed=emb.embed_query, model_id=str(emb.model_id))

    def judge_for(self, error: str) -> ErrorJudge:
        return ErrorJudge(error, embed=self.embed, model_id=self.model_id)

    def needs(self, model_id: str) -> Needs:
        return Needs()  # each record is judged on its own text: no background, no vectors

    def decide(self, query: Query, pool: Pool) -> Decision:
        """The candidates that describe the failure in query.text (the error output, its
        lines kept); evidence: each candidate's Verdict by key."""
        judge = self.judge_for(query.text)
        verdicts = {c.key: judge.judge(c.text or "",
                                       list(c.keywords) if isinstance(c, RecordCandidate)
                                       else [])
                    for c in pool.ranked}
        related = tuple(k for k, v in verdicts.items() if v.related)
        return Decision(related, "hint bar", verdicts)
