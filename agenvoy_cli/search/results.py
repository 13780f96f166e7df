"""What a search returns: ranked hits, their neighbours, merged segments, the JSON shape."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from agenvoy_cli.conversation.history_format import sender
from agenvoy_cli.conversation.messages import NS, Message
from agenvoy_cli.search.timewindow import TimeWindow

if TYPE_CHECKING:
    import sqlite3

BEFORE, AFTER = 2, 1  # expansion of a semantic/hybrid hit (upstream's history window)
SCORE_KINDS = {"keyword": "bm25", "semantic": "cosine", "hybrid": "rrf"}


def rfc3339(ns: int) -> str:
    """Local time with its offset, as upstream prints it (2025-01-02T15:04:05+08:00)."""
    return datetime.fromtimestamp(ns // NS).astimezone().isoformat(timespec="seconds")


@dataclass
class Row:
    source: str  # "archive" | "recent"
    segment: int
    hit: bool  # False for a neighbour added by the expansion
    seq: int
    send_at: int
    role: str
    content: str  # header stripped
    score: float | None
    rank: int | None = None  # 1 = best hit; None for a neighbour
    matched_terms: list[str] | None = None  # the query's terms a hit holds (None: neighbour)
    sender: str | None = None  # who sent it (sendAt format's sender, header's 傳送者), else None

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "segment": self.segment, "hit": self.hit,
                "rank": self.rank, "seq": self.seq, "sent_at": rfc3339(self.send_at),
                "sent_at_ns": self.send_at, "role": self.role, "sender": self.sender,
                "content": self.content,
                "score": None if self.score is None else round(self.score, 6),
                "matched_terms": self.matched_terms}


# What a search's notes say (docs/json-vocabulary.md lists the codes; the text output
# prints the same messages).
NOTE_CODES = {
    "any_term": "a short query no message matched with every term: any term ranks",
    "context_window": "every searchable message is in the context window",
    "outside_window": "nothing in the time window; matches outside it (search/outside.py)",
    "not_related": "no message is related closely enough (the relevance floor)",
    "nothing_searchable": "the query has no searchable word",
    "other_script": "keyword found nothing; the query and the memories are in different scripts",
    "unindexed": "messages without a vector yet, searched by keyword only",
    "budget_spent": "the embedding budget ran out: the rest searched by keyword only, hits "
                    "left unattributed",
    "unarchived": "messages of history.json not in SQLite yet: not searchable",
    "unsearchable": "vectors an inconsistent index left out (doctor --repair)",
    "uncalibrated": "the embedding model has no calibration profile: the relevance floor and "
                    "the fitted ranking are off (models/profiles.py)",
}


@dataclass(frozen=True)
class Note:
    """A note of a search: a stable code (NOTE_CODES) and the sentence for people."""

    code: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass
class SearchResult:
    session_id: str
    query: str
    mode: str
    results: list[Row] = field(default_factory=list)
    match: str | None = None  # keyword: "all" | "any" | "none" (nothing searchable)
    indexed: int = 0  # messages embedded by the catch-up before this search
    unindexed_count: int | None = None  # left without a vector (budget); None for keyword
    unsearchable_count: int = 0  # vectors an inconsistent index left out (doctor --repair)
    window: TimeWindow = field(default_factory=TimeWindow)
    notes: list[Note] = field(default_factory=list)
    # semantic/hybrid: messages outside the context window that could be found; with
    # message_count, says "all N messages are in the context window" when it is 0
    searchable_count: int | None = None
    message_count: int | None = None
    floor: float | None = None  # the relevance floor applied (semantic side)
    score_kind: str | None = None  # what `score` is (None: the mode's, SCORE_KINDS)

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"session_id": self.session_id, "query": self.query,
                               "mode": self.mode,
                               "score_kind": self.score_kind or SCORE_KINDS[self.mode]}
        if self.match is not None:
            doc["match"] = self.match
        if self.mode != "keyword":
            doc["indexed"] = self.indexed
            doc["searchable_count"] = self.searchable_count
            doc["message_count"] = self.message_count
        doc["unindexed_count"] = self.unindexed_count
        doc["unsearchable_count"] = self.unsearchable_count if self.mode != "keyword" else None
        doc["results"] = [r.as_dict() for r in self.results]
        doc["notes"] = [n.as_dict() for n in self.notes]
        return doc

    def note(self, code: str, message: str) -> None:
        assert code in NOTE_CODES, code
        self.notes.append(Note(code, message))


def expand(hits: Sequence[tuple[int, float]], lo: int, hi: int) -> list[list[int]]:
    """Each hit widened to [seq-2, seq+1] within [lo, hi); touching or overlapping windows
    merge. Segments in time order, each a list of seqs."""
    wanted: set[int] = set()
    for seq, _ in hits:
        wanted.update(s for s in range(seq - BEFORE, seq + AFTER + 1) if lo <= s < hi)
    segments: list[list[int]] = []
    for seq in sorted(wanted):
        if segments and seq == segments[-1][-1] + 1:
            segments[-1].append(seq)
        else:
            segments.append([seq])
    return segments


def best_first(segments: list[list[int]], ranks: dict[int, int]) -> list[list[int]]:
    """Segments ordered by the best hit they hold (results are best first); inside a
    segment, messages stay in time order."""
    far = len(ranks) + 1
    return sorted(segments, key=lambda seg: min(ranks.get(s, far) for s in seg))


def rows_of(conn: sqlite3.Connection | None, session_id: str, seqs: Iterable[int]
            ) -> list[Message]:
    """The session's archived messages at these places, in seq order."""
    wanted = sorted(set(seqs))
    if conn is None or not wanted:
        return []
    out: list[Message] = []
    for i in range(0, len(wanted), 500):
        part = wanted[i:i + 500]
        marks = ",".join("?" * len(part))
        sql = (f"SELECT seq, send_at, role, content, message FROM messages "
               f"WHERE session_id = ? AND seq IN ({marks}) ORDER BY seq")
        for seq, send_at, role, content, raw in conn.execute(sql, [session_id, *part]
                                                             ).fetchall():  # one call
            out.append(Message(seq, send_at, role, content, orjson.loads(raw) if raw else {}))
    return out


