"""The SQLite archive of a session: rows by place (seq).

Every message ever seen has a row and a place in the session's full history (seq, in
order; rows another program inserted get theirs when first aligned). A row is `gone`
once its message left history.json (trimmed, removed by Agenvoy's /compact or by hand):
still archived and searchable, never inserted again. conversation/alignment.py matches
history.json to the rows (conversation/identity.py has the rule) and writes through this
module, the one writer of the messages table.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, NamedTuple

import orjson

from agenvoy_cli.conversation.history_format import record_hash, sender
from agenvoy_cli.conversation.messages import (
    Message,
    assign_times,
    content_text,
    identity_key,
    search_body,
)
from agenvoy_cli.home import fts, generation


class SessionRows(NamedTuple):
    has_rows: bool  # any row at all (also rows another program wrote, not yet placed)
    next_seq: int  # max(seq) + 1
    start_seq: int | None
    start_at: int


def session_rows(conn: sqlite3.Connection, session_id: str) -> SessionRows:
    """The session's place counters: index lookups only (a count(*) would walk the whole
    session, ~0.2 s at a million rows, on every command)."""
    top = conn.execute("SELECT max(seq) FROM messages WHERE session_id = ?",
                       (session_id,)).fetchone()[0]
    has_rows = top is not None or bool(conn.execute(
        "SELECT EXISTS(SELECT 1 FROM messages WHERE session_id = ?)", (session_id,)
    ).fetchone()[0])
    start_seq, start_at = trim_row(conn, session_id)
    return SessionRows(has_rows, 0 if top is None else top + 1, start_seq, start_at)


def trim_row(conn: sqlite3.Connection, session_id: str) -> tuple[int | None, int]:
    """(start_seq, start_at) of the session's trim point, from the layout's trim table
    (home/generation.py): v0.32's session_meta, or Agenvoy 1.0's message_meta, where a
    session with no row yet falls back to what v0.32 left in session_meta (1.0 does not
    carry those rows over; we read them, never copy them)."""
    layout = generation.of(conn)
    found = _trim_of(conn, layout.trim_table, session_id)
    if found is None and layout.legacy_trim:
        found = _trim_of(conn, "session_meta", session_id)
    return found if found is not None else (None, 0)


def _trim_of(conn: sqlite3.Connection, table: str, session_id: str
             ) -> tuple[int | None, int] | None:
    # SELECT *: a 1.0 home read before a writer added start_seq (sqlite._follow_layout)
    cur = conn.execute(f"SELECT * FROM {table} WHERE session_id = ?", (session_id,))
    row = cur.fetchone()
    if row is None:
        return None
    values = dict(zip((d[0] for d in cur.description), row))
    return values.get("start_seq"), values.get("start_at") or 0


def next_seqs(conn: sqlite3.Connection) -> dict[str, int]:
    """Every session with a session_meta row (a trim point) or a session_stats row (every
    writer of history.json keeps one: conversation/sessions.py) -> its next seq (index
    lookups per session): what the server's indexer compares between looks to see which
    sessions grew. (Until #29 the append's fingerprint gave every session a session_meta row.)"""
    table = generation.of(conn).trim_table
    ids = [r[0] for r in conn.execute(f"SELECT session_id FROM {table} UNION "
                                      "SELECT session_id FROM session_stats")]
    return {sid: session_rows(conn, sid).next_seq for sid in ids}


def has_foreign_rows(conn: sqlite3.Connection, session_id: str) -> bool:
    """Rows another program (Agenvoy) inserted that have no place yet."""
    return bool(conn.execute("SELECT EXISTS(SELECT 1 FROM messages WHERE session_id = ? AND "
                             "seq IS NULL)", (session_id,)).fetchone()[0])


def count_rows(conn: sqlite3.Connection, session_id: str) -> int:
    count: int = conn.execute("SELECT count(*) FROM messages WHERE session_id = ?",
                              (session_id,)).fetchone()[0]
    return count


def last_send_at(conn: sqlite3.Connection, session_id: str, before_seq: int) -> int | None:
    row = conn.execute(
        "SELECT send_at FROM messages WHERE session_id = ? AND seq < ? ORDER BY seq DESC LIMIT 1",
        (session_id, before_seq),
    ).fetchone()
    return row[0] if row else None


def send_at_of(conn: sqlite3.Connection, session_id: str, seq: int) -> int | None:
    row = conn.execute("SELECT send_at FROM messages WHERE session_id = ? AND seq = ?",
                       (session_id, seq)).fetchone()
    return row[0] if row else None


def insert(conn: sqlite3.Connection, session_id: str, first_seq: int,
           messages: Sequence[dict[str, Any]], fallback_ns: int) -> int:
    """Insert messages at places first_seq.. (a place already taken is left as it is)."""
    if not messages:
        return 0
    times = assign_times(messages, last_send_at(conn, session_id, first_seq), fallback_ns)
    params = []
    for i, (msg, send_at) in enumerate(zip(messages, times)):
        role = str(msg.get("role"))
        text = content_text(msg.get("content"))
        ident = identity_key(role, text, msg)
        params.append((session_id, send_at, role, text, first_seq + i, ident,
                       orjson.dumps(msg).decode(), fts.index_text(search_body(text, msg)),
                       sender(msg), record_hash(msg, ident)))
    sql = ("INSERT OR IGNORE INTO messages (session_id, send_at, role, content, seq, hash, "
           "message, tokens, sender, record_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
    if len(params) < BULK_ROWS:
        # rowcount: rows of this statement only (total_changes counts trigger writes too)
        return conn.executemany(sql, params).rowcount
    return _bulk_insert(conn, sql, params)


BULK_ROWS = 500
# The FTS triggers cost ~20x more per row than the same rows indexed in one statement.
# trigger -> (FTS table, its columns, the table or view its rows come from)
_INDEXES = {"trigger_messages_after_insert": ("messages_fts5", "role, content", "messages"),
            "messages_fts_ai": ("messages_fts", "tokens, session", "messages_fts_source")}


def _bulk_insert(conn: sqlite3.Connection, sql: str, params: list[tuple[Any, ...]]) -> int:
    """Many rows at once (backfill): suspend the FTS insert triggers inside the caller's
    transaction, index the new rows set-wise, and put the triggers back as they were
    (their stored SQL, whoever created them). Nobody else can write in between."""
    assert conn.in_transaction
    saved = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'messages' "
        f"AND name IN ({', '.join('?' * len(_INDEXES))})", list(_INDEXES)).fetchall()
    before = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
    for name, _ in saved:
        conn.execute(f'DROP TRIGGER "{name}"')
    inserted = conn.executemany(sql, params).rowcount
    for name, trigger_sql in saved:
        table, columns, source = _INDEXES[name]
        conn.execute(f"INSERT INTO {table}(rowid, {columns}) SELECT id, {columns} "
                     f"FROM {source} WHERE id > ?", (before,))
        conn.execute(trigger_sql)
    return inserted


# -- the identity rule's writes (conversation/alignment.py decides, in the caller's transaction)
def renumber(conn: sqlite3.Connection, moves: list[tuple[int, int]]) -> None:
    """Give rows (id, new seq) new places without ever two rows at one place (a unique
    index): first all to distinct negative places, then to their own."""
    conn.executemany("UPDATE messages SET seq = ? WHERE id = ?",
                     [(-1 - seq, rid) for rid, seq in moves])
    conn.executemany("UPDATE messages SET seq = ? WHERE id = ?",
                     [(seq, rid) for rid, seq in moves])


def complete_external_row(conn: sqlite3.Connection, rid: int, ident: str,
                          message: dict[str, Any] | None) -> None:
    """A row another program inserted, first aligned: its identity, its tokens and (when
    history.json holds it unedited) its full JSON and the identity the rewrite leaves of it
    (else that is derived when a walk needs it: set_record_hashes)."""
    conn.execute("UPDATE messages SET hash = ?, tokens = ?, message = ?, record_hash = ? "
                 "WHERE id = ?",
                 (ident, fts.index_text(search_body(conn.execute(
                     "SELECT content FROM messages WHERE id = ?", (rid,)).fetchone()[0],
                     message)), None if message is None else orjson.dumps(message).decode(),
                  None if message is None else record_hash(message, ident), rid))


def set_record_hashes(conn: sqlite3.Connection, session_id: str,
                      derived: dict[int, str]) -> None:
    """record_hash of rows that had none (older rows: migration 016), by place, as the walk
    derived them from their JSON (big_sync.archived_prefix)."""
    conn.executemany("UPDATE messages SET record_hash = ? WHERE session_id = ? AND seq = ? "
                     "AND record_hash IS NULL",
                     [(value, session_id, seq) for seq, value in sorted(derived.items())])


def mark_gone(conn: sqlite3.Connection, row_ids: Sequence[int]) -> None:
    """Rows whose message left history.json (still archived)."""
    conn.executemany("UPDATE messages SET gone = 1 WHERE id = ?", [(r,) for r in row_ids])


def mark_back(conn: sqlite3.Connection, row_ids: Sequence[int]) -> None:
    """Gone rows whose message is in history.json again."""
    conn.executemany("UPDATE messages SET gone = 0 WHERE id = ?", [(r,) for r in row_ids])


def _row_values(message: dict[str, Any]) -> tuple[str, str, str, str, str, str]:
    role = str(message.get("role"))
    text = content_text(message.get("content"))
    ident = identity_key(role, text, message)
    return (role, text, ident, orjson.dumps(message).decode(),
            fts.index_text(search_body(text, message)), record_hash(message, ident))


def insert_placed(conn: sqlite3.Connection, session_id: str, seq: int, send_at: int,
                  message: dict[str, Any]) -> None:
    """One new message at its place (the identity rule's insert)."""
    role, text, ident, raw, tokens, told = _row_values(message)
    conn.execute("INSERT INTO messages (session_id, send_at, role, content, seq, hash, "
                 "message, tokens, sender, record_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 (session_id, send_at, role, text, seq, ident, raw, tokens, sender(message),
                  told))


