"""Where a session search looks (the archive, history.json, the context window) and how
its hits become results."""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agenvoy_cli.conversation import archive
from agenvoy_cli.conversation.messages import Message
from agenvoy_cli.search.keyword import matched_terms
from agenvoy_cli.search.query import Query
from agenvoy_cli.search.results import SearchResult, best_first, expand, make_row, rows_of

if TYPE_CHECKING:
    import sqlite3

    from agenvoy_cli.conversation.store import Store


@dataclass
class Scope:
    """Where a search looks: [0, cutoff) for keyword, [start, cutoff) for vectors, where
    cutoff leaves out the context window (None: nothing left out)."""

    start: int  # seq of history.json's first message (the archive is below it)
    cutoff: int | None
    recent: list[Message]
    next_seq: int  # SQLite's next place: no vector at or beyond it is ever returned
    _in_history: set[int] | None = None

    def source(self, seq: int) -> str:
        """archive: no longer in history.json (trimmed, or removed from its middle)."""
        return "recent" if seq in self.in_history else "archive"

    @property
    def in_history(self) -> Container[int]:
        held = getattr(self.recent, "by_seq", None)  # a warm store's (server/recent_cache.py)
        if held is not None:
            return held  # type: ignore[no-any-return]
        if self._in_history is None:
            self._in_history = {m.seq for m in self.recent}
        return self._in_history

    @property
    def vector_hi(self) -> int:
        return self.next_seq if self.cutoff is None else min(self.cutoff, self.next_seq)


def scope_of(store: Store, session_id: str, exclude_window: bool) -> Scope:
    recent = store.recent(session_id)
    conn = store.db_readonly()
    rows = archive.session_rows(conn, session_id) if conn is not None else None
    start = recent[0].seq if recent else (rows.next_seq if rows else 0)
    if rows is not None and rows.start_seq is not None:
        start = max(start, rows.start_seq)  # never a vector older than the trim point
    cutoff = None
    if exclude_window:
        n = store.settings.max_history_messages
        cutoff = recent[-n].seq if len(recent) >= n else (recent[0].seq if recent else start)
    return Scope(start, cutoff, recent, rows.next_seq if rows else 0)


def unarchived(conn: sqlite3.Connection | None, session_id: str, scope: Scope) -> int:
    if not scope.recent:
        return 0
    if conn is None:
        return len(scope.recent)
    nxt = archive.session_rows(conn, session_id).next_seq
    counted = getattr(scope.recent, "at_or_after", None)  # a warm store's: kept per place
    return counted(nxt) if counted is not None else sum(1 for m in scope.recent
                                                         if m.seq >= nxt)


def note_unarchived(result: SearchResult, missing: int) -> None:
    if missing:
        result.note("unarchived", f"{missing} message(s) of history.json are not in SQLite "
                    "yet, so not searchable; run `agenvoy backfill` for this session")


def _segments(scope: Scope, hits: Sequence[tuple[int, float]], ranks: dict[int, int],
              expand_lo: int | None) -> list[list[int]]:
    if expand_lo is None:
        return [[seq] for seq, _ in hits]
    hi = scope.cutoff if scope.cutoff is not None else scope.next_seq
    return best_first(expand(hits, expand_lo, hi), ranks)


def _matched(result: SearchResult, store: Store, session_id: str, scope: Scope,
             query: Query) -> None:
    """Each hit's matched_terms (SQLite holds the places below next_seq)."""
    hit = {r.seq: r.content for r in result.results if r.hit}
    with store.read_lock():
        held = matched_terms(store.db_readonly(), session_id, query, hit,
                             {s for s in hit if s < scope.next_seq})
    for row in result.results:
        if row.hit:
            row.matched_terms = held.get(row.seq, [])


def fill(result: SearchResult, store: Store, session_id: str, scope: Scope,
         hits: Sequence[tuple[int, float]], query: Query, *, expand_lo: int | None) -> None:
    """Results best first: each hit (with its rank) and, unless expand_lo is None, its
    neighbours 2 before / 1 after inside [expand_lo, cutoff), merged into segments."""
    ranks = {seq: i for i, (seq, _) in enumerate(hits, 1)}
    scores = dict(hits)
    segments = _segments(scope, hits, ranks, expand_lo)
    held = getattr(scope.recent, "by_seq", None)  # a warm store's: no walk of the list
    by_seq = {m.seq: m for m in scope.recent} if held is None else \
        {s: held[s][1] for seg in segments for s in seg if s in held}
    with store.read_lock():
        need = [s for seg in segments for s in seg if s not in by_seq]
        by_seq.update((m.seq, m) for m in rows_of(store.db_readonly(), session_id, need))
    for number, seg in enumerate(segments):
        for seq in seg:
            msg = by_seq.get(seq)
            if msg is not None:
                result.results.append(make_row(scope.source(seq), number, msg,
                                               scores.get(seq), ranks.get(seq)))
    if result.results:
        _matched(result, store, session_id, scope, query)
