"""Child processes of tests/workers.py (`python -m tests.workers KIND ...`), started on the
test's home with its environment."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT


def spawn(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.workers", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})})
