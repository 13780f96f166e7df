"""The fault injector itself (home/faults.py): how it is armed, what it counts, how each kind
of failure surfaces where it is injected. The sweep over every write path that uses it is
tests/test_fault_sweep.py."""

from __future__ import annotations

import errno
import sqlite3

import orjson
import pytest

from agenvoy_cli.home import faults
from tests.conftest import agenvoy
from tests.helpers.home import history, rows


def test_parse_reads_every_key_and_refuses_the_rest():
    plan = faults.parse("at=3, point=commit, fail=eio, once=1, log=/tmp/x")
    assert (plan.at, plan.point, plan.failure, plan.once, plan.log) == \
        (3, "commit", "eio", True, "/tmp/x")
    assert faults.parse("log=/tmp/y").at is None  # a dry counting run
    for bad in ("at=0", "point=network", "fail=slow", "colour=red", "at"):
        with pytest.raises(ValueError, match="AGENVOY_FAULTS"):
            faults.parse(bad)


def test_a_bad_value_is_refused_at_the_entry(home):
    res = agenvoy("append", "s", "--role", "user", "--content", "x",
                  env={"AGENVOY_FAULTS": "fail=slow"})
    assert res.returncode == 2 and res.stderr.decode().startswith("agenvoy: AGENVOY_FAULTS")
    assert not home.exists()


def test_unarmed_nothing_fails_and_nothing_is_counted(run, home):
    assert not faults.is_armed()
    assert run("append", "s", "--role", "user", "--content", "x").exit_code == 0


def test_counting_run_lists_the_points_in_order(run, home, tmp_path):
    run("append", "s", "--role", "user", "--content", "first")
    log = tmp_path / "points.log"
    with faults.armed(faults.parse(f"log={log}")) as plan:
        assert run("append", "s", "--role", "user", "--content", "second").exit_code == 0
    seen = [line.split(" ")[1] for line in log.read_text().splitlines()]
    assert plan.reached == len(seen) and not plan.fired
    # the hard link kept for a restore, the temp file written and synced, the rename, the
    # folder synced, the archive's commit
    assert seen[-4:] == ["fsync", "rename", "fsync", "commit"], seen
    assert "write" in seen[:3]


@pytest.mark.parametrize("point", ["write", "fsync", "rename", "commit"])
def test_a_full_disk_at_any_point_of_an_append_appends_nothing(run, home, point):
    run("append", "s", "--role", "user", "--content", "first")
    before = (history(home), rows(home))
    with faults.armed(faults.parse(f"point={point},at=1")) as plan:
        res = run("append", "s", "--role", "user", "--content", "second")
    assert plan.fired
    assert res.exit_code == 1 and f"no space left on {home}" in res.stderr, res.stderr
    assert (history(home), rows(home)) == before
    assert not [p for p in (home / "sessions/s").iterdir() if p.name.endswith(".tmp")]


def test_each_failure_surfaces_as_its_call_would_fail(tmp_path):
    with faults.armed(faults.parse("at=1,fail=enospc,point=write")), \
            pytest.raises(OSError) as raised:
        faults.hit("write", tmp_path / "f")
    assert raised.value.errno == errno.ENOSPC and raised.value.filename is None
    from agenvoy_cli.home.dbguard import _sqlite_failure

    with faults.armed(faults.parse("at=1,fail=eio")), \
            pytest.raises(sqlite3.OperationalError) as failed:
        faults.hit("commit", "COMMIT", _sqlite_failure)
    assert str(failed.value) == "disk I/O error" and failed.value.sqlite_errorcode == 10


def test_a_full_disk_stays_full_unless_once(tmp_path):
    with faults.armed(faults.parse("at=1,point=any")) as plan:
        with pytest.raises(OSError):
            faults.hit("write")
        with pytest.raises(OSError):
            faults.hit("commit")  # still full
        faults.hit("rename")  # a rename needs no space
        assert plan.reached == 2
    with faults.armed(faults.parse("at=1,once=1")):
        with pytest.raises(OSError):
            faults.hit("write")
        faults.hit("write")


def test_kill_ends_the_process_as_kill_9_does(home, tmp_path):
    log = tmp_path / "points.log"
    assert agenvoy("append", "s", "--role", "user", "--content", "first").returncode == 0
    res = agenvoy("append", "s", "--role", "user", "--content", "second",
                  env={"AGENVOY_FAULTS": f"at=1,point=commit,fail=kill,log={log}"})
    assert res.returncode == -9 and res.stdout == b"" and res.stderr == b""
    assert log.read_text().splitlines()[-1].startswith("fired ")
    orjson.loads((home / "sessions/s/history.json").read_bytes())  # parses
    assert agenvoy("doctor", "--repair").returncode == 0
    assert agenvoy("doctor").returncode == 0
