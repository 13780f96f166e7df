"""Knowledge notes: the operator's named notes, which outrank every other source (Agenvoy
v0.32.6's find_knowledge). The rooms: names (upstream's name rules and our limits), store
(SQLite first, Chroma after; the one writer of the notes' tables), files (the legacy
knowledge/*.md taken in once, another home's notes, export), search (keyword, semantic,
hybrid, and upstream's substring search) and vector_sync (the vectors caught up, checked
and repaired). Nothing here imports click; the vector side is imported only when a
semantic or hybrid search runs.
"""

from agenvoy_cli.exports import lazy

# What the layers above use, and the room that holds it (None: the room itself).
_EXPORTS: dict[str, str | None] = {
    "store": None,
    "export": "files",
    "note_count": "files",
    "take_from_home": "files",
    "take_legacy": "files",
    "MAX_CONTENT_BYTES": "names",
    "check_content": "names",
    "check_name": "names",
    "decode_content": "names",
    "go_trim_space": "names",
    "note_name": "names",
    "search_notes": "search",
    "substring_search": "search",
    "add_vectors": "store",
    "get": "store",
    "list_notes": "store",
    "remove": "store",
    "save": "store",
    "BATCH": "vector_sync",
    "check_note_index": "vector_sync",
    "embed_notes": "vector_sync",
    "pending": "vector_sync",
    "repair_note_index": "vector_sync",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy(__name__, _EXPORTS)
