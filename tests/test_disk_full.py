"""A full disk is reported as such by every writer: exit 1, "no space left on <the home's
path>", never exit 2, never "internal error", never an input file blamed, never "nothing was
written" after something was; what was written stays, and the same command run again with
space completes it. Each on a real, small tmpfs and through the fault injector."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import orjson
import pytest

from tests.helpers import fault_sweep as fs
from tests.helpers.disk import fill


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
    filler = fill(small_disk, 1 << 20)  # room for part of it (the WAL grows to ~2 MiB)
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
    filler = fill(small_disk, 96 << 10)
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


FAMILIES = {
    # family: (what the home holds first, the command run on the full disk)
    "summary": (lambda h, i: fs.conversation(h, n=20), lambda i: ["summarize", "s"]),
    "errors": (lambda h, i: fs.conversation(h),
               lambda i: ["errors", "record", "--tool", "make", "--symptom", "linker error",
                          "--action", "relinked", "--outcome", "resolved", "-k", "make"]),
    "rag": (lambda h, i: fs.ok(h, "rag", "create", "docs"),
            lambda i: ["rag", "add", "docs", str(fs._docs(i))]),
    "compaction": (lambda h, i: fs.with_vectors(h, 20),
                   lambda i: ["compact", "s", "--max-bytes", "1024"]),
    "session": (lambda h, i: fs.with_vectors(h), lambda i: ["session", "remove", "s", "-y"]),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_on_a_full_disk(tmp_path, small_disk, llm, family):
    """The injector's findings cross-checked on a real full file system: per family of write
    paths, the command with 0 or 32 KiB free says so (or succeeds), loses nothing, and runs
    again to the end once there is space."""
    prepare, argv = FAMILIES[family]
    inputs = tmp_path / "inputs"
    made = tmp_path / "made"
    prepare(made, inputs)
    import shutil

    codes = []
    for leave in (0, 32 << 10):
        home = small_disk / f"home-{leave}"
        shutil.copytree(made, home, symlinks=True)
        kept = _archived(home)
        filler = fill(small_disk, leave)
        res = fs.run(home, *argv(inputs))
        filler.unlink()
        said = res.stderr.decode()
        codes.append(res.returncode)
        assert "internal error" not in said and res.returncode in (0, 1), said
        if res.returncode == 1:
            _said_disk_full(res, home)
        assert set(kept) <= set(_archived(home))  # nothing archived before is lost
        fs.ok(home, "doctor", "--repair")
        assert fs.leftovers(home) == []
        if res.returncode == 1:
            fs.ok(home, *argv(inputs))
        assert fs.run(home, "doctor").returncode == 0
        shutil.rmtree(home)
    assert 1 in codes, codes  # the full disk did stop it
