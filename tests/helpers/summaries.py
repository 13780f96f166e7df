"""Sessions for summarizer tests: messages one minute apart, a session's folder, its
summary.json, and the one session of a `summarize --json` answer."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import orjson

T0 = datetime(2024, 5, 1, 10, 0, 0)


def stamp(i: int) -> str:
    return (T0 + timedelta(minutes=i)).strftime("%Y-%m-%d %H:%M:%S")


def build(run, sid: str, count: int, first: int = 0, first_role: str = "user") -> None:
    """`count` alternating messages one minute apart: one `agenvoy append --time` each, or,
    for long sessions (an append costs two fsyncs), one batch whose messages carry their
    own upstream-style time header."""
    other = "assistant" if first_role == "user" else "user"
    roles = [first_role if (i - first) % 2 == 0 else other for i in range(first, first + count)]
    if count < 10:
        for i, role in zip(range(first, first + count), roles):
            res = run("append", sid, "--role", role, "--content", f"{sid} message {i}",
                      "--time", stamp(i))
            assert res.exit_code == 0, res.stderr
        return
    batch = [{"role": role, "content": f"---\n當前時間: {stamp(i)}\n---\n{sid} message {i}"}
             for i, role in zip(range(first, first + count), roles)]
    res = run("append", sid, "--messages", "-", input=orjson.dumps(batch))
    assert res.exit_code == 0, res.stderr


def session(home: Path, sid: str = "s") -> Path:
    return home / "sessions" / sid


def summary(home: Path, sid: str = "s") -> dict:
    return orjson.loads((session(home, sid) / "summary.json").read_bytes())


def one(res) -> dict:
    [doc] = res.json()["sessions"]
    return doc
