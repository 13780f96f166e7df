"""Lookup: the live records related to an error, ranked, renewed.

Ranking (lookup): every candidate gets signals in [0, 1] -
  sem   cosine similarity of the query and the record above the query's median similarity
        to the records, in units of a per-model spread (models/profiles.py)
  lex   IDF-weighted share of the query's words found in the record (smoothed, so one
        common word is weak evidence)
  kw    recorded keywords found in the query: 1 - 0.5**n
  type  the query's error type (explicit or classified) equals the record's
and content = 0.40 sem + 0.30 lex + 0.20 kw + 0.10 type (without vectors: 0.50 lex +
0.33 kw + 0.17 type); a record of the failing tool gets +0.25 (score / 1.25). Records
below the relevance floor are left out; ties go to the most recently used.
With --tool only records of that tool are candidates (as upstream). Query words no record
holds count as fully specific: a record sharing one common word with a long error text
is not related.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agenvoy_cli.errormem import records
from agenvoy_cli.errormem.classify import ERROR_TYPES, TYPE_TERM, check_type, classify
from agenvoy_cli.errormem.hints import hint
from agenvoy_cli.errormem.records import (
    BASELINE_SAMPLE,
    CANDIDATES,
    COLUMNS,
    DEFAULT_LIMIT,
    LEX_SMOOTHING,
    MAX_LIMIT,
    MAX_QUERY,
    MAX_QUERY_TOKENS,
    MIN_CONTENT,
    MIN_CONTENT_SAME_TOOL,
    PRIOR_WEIGHT,
    TOOL_BONUS,
    VECTOR_POOL,
    W_KEYWORD,
    W_SEMANTIC,
    Hit,
    Record,
    Warn,
    plain,
    quiet,
    semantic_default,
    ttl_ns,
)
from agenvoy_cli.errormem.store import (
    by_ids,
    fetch,
    one_line,
    renew,
    vector_dir_exists,
)
from agenvoy_cli.errors import AgenvoyError, BadInput
from agenvoy_cli.home import fts
from agenvoy_cli.search.query import SHORT_QUERY_TERMS, Query
from agenvoy_cli.search.results import Note

# What an errors lookup's notes say (docs/json-vocabulary.md lists the codes).
NOTE_CODES = {
    "not_related": "records share words with the error, but none describes the same failure",
    "uncalibrated": "the embedding model has no calibration profile: the hint bar judges by "
                    "words alone (models/profiles.py)",
}

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.errormem.corpus import ErrorsCorpus
    from agenvoy_cli.search.corpus import Embedded, Found


_STOPWORDS = frozenset((
    "a", "an", "the", "to", "of", "in", "on", "at", "for", "is", "are", "was", "were", "be",
    "been", "and", "or", "but", "with", "by", "from", "as", "it", "its", "this", "that",
    "error", "errors", "failed", "fail", "failure", "while", "when", "after"))


# --------------------------------------------------------------------------- lookup


@dataclass
class ErrorQuery:
    text: str  # the query without error_type: terms (embedded, tokenised)
    lines: str  # the same with its lines kept (the hint bar reads an output line by line)
    error_type: str | None  # explicit (--type, error_type:x) or classified from the text
    explicit_type: bool
    tokens: list[str]  # distinct words for lexical matching (no stopwords)
    sequence: list[str]  # every token in order (keyword phrase matching)
    query: Query  # the text as a search parses it (search/query.py)


def parse_query(raw: str, error_type: str | None = None) -> ErrorQuery:
    raw = (raw or "")[:MAX_QUERY]
    explicit = check_type(error_type)
    for match in TYPE_TERM.finditer(raw):
        named = check_type(match.group(1))
        if explicit is not None and named != explicit:
            raise BadInput(f"two error types asked for: {explicit} and {named}")
        explicit = named
    lines = TYPE_TERM.sub(" ", raw).strip()
    text = " ".join(lines.split())
    sequence = fts.term_tokens(text)
    tokens = [t for t in dict.fromkeys(sequence)
              if t not in _STOPWORDS and (len(t) > 1 or not t.isascii())][:MAX_QUERY_TOKENS]
    etype = explicit if explicit is not None else classify(text)
    return ErrorQuery(text, lines, etype, explicit is not None, tokens, sequence, Query.of(text))


@dataclass
class LookupResult:
    hits: list[Hit]
    mode: str  # "semantic" | "keyword" | "filter" (tool/type only)
    unindexed_count: int | None = None  # records left without a vector (None: not semantic)
    match: str | None = None  # keyword mode: "all" | "any" (true of every hit), else None
    notes: list[Note] = field(default_factory=list)  # why nothing was returned (NOTE_CODES)

    @property
    def hint(self) -> str:
        return hint(self.hits)


def _keyword_only(conn: sqlite3.Connection, q: ErrorQuery, tool: str | None) -> bool:
    """True when the query is only keywords, error types or tool names (then vectors add
    nothing and the model is not loaded)."""
    if not q.text:
        return True

    def known(part: str) -> bool:
        if not part or part in ERROR_TYPES or part == (tool or "").lower():
            return True
        return bool(conn.execute("SELECT 1 FROM error_keywords WHERE keyword = ? LIMIT 1",
                                 (part,)).fetchone()
                    or conn.execute("SELECT 1 FROM error_records WHERE tool_name = ? LIMIT 1",
                                    (part,)).fetchone())

    low = q.text.lower()
    return any(all(known(" ".join(p.split())) for p in parts)
               for parts in (low.split(","), low.split()))


def _typed_words(q: ErrorQuery) -> bool:
    """A few plain words (`ttl redis`, `redis ttl?`: at most SHORT_QUERY_TERMS, one line,
    without the colon or quotes of a program's error line) are someone searching by
    keyword, ranked by the keyword rule, not an error output for the hint bar. None of the
    237 error outputs of the bar's calibration set (bench/hint_cases.py) is such a query."""
    return (len(q.tokens) <= SHORT_QUERY_TERMS and "\n" not in q.lines
            and not any(mark in q.text for mark in ":'\"`‘’“”"))


def _candidates(conn: sqlite3.Connection, q: ErrorQuery, tool: str | None,
                now: int) -> dict[str, Record]:
    found: dict[str, Record] = {}

    def add(records: Iterable[Record]) -> None:
        for r in records:
            found.setdefault(r.id, r)

    recency = "max(created_at, coalesce(last_hit_at, 0)) DESC, seq DESC"
    if q.tokens:
        expr = fts.match_any(" ".join(q.tokens))
        if expr:
            add(Record.from_row(r) for r in conn.execute(
                f"SELECT {', '.join('r.' + c.strip() for c in COLUMNS.split(','))} "
                "FROM error_records_fts f JOIN error_records r ON r.seq = f.rowid "
                "WHERE error_records_fts MATCH ? AND r.expires_at > ? "
                + ("AND r.tool_name = ? " if tool else "")
                + f"ORDER BY bm25(error_records_fts, 2.0, 1.0) LIMIT {CANDIDATES}",
                (expr, now, tool) if tool else (expr, now)))
    if tool and q.error_type and q.error_type != "other":
        add(fetch(conn, "tool_name = ? AND error_type = ? AND expires_at > ?",
                   (tool, q.error_type, now), order=recency, limit=CANDIDATES))
    if not q.text:  # a filter, not a search: every record of the tool and/or type
        where, params = ["expires_at > ?"], [now]
        if tool:
            where.append("tool_name = ?")
            params.append(tool)
        if q.error_type:
            where.append("error_type = ?")
            params.append(q.error_type)
        add(fetch(conn, " AND ".join(where), params, order=recency, limit=CANDIDATES))
    return found


def _rarity(conn: sqlite3.Connection, tokens: list[str]) -> dict[str, float]:
    """Per query token: idf / the largest idf possible, in (0, 1]; 0 when no record has it."""
    import math

    n = conn.execute("SELECT count(*) FROM error_records").fetchone()[0]
    if not n:
        return {}
    top = math.log(1 + (n - 0.5) / 1.5)
    out = {}
    for tok in tokens:
        row = conn.execute("SELECT doc FROM error_records_vocab WHERE term = ?",
                           (tok,)).fetchone()
        df = row[0] if row else 0
        out[tok] = math.log(1 + (n - df + 0.5) / (df + 0.5)) / top if df else 0.0
    return out


def _contains(sequence: list[str], part: list[str]) -> bool:
    if not part or len(part) > len(sequence):
        return False
    first = part[0]
    return any(sequence[i] == first and sequence[i:i + len(part)] == part
               for i in range(len(sequence) - len(part) + 1))


def _calibration(model_id: str) -> tuple[float, float]:
    """(prior, spread) of the model's profile; a guess for a model without one."""
    from agenvoy_cli.models.profiles import DEFAULT_SIMILARITY, profile

    found = profile(model_id)
    return found.similarity if found is not None and found.similarity else DEFAULT_SIMILARITY


def _semantic(store: Store, conn: sqlite3.Connection, qvec: list[float], model: str,
              tool: str | None, found: dict[str, Record], now: int) -> dict[str, float]:
    """Hold write_lock. Adds the nearest records to `found`; returns id -> rescaled
    similarity for every candidate that has a vector."""
    import numpy as np

    from agenvoy_cli.vectors import api as vectors

    if not vector_dir_exists(store) or not vectors.index_exists(store, vectors.ERRORS):
        raise AgenvoyError("the error-memory vector index is missing")
    index = vectors.open_index(store, vectors.ERRORS, create=False)
    if index.embedder.model_id != model:
        raise AgenvoyError("the embedder changed meanwhile")
    where = {"tool_name": tool} if tool else None  # --tool filters, as upstream
    near = {h.id for h in index.query(qvec, VECTOR_POOL, where=where)}
    missing = [i for i in near if i not in found]
    for r in by_ids(conn, missing, " AND expires_at > ?", (now,)):
        found[r.id] = r
    ids = [i for i, r in found.items() if r.vector_model is not None]
    if not ids:
        return {}
    query = np.asarray(qvec, dtype=np.float32)
    got = index.collection.get(ids=ids, include=["embeddings"])
    if not len(got["ids"]):
        return {}
    sims = np.asarray(got["embeddings"], dtype=np.float32) @ query
    sample = index.collection.get(limit=BASELINE_SAMPLE, include=["embeddings"])
    base = np.asarray(sample["embeddings"], dtype=np.float32) @ query
    prior, spread = _calibration(model)
    baseline = (float(np.median(base)) * len(base) + prior * PRIOR_WEIGHT) / (
        len(base) + PRIOR_WEIGHT) if len(base) else prior
    return {i: min(1.0, max(0.0, (float(s) - baseline) / spread))
            for i, s in zip(got["ids"], sims)}


@dataclass(frozen=True)
class _Scoring:
    """What scoring every candidate of one lookup shares."""

    q: ErrorQuery
    tool: str | None
    sem: dict[str, float] | None
    rarity: dict[str, float]
    known: float  # the query words' summed rarity, a word no record holds counting fully
    specific: str | None  # the query's error type when it names one
    floor: bool

    @classmethod
    def of(cls, q: ErrorQuery, tool: str | None, sem: dict[str, float] | None,
           rarity: dict[str, float], floor: bool) -> _Scoring:
        known = sum(rarity.get(t, 0.0) or 1.0 for t in q.tokens)
        specific = q.error_type if q.error_type not in (None, "other") else None
        return cls(q, tool, sem, rarity, known, specific, floor)


def _signals(r: Record, c: _Scoring) -> tuple[dict[str, float], list[str], list[str],
                                              list[str]]:
    """(signals, the query words the record holds, the rare ones among them, the recorded
    keywords found in the query)."""
    words = set(fts.term_tokens(" ".join(
        [r.tool_name, *plain(r.keywords), r.symptom, r.cause])))
    held = [t for t in c.q.tokens if t in words]
    shared = [t for t in held if c.rarity.get(t, 0.0) > 0]
    lex = sum(c.rarity[t] for t in shared) / (c.known + LEX_SMOOTHING) if shared else 0.0
    kws = [k for k in plain(r.keywords) if _contains(c.q.sequence, fts.term_tokens(k))]
    signals = {"lex": lex, "kw": 1 - 0.5 ** len(kws),
               "type": 1.0 if c.specific and r.error_type == c.specific else 0.0}
    if c.sem is not None:
        signals["sem"] = c.sem.get(r.id, 0.0)
    return signals, held, shared, kws


def _why(signals: dict[str, float], shared: list[str], kws: list[str]) -> list[str]:
    """What matched, as a hit's `matched` lists it."""
    out = ["error_type"] if signals["type"] else []
    out += [f"keyword:{k}" for k in kws]
    if shared:
        out.append("words:" + ",".join(shared[:8]))
    if signals.get("sem", 0) > 0:
        out.append(f"semantic:{signals['sem']:.2f}")
    return out


def _scored(r: Record, c: _Scoring) -> Hit | None:
    """One candidate's hit, None when the floor leaves it out."""
    same_tool = bool(c.tool) and r.tool_name == c.tool
    matched = ["tool"] if same_tool else []
    if not c.q.text:  # a filter (tool / type only): everything found matches
        if c.q.error_type and r.error_type == c.q.error_type:
            matched.append("error_type")
        return Hit(r, 1.0, {"filter": 1.0}, matched)
    signals, held, shared, kws = _signals(r, c)
    weights = W_SEMANTIC if c.sem is not None else W_KEYWORD
    content = sum(weights[k] * v for k, v in signals.items())
    matched += _why(signals, shared, kws)
    if c.floor and content < (MIN_CONTENT_SAME_TOOL if same_tool else MIN_CONTENT):
        return None
    score = (content + TOOL_BONUS * same_tool) / (1 + TOOL_BONUS) if c.tool else content
    return Hit(r, score, signals, matched, held)


def _score(found: dict[str, Record], q: ErrorQuery, tool: str | None,
           sem: dict[str, float] | None, rarity: dict[str, float],
           floor: bool = True) -> list[Hit]:
    """Every candidate ranked; with `floor`, only those whose content reaches MIN_CONTENT
    (keyword queries: an error text is judged by the hint bar instead)."""
    scoring = _Scoring.of(q, tool, sem, rarity, floor)
    hits = [h for r in found.values() if not (tool and r.tool_name != tool)
            if (h := _scored(r, scoring)) is not None]
    hits.sort(key=lambda h: (-round(h.score, 9), -h.record.last_used, -h.record.seq))
    return hits


def _asked(query: str, tool: str | None, error_type: str | None, limit: int
           ) -> tuple[ErrorQuery, str | None]:
    """The parsed query and the tool; BadInput for a lookup that asks nothing."""
    if not 1 <= limit <= MAX_LIMIT:
        raise BadInput(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    tool = tool.strip() if tool else None
    q = parse_query(query, error_type)
    if not q.text and not tool and not q.explicit_type:
        raise BadInput("nothing to look up: give a QUERY (error text or keywords), --tool "
                       "or --type")
    return q, tool


def _query_vector(store: Store, q: ErrorQuery, tool: str | None, semantic: bool | None,
                  budget: float | None, corpus: ErrorsCorpus, found: Found
                  ) -> Embedded | None:
    """The pipeline's catch-up stage (search/pipeline.py `embed`) when the lookup is
    semantic: more than keywords and tool names, or asked for."""
    from agenvoy_cli.search import pipeline

    want = _wants_vectors(store, q, tool, semantic)
    return pipeline.embed(corpus, q.query, budget, found) if want else None


def _wants_vectors(store: Store, q: ErrorQuery, tool: str | None, semantic: bool | None
                   ) -> bool:
    with store.read_lock():
        conn = store.db_readonly()
        want = semantic_default(store) if semantic is None else semantic
        return bool(want and q.text and conn is not None
                    and (semantic or not _keyword_only(conn, q, tool)))


def loads_model(store: Store, query: str, *, tool: str | None = None,
                error_type: str | None = None, semantic: bool | None = None) -> bool:
    """Whether lookup() would embed the query (load a model): what `server = auto` asks
    before it starts the background server for `errors lookup`. Reads only SQLite."""
    q, tool = _asked(query, tool, error_type, 1)
    return _wants_vectors(store, q, tool, semantic)


@dataclass
class _Ranked:
    """A lookup's ranking, made under the lock."""

    hits: list[Hit]
    match: str | None
    sem: dict[str, float] | None
    keywords: bool  # only keywords, error types or tool names: no hint bar
    typed: bool  # a few words typed to search by: the keyword rule, no hint bar
    candidates: int


def _rank(store: Store, q: ErrorQuery, tool: str | None, now: int,
          embedded: Embedded | None, warn: Warn) -> _Ranked:
    """Gather the candidates (words, the tool and type, the nearest vectors), score and
    order them. Hold the write lock (Chroma)."""
    conn = store.db()
    keywords = _keyword_only(conn, q, tool)
    typed = not keywords and _typed_words(q)
    found = _candidates(conn, q, tool, now)
    sem: dict[str, float] | None = None
    if embedded is not None:
        try:
            sem = _semantic(store, conn, list(embedded.vector), embedded.model.model_id,
                            tool, found, now)
        except Exception as exc:  # noqa: BLE001 - missing, stale or broken index
            warn(f"agenvoy: warning: the error-memory vector index is unusable "
                 f"({one_line(exc)}); keyword matching only "
                 "(`agenvoy doctor --repair` rebuilds it)")
    rarity = _rarity(conn, q.tokens) if q.tokens else {}
    scored = _score(found, q, tool, sem, rarity, floor=keywords or typed)
    if typed:  # words typed to search by: the records holding them, by the keyword rule
        scored = [h for h in scored if h.matched_terms]
    hits, match = _keyword_rule(scored, q, sem is None or typed)
    return _Ranked(hits, match, sem, keywords, typed, len(found))


def _judged(store: Store, q: ErrorQuery, ranked: _Ranked, warn: Warn, model: str
            ) -> tuple[list[Hit], list[Note]]:
    """The hits the relevance stage keeps: an error text's by the hint bar (outside the
    lock), typed words' by the keyword rule; and why nothing is left."""
    hits = ranked.hits
    if ranked.typed:
        return hits, [] if hits else [Note("not_related", "no record holds these words; "
                                           "no hint")]
    if ranked.keywords:
        return hits, []
    hits = _related(store, q, hits, ranked.sem is not None, warn, model) if hits else []
    if hits:
        return hits, []
    said = (f"{ranked.candidates} record(s) share words with this error, but none describes "
            "the same failure" if ranked.candidates else "no record shares a word with this "
            "error")
    return hits, [Note("not_related", f"{said}; no hint")]


def _renewed(store: Store, hits: list[Hit], now: int, ttl: int) -> list[Hit]:
    """The hits still alive, each renewed to now + TTL (only a record returned is)."""
    if not hits:
        return hits
    with store.write_lock():
        alive = {r.seq for r in fetch(store.db(), f"seq IN ({','.join('?' * len(hits))})"
                                      " AND expires_at > ?",
                                      [*(h.record.seq for h in hits), now])}
        hits = [h for h in hits if h.record.seq in alive]
        renew(store, [h.record.seq for h in hits], now, ttl)
    for h in hits:
        h.record.expires_at, h.record.last_hit_at = now + ttl, now
        h.record.hits += 1
    return hits


def lookup(store: Store, query: str = "", *, tool: str | None = None,
           error_type: str | None = None, limit: int = DEFAULT_LIMIT,
           semantic: bool | None = None, now: int | None = None,
           warn: Warn = quiet, budget: float | None = None) -> LookupResult:
    """The live records related to an error, most relevant first; each one returned gets
    its expiry renewed to now + TTL. Never fails because of the vector side: without it
    (missing, stale, other model, no embedder) the ranking is by keywords, with a warning.

    semantic: None = automatic (vectors when the query is more than keywords/tool names
    and records have vectors), False = never (no model, no Chroma), True = whenever any
    record has vectors. Records without a vector are embedded first, for at most `budget`
    seconds (None: all): the retrieval pipeline's catch-up stage over the records
    (errormem/corpus.py)."""
    from agenvoy_cli.errormem.corpus import ErrorsCorpus
    from agenvoy_cli.search.corpus import Found

    now = records.now_ns() if now is None else now
    q, tool = _asked(query, tool, error_type, limit)
    ttl = ttl_ns(store)  # a bad setting fails before anything is read or written
    if store.db_readonly() is None:  # no database: nothing recorded, nothing is created
        return LookupResult([], "keyword")
    corpus, found = ErrorsCorpus(store, now, warn, bool(semantic)), Found("semantic")
    embedded = _query_vector(store, q, tool, semantic, budget, corpus, found)
    with store.write_lock():  # Chroma needs the lock
        ranked = _rank(store, q, tool, now, embedded, warn)
    model = embedded.model.model_id if embedded is not None else ""
    hits, notes = _judged(store, q, ranked, warn, model)
    hits = _renewed(store, hits[:limit], now, ttl)
    mode = "filter" if not q.text else ("semantic" if ranked.sem is not None else "keyword")
    if ranked.sem is not None:
        notes += [Note(code, text) for code, text in found.notes if code == "uncalibrated"]
    return LookupResult(hits, mode, corpus.left, ranked.match, notes)


def _related(store: Store, q: ErrorQuery, hits: list[Hit], semantic: bool, warn: Warn,
             model: str) -> list[Hit]:
    """The hits the hint bar (errormem/relevance.py, a search Relevance) finds related to
    the error text, in their order; each says why in `matched`."""
    from agenvoy_cli.errormem.relevance import HintBar, RecordCandidate
    from agenvoy_cli.search.relevance import Pool, Relevance

    bar: Relevance  # the search pipeline's interface (mypy checks HintBar keeps to it)
    try:
        bar = HintBar.for_store(store, semantic)
    except Exception as exc:  # noqa: BLE001 - no embedder now: the words decide
        warn(f"agenvoy: warning: the hint bar judges by words only ({one_line(exc)})")
        bar = HintBar()
    # similarity: the lookup's semantic signal (0 without vectors); the bar does not read it
    pool = Pool([RecordCandidate(h.record.id, h.signals.get("sem", 0.0), h.record.symptom,
                                 keywords=tuple(plain(h.record.keywords))) for h in hits],
                background=(), typical=None, query_vector=(), model_id=model)
    decision = bar.decide(Query.of(q.lines), pool)  # the bar reads the output line by line
    kept = set(decision.related)
    for h in hits:
        if h.record.id in kept:
            h.matched.append(decision.evidence[h.record.id].why)
    return [h for h in hits if h.record.id in kept]


def _keyword_rule(hits: list[Hit], q: ErrorQuery, keyword: bool) -> tuple[list[Hit], str | None]:
    """Ranked by keyword, by conversation keyword search's rule (search/query.py): a
    keyword query of 1-3 words (after stop-words) keeps only the records holding every word,
    unless none does (then any); a longer one or a question ranks any."""
    if not keyword or not q.text or not q.tokens:
        return hits, None
    if q.query.match_for(len(q.tokens)) == "any":
        return hits, "any"
    every = [h for h in hits if len(h.matched_terms) == len(q.tokens)]
    return (every, "all") if every or not hits else (hits, "any")
