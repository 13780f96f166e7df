"""Knowledge notes: the operator's named notes, which outrank every other source (Agenvoy
v0.32.6's find_knowledge). The rooms: names (upstream's name rules and our limits), store
(SQLite first, Chroma after; the one writer of the notes' tables), files (the legacy
knowledge/*.md taken in once, another home's notes, export), search (keyword, semantic,
hybrid, and upstream's substring search) and vector_sync (the vectors caught up, checked
and repaired). Nothing here imports click; the vector side is imported only when a
semantic or hybrid search runs. The layers above import the room they need.
"""
