"""Conversations for search tests: append turns through the CLI, search them, read the
results, compact a session, and the message vectors a session has."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson


def add(run, sid: str, *contents: str, time: str = "2024-03-01 10:00:00", compact=False):
    """Append user/assistant turns (alternating) with one header time."""
    batch = [{"role": "user" if i % 2 == 0 else "assistant", "content": c}
             for i, c in enumerate(contents)]
    args = ["append", sid, "--messages", "-", "--time", time]
    if not compact:
        args.append("--no-compact")
    res = run(*args, input=orjson.dumps(batch))
    assert res.exit_code == 0, res.stderr


def find(run, sid: str, *query: str, mode="keyword", limit="100", extra=()):
    res = run("search", sid, *query, "--mode", mode, "--limit", limit, "--json", *extra)
    assert res.exit_code == 0, res.stderr
    return res.json()


def contents(doc: dict, source: str | None = None) -> list[str]:
    return [r["content"] for r in doc["results"] if source in (None, r["source"])]


def meta(home: Path, sid: str = "s") -> int:
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        table = "message_meta" if "message_meta" in tables else "session_meta"  # 1.0 / v0.32
        return conn.execute(f"SELECT start_seq FROM {table} WHERE session_id=?",
                            (sid,)).fetchone()[0]


def compacted(run, home, sid="s", pairs=20, word="filler") -> int:
    """A session whose oldest messages are only in the archive; returns start_seq."""
    msgs = []
    for i in range(pairs):
        msgs += [f"question {i} {word} " + "q" * 80, f"answer {i} {word} " + "a" * 80]
    add(run, sid, *msgs)
    res = run("compact", sid, "--max-bytes", "2048", "--json")
    assert res.exit_code == 0 and res.json()["removed"] > 0
    return meta(home, sid)


def vector_ids(home: Path, sid: str = "s") -> dict[str, dict]:
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors.hooks import open_store

    store = open_store(Layout(home))
    with store.write_lock():
        return vectors.open_index(store, vectors.MESSAGES, create=False).get(
            {"session_id": sid})


def turns(*contents: str) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": c}
            for i, c in enumerate(contents)]


def search(run, sid: str, query: str, *extra: str) -> dict:
    res = run("search", sid, *extra, "--json", "--", query)
    assert res.exit_code == 0, res.stderr
    return res.json()


def ranked(doc: dict) -> list[int]:
    """The hits' seqs, best first (each hit carries its rank)."""
    hits = [r for r in doc["results"] if r["hit"]]
    assert all("rank" in r for r in hits), hits
    return [r["seq"] for r in sorted(hits, key=lambda r: r["rank"])]
