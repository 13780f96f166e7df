"""A stand-in for the Go agent Agenvoy writing a shared home, byte for byte as its code does.

Read from pardnchiu/Agenvoy (v0.28.1):
- internal/session/history/history.go  Append: read history.json into []Message (unknown
  fields dropped), append the delta, json.Marshal the whole array, write it (no newline);
  SQLite: the whole history on a session's first write, else the delta.
- internal/session/history/compact.go  compact: over max_history_bytes, cut from the front
  to 80 % (only after an assistant message), session_meta.start_at = first kept header time.
- internal/session/history/replace.go  Replace (/compact): write the given messages.
- internal/session/history/store/write.go  Write: content = ExtractContent (string, or the
  non-empty "text" parts joined by "\\n"), blank content skipped, send_at = the header time
  (regex anywhere in the text) else the previous + 1 (0 for the first of a batch).
- internal/agents/types/message.go  the Message struct and its field order.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from datetime import datetime
from pathlib import Path
from typing import Any

MIGRATE_SQL = """
CREATE TABLE IF NOT EXISTS messages (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id   TEXT    NOT NULL,
    send_at      INTEGER NOT NULL DEFAULT 0,
    role         TEXT    NOT NULL,
    content      TEXT    NOT NULL
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
"""

_TS = re.compile(r"當前時間:\s*(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")
MAX_HISTORY_BYTES = 5 * 1024 * 1024


def extract_content(content: Any) -> str:
    """store.ExtractContent."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [item["text"] for item in content
                 if isinstance(item, dict) and item.get("type") == "text"
                 and isinstance(item.get("text"), str) and item["text"] != ""]
        return "\n".join(parts)
    if content is None:
        return ""
    return str(content)  # fmt.Sprint; never reached with JSON input of chat messages


def extract_timestamp(content: str) -> int:
    match = _TS.search(content)
    if not match:
        return 0
    moment = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")
    return int(time.mktime(moment.timetuple())) * 1_000_000_000


# --------------------------------------------------------------------------- JSON as Go


