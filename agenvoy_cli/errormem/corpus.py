"""Error records as a corpus of the retrieval pipeline (search/pipeline.py).

A unit is a live error record, keyed by its id; the full-text index holds its tool, keywords,
symptom and cause (errormem/store.py); its vector was made of its symptom and cause. A lookup
runs the pipeline's catch-up stage through this adapter (the records without a vector
embedded within the budget, the query embedded once, keyword matching when the model or
the index fails) and the pipeline's relevance interface through the hint bar
(errormem/relevance.py `HintBar`, a search `Relevance`). Its ranking stays its own
(errormem/ranking.py): per record, signals in [0, 1] weighed together, which the hint bar's
thresholds were calibrated on (docs/benchmarks.md), not a keyword and a vector ranking fused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agenvoy_cli.errormem.records import Warn
from agenvoy_cli.errormem.store import catch_up, one_line, warm_chroma

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.models.base import Embedder
    from agenvoy_cli.search.corpus import Found


class ErrorsCorpus:
    """The live error records of one home, for one lookup (its catch-up stage)."""

    unit = "record"
    degrades = True
    unindexed_note = False  # a lookup reports unindexed_count, without a note

    def __init__(self, store: Store, now: int, warn: Warn, forced: bool) -> None:
        self.store = store
        self.now = now
        self.warn = warn
        self.forced = forced  # semantic asked for explicitly: say why it is not used
        self.left: int | None = None  # records left without a vector

    def catch_up(self, budget: float | None, found: Found) -> int | None:
        self.left = catch_up(self.store, self.now, budget, self.warn)  # outside the lock
        with self.store.read_lock():
            conn = self.store.db_readonly()
            usable = conn is not None and conn.execute(
                "SELECT 1 FROM error_records WHERE vector_model IS NOT NULL "
                "AND expires_at > ? LIMIT 1", (self.now,)).fetchone() is not None
        if usable:
            return self.left
        if self.forced:
            self.warn("agenvoy: warning: no error record has a vector yet; keyword matching "
                      "only (`agenvoy doctor --repair` embeds them)")
        return None

    def embedder(self) -> Embedder:
        from agenvoy_cli.vectors import api as vectors

        emb = vectors.embedder(self.store)
        warm_chroma()
        return emb

    def unavailable(self, exc: Exception, found: Found) -> None:
        self.warn(f"agenvoy: warning: semantic matching unavailable ({one_line(exc)}); "
                  "keyword matching only")

    def uncalibrated(self, model_id: str) -> str | None:
        from agenvoy_cli.models.profiles import hint_uncalibrated

        return hint_uncalibrated(model_id)
