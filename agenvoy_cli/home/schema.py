"""The schema of history.db: every migration, in order (upstream's names kept).

Each FTS5 index is an external-content table kept in step by triggers (fts_triggers: one
definition for all of them). messages_fts carries the session as a column (the hex of its
id, one token) so a MATCH narrows to one session by seeking doclists: keyword search costs
what the session holds, not what the home holds (migration 009).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def trim_table(conn: sqlite3.Connection) -> str:
    """Where the trim points live: Agenvoy 1.0's message_meta once it ran on the file, else
    v0.32's session_meta (home/generation.py tells the layouts apart for everyone else)."""
    return "message_meta" if "message_meta" in _tables(conn) else "session_meta"


def _m001_upstream(conn: sqlite3.Connection) -> None:
    # Upstream's v0.32 schema statement for statement (the Go daemon runs the same IF NOT
    # EXISTS), so either program can create the file and both keep every index in sync. A
    # file Agenvoy 1.0 created has its own trim table (message_meta): no session_meta then.
    if "message_meta" not in _tables(conn):
        conn.execute("CREATE TABLE IF NOT EXISTS session_meta (session_id TEXT PRIMARY KEY, "
                     "start_at INTEGER NOT NULL DEFAULT 0)")
    _script(conn,
        """
        CREATE TABLE IF NOT EXISTS messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            send_at INTEGER NOT NULL DEFAULT 0,
            role TEXT NOT NULL,
            content TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS idx_messages_session_send_at ON messages(session_id, send_at);
        CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts5 USING fts5(
            role, content, content=messages, content_rowid=id
        );
        CREATE TRIGGER IF NOT EXISTS trigger_messages_after_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts5(rowid, role, content) VALUES (new.id, new.role, new.content);
        END;
        CREATE TRIGGER IF NOT EXISTS trigger_messages_after_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts5(messages_fts5, rowid, role, content)
            VALUES ('delete', old.id, old.role, old.content);
        END;
        """
    )


def _script(conn: sqlite3.Connection, sql: str) -> None:
    """Run statements one by one: executescript() would COMMIT the open transaction."""
    pending = ""
    for line in sql.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            conn.execute(pending)
            pending = ""
    if pending.strip():
        conn.execute(pending)


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _m002_positions(conn: sqlite3.Connection) -> None:
    """seq (place in the session's full history) + hash make every write replayable;
    message keeps the full JSON so history.json can be rebuilt; tokens (CJK bigrams) feeds
    our own FTS index, messages_fts, beside upstream's unicode61 messages_fts5."""
    have = _columns(conn, "messages")
    for name, decl in (("seq", "INTEGER"), ("hash", "TEXT"), ("message", "TEXT"),
                       ("tokens", "TEXT")):
        if name not in have:
            conn.execute(f"ALTER TABLE messages ADD COLUMN {name} {decl}")
    meta = trim_table(conn)
    if "start_seq" not in _columns(conn, meta):
        conn.execute(f"ALTER TABLE {meta} ADD COLUMN start_seq INTEGER")
    # Rows written before (by the Go daemon) keep seq NULL here: the archive adopts them
    # (conversation/alignment.py), the one place that knows a message's identity.
    _script(conn,
        """
        CREATE UNIQUE INDEX IF NOT EXISTS idx_messages_session_seq ON messages(session_id, seq);
        """
    )
    if "session" not in _columns(conn, "messages_fts"):
        _messages_fts(conn)


