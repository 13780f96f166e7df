"""doctor checks that each message vector describes the message it points to: the content
hash in its metadata against the archive row at its place; a vector of another message (or
of none) is reported, and `doctor --repair` embeds those messages again."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

from tests.helpers import fault_sweep as fs


def _hashes(home: Path) -> dict[int, str]:
    with sqlite3.connect(home / ".store/history.db") as conn:
        rows = dict(conn.execute("SELECT seq, hash FROM messages WHERE session_id = 's'"))
    conn.close()
    return rows


def _vector_hashes(home: Path) -> dict[int, str]:
    vectors = fs.state(home)["vectors"]
    (entries,) = [v for k, v in vectors.items() if k.startswith("agenvoy_messages")]
    return {int(e.split("=")[0].split(":")[1]): e.split("=")[1] for e in entries}


def _shift_vector_hashes(home: Path) -> int:
    """Every vector but the first two carries the hash of the message two places later (what
    a renumbering that forgot the index leaves), rewritten in Chroma's own metadata table."""
    hashes = _hashes(home)
    db = home / ".store/chroma/chroma.sqlite3"
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT e.id, e.embedding_id FROM embeddings e").fetchall()
        changed = 0
        for rowid, vid in rows:
            seq = int(vid.split(":")[1])
            if seq >= 2 and seq + 2 in hashes:
                conn.execute("UPDATE embedding_metadata SET string_value = ? WHERE id = ? AND "
                             "key = 'hash'", (hashes[seq + 2], rowid))
                changed += 1
    conn.close()
    return changed


def test_vectors_of_other_messages_are_found_and_embedded_again(tmp_path):
    home = tmp_path / "home"
    fs.conversation(home, n=12)
    fs.ok(home, "backfill", "--all", "--vectors")
    assert _vector_hashes(home) == _hashes(home)
    changed = _shift_vector_hashes(home)
    assert changed >= 6
    check = fs.run(home, "doctor", "--json")
    doc = orjson.loads(check.stdout)
    assert check.returncode == 1, doc
    detail = " ".join(p["detail"] for p in doc["problems"] if p["check"] == "vectors")
    assert f"{changed} vector(s) describe another message" in detail, detail
    fs.ok(home, "doctor", "--repair")
    assert _vector_hashes(home) == _hashes(home)
    assert fs.run(home, "doctor").returncode == 0
