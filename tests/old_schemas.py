"""Older shapes of the home's database, as SQL run on a current one: the migration tests and
bench/scale.py's `--migration` rebuild a home the way an older release left it."""

# messages_fts as the release before migration 009 left it (no session column)
V8_MESSAGES_FTS = """
DROP TRIGGER messages_fts_ai; DROP TRIGGER messages_fts_ad; DROP TRIGGER messages_fts_au;
DROP TABLE messages_fts; DROP VIEW messages_fts_source;
CREATE VIRTUAL TABLE messages_fts USING fts5(tokens, content='messages', content_rowid='id',
                                             tokenize='porter unicode61 remove_diacritics 2');
CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, tokens) VALUES (new.id, new.tokens);
END;
CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, tokens) VALUES ('delete', old.id, old.tokens);
END;
CREATE TRIGGER messages_fts_au AFTER UPDATE OF tokens ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, tokens) VALUES ('delete', old.id, old.tokens);
    INSERT INTO messages_fts(rowid, tokens) VALUES (new.id, new.tokens);
END;
INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');
PRAGMA user_version = 8;
DELETE FROM agenvoy_migrations WHERE name = '009_session_in_fts';
"""

# rag_chunks_fts as the release before migration 011 left it (no db_id column)
V10_RAG_FTS = """
DROP TRIGGER rag_chunks_fts_ai; DROP TRIGGER rag_chunks_fts_ad; DROP TABLE rag_chunks_fts;
ALTER TABLE rag_chunks DROP COLUMN db_id;
CREATE VIRTUAL TABLE rag_chunks_fts USING fts5(tokens, content='rag_chunks', content_rowid='id',
                                               tokenize='porter unicode61 remove_diacritics 2');
CREATE TRIGGER rag_chunks_fts_ai AFTER INSERT ON rag_chunks BEGIN
    INSERT INTO rag_chunks_fts(rowid, tokens) VALUES (new.id, new.tokens);
END;
CREATE TRIGGER rag_chunks_fts_ad AFTER DELETE ON rag_chunks BEGIN
    INSERT INTO rag_chunks_fts(rag_chunks_fts, rowid, tokens) VALUES ('delete', old.id, old.tokens);
END;
INSERT INTO rag_chunks_fts(rag_chunks_fts) VALUES ('rebuild');
PRAGMA user_version = 10;
DELETE FROM agenvoy_migrations WHERE name = '011_db_in_rag_fts';
"""

# the history.json fingerprint as releases before migration 015 kept it: in session_meta's
# hist_* (what the last append wrote) besides the session_stats row; run it after setting the
# hist_* a test wants (NULL ones are taken from the row, as that append would have written)
V14_FINGERPRINT_TWICE = """
INSERT OR IGNORE INTO session_meta (session_id) SELECT session_id FROM session_stats;
UPDATE session_meta SET (hist_ino, hist_size, hist_mtime_ns, hist_count) = (
    SELECT t.hist_ino, t.bytes, t.hist_mtime_ns, t.messages FROM session_stats t
    WHERE t.session_id = session_meta.session_id) WHERE hist_ino IS NULL;
PRAGMA user_version = 14;
DELETE FROM agenvoy_migrations WHERE name = '015_one_fingerprint';
"""
