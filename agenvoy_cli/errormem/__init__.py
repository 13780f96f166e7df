"""Error memory: tool failures, their fixes and outcomes, shared by every session of a home.
The rooms: classify (error types), records (the record, its validation, settings), store
(SQLite first, Chroma after), ranking (lookup), hints (the agent's text) and vector_sync
(vector index consistency); the layers above import the room they need.

SQLite is the source of truth (table ``error_records`` with an expiry, ``error_keywords``
for exact keyword matches, ``error_records_fts`` over fts.index_text tokens so Chinese
works). Vectors live in the Chroma collection ``vectors.ERRORS``, derived: written after
SQLite, deleted before it, checked and rebuilt by vector_sync. A record's ``vector_model``
column says whether (and with which model) it was embedded, so a lookup knows without
importing Chroma whether the semantic path can help. Nothing here imports click; the
vector side is imported only when the semantic path runs.
"""
