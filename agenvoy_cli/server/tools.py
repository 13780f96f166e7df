"""The tools the server offers: upstream Agenvoy's memory tools (same names, parameters and
limits, descriptions an LLM can act on) plus append_messages and get_context.

Plain JSON schemas, so that what an agent host shows the model is exactly what is written
here. Arguments are checked again by server.args (hosts do not all validate).
"""

from __future__ import annotations

from typing import Any

SEARCH_MODES = ["keyword", "semantic", "hybrid"]
TIME_RANGES = ["1d", "7d", "1m", "1y", "all"]
# search_chat_history's default: all (upstream's v0.31 tool had 1d). Its own description
# sends keyword "across full history (archive + recent)", and a host's model rarely sets
# time_range: the last day hid every older conversation (issue #49). A recent hit still
# ranks first; chat_history (--tools agenvoy) keeps upstream's 1d, exactly.
DEFAULT_TIME_RANGE = "all"
HISTORY_LIMITS = [8, 16, 32]
OUTCOMES = ["resolved", "failed", "abandoned"]
ERROR_LIMIT_MAX = 16
RAG_LIMIT_MAX = 100
NOTE_MODES = ["hybrid", "keyword", "semantic"]
NOTE_LIMIT_MAX = 20  # upstream find_knowledge's MaxLimit
MAX_APPEND = 1000  # messages per append_messages call
MAX_BUDGET = 60.0  # seconds a search may be told to spend embedding (hosts time calls out)


def _window(what: str) -> dict[str, Any]:
    """A corpus's time_range (notes, RAG documents): all by default."""
    return {"type": "string", "enum": TIME_RANGES, "default": "all",
            "description": f"Only {what} in the last day, 7 days, 30 days or year (default: "
                           "all)."}


def _budget(what: str) -> dict[str, Any]:
    return {"type": "number", "minimum": 0, "maximum": MAX_BUDGET, "default": 3,
            "description": f"Seconds this search may spend embedding {what} not indexed yet "
            "before it searches (default 3; 0: none). What is left is still found by "
            "keyword (structured result: unindexed_count). The server indexes new ones in "
            "the background, so this rarely matters."}


def _session(bound: str | None) -> dict[str, Any]:
    if bound:
        text = f"Session id (default: {bound}, the session this server is bound to)."
    else:
        text = "Session id (a name such as 'main'; no '/', no leading '.')."
    return {"type": "string", "description": text}


