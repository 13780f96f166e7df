"""A stand-in for Agenvoy v0.32.7 writing a shared home, byte for byte as its code does.

Read from agenvoy/Agenvoy v0.32.7:
- internal/session/history/record.go  Record{role, content any, sendAt int64 omitempty,
  sender omitempty}: every other field of an entry is dropped; normalize() gives a string
  content its sendAt from 當前時間 (local time), its sender from 傳送者, and strips the legacy
  block / lines and a leading `sendAt|sender|channelId:` line; Prefix()/WithPrefix() build
  what the model sees; rows(): ExtractContent, blank skipped.
- internal/session/history/history.go  Append: read, normalize the whole file, append the
  delta, json.Marshal, write; SQLite: the whole file on a session's first write, else the
  delta.
- internal/runtime/history/migrate.sql, store.go  the schema script (messages with sender,
  file_history) and syncColumns (ALTER TABLE messages ADD COLUMN sender when missing).
- internal/runtime/history/message.go  Write: send_at = sendAt, 0 -> previous + 1.
- internal/session/history/compact.go  after an append whose file is over
  limits.max_history_bytes (config.json; 5 MiB by default, filesystem/runtime.go): drop the
  oldest entries down to 80 %, cut after an assistant, session_meta.start_at := the first
  kept entry's sendAt.
- internal/agents/exec/saveHistory.go  a turn's save: system, tool and assistant-with-
  tool_calls messages are not saved; every record gets the same sendAt (one time.Now per
  save; a user message its UserSendAt when set) and a user message the session's sender.
- internal/session/reset.go  Reset: history.json, history/, pending/, action.log, the
  session's rows and session_meta row; ResetAll also summary.json and summary.meta.json.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.agenvoy_sim import extract_content

MIGRATE_SQL = """
CREATE TABLE IF NOT EXISTS messages (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id   TEXT    NOT NULL,
    send_at      INTEGER NOT NULL DEFAULT 0,
    role         TEXT    NOT NULL,
    content      TEXT    NOT NULL,
    sender       TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS idx_messages_session_send_at
    ON messages(session_id, send_at);
CREATE TABLE IF NOT EXISTS session_meta (
    session_id TEXT PRIMARY KEY,
    start_at   INTEGER NOT NULL DEFAULT 0
);
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts5 USING fts5(
    role, content,
    content=messages, content_rowid=id
);
CREATE TRIGGER IF NOT EXISTS trigger_messages_after_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts5(rowid, role, content)
    VALUES (new.id, new.role, new.content);
END;
CREATE TRIGGER IF NOT EXISTS trigger_messages_after_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts5(messages_fts5, rowid, role, content)
    VALUES ('delete', old.id, old.role, old.content);
END;
CREATE TABLE IF NOT EXISTS file_history (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    dir        TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    action     TEXT    NOT NULL,
    content    BLOB,
    hash       TEXT    NOT NULL DEFAULT '',
    size       INTEGER NOT NULL DEFAULT 0,
    truncated  INTEGER NOT NULL DEFAULT 0,
    trash_path TEXT,
    session_id TEXT    NOT NULL DEFAULT '',
    task_id    TEXT    NOT NULL DEFAULT '',
    tool       TEXT    NOT NULL DEFAULT '',
    changed_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS idx_fh_unique
    ON file_history(dir, name, changed_at, task_id, session_id);
CREATE INDEX IF NOT EXISTS idx_fh_path    ON file_history(dir, name, changed_at DESC);
CREATE INDEX IF NOT EXISTS idx_fh_dir     ON file_history(dir, changed_at DESC);
CREATE INDEX IF NOT EXISTS idx_fh_time    ON file_history(changed_at DESC);
CREATE INDEX IF NOT EXISTS idx_fh_session ON file_history(session_id, changed_at DESC);
"""

TIME_LAYOUT = "%Y-%m-%d %H:%M:%S"
MAX_HISTORY_BYTES = 5 * 1024 * 1024  # filesystem/runtime.go
_S = r"[\t\n\f\r ]"  # RE2's \s
_LEGACY = r"(?:當前時間|工作目錄|傳送者|當前 chat ID|當前 channel)"
PREFIX = re.compile(r"\A" + _S + r"*(?:sendAt|sender|channelId)" + _S + r"*:[^\n]*\n")
LEGACY_BLOCK = re.compile(r"\A" + _S + r"*-{3,}\n?(?:" + _LEGACY + r"[^\n]*\n?)+-{3,}\n?")
LEGACY_LINE = re.compile(r"\A" + _S + r"*" + _LEGACY + _S + r"*[:：][^\n]*\n?")
LEGACY_TIME = re.compile(r"當前時間:" + _S + r"*(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")
LEGACY_SENDER = re.compile(r"傳送者:" + _S + r"*([^\n]*)")


def strip_prefix(content: str) -> str:
    content = LEGACY_BLOCK.sub("", content, count=1)
    while True:
        trimmed = LEGACY_LINE.sub("", content, count=1)
        if trimmed == content:
            break
        content = trimmed
    return PREFIX.sub("", content, count=1)


def _go_value(value: Any) -> Any:
    """An `any` after json.Unmarshal + json.Marshal: maps get sorted keys."""
    if isinstance(value, dict):
        return {k: _go_value(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_go_value(v) for v in value]
    return value


def record(entry: dict[str, Any]) -> dict[str, Any]:
    """Record after a JSON round trip: role, content (null kept), sendAt, sender."""
    out: dict[str, Any] = {"role": entry.get("role") or "",
                           "content": _go_value(entry.get("content"))}
    send_at = entry.get("sendAt") or 0
    if not isinstance(send_at, int) or isinstance(send_at, bool):
        raise ValueError("sendAt: cannot unmarshal into int64")
    if send_at:
        out["sendAt"] = send_at
    if entry.get("sender"):
        out["sender"] = entry["sender"]
    return out


def go_marshal(records: list[dict[str, Any]]) -> bytes:
    """encoding/json.Marshal: compact, HTML-escaped, U+2028/2029 escaped, UTF-8."""
    text = json.dumps(records, ensure_ascii=False, separators=(",", ":"))
    for char, escape in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text.encode("utf-8")


def normalize(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for r in records:
        content = r.get("content")
        if not isinstance(content, str):
            continue
        if not r.get("sendAt"):
            match = LEGACY_TIME.search(content)
            if match:
                moment = datetime.strptime(match.group(1), TIME_LAYOUT)
                r["sendAt"] = int(time.mktime(moment.timetuple())) * 1_000_000_000
        if not r.get("sender"):
            match = LEGACY_SENDER.search(content)
            if match and match.group(1).strip(" \t\r\n\f\v"):
                r["sender"] = match.group(1).strip(" \t\r\n\f\v")
        r["content"] = strip_prefix(content)
    # keep Record's field order after the changes above
    return [{k: r[k] for k in ("role", "content", "sendAt", "sender") if k in r}
            for r in records]


def prefix(r: dict[str, Any]) -> str:
    parts = []
    if r.get("sendAt", 0) > 0:
        parts.append("sendAt: " + time.strftime(TIME_LAYOUT,
                                                 time.localtime(r["sendAt"] // 1_000_000_000)))
    if r.get("sender"):
        parts.append("sender: " + r["sender"])
    return ", ".join(parts)


def model_message(r: dict[str, Any]) -> dict[str, Any]:
    """Record.Message(): what the model is sent for an entry."""
    head, content = prefix(r), r.get("content")
    if head:
        if isinstance(content, str):
            content = head + "\n" + content
        elif content is None:
            content = head
        elif isinstance(content, list):
            at = next((i for i, p in enumerate(content) if p.get("type") == "text"), None)
            if at is None:
                content = [{"type": "text", "text": head}, *content]
            else:
                content = [dict(p) for p in content]
                content[at]["text"] = head + "\n" + content[at].get("text", "")
    return {"role": r["role"], "content": content}


class GoAgentV032:
    """One Agenvoy v0.32.7 process on a home (its sqlite connection, its history files)."""

    meta_table = "session_meta"  # where compact() records the trim point (1.0: message_meta)

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.trims = 0  # history.json trims compact() made
        db = self.home / ".store" / "history.db"
        db.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(db, isolation_level=None, timeout=30)
        self.conn.executescript(MIGRATE_SQL)
        columns = {r[1] for r in self.conn.execute("PRAGMA table_info(messages)")}
        if "sender" not in columns:
            self.conn.execute("ALTER TABLE messages ADD COLUMN sender TEXT NOT NULL DEFAULT ''")

    def close(self) -> None:
        self.conn.close()

    def history_path(self, sid: str) -> Path:
        return self.home / "sessions" / sid / "history.json"

    def read(self, sid: str) -> list[dict[str, Any]]:
        try:
            data = json.loads(self.history_path(sid).read_bytes())
            return [record(m) for m in data] if isinstance(data, list) else []
        except (OSError, ValueError):
            return []  # ReadJSON error: latest = nil

    def _is_exist(self, sid: str) -> bool:
        return bool(self.conn.execute(
            "SELECT EXISTS(SELECT 1 FROM messages WHERE session_id = ?)", (sid,)).fetchone()[0])

    def store_write(self, sid: str, records: list[dict[str, Any]]) -> None:
        """rows() + historyStore.Write."""
        self.conn.execute("BEGIN")
        last = 0
        for r in records:
            content = extract_content(r.get("content"))
            if content.strip() == "":
                continue
            ts = r.get("sendAt", 0)
            if ts == 0 and last > 0:
                ts = last + 1
            if ts > last:
                last = ts
            self.conn.execute("INSERT INTO messages (session_id, send_at, role, content, sender)"
                              " VALUES (?, ?, ?, ?, ?)",
                              (sid, ts, r.get("role") or "", content, r.get("sender") or ""))
        self.conn.execute("COMMIT")

    def append(self, sid: str, delta: list[dict[str, Any]]) -> None:
        """history.Append (delta: Records, e.g. {"role","content","sendAt","sender"})."""
        if not delta:
            return
        delta = [record(d) for d in delta]
        latest = normalize(self.read(sid)) + delta
        path = self.history_path(sid)
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = go_marshal(latest)
        path.write_bytes(raw)
        if not self._is_exist(sid) and len(latest) > len(delta):
            self.store_write(sid, latest)
        else:
            self.store_write(sid, delta)
        if len(raw) > self.max_history_bytes():
            self.compact(sid, latest, len(raw))

    def max_history_bytes(self) -> int:
        """LoadRuntime: config.json limits.max_history_bytes, <= 0 or absent: 5 MiB."""
        try:
            limits = json.loads((self.home / "config.json").read_bytes()).get("limits") or {}
        except (OSError, ValueError):
            limits = {}
        value = limits.get("max_history_bytes") or 0
        return value if isinstance(value, int) and value > 0 else MAX_HISTORY_BYTES

    def compact(self, sid: str, records: list[dict[str, Any]], current: int) -> None:
        """compact.go: trim the front of history.json to 80 % of the limit."""
        if len(records) < 4:
            return
        need = current - int(self.max_history_bytes() * 0.8)
        if need <= 0:
            return
        size = idx = 0
        for i, r in enumerate(records):
            size += len(go_marshal([r])) - 2 + 1  # json.Marshal(message) + 1
            if size >= need:
                idx = i + 1
                break
        while idx < len(records) and records[idx - 1]["role"] != "assistant":
            idx += 1
        if idx <= 0 or idx >= len(records):
            return
        remaining = records[idx:]
        start_at = next((r["sendAt"] for r in remaining if r.get("sendAt", 0) > 0), 0)
        if start_at > 0:
            self.conn.execute(f"INSERT INTO {self.meta_table} (session_id, start_at) VALUES (?, ?) "
                              "ON CONFLICT(session_id) DO UPDATE SET start_at = "
                              "excluded.start_at", (sid, start_at))
        self.history_path(sid).write_bytes(go_marshal(remaining))
        self.trims += 1

    def save_turn(self, sid: str, messages: list[dict[str, Any]], sender: str = "",
                  user_send_at: int = 0) -> None:
        """saveNewHistory: the turn's provider messages, as Agenvoy v0.32 saves them."""
        now = time.time_ns()
        delta = []
        for m in messages:
            role = m.get("role")
            if role in ("system", "tool") or (role == "assistant" and m.get("tool_calls")):
                continue
            content = m.get("content")
            r: dict[str, Any] = {"role": role, "content": strip_prefix(content)
                                 if isinstance(content, str) else content, "sendAt": now}
            if role == "user":
                if sender:
                    r["sender"] = sender
                if user_send_at > 0:
                    r["sendAt"] = user_send_at
            delta.append(r)
        self.append(sid, delta)

    def reset(self, sid: str) -> None:
        """session.Reset: history.json, history/, pending/, action.log, rows, start_at."""
        import shutil

        folder = self.home / "sessions" / sid
        (folder / "history.json").unlink(missing_ok=True)
        for name in ("history", "pending"):
            shutil.rmtree(folder / name, ignore_errors=True)
        (folder / "action.log").unlink(missing_ok=True)
        self.conn.execute("DELETE FROM messages WHERE session_id = ?", (sid,))
        self.conn.execute(f"DELETE FROM {self.meta_table} WHERE session_id = ?", (sid,))

    def say(self, sid: str, role: str, text: str, sender: str = "") -> None:
        entry: dict[str, Any] = {"role": role, "content": text, "sendAt": time.time_ns()}
        if sender:
            entry["sender"] = sender
        self.append(sid, [entry])

    def reset_all(self, sid: str) -> None:
        """session.ResetAll: Reset, then summary.json and summary.meta.json."""
        self.reset(sid)
        folder = self.home / "sessions" / sid
        for name in ("summary.json", "summary.meta.json"):
            (folder / name).unlink(missing_ok=True)

    def model_view(self, sid: str) -> list[dict[str, Any]]:
        return [model_message(r) for r in normalize(self.read(sid))]
