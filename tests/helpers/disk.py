"""A real, small file system to fill: a tmpfs mounted for a test (root only; the test is
skipped elsewhere) and a file that takes all of it but what is asked."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(mount: Path, size: str = "16m") -> Iterator[Path]:
    mount.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(mount: Path, leave: int = 0) -> Path:
    """A file taking all but `leave` bytes of the file system (unlink it to free them)."""
    filler = mount / "filler"
    info = os.statvfs(mount)
    with open(filler, "ab") as handle:
        handle.write(b"\0" * max(0, info.f_bavail * info.f_frsize - leave))
    return filler
