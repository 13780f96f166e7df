"""Error records: the settings, the record and its validation (nothing here touches the
home)."""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from agenvoy_cli.errormem.classify import TYPE_PREFIX, classify
from agenvoy_cli.errors import BadInput
from agenvoy_cli.home import fts

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store


OUTCOMES = ("resolved", "failed", "abandoned")
NS = 1_000_000_000
DAY_NS = 86_400 * NS
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
# what a lookup's `score` is (docs/json-vocabulary.md): the weighted share of the evidence
# (shared words, keywords, error type, meaning; the same tool's bonus), 0 to 1
SCORE_KIND = "relevance"

# Cosine similarity -> [0, 1]: (sim - baseline) / spread, where the baseline is the query's
# median similarity to a sample of the records (how similar "anything" is to this query),
# pulled towards the model's prior (its profile's `similarity`, models/profiles.py) while
# the sample is small.
PRIOR_WEIGHT = 8  # the prior counts as this many sampled records
BASELINE_SAMPLE = 64

W_SEMANTIC = {"sem": 0.40, "lex": 0.30, "kw": 0.20, "type": 0.10}
W_KEYWORD = {"lex": 0.50, "kw": 0.33, "type": 0.17}
TOOL_BONUS = 0.25
MIN_CONTENT = 0.12  # a record of another tool must be at least this relevant
MIN_CONTENT_SAME_TOOL = 0.05
LEX_SMOOTHING = 0.5

HEX = re.compile(r"\A[0-9a-f]+\Z")
COLUMNS = ("seq, id, tool_name, keywords, error_type, symptom, cause, action, outcome, "
            "created_at, expires_at, hits, last_hit_at, vector_model")

Warn = Callable[[str], None]


def quiet(message: str) -> None:
    pass


def now_ns() -> int:
    """The clock of this module (tests replace it)."""
    return time.time_ns()



# --------------------------------------------------------------------------- settings


def ttl_days(store: Store) -> float:
    """AGENVOY_ERROR_TTL_DAYS, else config agenvoy.error_ttl_days, else 90 (settings.py)."""
    return store.settings.error_ttl_days


def ttl_ns(store: Store) -> int:
    return int(ttl_days(store) * DAY_NS)


def semantic_default(store: Store) -> bool:
    """Whether the vector side is on unless a call says (AGENVOY_ERRORS_SEMANTIC)."""
    return store.settings.errors_semantic


# --------------------------------------------------------------------------- records


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
        words = plain(self.keywords)
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
    if not plain(words):
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
                     warn: Warn = quiet) -> list[Draft]:
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


@dataclass
class Hit:
    """A record found by a lookup, with its score and what matched."""

    record: Record
    score: float
    signals: dict[str, float] = field(default_factory=dict)
    matched: list[str] = field(default_factory=list)
    matched_terms: list[str] = field(default_factory=list)  # the query's words it holds

    def as_dict(self) -> dict[str, Any]:
        return {**self.record.as_dict(), "score": round(self.score, 4),
                "score_kind": SCORE_KIND, "matched": self.matched,
                "matched_terms": self.matched_terms}


def record_id(tool_name: str, created_ns: int) -> str:
    """Upstream's id: hex(sha256(tool_name + decimal unix nanoseconds))."""
    return hashlib.sha256(f"{tool_name}{created_ns}".encode()).hexdigest()


def plain(keywords: Iterable[str]) -> list[str]:
    """The keywords without the derived error_type:<t> ones."""
    return [k for k in keywords if not k.startswith(TYPE_PREFIX)]


def tokens_of(draft: Draft) -> tuple[str, str]:
    kw = fts.index_text(" ".join([draft.tool_name, *plain(draft.keywords)]))
    return kw, fts.index_text(draft.symptom + "\n" + draft.cause)


def vector_meta(draft: Draft) -> dict[str, Any]:
    return {"tool_name": draft.tool_name, "outcome": draft.outcome,
            "error_type": draft.error_type or ""}