def replace_edited(conn: sqlite3.Connection, rid: int, session_id: str, seq: int,
                   send_at: int, message: dict[str, Any], gone: int = 0) -> None:
    """An edited message: delete + insert under the same id keeps both FTS indexes right
    (the row is back in history.json, unless `gone`: a completed message already trimmed)."""
    role, text, ident, raw, tokens, told = _row_values(message)
    conn.execute("DELETE FROM messages WHERE id = ?", (rid,))
    conn.execute("INSERT INTO messages (id, session_id, send_at, role, content, seq, "
                 "hash, message, tokens, gone, sender, record_hash) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 (rid, session_id, send_at, role, text, seq, ident, raw, tokens, gone,
                  sender(message), told))


def rederive_row(conn: sqlite3.Connection, rid: int, role: str, content: str, text: str,
                 message: dict[str, Any] | None) -> None:
    """A row derived again from its full JSON: text (was content), identity, tokens and
    the identity the rewrite leaves of it. Upstream's FTS table has no update trigger: its
    entry is replaced by hand."""
    if text != content:
        conn.execute("INSERT INTO messages_fts5(messages_fts5, rowid, role, content) "
                     "VALUES ('delete', ?, ?, ?)", (rid, role, content))
        conn.execute("INSERT INTO messages_fts5(rowid, role, content) VALUES (?, ?, ?)",
                     (rid, role, text))
    ident = identity_key(role, text, message)
    conn.execute("UPDATE messages SET content = ?, hash = ?, tokens = ?, record_hash = ? "
                 "WHERE id = ?",
                 (text, ident, fts.index_text(search_body(text, message)),
                  None if message is None else record_hash(message, ident), rid))


