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
