"""The viewer's one write path of its own, `--write`'s new fix for an error record
(web/writes.replace_fix: record the record again with the new fix, then forget the old
one), failed at each of its injection points (home/faults.py: a full disk, an I/O error):
the record is never lost (the old one or the new one is there, whole), and the failure is
one of the documented errors the page shows as its one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agenvoy_cli.api import Memory
from agenvoy_cli.errors import AgenvoyError, documented
from agenvoy_cli.home import faults
from agenvoy_cli.web.writes import replace_fix

NEW = "add the deploy user to www-data"


def _base(home: Path, embedders) -> str:
    with Memory(home, embedders=embedders) as memory:
        doc = memory.record_error("bash", ["permission", "deploy"], "permission denied",
                                  "use sudo", "resolved", "not in www-data")
        return str(doc["records"][0]["id"])


def _records(home: Path, embedders) -> list[tuple[str, str, str, str]]:
    with Memory(home, embedders=embedders) as memory:
        return [(r["symptom"], r["cause"], r["action"], r["outcome"])
                for r in memory.errors(tool="bash")["records"]]


def test_a_new_fix_under_faults_never_loses_the_record(home: Path, tmp_path: Path,
                                                       embedders) -> None:
    rid = _base(home, embedders)
    base = tmp_path / "base"
    shutil.copytree(home, base, symlinks=True)
    with Memory(home, embedders=embedders) as memory, faults.armed(faults.Plan()) as plan:
        replace_fix(memory, rid, NEW, "resolved")  # counting run: every point it reaches
    points = plan.reached
    assert points > 2
    assert _records(home, embedders) == [("permission denied", "not in www-data", NEW,
                                          "resolved")]
    old = ("permission denied", "not in www-data", "use sudo", "resolved")
    new = ("permission denied", "not in www-data", NEW, "resolved")
    for failure in ("enospc", "eio"):
        for at in range(1, points + 1):
            case = tmp_path / f"{failure}-{at}"
            shutil.copytree(base, case, symlinks=True)
            with Memory(case, embedders=embedders) as memory, \
                    faults.armed(faults.Plan(at=at, failure=failure)):
                try:
                    replace_fix(memory, rid, NEW, "resolved")
                except AgenvoyError:
                    pass
                except OSError as exc:  # what the CLI reports as a documented error
                    assert documented(exc, case) is not None, (failure, at, exc)
            got = _records(case, embedders)
            assert got and set(got) <= {old, new}, (failure, at, got)
            shutil.rmtree(case)


@pytest.fixture
def embedders(embedders):  # the session's models (tests/conftest.py), named for clarity
    return embedders
