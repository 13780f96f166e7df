"""`doctor --repair` never destroys what it cannot prove damaged: a full or failing disk is
reported as such (exit 1, "no space left on <home>"), never taken for a damaged database or
vector index; nothing is moved aside because a write failed; what a repair leaves behind
(salvage copies, temp files) is removed by the next successful repair, and what it keeps
aside on purpose (a damaged file) is listed by `doctor` with how to remove it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from tests.helpers import fault_sweep as fs
from tests.helpers.disk import fill


@pytest.fixture(scope="module")
def seeded(module_env: Path) -> Path:
    """A healthy home with vectors, made once: each test takes a copy (_home)."""
    home = module_env / "seeded"
    fs.conversation(home, n=8)
    fs.ok(home, "backfill", "--all", "--vectors")
    return home


def _home(seeded: Path, at: Path) -> Path:
    return fs.copy_home(seeded, at / "home")


def _rows(home: Path) -> list[tuple]:
    with sqlite3.connect(home / ".store/history.db") as conn:
        rows = conn.execute("SELECT session_id, seq, content FROM messages ORDER BY 1, 2"
                            ).fetchall()
    conn.close()
    return rows






def test_repair_on_a_full_disk_reports_it_and_moves_nothing(seeded, small_disk):
    import shutil

    made = seeded
    for leave in (0, 32 << 10):
        home = small_disk / f"home-{leave}"
        shutil.copytree(made, home, symlinks=True)
        fs.ok(home, "append", "s", "--role", "user", "--content", "one more")  # a live WAL
        rows = _rows(home)
        filler = fill(small_disk, leave)
        res = fs.run(home, "doctor", "--repair")
        said = (res.stdout + res.stderr).decode()
        filler.unlink()
        assert "internal error" not in said
        if res.returncode != 0:
            assert res.returncode == 1 and f"no space left on {home}" in said, said
        assert "damaged" not in said and "salvage" not in said, said
        assert fs.leftovers(home) == [], said  # no .salvage, no chroma.damaged-*, no .tmp
        assert _rows(home) == rows  # the archive as it was
        assert fs.run(home, "doctor").returncode == 0
        shutil.rmtree(home)


def test_repair_failing_to_write_keeps_the_database_in_place(tmp_path, seeded):
    """An I/O error during the repair of a healthy home is reported and touches nothing."""
    home = _home(seeded, tmp_path)
    (home / "sessions/s/.history.json.1.dead.tmp").write_bytes(b"[]")  # something to repair
    rows = _rows(home)
    for failure in ("enospc", "eio"):
        for at in (1, 2, 3):
            res = fs.run(home, "doctor", "--repair",
                         env={"AGENVOY_FAULTS": f"at={at},fail={failure}"})
            said = (res.stdout + res.stderr).decode()
            assert "internal error" not in said and res.returncode in (0, 1), said
            assert "salvage" not in said and "damaged" not in said, said
            assert not [p for p in fs.leftovers(home) if not p.endswith("dead.tmp")], said
            assert _rows(home) == rows
    fs.ok(home, "doctor", "--repair")
    assert fs.leftovers(home) == [] and fs.run(home, "doctor").returncode == 0


def test_what_an_earlier_repair_left_is_removed_or_listed(tmp_path, seeded):
    home = _home(seeded, tmp_path)
    store = home / ".store"
    (store / "history.db.salvage").write_bytes(b"")  # a salvage that died
    (store / "history.db.salvage-wal").write_bytes(b"")
    (store / ".chroma.generation.4242.tmp").write_bytes(b"ab")  # a token write that died
    kept = store / "chroma.damaged-20250101-000000"  # a damaged index kept on purpose
    kept.mkdir()
    (kept / "chroma.sqlite3").write_bytes(b"not a database" * 100)
    check = fs.run(home, "doctor", "--json")
    doc = orjson.loads(check.stdout)
    found = " ".join(p["detail"] for p in doc["problems"])
    assert check.returncode == 1
    assert "history.db.salvage" in found and ".chroma.generation.4242.tmp" in found, found
    assert [k["path"] for k in doc["kept_aside"]] == [str(kept)]
    assert "rm -r" in doc["kept_aside"][0]["remove_with"]
    fs.ok(home, "doctor", "--repair")
    assert fs.leftovers(home) == ["/".join(kept.relative_to(home).parts)]
    again = fs.run(home, "doctor")
    assert again.returncode == 0  # listed, not a problem
    assert str(kept) in again.stdout.decode() and "rm -r" in again.stdout.decode()
