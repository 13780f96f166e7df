"""A full disk is reported as such by every writer: exit 1, "no space left on <the home's
path>", never exit 2, never "internal error", never an input file blamed, never "nothing was
written" after something was; what was written stays, and the same command run again with
space completes it. Each on a real, small tmpfs and through the fault injector."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import orjson
import pytest

from tests.helpers import fault_sweep as fs


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


def _fill(mount: Path, leave: int = 0) -> Path:
    filler = mount / "filler"
    info = os.statvfs(mount)
    with open(filler, "ab") as handle:
        handle.write(b"\0" * max(0, info.f_bavail * info.f_frsize - leave))
    return filler


def _archived(home: Path) -> list[str]:
    db = home / ".store/history.db"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        rows = [c for (c,) in conn.execute("SELECT content FROM messages ORDER BY seq")]
    conn.close()
    return rows


def _openai(path: Path, n: int) -> Path:
    path.write_bytes(b"\n".join(orjson.dumps(
        {"role": "user" if i % 2 == 0 else "assistant",
         "content": f"message {i} " + "about the quarterly numbers " * 3}) for i in range(n)))
    return path


def _said_disk_full(res: subprocess.CompletedProcess, home: Path) -> str:
    said = res.stderr.decode()
    assert res.returncode == 1, said
    assert f"no space left on {home}" in said, said
    assert "internal error" not in said and "cannot be read" not in said, said
    return said


def test_import_on_a_full_disk_says_so_and_resumes(tmp_path, small_disk):
    """The issue's case: 2,000 messages from another file system onto a full home."""
    source = _openai(tmp_path / "export.jsonl", 2000)  # readable, elsewhere
    home = small_disk / "home"
    fs.conversation(home)
    filler = _fill(small_disk, 1 << 20)  # room for part of it (the WAL grows to ~2 MiB)
    res = fs.run(home, "import", "openai", str(source))
    said = _said_disk_full(res, home)
    written = [c for c in _archived(home) if "quarterly" in c]
    if written:
        assert "nothing was written" not in said, said
    filler.unlink()
    fs.ok(home, "doctor", "--repair")
    assert fs.run(home, "doctor").returncode == 0
    fs.ok(home, "import", "openai", str(source))  # space again: the rest, once
    again = [c for c in _archived(home) if "quarterly" in c]
    assert len(again) == 2000 and len(set(again)) == 2000


def test_import_failing_to_write_blames_no_input(tmp_path):
    """Through the injector: every write and commit of an import failing in turn."""
    source = _openai(tmp_path / "export.jsonl", 40)
    base = tmp_path / "base"
    fs.conversation(base)
    log = tmp_path / "count.log"
    fs.ok(fs.copy_home(base, tmp_path / "count"), "import", "openai", str(source),
          env={"AGENVOY_FAULTS": f"log={log}"})
    for at in range(1, len(fs.points(log)) + 1):
        home = fs.copy_home(base, tmp_path / "case")
        res = fs.run(home, "import", "openai", str(source), env={"AGENVOY_FAULTS": f"at={at}"})
        _said_disk_full(res, home)


def test_backfill_vectors_on_a_full_disk_is_no_internal_error(tmp_path, small_disk):
    """Chroma's SQLite answers "database or disk is full" (code 13): exit 1 naming the home."""
    home = small_disk / "home"
    fs.conversation(home, n=300)
    filler = _fill(small_disk, 96 << 10)
    res = fs.run(home, "backfill", "--all", "--vectors")
    filler.unlink()
    if res.returncode != 0:
        _said_disk_full(res, home)
    fs.ok(home, "doctor", "--repair")
    assert fs.leftovers(home) == []
    fs.ok(home, "backfill", "--all", "--vectors")
    assert fs.run(home, "doctor").returncode == 0


@pytest.mark.parametrize("failure", ["enospc", "eio"])
def test_backfill_vectors_failing_in_chroma_is_no_internal_error(tmp_path, failure):
    home = tmp_path / "home"
    fs.conversation(home, n=20)
    res = fs.run(home, "backfill", "--all", "--vectors",
                 env={"AGENVOY_FAULTS": f"point=chroma,at=2,fail={failure}"})
    said = res.stderr.decode()
    assert res.returncode == 1 and "internal error" not in said, said
    if failure == "enospc":
        assert f"no space left on {home}" in said, said
    else:
        assert f"I/O error in {home}" in said, said
    fs.ok(home, "backfill", "--all", "--vectors")
    assert fs.run(home, "doctor").returncode == 0