def set_start(conn: sqlite3.Connection, session_id: str, start_seq: int) -> int:
    """Record the trim point (place and time of the first message kept in history.json)."""
    start_at = send_at_of(conn, session_id, start_seq)
    if start_at is None:
        start_at = (last_send_at(conn, session_id, start_seq) or 0) + 1
    conn.execute(
        f"INSERT INTO {generation.of(conn).trim_table} (session_id, start_at, start_seq) "
        "VALUES (?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET start_at = excluded.start_at, "
        "start_seq = excluded.start_seq",
        (session_id, start_at if start_seq > 0 else 0, start_seq),
    )
    conn.execute("UPDATE messages SET gone = 1 WHERE session_id = ? AND seq < ? AND gone = 0",
                 (session_id, start_seq))
    return start_at


def rows_from(conn: sqlite3.Connection, session_id: str, lo: int = 0,
              hi: int | None = None, *, live: bool = False) -> list[Message]:
    """Rows by place; live: only those in history.json (not gone)."""
    sql = ("SELECT seq, send_at, role, content, message FROM messages "
           "WHERE session_id = ? AND seq >= ?" + (" AND gone = 0" if live else ""))
    args: list[Any] = [session_id, lo]
    if hi is not None:
        sql += " AND seq < ?"
        args.append(hi)
    out = []
    for seq, send_at, role, content, message in conn.execute(sql + " ORDER BY seq", args):
        raw = orjson.loads(message) if message else {"role": role, "content": content}
        out.append(Message(seq, send_at, role, content, raw))
    return out


def delete_session(conn: sqlite3.Connection, session_id: str) -> int:
    deleted = conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,)).rowcount
    layout = generation.of(conn)
    for table in {layout.trim_table, "session_meta" if layout.legacy_trim else layout.trim_table}:
        conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
    return deleted


def drop_duplicates(conn: sqlite3.Connection, drop: Sequence[int], keep: Sequence[int]) -> None:
    """doctor's repair of a message archived twice: the extra rows deleted, the copies kept
    back in history.json (the oldest may have been marked gone while a newer one stood for
    it)."""
    conn.executemany("DELETE FROM messages WHERE id = ?", [(i,) for i in drop])
    conn.executemany("UPDATE messages SET gone = 0 WHERE id = ?", [(i,) for i in keep])


FTS_TABLES = ("messages_fts", "messages_fts5")  # the archive's two full-text indexes


def fts_problems(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(table, error) of each full-text index FTS5's integrity check finds damaged."""
    found = []
    for table in FTS_TABLES:
        try:
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
        except sqlite3.DatabaseError as exc:
            found.append((table, str(exc)))
    return found


def rebuild_fts(conn: sqlite3.Connection, table: str) -> str:
    """Rebuild one full-text index from the rows (doctor --repair)."""
    if table not in FTS_TABLES:
        raise ValueError(f"not a full-text index of the archive: {table}")
    conn.execute(f"INSERT INTO {table}({table}) VALUES ('rebuild')")
    return f"rebuilt {table}"


def forget_rows(conn: sqlite3.Connection, session_id: str, seqs: Sequence[int]) -> None:
    """`forget`'s delete: the rows gone, and both full-text indexes merged so that no old
    segment keeps the text."""
    conn.executemany("DELETE FROM messages WHERE session_id = ? AND seq = ?",
                     [(session_id, s) for s in sorted(seqs)])
    for table in FTS_TABLES:
        conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
