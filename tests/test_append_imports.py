"""The append path's imports (issue #51 item 4): beyond its floor (`import click, orjson,
sqlite3`, whose own imports bring uuid, inspect and ast) `append` loads agenvoy_cli's modules
and the few it uses, and none of them compiles a regular expression at import (each is
compiled on first use, through re's cache). bench/append.py measures what this buys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# fcntl: the lock; _blake2: message ids; locale: click's gettext for its help option;
# runpy: `python -m`; gc: paused for the start-up imports (__main__.py)
USED = {"fcntl", "_blake2", "locale", "_locale", "runpy", "gc"}

APPEND = """
import json, re, sys
compiled_at_import = []
original = re._compile
def counting(pattern, flags):
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.endswith(("re/__init__.py",)):
        frame = frame.f_back
    if frame is not None and frame.f_code.co_name == "<module>" \\
            and "agenvoy_cli" in frame.f_code.co_filename:
        compiled_at_import.append(frame.f_code.co_filename)
    return original(pattern, flags)
re._compile = counting
sys.argv = ["agenvoy", "append", "s", "--role", "user", "--content", "x"]
import runpy
try:
    runpy.run_module("agenvoy_cli", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps({"modules": sorted(sys.modules), "compiled": compiled_at_import}))
"""


def _modules(code: str, home: Path) -> dict:
    env = {"PATH": "/usr/bin:/bin", "AGENVOY_HOME": str(home), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_append_imports_only_its_floor_and_what_it_uses(tmp_path):
    floor = set(_modules("import click, orjson, sqlite3, sys, json\n"
                         "print(json.dumps({'modules': sorted(sys.modules)}))",
                         tmp_path / "none")["modules"])
    got = _modules(APPEND, tmp_path / "home")
    extra = {m for m in got["modules"] if m not in floor and m != "agenvoy_cli"
             and not m.startswith("agenvoy_cli.") and not m.startswith("__editable__")}
    assert extra <= USED, f"the append path imports more than its floor: {sorted(extra - USED)}"
    assert "difflib" not in got["modules"]


def test_no_module_on_the_append_path_compiles_a_pattern_at_import(tmp_path):
    got = _modules(APPEND, tmp_path / "home")
    assert got["compiled"] == [], got["compiled"]
