"""The conversation: messages, history.json, the archive, the dual-write Store, compaction,
the rolling summary and the summarizer."""

from agenvoy_cli.exports import lazy

# What the layers above use, and the room that holds it (None: the room itself).
_EXPORTS: dict[str, str | None] = {
    "alignment": None,
    "archive": None,
    "compaction": None,
    "dress": None,
    "session_list": None,
    "sessions": None,
    "archived_prefix": "big_sync",
    "sender": "dress",
    "forget_messages": "forget",
    "History": "history",
    "dump_history": "history",
    "read_tail": "history",
    "write_history": "history",
    "HistoryView": "history_view",
    "open_history": "history_view",
    "MAX_YEAR": "messages",
    "MIN_YEAR": "messages",
    "Message": "messages",
    "NS": "messages",
    "ROLES": "messages",
    "content_text": "messages",
    "identity_key": "messages",
    "is_blank": "messages",
    "message_identity": "messages",
    "ns_to_local": "messages",
    "parse_local_time": "messages",
    "strip_header": "messages",
    "validate_message": "messages",
    "clear_session": "reset",
    "reset_with_summary": "reset",
    "list_all": "session_list",
    "as_dicts": "sessions",
    "folder_names": "sessions",
    "Store": "store",
    "SessionResult": "summarizer",
    "dry_run": "summarizer",
    "pending_sessions": "summarizer",
    "summarize_session": "summarizer",
    "read_summary": "summary",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy(__name__, _EXPORTS)
