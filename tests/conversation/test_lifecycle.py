"""Compaction, backfill, reset/remove and doctor (SPEC §2, invariants 1-3)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from tests.helpers.home import history, rows, snapshot


def fill(run, sid: str, pairs: int, size: int = 200, start_hour: int = 0) -> None:
    batch = []
    for i in range(pairs):
        stamp = f"2024-03-01 {start_hour + i // 3600:02d}:{(i // 60) % 60:02d}:{i % 60:02d}"
        head = f"---\n當前時間: {stamp}\n---\n"
        batch.append({"role": "user", "content": head + f"question {i} " + "q" * size})
        batch.append({"role": "assistant", "content": head + f"answer {i} " + "a" * size})
    res = run("append", sid, "--messages", "-", "--no-compact", input=orjson.dumps(batch))
    assert res.exit_code == 0, res.stderr


def meta(home: Path, sid: str = "s") -> tuple:
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        return conn.execute("SELECT start_at, start_seq FROM session_meta WHERE session_id=?",
                            (sid,)).fetchone()


def test_compact_trims_to_80_percent_after_assistant(run, home):
    fill(run, "s", 40)
    size = (home / "sessions/s/history.json").stat().st_size
    limit = size // 2
    res = run("compact", "s", "--max-bytes", str(limit), "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    kept = history(home)
    assert doc["removed"] + doc["kept"] == 80 and doc["kept"] == len(kept)
    assert doc["bytes_after"] == (home / "sessions/s/history.json").stat().st_size
    assert doc["bytes_after"] <= limit * 0.8
    assert kept[0]["role"] == "user" and doc["removed"] % 2 == 0
    assert len(rows(home)) == 80  # SQLite untouched
    start_at, start_seq = meta(home)
    assert start_seq == doc["removed"] and start_at == rows(home)[start_seq][1]
    assert doc["start_at_ns"] == start_at and doc["start_at"].startswith("20")


def test_compact_under_limit_and_uncuttable(run, home):
    fill(run, "s", 3)
    res = run("compact", "s", "--json")
    assert res.json()["removed"] == 0 and res.json()["note"] == "under the limit"
    batch = [{"role": "user", "content": "u" * 600} for _ in range(6)]
    run("append", "t", "--messages", "-", "--no-compact", input=orjson.dumps(batch))
    res = run("compact", "t", "--max-bytes", "1024", "--json")
    assert res.exit_code == 0 and res.json()["removed"] == 0
    assert "no place to cut" in res.json()["note"]
    assert len(history(home, "t")) == 6


def test_automatic_compaction_on_append(run, home, monkeypatch):
    monkeypatch.setenv("AGENVOY_MAX_HISTORY_BYTES", "4096")
    for i in range(30):
        run("append", "s", "--role", "user", "--content", f"u{i} " + "x" * 100)
        res = run("append", "s", "--role", "assistant", "--content", f"a{i} " + "y" * 100,
                  "--json")
        assert res.exit_code == 0
        assert (home / "sessions/s/history.json").stat().st_size <= 4096
    archived = rows(home)
    assert len(archived) == 60 and [r[0] for r in archived] == list(range(60))
    kept = history(home)
    _, start_seq = meta(home)
    assert [r[3] for r in archived[start_seq:]] == [m["content"] for m in kept]
    assert run("doctor").exit_code == 0


def test_backfill_is_idempotent(run, home):
    folder = home / "sessions" / "imported"
    folder.mkdir(parents=True)
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"}
            for i in range(50)]
    (folder / "history.json").write_bytes(orjson.dumps(msgs))
    first = run("backfill", "--all", "--json")
    assert first.exit_code == 0 and first.json()["inserted"] == 50
    before = snapshot(home)
    second = run("backfill", "imported", "--json")
    assert second.json()["inserted"] == 0
    assert snapshot(home) == before
    assert [r[3] for r in rows(home, "imported")] == [m["content"] for m in msgs]


def test_backfill_usage(run, home):
    assert run("backfill").exit_code == 2
    assert run("backfill", "x", "--all").exit_code == 2
    assert run("backfill", "nope").exit_code == 3


def test_reset_keeps_summary_remove_deletes_all(run, home):
    fill(run, "s", 3)
    fill(run, "other", 2)
    folder = home / "sessions/s"
    (folder / "summary.json").write_text('{"key_decisions": ["x"], "past_discussions": []}')
    (folder / "summary.meta.json").write_text('{"last_message_time": "2024-03-01 00:00:02"}')
    assert run("session", "reset", "s").exit_code == 2  # not a terminal, no --yes
    assert (folder / "history.json").exists()
    res = run("session", "reset", "s", "--yes", "--json")
    assert res.exit_code == 0 and res.json()["deleted"] >= 6
    assert not (folder / "history.json").exists()
    assert (folder / "summary.json").exists() and (folder / "summary.meta.json").exists()
    assert rows(home) == [] and meta(home) is None
    assert len(rows(home, "other")) == 4
    res = run("session", "remove", "s", "--yes")
    assert res.exit_code == 0 and not folder.exists()
    assert run("session", "show", "s").exit_code == 3
    assert run("session", "remove", "s", "--yes").exit_code == 3


def test_reset_reclaims_space(run, home):
    for i in range(5):
        fill(run, f"big{i}", 100, size=2000)
    db = home / ".store/history.db"
    for i in range(5):
        run("session", "remove", f"big{i}", "--yes")
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.close()
    assert free < pages * 0.2


def test_session_list_and_show(run, home):
    fill(run, "a", 2)
    fill(run, "b", 1)
    res = run("session", "list", "--json")
    got = {s["session_id"]: s for s in res.json()["sessions"]}
    assert set(got) == {"a", "b"} and got["a"]["message_count"] == 4
    assert got["a"]["last_message_at"] == "2024-03-01T00:00:01+08:00"
    assert got["a"]["has_summary"] is False
    show = run("session", "show", "a", "--json").json()
    assert show["row_count"] == 4 and show["trim_point"]["start_seq"] == 0
    text = run("session", "list").stdout
    assert "a" in text and "messages" in text


def test_doctor_finds_and_repairs(run, home):
    fill(run, "s", 5)
    path = home / "sessions/s/history.json"
    # 1: a message in history.json that SQLite lacks
    msgs = history(home) + [{"role": "user", "content": "unarchived"}]
    path.write_bytes(orjson.dumps(msgs))
    # 2: a temp file left by a crashed writer
    (home / "sessions/s/.history.json.123.abcd.tmp").write_text("[")
    # 3: a damaged summary
    (home / "sessions/s/summary.json").write_text("{not json")
    res = run("doctor", "--json")
    assert res.exit_code == 1
    checks = sorted(p["check"] for p in res.json()["problems"])
    assert checks == ["archive", "summary.json", "temp-file"]
    res = run("doctor", "--repair", "--json")
    assert res.exit_code == 0 and all(p["repaired"] for p in res.json()["problems"])
    assert run("doctor").exit_code == 0
    assert rows(home)[-1][3] == "unarchived"


def test_doctor_rebuilds_damaged_history_from_archive(run, home):
    fill(run, "s", 10)
    run("compact", "s", "--max-bytes", "4096")
    kept = history(home)
    (home / "sessions/s/history.json").write_bytes(b'[{"role": "us')
    assert run("doctor").exit_code == 1
    assert run("doctor", "s", "--repair").exit_code == 0
    assert history(home) == kept
    assert list((home / "sessions/s").glob("history.json.damaged-*"))


@pytest.mark.parametrize("sid", ["../x", ".x"])
def test_doctor_refuses_bad_ids(run, sid):
    assert run("doctor", sid).exit_code == 2


def test_bulk_backfill_keeps_both_fts_indexes_and_triggers(run, home):
    folder = home / "sessions" / "bulk"
    folder.mkdir(parents=True)
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"第{i}條 部署 item{i}"}
            for i in range(1200)]
    (folder / "history.json").write_bytes(orjson.dumps(msgs))
    assert run("backfill", "bulk", "--json").json()["inserted"] == 1200
    conn = sqlite3.connect(home / ".store/history.db")
    assert conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH '部署'"
                        ).fetchone()[0] == 1200
    assert conn.execute("SELECT rowid FROM messages_fts5 WHERE messages_fts5 MATCH 'item7'"
                        ).fetchall() == [(8,)]
    triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")}
    assert {"trigger_messages_after_insert", "messages_fts_ai"} <= triggers
    conn.close()
    run("append", "bulk", "--role", "user", "--content", "after the bulk 部署")
    conn = sqlite3.connect(home / ".store/history.db")
    assert conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH '部署'"
                        ).fetchone()[0] == 1201
    conn.close()
    assert run("doctor").exit_code == 0
