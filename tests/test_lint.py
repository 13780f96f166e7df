"""ruff is part of the test command, so CI's one command also keeps the code clean."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def test_ruff_clean():
    if shutil.which("ruff") is None and subprocess.run(
            [sys.executable, "-m", "ruff", "--version"], capture_output=True).returncode != 0:
        pytest.fail("ruff is not installed (pip install -e '.[test]')")
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "agenvoy_cli", "tests", "bench",
                          "tools"],
                         cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