def make_row(source: str, segment: int, msg: Message, score: float | None,
             rank: int | None) -> Row:
    return Row(source, segment, rank is not None, msg.seq, msg.send_at, msg.role, msg.body,
               score, rank, sender=sender(msg.raw) or None)


def who(row: dict[str, Any]) -> str:
    """`role`, or `role · sender` when the row names one (upstream's chat_history lines)."""
    return f"{row['role']} · {row['sender']}" if row.get("sender") else str(row["role"])


def grouped_lines(doc: dict[str, Any], line: Callable[[dict[str, Any]], str]) -> list[str]:
    """A search document's rows in their order, one `line` each: [archive]/[recent] labels
    for keyword and hybrid, a blank line between segments (the CLI's --order time and the
    MCP tool's text, as upstream's search_chat_history)."""
    labelled = doc["mode"] != "semantic"
    out: list[str] = []
    label = segment = None
    for row in doc["results"]:
        if labelled and row["source"] != label:
            if out:
                out.append("")
            label = row["source"]
            out.append(f"[{label}]")
        elif row["segment"] != segment and out:
            out.append("")
        segment = row["segment"]
        out.append(line(row))
    return out


def note_uncalibrated(result: SearchResult, model_id: str, floor_set: bool) -> None:
    """Say, when the index model has no profile (models/profiles.py), that the floor and the
    fitted ranking are off, and why."""
    from agenvoy_cli.models.profiles import uncalibrated

    why = uncalibrated(model_id, floor_set)
    if why is not None:
        result.note("uncalibrated", why)
