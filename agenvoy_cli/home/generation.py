"""Which Agenvoy wrote this home's history.db: the layout generation, read from the tables
the file holds (docs/upstream.md has the facts and their sources).

- "v0.28-v0.32": trim points in `session_meta`, upstream's `messages_fts5` on the default
  tokenizer, notes only in our `notes` table.
- "1.0": Agenvoy 1.0.0 (2026-09) ran on the file: trim points in `message_meta`, notes in
  `knowledge`, personas in `session`, finished tasks in `action_history`. A home that v0.32
  wrote and 1.0 upgraded keeps its old `messages_fts5` (1.0 creates it only when missing),
  so the tokenizer is read from the table, never assumed.

We follow what we find and never move a home from one generation to the next: whoever
upgrades Agenvoy upgrades the home. A connection opened on the home detects it once
(GuardedConnection keeps it with the schema's version: a change of the schema by another
process, an upgrade half way through a server's life, is seen at the next read).
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

from agenvoy_cli.home.dbguard import GuardedConnection

LEGACY = "v0.28-v0.32"
V1 = "1.0"


class Layout(NamedTuple):
    version: str  # LEGACY | V1
    trim_table: str  # session_meta | message_meta: where a session's trim point lives
    legacy_trim: bool  # a session_meta left by v0.32 beside 1.0's message_meta (read only)
    knowledge: bool  # notes live in upstream's `knowledge` table
    persona: bool  # upstream's `session` table (name, self_id, model, ...)
    tasks: bool  # upstream's `action_history` table (one row per finished task)
    fts5_tokenizer: str | None  # upstream's messages_fts5: "trigram", "unicode61" or None

    def as_dict(self) -> dict[str, object]:
        return {"version": self.version, "trim_table": self.trim_table,
                "knowledge_table": self.knowledge, "persona_table": self.persona,
                "tasks_table": self.tasks, "upstream_fts_tokenizer": self.fts5_tokenizer}


EMPTY = Layout(LEGACY, "session_meta", False, False, False, False, None)


def _tokenizer(sql: str | None) -> str | None:
    if not sql:
        return None
    text = sql.lower()
    return "trigram" if "trigram" in text else "unicode61"


def detect(conn: sqlite3.Connection) -> Layout:
    """The layout of the database `conn` is open on (one read of sqlite_master)."""
    found = dict(conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name IN "
        "('message_meta', 'session_meta', 'knowledge', 'session', 'action_history', "
        "'messages_fts5')").fetchall())
    v1 = "message_meta" in found
    return Layout(V1 if v1 else LEGACY, "message_meta" if v1 else "session_meta",
                  v1 and "session_meta" in found, "knowledge" in found, "session" in found,
                  "action_history" in found, _tokenizer(found.get("messages_fts5")))


def of(conn: sqlite3.Connection) -> Layout:
    """The layout, detected once per connection and schema version (PRAGMA schema_version
    reads the file's header: any CREATE, ALTER or DROP by anyone changes it)."""
    version = int(conn.execute("PRAGMA schema_version").fetchone()[0])
    if isinstance(conn, GuardedConnection):
        kept = conn.layout_seen
        if kept is not None and kept[0] == version and isinstance(kept[1], Layout):
            return kept[1]
        found = detect(conn)
        conn.layout_seen = (version, found)
        return found
    return detect(conn)


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def adapt(conn: sqlite3.Connection) -> bool:
    """A writer's connection to a 1.0 home: our extra column on upstream's trim table (the
    place, start_seq, beside upstream's start_at, as on v0.32's session_meta since
    migration 002). Extra columns are allowed in upstream's tables; nothing of upstream's
    is changed. True when it altered the table (once per home)."""
    if of(conn).version != V1 or "start_seq" in columns(conn, "message_meta"):
        return False
    conn.execute("ALTER TABLE message_meta ADD COLUMN start_seq INTEGER")
    return True
