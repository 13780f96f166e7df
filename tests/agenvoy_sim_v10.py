"""A stand-in for Agenvoy 1.0 writing a shared home (docs/upstream.md: each fact and the
upstream file and commit it comes from).

Agenvoy 1.0 is AGPL-licensed: nothing here is its code or its SQL. The DDL below is ours,
written from the table and column names (and their types and defaults) that 1.0's
internal/runtime/store/migrate.sql and internal/knowledge/migrate.sql declare; what the
writer does is what docs/upstream.md records of its behaviour:

- history.json: still written per session, the v0.32 record format (role, content, sendAt,
  sender), the whole file rewritten on every append (internal/session/history/record.go at
  1.0 imports the 1.0 store package) -> the v0.32 writer's append is reused.
- history.db: messages (+ sender), the trim point in message_meta(session_id, start_at),
  messages_fts5 on the trigram tokenizer kept by an insert and a delete trigger (no update
  trigger), file_history with its new unique index, action_history (one row per finished
  task), session (the persona), knowledge(name, content, updated_at); `state` dropped.
- Every statement runs with IF NOT EXISTS: on a v0.32 home the old messages_fts5 (default
  tokenizer) and session_meta stay as they were; message_meta starts empty (no row is
  carried over: inferred, no statement copies one).
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from tests.agenvoy_sim_v032 import GoAgentV032

# Our DDL of the 1.0 tables (names, types and defaults as 1.0 declares them).
V10_TABLES = [
    "CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY AUTOINCREMENT, "
    "session_id TEXT NOT NULL, send_at INTEGER NOT NULL DEFAULT 0, role TEXT NOT NULL, "
    "content TEXT NOT NULL, sender TEXT NOT NULL DEFAULT '')",
    "CREATE INDEX IF NOT EXISTS idx_messages_session_send_at ON messages(session_id, send_at)",
    "CREATE TABLE IF NOT EXISTS message_meta (session_id TEXT PRIMARY KEY, "
    "start_at INTEGER NOT NULL DEFAULT 0)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts5 USING fts5(role, content, "
    "content=messages, content_rowid=id, tokenize='trigram')",
    "CREATE TRIGGER IF NOT EXISTS trigger_messages_after_insert AFTER INSERT ON messages "
    "BEGIN INSERT INTO messages_fts5(rowid, role, content) "
    "VALUES (new.id, new.role, new.content); END",
    "CREATE TRIGGER IF NOT EXISTS trigger_messages_after_delete AFTER DELETE ON messages "
    "BEGIN INSERT INTO messages_fts5(messages_fts5, rowid, role, content) "
    "VALUES ('delete', old.id, old.role, old.content); END",
    "CREATE TABLE IF NOT EXISTS file_history (id INTEGER PRIMARY KEY AUTOINCREMENT, "
    "dir TEXT NOT NULL, name TEXT NOT NULL, action TEXT NOT NULL, content BLOB, "
    "hash TEXT NOT NULL DEFAULT '', size INTEGER NOT NULL DEFAULT 0, "
    "truncated INTEGER NOT NULL DEFAULT 0, trash_path TEXT, "
    "session_id TEXT NOT NULL DEFAULT '', task_id TEXT NOT NULL DEFAULT '', "
    "tool TEXT NOT NULL DEFAULT '', changed_at INTEGER NOT NULL)",
    "DROP INDEX IF EXISTS idx_fh_unique",
    "CREATE UNIQUE INDEX IF NOT EXISTS idx_fh_unique ON file_history(dir, name, task_id, "
    "session_id) WHERE task_id != ''",
    "CREATE TABLE IF NOT EXISTS action_history (id INTEGER PRIMARY KEY AUTOINCREMENT, "
    "session_id TEXT NOT NULL, task_hash TEXT NOT NULL, end_at INTEGER NOT NULL, "
    "model TEXT NOT NULL DEFAULT '', reasoning TEXT NOT NULL DEFAULT '', "
    "objective TEXT NOT NULL DEFAULT '', tool_results TEXT NOT NULL DEFAULT '', "
    "reply TEXT NOT NULL DEFAULT '')",
    "CREATE UNIQUE INDEX IF NOT EXISTS idx_ah_unique ON action_history(session_id, task_hash)",
    "CREATE TABLE IF NOT EXISTS session (session_id TEXT PRIMARY KEY, "
    "self_id TEXT NOT NULL DEFAULT '', name TEXT NOT NULL DEFAULT '', "
    "model TEXT NOT NULL DEFAULT 'auto', reasoning TEXT NOT NULL DEFAULT 'medium', "
    "role TEXT NOT NULL DEFAULT '', rule TEXT NOT NULL DEFAULT '', "
    "chat_id TEXT NOT NULL DEFAULT '', guild_id TEXT NOT NULL DEFAULT '', "
    "channel_id TEXT NOT NULL DEFAULT '', user_id TEXT NOT NULL DEFAULT '')",
    "CREATE UNIQUE INDEX IF NOT EXISTS idx_session_self_id ON session(self_id) "
    "WHERE self_id <> ''",
    "DROP TABLE IF EXISTS state",
    "CREATE TABLE IF NOT EXISTS knowledge (name TEXT PRIMARY KEY, "
    "content TEXT NOT NULL DEFAULT '', updated_at INTEGER NOT NULL DEFAULT 0)",
]


class GoAgentV10(GoAgentV032):
    """One Agenvoy 1.0 process on a home: the v0.32 history files and rows, 1.0's tables."""

    meta_table = "message_meta"

    def __init__(self, home: Path) -> None:  # noqa: D107 - no super(): its own schema
        self.home = Path(home)
        self.trims = 0
        db = self.home / ".store" / "history.db"
        db.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(db, isolation_level=None, timeout=30)
        columns = {r[1] for r in self.conn.execute("PRAGMA table_info(messages)")}
        for statement in V10_TABLES:
            self.conn.execute(statement)
        if columns and "sender" not in columns:  # a pre-v0.32 file: 1.0's syncColumns
            self.conn.execute("ALTER TABLE messages ADD COLUMN sender TEXT NOT NULL "
                              "DEFAULT ''")
        self.migrate_personas()

    # -- the persona (session table), bot.json/config.json taken in at start, files removed
    def migrate_personas(self) -> None:
        sessions = self.home / "sessions"
        for folder in sorted(sessions.iterdir()) if sessions.is_dir() else ():
            bot, config = folder / "bot.json", folder / "config.json"
            if not bot.is_file() and not config.is_file():
                continue
            row: dict[str, str] = {}
            if bot.is_file():
                data = json.loads(bot.read_text())
                row.update(name=data.get("name", ""), model=data.get("model") or "auto",
                           rule=data.get("body", ""))
            if config.is_file():
                data = json.loads(config.read_text())
                row.update({k: data.get(k, "") for k in ("chat_id", "channel_id")})
            self.set_persona(folder.name, **row)
            bot.unlink(missing_ok=True)
            config.unlink(missing_ok=True)

    def set_persona(self, sid: str, *, name: str = "", self_id: str = "", model: str = "auto",
                    reasoning: str = "medium", rule: str = "", chat_id: str = "",
                    channel_id: str = "") -> None:
        self.conn.execute(
            "INSERT INTO session (session_id, self_id, name, model, reasoning, role, rule, "
            "chat_id, channel_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(session_id) "
            "DO UPDATE SET self_id = excluded.self_id, name = excluded.name, "
            "model = excluded.model, reasoning = excluded.reasoning, role = excluded.role, "
            "rule = excluded.rule, chat_id = excluded.chat_id, channel_id = excluded.channel_id",
            (sid, self_id.strip().lower(), name, model or "auto", reasoning or "medium", rule,
             rule, chat_id, channel_id))

    # -- a finished task
    def finish_task(self, sid: str, task_hash: str, objective: str, *, reply: str = "",
                    tool_results: str = "", model: str = "auto", end_at: int | None = None
                    ) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO action_history (session_id, task_hash, end_at, model, "
            "reasoning, objective, tool_results, reply) VALUES (?, ?, ?, ?, 'medium', ?, ?, ?)",
            (sid, task_hash, int(time.time()) if end_at is None else end_at, model,
             objective, tool_results, reply))

    # -- knowledge notes (the web UI's create / update / delete)
    def save_note(self, name: str, content: str) -> None:
        self.conn.execute("INSERT INTO knowledge (name, content, updated_at) VALUES (?, ?, ?) "
                          "ON CONFLICT(name) DO UPDATE SET content = excluded.content, "
                          "updated_at = excluded.updated_at", (name, content, int(time.time())))

    def delete_note(self, name: str) -> bool:
        return self.conn.execute("DELETE FROM knowledge WHERE name = ?", (name,)).rowcount > 0

    def notes(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT name, content FROM knowledge ORDER BY name"))

    def fts_match(self, text: str) -> list[int]:
        """1.0's own full-text lookup (trigram: substrings of 3+ characters)."""
        quoted = '"' + text.replace('"', '""') + '"'
        return [r[0] for r in self.conn.execute(
            "SELECT rowid FROM messages_fts5 WHERE messages_fts5 MATCH ? ORDER BY rowid",
            (quoted,))]


def upgrade_to_v10(home: Path) -> GoAgentV10:
    """What starting Agenvoy 1.0 on a v0.32 home does to it (the statements run once)."""
    return GoAgentV10(home)


def trim_tables(home: Path) -> set[str]:
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                           "AND name IN ('session_meta', 'message_meta')")}


def message_meta(home: Path) -> dict[str, Any]:
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        return {r[0]: r[1] for r in conn.execute("SELECT session_id, start_at FROM message_meta")}