def _m003_error_memory(conn: sqlite3.Connection) -> None:
    """Error memory (agenvoy errors): one row per record with its expiry (unix ns), its
    keywords in a side table for exact matches, and an FTS index over CJK-aware tokens
    (fts.index_text; no stemming, so query tokens can be compared with stored ones).
    vector_model names the model of the record's vector in Chroma (NULL: none)."""
    _script(conn,
        """
        CREATE TABLE IF NOT EXISTS error_records (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            tool_name TEXT NOT NULL,
            keywords TEXT NOT NULL,
            error_type TEXT,
            symptom TEXT NOT NULL,
            cause TEXT NOT NULL DEFAULT '',
            action TEXT NOT NULL,
            outcome TEXT NOT NULL CHECK (outcome IN ('resolved', 'failed', 'abandoned')),
            created_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            hits INTEGER NOT NULL DEFAULT 0,
            last_hit_at INTEGER,
            vector_model TEXT,
            kw_tokens TEXT NOT NULL DEFAULT '',
            text_tokens TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX IF NOT EXISTS idx_error_records_tool
            ON error_records(tool_name, error_type, expires_at);
        CREATE INDEX IF NOT EXISTS idx_error_records_expires ON error_records(expires_at);
        CREATE TABLE IF NOT EXISTS error_keywords (
            keyword TEXT NOT NULL,
            seq INTEGER NOT NULL REFERENCES error_records(seq) ON DELETE CASCADE,
            PRIMARY KEY (keyword, seq)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS idx_error_keywords_seq ON error_keywords(seq);
        CREATE VIRTUAL TABLE IF NOT EXISTS error_records_fts USING fts5(
            kw_tokens, text_tokens,
            content='error_records', content_rowid='seq',
            tokenize='unicode61 remove_diacritics 2'
        );
        CREATE VIRTUAL TABLE IF NOT EXISTS error_records_vocab
            USING fts5vocab(error_records_fts, 'row');
        """
    )
    _script(conn, fts_triggers("error_records_fts", "error_records", "seq",
                               _plain("kw_tokens", "text_tokens"),
                               update_of="kw_tokens, text_tokens"))


def _m004_history_fingerprint(conn: sqlite3.Connection) -> None:
    """Identity of the history.json our last append wrote, so the next one can skip
    parsing a file nobody else touched. Unused since migration 015 (session_stats holds it);
    never added to a 1.0 home's message_meta."""
    if trim_table(conn) != "session_meta":
        return
    have = _columns(conn, "session_meta")
    for name in ("hist_ino", "hist_size", "hist_mtime_ns", "hist_count"):
        if name not in have:
            conn.execute(f"ALTER TABLE session_meta ADD COLUMN {name} INTEGER")


def _m005_rag(conn: sqlite3.Connection) -> None:
    """Document RAG (agenvoy rag): named databases, the paths they watch, their files (with
    the size/mtime/hash a sync compares and a state: pending until both the rows and the
    vectors of the file are written, then done; or skipped, with the reason) and the
    files' chunks, indexed by FTS5 over CJK-bigram tokens (fts.index_text), as messages_fts.
    AUTOINCREMENT keeps ids unique for ever: a chunk id names its vector in Chroma, a
    database id its collection."""
    _script(conn,
        f"""
        CREATE TABLE IF NOT EXISTS rag_dbs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL UNIQUE,
            created_at INTEGER NOT NULL,
            synced_at INTEGER,
            options TEXT NOT NULL DEFAULT '{{}}'
        );
        CREATE TABLE IF NOT EXISTS rag_sources (
            db_id INTEGER NOT NULL REFERENCES rag_dbs(id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('dir', 'file')),
            added_at INTEGER NOT NULL,
            PRIMARY KEY (db_id, path)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS rag_files (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            db_id INTEGER NOT NULL REFERENCES rag_dbs(id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            source TEXT NOT NULL,
            format TEXT,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            hash TEXT,
            lines INTEGER NOT NULL DEFAULT 0,
            state TEXT NOT NULL CHECK (state IN ('pending', 'done', 'skipped')),
            reason TEXT,
            chunks INTEGER NOT NULL DEFAULT 0,
            indexed_at INTEGER,
            UNIQUE (db_id, path)
        );
        CREATE TABLE IF NOT EXISTS rag_chunks (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            file_id INTEGER NOT NULL REFERENCES rag_files(id) ON DELETE CASCADE,
            ord INTEGER NOT NULL,
            line_start INTEGER NOT NULL,
            line_end INTEGER NOT NULL,
            heading TEXT,
            text TEXT NOT NULL,
            tokens TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS idx_rag_chunks_file ON rag_chunks(file_id, ord);
        CREATE VIRTUAL TABLE IF NOT EXISTS rag_chunks_fts USING fts5(
            tokens, content='rag_chunks', content_rowid='id', tokenize='{FTS_TOKENIZE}'
        );
        """
    )
    _script(conn, fts_triggers("rag_chunks_fts", "rag_chunks", "id", _plain("tokens")))


