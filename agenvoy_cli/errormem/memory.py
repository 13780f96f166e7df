"""Error memory: tool failures with their resolution, shared by every session of a home.
The names the commands, doctor and the API use; the rooms are classify (error types),
records (the record, its validation, settings), store (SQLite first, Chroma after),
ranking (lookup), hints (the agent's text) and index (vector index consistency).

SQLite is the source of truth (table ``error_records`` with an expiry, ``error_keywords``
for exact keyword matches, ``error_records_fts`` over fts.index_text tokens so Chinese
works). Vectors live in the Chroma collection ``vectors.ERRORS``, derived: written after
SQLite, deleted before it, checked and rebuilt by check_error_index/repair_error_index.
A record's ``vector_model`` column says whether (and with which model) it was embedded,
so a lookup knows without importing Chroma whether the semantic path can help.
Nothing here imports click; the vector side is imported only when the semantic path runs.
"""

from agenvoy_cli.errormem.classify import ERROR_TYPES, TYPE_PREFIX, check_type, classify
from agenvoy_cli.errormem.hints import hint
from agenvoy_cli.errormem.ranking import LookupResult, Query, lookup, parse_query
from agenvoy_cli.errormem.records import (
    DAY_NS,
    DEFAULT_LIMIT,
    DEFAULT_TTL_DAYS,
    MAX_LIMIT,
    NS,
    OUTCOMES,
    SEMANTIC_ENV,
    SHORT_ID,
    SIM_CALIBRATION,
    TTL_ENV,
    VECTOR_POOL,
    Draft,
    Hit,
    Record,
    drafts_from_json,
    make_draft,
    normalize_keywords,
    now_ns,
    record_id,
    semantic_default,
    ttl_days,
    ttl_ns,
)
from agenvoy_cli.errormem.store import forget, get, list_records, prune, record
from agenvoy_cli.errormem.vector_sync import check_error_index, repair_error_index

__all__ = [
    "DAY_NS", "DEFAULT_LIMIT", "DEFAULT_TTL_DAYS", "ERROR_TYPES", "MAX_LIMIT", "NS", "OUTCOMES",
    "SEMANTIC_ENV", "SHORT_ID", "SIM_CALIBRATION", "TTL_ENV", "TYPE_PREFIX", "VECTOR_POOL",
    "Draft", "Hit", "LookupResult", "Query", "Record", "check_error_index", "check_type",
    "classify", "drafts_from_json", "forget", "get", "hint", "list_records", "lookup",
    "make_draft", "normalize_keywords", "now_ns", "parse_query", "prune", "record",
    "record_id", "repair_error_index", "semantic_default", "ttl_days", "ttl_ns",
]
