"""`forget` is all or nothing: a message is gone from history.json, the archive (both FTS
indexes) and the vector index (its vector and the vectors kept in its entry), or from none
of them, and the output says which. A forget killed half-way is completed by the next
`doctor --repair` (doctor reports it meanwhile). Failures come from the fault injector
(home/faults.py) and from a real, small tmpfs."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest

from tests.helpers import fault_sweep as fs
from tests.helpers.disk import fill

SECRET = "sk-live-leaked0042"


@pytest.fixture(scope="module")
def seeded(module_env: Path) -> tuple[Path, list[str]]:
    """The home every test starts from (a copy of it: it is made once) and the injection
    points of `forget s 2` on it (a dry counting run on another copy)."""
    home = module_env / "seeded"
    fs.ok(home, "append", "s", "--messages", "-", "--time", fs.TIME, stdin=fs.messages(
        "the database migration runs on Saturday", "noted, Saturday it is",
        f"my deploy key is {SECRET} oops", "please rotate that key",
        "the cat hides under the bed", "poor cat"))
    fs.ok(home, "backfill", "--all", "--vectors")
    copy = fs.copy_home(home, module_env / "count")
    log = module_env / "count.log"
    fs.ok(copy, "forget", "s", "2", "-y", env={"AGENVOY_FAULTS": f"log={log}"})
    return home, fs.points(log)


def _home(seeded: tuple[Path, list[str]], tmp_path: Path) -> Path:
    return fs.copy_home(seeded[0], tmp_path / "home")


def layers(home: Path) -> dict[str, bool]:
    """Where the secret still is."""
    history = (home / "sessions/s/history.json").read_text()
    db = home / ".store/history.db"
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT count(*) FROM messages WHERE content LIKE ?",
                            (f"%{SECRET}%",)).fetchone()[0]
        fts = sum(conn.execute(f"SELECT count(*) FROM {t} WHERE {t} MATCH ?",
                               (f'"{SECRET}"',)).fetchone()[0]
                  for t in ("messages_fts", "messages_fts5"))
        hashes = {h for (h,) in conn.execute("SELECT hash FROM messages WHERE session_id = 's'")}
    conn.close()
    vectors = fs.state(home)["vectors"].get(next(iter(fs.state(home)["vectors"]), ""), [])
    ahead = [v for v in vectors if v.split("=", 1)[1] not in hashes]
    assert not ahead, f"vectors of messages the archive does not have: {ahead}"
    return {"history.json": SECRET in history, "archive": rows > 0, "fts": fts > 0,
            "vector": any(v.startswith("s:2=") for v in vectors)}


def _point_after_history(seen: list[str], point: str) -> int:
    """The call number of the first `point` after history.json is replaced."""
    start = next(i for i, p in enumerate(seen) if p.startswith("rename ")
                 and p.endswith("/history.json"))
    return next(i for i, p in enumerate(seen) if i > start and p.startswith(point)) + 1


def test_a_failed_archive_commit_forgets_nothing(tmp_path, seeded):
    home = _home(seeded, tmp_path)
    at = _point_after_history(seeded[1], "commit")
    res = fs.run(home, "forget", "s", "2", "-y", env={"AGENVOY_FAULTS": f"at={at}"})
    said = res.stderr.decode()
    assert res.returncode == 1, said
    where = layers(home)
    assert where == {**where, "history.json": True, "archive": True, "fts": True}, where
    assert f"no space left on {home}" in said and "nothing was forgotten" in said, said
    assert fs.run(home, "doctor").returncode == 0  # nothing half-done to find
    fs.ok(home, "forget", "s", "2", "-y")  # space again: the same command does it all
    assert not any(layers(home).values())


@pytest.mark.parametrize("point", ["commit", "chroma"])
def test_a_killed_forget_is_reported_and_completed_by_repair(tmp_path, seeded, point):
    home = _home(seeded, tmp_path)
    seen = seeded[1]
    at = max(i for i, p in enumerate(seen) if p.startswith(point)) + 1  # the last one
    res = fs.run(home, "forget", "s", "2", "-y",
                 env={"AGENVOY_FAULTS": f"at={at},fail=kill"})
    assert res.returncode == -9
    if not any(layers(home).values()):
        return  # killed after everything was done
    check = fs.run(home, "doctor")
    assert check.returncode == 1 and b"forget" in check.stdout, check.stdout
    fs.ok(home, "doctor", "--repair")
    assert not any(layers(home).values()), layers(home)
    assert fs.run(home, "doctor").returncode == 0
    assert fs.leftovers(home) == []


def test_forget_on_a_full_disk_is_all_or_nothing(seeded, small_disk):
    """The issue's reproduction: 32-64 KiB free on the home's file system."""
    made = seeded[0]
    seen: set[str] = set()
    for leave in (0, 32 << 10, 64 << 10):
        home = small_disk / f"home-{leave}"
        shutil.copytree(made, home, symlinks=True)
        filler = fill(small_disk, leave)
        res = fs.run(home, "forget", "s", "2", "-y")
        said = res.stderr.decode()
        filler.unlink()  # (SQLite cannot even read a WAL database on a full tmpfs)
        where = layers(home)
        assert "internal error" not in said and res.returncode in (0, 1), said
        if res.returncode == 0:
            assert not any(where.values()), (leave, where)
            seen.add("all")
        else:
            assert f"no space left on {home}" in said, said
            if "nothing was forgotten" in said:
                assert where["history.json"] and where["archive"] and where["fts"], where
                seen.add("none")
            else:  # recorded: the repair completes it
                assert "doctor --repair" in said, said
                seen.add("pending")
        fs.ok(home, "doctor", "--repair")
        assert fs.run(home, "doctor").returncode == 0
        assert fs.leftovers(home) == []
        if any(layers(home).values()):
            fs.ok(home, "forget", "s", "2", "-y")
        assert not any(layers(home).values())
        shutil.rmtree(home)
    assert "none" in seen, seen  # the full disk did stop some of them
    assert orjson.loads((made / "sessions/s/history.json").read_bytes())  # untouched