def _m006_gone(conn: sqlite3.Connection) -> None:
    """gone = 1: the row's message left history.json (trimmed, removed by Agenvoy's /compact
    or by hand); it stays archived and is never inserted again. Rows whose text, identity
    or tokens an older version derived differently (content parts, tool calls) get hash
    NULL: the archive derives them again from their full JSON on its next alignment."""
    if "gone" not in _columns(conn, "messages"):
        conn.execute("ALTER TABLE messages ADD COLUMN gone INTEGER NOT NULL DEFAULT 0")
    _script(conn,
        f"""
        UPDATE messages SET gone = 1 WHERE seq < (SELECT coalesce(start_seq, 0)
            FROM {trim_table(conn)} m WHERE m.session_id = messages.session_id);
        UPDATE messages SET hash = NULL WHERE message IS NOT NULL AND json_valid(message)
            AND (json_type(message, '$.content') = 'array'
                 OR json_type(message, '$.tool_calls') = 'array');
        CREATE INDEX IF NOT EXISTS idx_messages_live ON messages(session_id, seq)
            WHERE gone = 0;
        CREATE INDEX IF NOT EXISTS idx_messages_unhashed ON messages(session_id)
            WHERE hash IS NULL;
        """
    )


# session_stats rows from session_meta's history.json fingerprints, for sessions without one
# (migration 007 seeds the new table; 015 moves the last fingerprints there).
_SEED_STATS = """INSERT OR IGNORE INTO session_stats
            (session_id, messages, bytes, last_send_at, hist_ino, hist_mtime_ns)
        SELECT s.session_id, s.hist_count, s.hist_size,
               (SELECT m.send_at FROM messages m WHERE m.session_id = s.session_id
                AND m.seq = coalesce(s.start_seq, 0) + s.hist_count - 1),
               s.hist_ino, s.hist_mtime_ns
        FROM session_meta s WHERE s.hist_ino IS NOT NULL;"""


def _m007_session_stats(conn: sqlite3.Connection) -> None:
    """One small row per session, kept by the writers: what `session list` shows, with the
    identity of the history.json and summary.json it describes (a file changed by another
    program no longer matches and is read instead). Seeded from our appends' fingerprints."""
    seed = _SEED_STATS if "hist_ino" in _columns(conn, "session_meta") else ""
    _script(conn,
        f"""
        CREATE TABLE IF NOT EXISTS session_stats (
            session_id TEXT PRIMARY KEY,
            messages INTEGER NOT NULL,
            bytes INTEGER NOT NULL,
            last_send_at INTEGER,
            hist_ino INTEGER,
            hist_mtime_ns INTEGER,
            summary INTEGER,
            sum_size INTEGER,
            sum_mtime_ns INTEGER
        ) WITHOUT ROWID;
        {seed}
        """
    )


def _m008_session_ids(conn: sqlite3.Connection) -> None:
    """A session's smallest and largest row id in two index probes: keyword search narrows
    the FTS5 scan to that rowid range, so its cost follows the session, not the home."""
    conn.execute("CREATE INDEX IF NOT EXISTS idx_messages_session_id ON messages(session_id, id)")