def _go_value(value: Any) -> Any:
    """An `any` after json.Unmarshal + json.Marshal: maps get sorted keys."""
    if isinstance(value, dict):
        return {k: _go_value(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_go_value(v) for v in value]
    return value


def _go_tool_call(call: dict[str, Any]) -> dict[str, Any]:
    fn = call.get("function") or {}
    out: dict[str, Any] = {"id": call.get("id") or "", "type": call.get("type") or "",
                           "function": {"name": fn.get("name") or "",
                                        "arguments": fn.get("arguments") or ""}}
    if call.get("thought_signature"):
        out["thought_signature"] = call["thought_signature"]
    return out


def go_message(msg: dict[str, Any]) -> dict[str, Any]:
    """agentTypes.Message after a JSON round trip: its fields in struct order, omitempty,
    every other field dropped."""
    out: dict[str, Any] = {"role": msg.get("role") or ""}
    if msg.get("content") is not None:
        out["content"] = _go_value(msg["content"])
    if msg.get("reasoning_content"):
        out["reasoning_content"] = msg["reasoning_content"]
    if msg.get("tool_calls"):
        out["tool_calls"] = [_go_tool_call(c) for c in msg["tool_calls"]]
    if msg.get("tool_call_id"):
        out["tool_call_id"] = msg["tool_call_id"]
    return out


def go_marshal(messages: list[dict[str, Any]]) -> bytes:
    """encoding/json.Marshal: compact, HTML-escaped, U+2028/2029 escaped, UTF-8."""
    text = json.dumps([go_message(m) for m in messages], ensure_ascii=False,
                      separators=(",", ":"))
    for char, escape in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text.encode("utf-8")


# --------------------------------------------------------------------------- the Go agent


class GoAgent:
    """One Agenvoy process on a home (its sqlite connection, its history files)."""

    def __init__(self, home: Path, max_history_bytes: int = MAX_HISTORY_BYTES) -> None:
        self.home = Path(home)
        self.max_history_bytes = max_history_bytes
        db = self.home / ".store" / "history.db"
        db.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(db, isolation_level=None, timeout=30)
        self.conn.executescript(MIGRATE_SQL)

    def close(self) -> None:
        self.conn.close()

    def history_path(self, sid: str) -> Path:
        return self.home / "sessions" / sid / "history.json"

    def read(self, sid: str) -> list[dict[str, Any]]:
        try:
            data = json.loads(self.history_path(sid).read_bytes())
        except (OSError, ValueError):
            return []  # ReadJSON error: latest = nil
        return [go_message(m) for m in data] if isinstance(data, list) else []

    def _write_file(self, sid: str, raw: bytes) -> None:
        path = self.history_path(sid)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)

    def _is_exist(self, sid: str) -> bool:
        return bool(self.conn.execute(
            "SELECT EXISTS(SELECT 1 FROM messages WHERE session_id = ?)", (sid,)).fetchone()[0])

    def store_write(self, sid: str, messages: list[dict[str, Any]]) -> None:
        """store.Write."""
        self.conn.execute("BEGIN")
        last = 0
        for msg in messages:
            content = extract_content(msg.get("content"))
            if content.strip() == "":
                continue
            ts = extract_timestamp(content)
            if ts == 0 and last > 0:
                ts = last + 1
            if ts > last:
                last = ts
            self.conn.execute(
                "INSERT INTO messages (session_id, send_at, role, content) VALUES (?, ?, ?, ?)",
                (sid, ts, msg.get("role") or "", content))
        self.conn.execute("COMMIT")

    def append(self, sid: str, delta: list[dict[str, Any]]) -> None:
        """history.Append."""
        if not delta:
            return
        latest = self.read(sid) + [go_message(m) for m in delta]
        raw = go_marshal(latest)
        self._write_file(sid, raw)
        if not self._is_exist(sid) and len(latest) > len(delta):
            self.store_write(sid, latest)
        else:
            self.store_write(sid, delta)
        if self.max_history_bytes > 0 and len(raw) > self.max_history_bytes:
            self._compact(sid, latest, len(raw))

    def _compact(self, sid: str, messages: list[dict[str, Any]], current: int) -> None:
        """history.compact (size trim from the front)."""
        if len(messages) < 4:
            return
        need = current - int(self.max_history_bytes * 0.8)
        if need <= 0:
            return
        size, idx = 0, 0
        for i, msg in enumerate(messages):
            size += len(go_marshal([msg])) - 2 + 1
            if size >= need:
                idx = i + 1
                break
        while idx < len(messages) and messages[idx - 1].get("role") != "assistant":
            idx += 1
        if idx <= 0 or idx >= len(messages):
            return
        remaining = messages[idx:]
        start_at = next((t for t in (extract_timestamp(extract_content(m.get("content")))
                                     for m in remaining) if t > 0), 0)
        if start_at > 0:
            self.conn.execute(
                "INSERT INTO session_meta (session_id, start_at) VALUES (?, ?) "
                "ON CONFLICT(session_id) DO UPDATE SET start_at = excluded.start_at",
                (sid, start_at))
        self._write_file(sid, go_marshal(remaining))

    def replace(self, sid: str, messages: list[dict[str, Any]]) -> None:
        """history.Replace, as /compact calls it with the exchanges it keeps."""
        self._write_file(sid, go_marshal(messages))

    def compact_exchanges(self, sid: str, remove: set[int]) -> None:
        """exec.CompactHistory with the LLM's answer given: drop the listed exchanges (an
        exchange = a user message and everything up to the next user message)."""
        old = self.read(sid)
        starts = [i for i, m in enumerate(old) if m.get("role") == "user"]
        bounds = list(zip(starts, starts[1:] + [len(old)]))
        kept = [m for j, (a, b) in enumerate(bounds) if j not in remove for m in old[a:b]]
        self.replace(sid, kept)


def header(moment: str) -> str:
    """The header Agenvoy puts on a user message."""
    return f"---\n當前時間: {moment}\n---\n"