def _object(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props,
                              "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


def definitions(bound: str | None) -> list[dict[str, Any]]:
    """name, description, inputSchema of every tool (session_id optional when bound)."""
    need_session = [] if bound else ["session_id"]
    return [
        {
            "name": "search_chat_history",
            "description": (
                "Search this session's past messages. mode=keyword for exact match across "
                "full history (archive + recent); mode=semantic for meaning-based match in "
                "recent messages; mode=hybrid fuses both (best recall). Use for prior "
                "conversation references, named entity lookups (call first, then "
                "search_web), or theme recall. Extract the core noun as keyword. Messages "
                "already in the context window are left out of semantic/hybrid results; "
                "each hit comes with 2 messages before and 1 after."),
            "inputSchema": _object({
                "keyword": {"type": "string", "description":
                            "Search text (e.g. 'redis TTL', 'bwrap sandbox decision')."},
                "mode": {"type": "string", "enum": SEARCH_MODES, "default": "semantic",
                         "description": "keyword: every term, across the full history "
                         "including the archive. semantic: vector similarity in recent "
                         "messages. hybrid: keyword ranking fused with vectors."},
                "time_range": {"type": "string", "enum": TIME_RANGES,
                               "default": DEFAULT_TIME_RANGE,
                               "description": "Time window filter (last day, 7 days, 30 "
                               "days, year, or all). Applies to every mode. Nothing "
                               "inside it but matches outside: the answer says so."},
                "limit": {"type": "integer", "enum": HISTORY_LIMITS, "default": 8,
                          "description": "Hit cap per source. Output exceeds limit after "
                          "context expansion."},
                "session_id": _session(bound),
                "budget": _budget("messages"),
            }, ["keyword", *need_session]),
        },
        {
            "name": "remember_error",
            "description": (
                "Persist tool-error record to cross-session memory. Auto-call when: resolved "
                "via non-trivial fallback → resolved; strategy confirmed non-working → "
                "failed; 3 approaches exhausted → abandoned. Skip trivial typos, 1st-retry "
                "fixes, transient errors. Records expire after 90 days unless found again."),
            "inputSchema": _object({
                "tool_name": {"type": "string", "description":
                              "Tool that produced the error (e.g. 'fetch_page')."},
                "keywords": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                             "description": "Lookup keywords — tool name, error type, "
                             "parameter traits. Be specific."},
                "symptom": {"type": "string", "description":
                            "Observed behavior — what the tool returned or failed on."},
                "cause": {"type": "string", "default": "",
                          "description": "Root cause once confirmed."},
                "action": {"type": "string", "description": "Action taken (e.g. 'retried "
                           "with English keyword', 'fell back to search_web')."},
                "outcome": {"type": "string", "enum": OUTCOMES, "description":
                            "resolved = fix worked; failed = strategy confirmed "
                            "non-working; abandoned = 3+ approaches tried."},
            }, ["tool_name", "keywords", "symptom", "action", "outcome"]),
        },
        {
            "name": "search_error_history",
            "description": (
                "Search past tool-error records for root cause and resolution. Call before "
                "2nd retry when no error hints were injected. Results are authoritative: "
                "resolved → apply, failed/abandoned → avoid. Every record found has its "
                "90-day expiry renewed."),
            "inputSchema": _object({
                "keyword": {"type": "string", "description":
                            "Keyword — tool name, error symptom, or parameter trait."},
                "limit": {"type": "integer", "minimum": 1, "maximum": ERROR_LIMIT_MAX,
                          "default": 4, "description": "Max results (default 4, max 16)."},
                "tool_name": {"type": "string", "description":
                              "The tool that failed (optional): its records rank first."},
                "budget": _budget("error records"),
            }, ["keyword"]),
        },
        {
            "name": "read_error",
            "description": (
                "Fetch a prior tool error record by hash. Use when a tool returns "
                "'no data: {hash}' or a search result names a record and the full context "
                "is needed."),
            "inputSchema": _object({
                "hash": {"type": "string", "description":
                         "Error hash (8-char hex, e.g. 'a1b2c3d4'), or the full record id."},
            }, ["hash"]),
        },
        {
            "name": "list_rag",
            "description": (
                "List RAG knowledge base databases (name, paths, files, chunks). Call when "
                "the target database name is unknown; skip if the name is already known."),
            "inputSchema": _object({}, []),
        },
        {
            "name": "search_rag",
            "description": (
                "Search RAG knowledge base by keyword or semantic mode. Use mode=keyword for "
                "precise strings (filenames, terms, names, symbols); use mode=semantic for "
                "natural-language queries; hybrid fuses both. If results are sufficient, "
                "answer directly without external tools."),
            "inputSchema": _object({
                "mode": {"type": "string", "enum": SEARCH_MODES, "default": "hybrid",
                         "description": "'keyword' for exact token match, 'semantic' for "
                         "embedding similarity, 'hybrid' for both."},
                "db": {"type": "string", "description":
                       "Target RAG database name (see list_rag; default: all databases)."},
                "q": {"type": "string", "description": "Search query."},
                "limit": {"type": "integer", "minimum": 1, "maximum": RAG_LIMIT_MAX,
                          "default": 10, "description": "Max chunks to return (1-100)."},
                "time_range": _window("documents last modified"),
            }, ["q"]),
        },
        {
            "name": "search_notes",
            "description": (
                "Search the operator's knowledge notes — house rules, conventions, background "
                "this workspace assumes; they outrank anything else you find. Call it before "
                "answering anything a local convention could override (get_context says "
                "whether notes exist). Returns the best notes with a snippet each; read_note "
                "for the whole note. mode=hybrid (default) matches words and meaning, also "
                "across languages; keyword matches the words only."),
            "inputSchema": _object({
                "query": {"type": "string", "description":
                          "What to look for: the request's key terms, or a question."},
                "mode": {"type": "string", "enum": NOTE_MODES, "default": "hybrid",
                         "description": "hybrid: words and meaning fused. keyword: names "
                         "and text, every term for 1-3 terms. semantic: meaning only."},
                "limit": {"type": "integer", "minimum": 1, "maximum": NOTE_LIMIT_MAX,
                          "default": 5, "description": "Max notes (default 5, max 20)."},
                "budget": _budget("notes"),
                "time_range": _window("notes last changed"),
            }, ["query"]),
        },
        {
            "name": "read_note",
            "description": (
                "Read one knowledge note in full, by the name search_notes (or get_context) "
                "gave. Read every note that looks relevant, in one turn."),
            "inputSchema": _object({
                "name": {"type": "string", "description": "The note's name, as listed."},
            }, ["name"]),
        },
        {
            "name": "save_note",
            "description": (
                "Save a knowledge note for later turns and sessions (only when the user asks "
                "to keep something as a note). Without a name it is named after the "
                "content's first line (at most 32 characters; no '/', '\\', '*', '?', "
                "'[', ']', no leading '.'). An existing name is refused unless replace."),
            "inputSchema": _object({
                "content": {"type": "string", "description": "The note's text (Markdown)."},
                "name": {"type": "string", "description": "The note's name (optional)."},
                "replace": {"type": "boolean", "default": False,
                            "description": "Overwrite a note of the same name."},
            }, ["content"]),
        },
        {
            "name": "append_messages",
            "description": (
                "Append chat messages to a session's memory (history.json and the "
                "full-text archive, under the store lock; all or nothing). Each message is "
                "an OpenAI-style object {role, content, ...} stored verbatim; a message "
                "without a '當前時間:' time header gets one with the current time. New "
                f"messages are indexed for semantic search in the background. At most "
                f"{MAX_APPEND} messages per call."),
            "inputSchema": _object({
                "session_id": _session(bound),
                "messages": {"type": "array", "minItems": 1, "maxItems": MAX_APPEND,
                             "items": {"type": "object", "required": ["role"],
                                       "properties": {"role": {"type": "string"}}},
                             "description": "Messages in order, oldest first."},
            }, [*need_session, "messages"]),
        },
        {
            "name": "get_context",
            "description": (
                "The messages to send to the model this turn: the session's rolling summary "
                "as a system message, then its last max_messages messages (default: the "
                "home's max_history_messages, 16)."),
            "inputSchema": _object({
                "session_id": _session(bound),
                "max_messages": {"type": "integer", "minimum": 0, "description":
                                 "How many recent messages (default 16)."},
            }, need_session),
        },
    ]