def fts_triggers(fts: str, table: str, rowid: str, values: dict[str, str], *,
                 update_of: str | None = None) -> str:
    """The triggers keeping the external-content FTS5 table `fts` in step with `table`:
    after insert and delete (and after an update of the columns `update_of`). `values` maps
    each FTS column to the SQL of its value, `{r}` standing for the row (new or old)."""
    cols = ", ".join(values)

    def row(r: str) -> str:
        return ", ".join(v.format(r=r) for v in values.values())

    add = f"INSERT INTO {fts}(rowid, {cols}) VALUES (new.{rowid}, {row('new')});"
    drop = (f"INSERT INTO {fts}({fts}, rowid, {cols}) "
            f"VALUES ('delete', old.{rowid}, {row('old')});")
    sql = (f"CREATE TRIGGER IF NOT EXISTS {fts}_ai AFTER INSERT ON {table} BEGIN {add} END;\n"
           f"CREATE TRIGGER IF NOT EXISTS {fts}_ad AFTER DELETE ON {table} BEGIN {drop} END;\n")
    if update_of:
        sql += (f"CREATE TRIGGER IF NOT EXISTS {fts}_au AFTER UPDATE OF {update_of} ON {table} "
                f"BEGIN {drop} {add} END;\n")
    return sql


def _plain(*columns: str) -> dict[str, str]:
    return {c: "{r}." + c for c in columns}


# messages_fts: our index of messages.tokens (CJK bigrams + porter), and the session as one
# token (hex of its id, matched with a column filter: `session : "<hex>" AND ...`).
SESSION_TOKEN_SQL = "hex({r}.session_id)"


def _messages_fts(conn: sqlite3.Connection) -> None:
    """(Re)create messages_fts over the view that adds the session column, and fill it."""
    _script(conn,
        f"""
        CREATE VIEW IF NOT EXISTS messages_fts_source AS
            SELECT id, tokens, {SESSION_TOKEN_SQL.format(r="messages")} AS session FROM messages;
        CREATE VIRTUAL TABLE messages_fts USING fts5(
            tokens, session, content='messages_fts_source', content_rowid='id',
            tokenize='{FTS_TOKENIZE}'
        );
        """
    )
    _script(conn, fts_triggers("messages_fts", "messages", "id",
                               {**_plain("tokens"), "session": SESSION_TOKEN_SQL},
                               update_of="tokens, session_id"))
    conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')")


def _m009_session_in_fts(conn: sqlite3.Connection) -> None:
    """messages_fts gains the session column; the index is rebuilt once, inside the
    migration's transaction (a crash leaves the old index and version 8)."""
    if "session" in _columns(conn, "messages_fts"):
        return
    for name in ("messages_fts_ai", "messages_fts_ad", "messages_fts_au"):
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    conn.execute("DROP TABLE IF EXISTS messages_fts")
    _messages_fts(conn)


def _m010_folder_mtime(conn: sqlite3.Connection) -> None:
    """session_stats.dir_mtime_ns: the session folder's mtime as the last writer set it (to
    the nanosecond: conversation/sessions.py); while it holds, nothing in the folder was
    created, renamed or removed since, and `session list` needs no stat of the files."""
    if "dir_mtime_ns" not in _columns(conn, "session_stats"):
        conn.execute("ALTER TABLE session_stats ADD COLUMN dir_mtime_ns INTEGER")


def _m011_db_in_rag_fts(conn: sqlite3.Connection) -> None:
    """rag_chunks.db_id (the chunk's database, copied from rag_files: the delete trigger
    reads it from the chunk row itself, which ON DELETE CASCADE still has) and the same id
    as a column of rag_chunks_fts: a search MATCHes `db_id : ("<id>" OR ...) AND tokens :
    (...)`, so its cost follows the searched databases, not the home. The index is rebuilt
    once, inside the migration's transaction (a crash leaves the old index and version 10)."""
    if "db_id" not in _columns(conn, "rag_chunks"):
        conn.execute("ALTER TABLE rag_chunks ADD COLUMN db_id INTEGER")
    conn.execute("UPDATE rag_chunks SET db_id = (SELECT f.db_id FROM rag_files f "
                 "WHERE f.id = rag_chunks.file_id) WHERE db_id IS NULL")
    if "db_id" in _columns(conn, "rag_chunks_fts"):
        return
    for name in ("rag_chunks_fts_ai", "rag_chunks_fts_ad", "rag_chunks_fts_au"):
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    conn.execute("DROP TABLE IF EXISTS rag_chunks_fts")
    conn.execute("CREATE VIRTUAL TABLE rag_chunks_fts USING fts5(tokens, db_id, "
                 f"content='rag_chunks', content_rowid='id', tokenize='{FTS_TOKENIZE}')")
    _script(conn, fts_triggers("rag_chunks_fts", "rag_chunks", "id", _plain("tokens", "db_id")))
    conn.execute("INSERT INTO rag_chunks_fts(rag_chunks_fts) VALUES ('rebuild')")


