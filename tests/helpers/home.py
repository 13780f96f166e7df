"""A home's files read and written as other programs see them: a session's history.json,
the archive's rows, every file's hash (for "nothing changed")."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import orjson


def history(home: Path, sid: str = "s") -> list[dict]:
    return orjson.loads((home / "sessions" / sid / "history.json").read_bytes())


def write_history(home: Path, messages: list[dict[str, Any]], sid: str = "s") -> None:
    """As a person with an editor saves it (pretty-printed)."""
    path = home / "sessions" / sid / "history.json"
    path.write_bytes(orjson.dumps(messages, option=orjson.OPT_INDENT_2))


def rows(home: Path, sid: str = "s") -> list[tuple]:
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        return conn.execute("SELECT seq, send_at, role, content FROM messages WHERE session_id=?"
                            " ORDER BY seq", (sid,)).fetchall()


def snapshot(home: Path) -> dict[str, str]:
    """Every file of the home with a content hash: 'nothing changed' means this is equal."""
    out = {}
    for path in sorted(home.rglob("*")):
        if path.is_file() and not path.name.endswith(("-wal", "-shm")):
            out[str(path.relative_to(home))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def append(run, sid: str, *contents: str) -> None:
    """Messages alternating user/assistant appended through the CLI at a fixed time."""
    batch = [{"role": "user" if i % 2 == 0 else "assistant", "content": c}
             for i, c in enumerate(contents)]
    res = run("append", sid, "--messages", "-", "--time", "2024-05-01 10:00:00",
              input=orjson.dumps(batch))
    assert res.exit_code == 0, res.stderr
