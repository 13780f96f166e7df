"""Search over a session: keyword, semantic and hybrid."""

from agenvoy_cli.exports import lazy

# What the layers above use, and the room that holds it (None: the room itself).
_EXPORTS: dict[str, str | None] = {
    "catchup": None,
    "floor": None,
    "semantic": None,
    "index_session": "catchup",
    "notice_line": "catchup",
    "pending_vectors": "catchup",
    "DEFAULT_BUDGET": "defaults",
    "DEFAULT_LIMIT": "defaults",
    "MODES": "defaults",
    "check_budget": "defaults",
    "search": "engine",
    "coverage": "fusion",
    "fuse": "fusion",
    "weights": "fusion",
    "content_query": "keyword",
    "default_match": "keyword",
    "fold": "keyword",
    "term_count": "keyword",
    "Note": "results",
    "grouped_lines": "results",
    "rows_of": "results",
    "who": "results",
    "scope_of": "scope",
    "ATTRIBUTION_CHARS": "semantic",
    "time_window": "timewindow",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy(__name__, _EXPORTS)