def _m012_folder_marks(conn: sqlite3.Connection) -> None:
    """folder_marks: the sessions/ folder's mtime as `session list` or our append last set it
    (conversation/session_marks.py); while it holds, every session folder has its row in
    session_stats and the listing reads no directory. `gen` counts the rows dropped since."""
    conn.execute("CREATE TABLE IF NOT EXISTS folder_marks (folder TEXT PRIMARY KEY, "
                 "mtime_ns INTEGER, gen INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID")


def _m013_sender(conn: sqlite3.Connection) -> None:
    """messages.sender, in the shape Agenvoy v0.32 adds it at start-up (syncColumns), which
    may already have happened on this database."""
    if "sender" not in _columns(conn, "messages"):
        conn.execute("ALTER TABLE messages ADD COLUMN sender TEXT NOT NULL DEFAULT ''")


def _m014_import_sources(conn: sqlite3.Connection) -> None:
    """import_sources: where `agenvoy import` read each source up to (records consumed, a
    digest of them, the session they went to and the archive's next place after them), so
    a re-import adds only what is new and never brings back what `forget` removed."""
    conn.execute("CREATE TABLE IF NOT EXISTS import_sources (key TEXT PRIMARY KEY, "
                 "format TEXT NOT NULL, session_id TEXT NOT NULL, records INTEGER NOT NULL, "
                 "digest TEXT NOT NULL, seq_end INTEGER NOT NULL, size INTEGER, "
                 "mtime_ns INTEGER, meta TEXT NOT NULL DEFAULT '{}', updated_at INTEGER "
                 "NOT NULL) WITHOUT ROWID")
    conn.execute("CREATE INDEX IF NOT EXISTS idx_import_sources_session "
                 "ON import_sources(session_id)")


def _m015_one_fingerprint(conn: sqlite3.Connection) -> None:
    """The identity of the history.json we last wrote or aligned is kept once: the session's
    session_stats row (inode, bytes, mtime, messages), which the append's fast path and
    `session list` both read (#29). A session with hist_* but no row (made by a release before
    migration 007 after a later one migrated the home) gets its row from them, as 007 seeded
    them; a row that exists is left alone: releases since 007 wrote it with hist_* in the same
    transaction and after every alignment and trim too, so it is never the older of the two
    (one that differs describes a file the next append reads again). hist_* are then cleared.

    The columns stay, unused: an older agenvoy-cli opens a newer schema without complaint
    (sqlite.migrate leaves a higher user_version alone) and still reads and writes them, so
    dropping them would fail its every append ("no such column"), and SQLite before 3.35 (a
    Python 3.10 may bring one) has no DROP COLUMN. Cleared, they make such a release read the
    file once; what it writes there afterwards vouches only for a file with that inode, size
    and mtime, which our next write replaces. (A 1.0 home without session_meta has none of them.)"""
    if "hist_ino" not in _columns(conn, "session_meta"):
        return
    _script(conn,
        f"""
        {_SEED_STATS}
        UPDATE session_meta SET hist_ino = NULL, hist_size = NULL, hist_mtime_ns = NULL,
            hist_count = NULL WHERE hist_ino IS NOT NULL OR hist_count IS NOT NULL;
        """
    )


def _m016_record_hash(conn: sqlite3.Connection) -> None:
    """messages.record_hash: the identity of what Agenvoy v0.32's normalise rewrite leaves of
    the row's message (its header moved into sendAt and stripped, tool-call fields dropped;
    "": the row's own identity, as for most; NULL: not derived yet, as for every row before
    this migration and every row Agenvoy inserts, derived from the row's JSON when a walk
    needs it), and an index of both identities by place: the walk (conversation/big_sync.py)
    knows a message, rewritten or not, by the plain identity of what the file holds, reading
    the index alone."""
    if "record_hash" not in _columns(conn, "messages"):
        conn.execute("ALTER TABLE messages ADD COLUMN record_hash TEXT")
    conn.execute("CREATE INDEX IF NOT EXISTS idx_messages_identities "
                 "ON messages(session_id, seq, hash, record_hash) WHERE seq IS NOT NULL")


def _m017_notes(conn: sqlite3.Connection) -> None:
    """Knowledge notes (agenvoy notes; Agenvoy v0.32.6's find_knowledge): one row per note,
    its name unique (upstream's rules: notes/names.py), its content and the FTS tokens of
    both (fts.index_text, as messages_fts: CJK bigrams + porter), indexed by notes_fts with
    the name as a column of its own. A new content or name is a new row (a new id): the
    vectors of the old one (Chroma ids "<id>:<passage>") point to no row and are ignored
    until doctor deletes them. vector_model names the model of the row's passage vectors
    (NULL: not embedded yet; searched by keyword meanwhile). note_files: the legacy
    knowledge/*.md files (Agenvoy through v0.32.5) and other homes' notes already taken in,
    so each is taken once and a removed note is not brought back."""
    _script(conn,
        f"""
        CREATE TABLE IF NOT EXISTS notes (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL UNIQUE,
            content TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            source TEXT NOT NULL DEFAULT '',
            name_tokens TEXT NOT NULL,
            tokens TEXT NOT NULL,
            vector_model TEXT,
            vector_count INTEGER NOT NULL DEFAULT 0
        );
        CREATE VIRTUAL TABLE IF NOT EXISTS notes_fts USING fts5(
            name_tokens, tokens, content='notes', content_rowid='id', tokenize='{FTS_TOKENIZE}'
        );
        CREATE TABLE IF NOT EXISTS note_files (
            source TEXT PRIMARY KEY,
            size INTEGER,
            mtime_ns INTEGER,
            digest TEXT NOT NULL,
            name TEXT,
            outcome TEXT NOT NULL,
            taken_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        """
    )
    _script(conn, fts_triggers("notes_fts", "notes", "id", _plain("name_tokens", "tokens"),
                               update_of="name_tokens, tokens"))


def _m018_knowledge_mark(conn: sqlite3.Connection) -> None:
    """notes.knowledge_at: on a home Agenvoy 1.0 shares, the `knowledge` row's updated_at a
    note was last written or read as (NULL: never in `knowledge`, a note saved before the
    home's upgrade). A note with a mark whose row is gone was deleted by Agenvoy; one without
    is ours, not yet written there (notes/store.py follow_knowledge)."""
    if "knowledge_at" not in _columns(conn, "notes"):
        conn.execute("ALTER TABLE notes ADD COLUMN knowledge_at INTEGER")


MIGRATIONS: list[tuple[str, Callable[[sqlite3.Connection], None]]] = [
    ("001_upstream", _m001_upstream),
    ("002_positions", _m002_positions),
    ("003_error_memory", _m003_error_memory),
    ("004_history_fingerprint", _m004_history_fingerprint),
    ("005_rag", _m005_rag),
    ("006_gone", _m006_gone),
    ("007_session_stats", _m007_session_stats),
    ("008_session_ids", _m008_session_ids),
    ("009_session_in_fts", _m009_session_in_fts),
    ("010_folder_mtime", _m010_folder_mtime),
    ("011_db_in_rag_fts", _m011_db_in_rag_fts),
    ("012_folder_marks", _m012_folder_marks),
    ("013_sender", _m013_sender),
    ("014_import_sources", _m014_import_sources),
    ("015_one_fingerprint", _m015_one_fingerprint),
    ("016_record_hash", _m016_record_hash),
    ("017_notes", _m017_notes),
    ("018_knowledge_mark", _m018_knowledge_mark),
]
SCHEMA_VERSION = len(MIGRATIONS)
