"""The wheel: the package, its prompts, the `agenvoy` entry point, one version, and the man
page and completions in the standard share/ locations."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from agenvoy_cli import __version__
from tests.conftest import ROOT

DATA_FILES = {  # installed path (under the prefix) -> file in the repository
    "share/man/man1/agenvoy.1": "man/agenvoy.1",
    "share/bash-completion/completions/agenvoy.bash": "completions/agenvoy.bash",
    "share/zsh/site-functions/_agenvoy": "completions/_agenvoy",
    "share/fish/vendor_completions.d/agenvoy.fish": "completions/agenvoy.fish",
}
SOURCES = ["pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "agenvoy_cli", "man",
           "completions"]


def _at_least(dist: str, version: str) -> bool:
    from packaging.version import Version

    try:
        return Version(importlib.metadata.version(dist)) >= Version(version)
    except importlib.metadata.PackageNotFoundError:
        return False


def build_command(src: Path, out: Path) -> list[str]:
    """`python -m build --wheel --no-isolation` when this environment can build the project
    itself (pyproject's build-system: setuptools>=68 and wheel, or a setuptools that has
    bdist_wheel built in); otherwise pip's isolated build, which fetches them."""
    can_build_here = importlib.util.find_spec("build") is not None and _at_least(
        "setuptools", "68") and (_at_least("setuptools", "70.1") or _at_least("wheel", "0.36"))
    if can_build_here:
        return [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                str(out), str(src)]
    return [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir",
            str(out), str(src)]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the tree (the work tree gets no build/ or egg-info)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src, out = tmp / "src", tmp / "dist"
    src.mkdir()
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=junk)
        elif path.exists():
            shutil.copy2(path, src / name)
    cmd = build_command(src, out)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp)
    assert res.returncode == 0, f"{' '.join(cmd)}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    wheels = list(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


def read(wheel: Path, name: str) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(name)


def dist_info(wheel: Path) -> str:
    return f"agenvoy_cli-{__version__}.dist-info"


def test_wheel_name_and_metadata_version(wheel):
    assert wheel.name.startswith(f"agenvoy_cli-{__version__}-py3-none-any"), wheel.name
    meta = Parser().parsestr(read(wheel, f"{dist_info(wheel)}/METADATA").decode())
    assert meta["Name"] == "agenvoy-cli"
    assert meta["Version"] == __version__
    assert meta["Requires-Python"] == ">=3.10"


def test_wheel_entry_point(wheel):
    text = read(wheel, f"{dist_info(wheel)}/entry_points.txt").decode()
    section = text.split("[console_scripts]", 1)[1].split("[", 1)[0]
    assert [line.replace(" ", "") for line in section.strip().splitlines()] == \
        ["agenvoy=agenvoy_cli.__main__:main"]  # Ctrl-C during imports: exit 130, one line


def test_wheel_holds_the_package_its_prompts_and_reference(wheel):
    have = names(wheel)
    for path in sorted((ROOT / "agenvoy_cli").rglob("*.py")):
        if "__pycache__" not in path.parts:
            rel = path.relative_to(ROOT).as_posix()
            assert rel in have, f"{rel} is not in the wheel"
    prompts = sorted((ROOT / "agenvoy_cli" / "prompts").glob("*.md"))
    for path in prompts:
        rel = path.relative_to(ROOT).as_posix()
        assert read(wheel, rel) == path.read_bytes(), rel
    assert "agenvoy_cli/py.typed" in have
    # the floor's reference questions and both models' vectors of them (search/hubness.py)
    for path in sorted((ROOT / "agenvoy_cli" / "search" / "reference").iterdir()):
        rel = path.relative_to(ROOT).as_posix()
        assert read(wheel, rel) == path.read_bytes(), rel
    assert not [n for n in have if n.startswith(("tests/", "tools/", "bench/"))
                or "__pycache__" in n or n.endswith(".pyc")]


def test_wheel_installs_man_page_and_completions_under_share(wheel):
    data = f"agenvoy_cli-{__version__}.data/data/"
    for installed, source in DATA_FILES.items():
        assert data + installed in names(wheel), f"{installed} is not in the wheel"
        assert read(wheel, data + installed) == (ROOT / source).read_bytes(), source
    assert not [n for n in names(wheel) if n.startswith(data)
                and n[len(data):] not in DATA_FILES]


def test_installing_the_wheel_puts_them_where_man_and_the_shells_look(wheel, tmp_path):
    """Installed into a throwaway venv (pip --python): never into the running environment,
    where pip would first uninstall the developer's own install of agenvoy-cli."""
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True,
                   timeout=120)
    python = env / "bin" / "python"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
    res = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                          "--quiet", "--no-deps", "--no-index", "--no-compile",
                          "--ignore-installed", str(wheel)],
                         capture_output=True, text=True, timeout=300, env=clean)
    assert res.returncode == 0, res.stderr
    for installed, source in DATA_FILES.items():
        assert (env / installed).read_bytes() == (ROOT / source).read_bytes(), installed
    assert (env / "bin" / "agenvoy").exists()
    smoke_test(env, clean, tmp_path / "home")


HELP_EVERY_COMMAND = r"""
import sys, click, agenvoy_cli
from agenvoy_cli.cli import cli
assert agenvoy_cli.__file__.startswith(sys.prefix), agenvoy_cli.__file__  # the wheel's copy
def paths(group, prefix):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        sub = group.get_command(ctx, name)
        yield [*prefix, name]
        if isinstance(sub, click.Group):
            yield from paths(sub, [*prefix, name])
count = 0
for path in [[], *paths(cli, [])]:
    try:
        cli.main([*path, "--help"], prog_name="agenvoy")
    except SystemExit as exc:
        assert not exc.code, (path, exc.code)
    count += 1
sys.stderr.write(f"HELPS={count}\n")
"""


def smoke_test(env: Path, clean: dict[str, str], home: Path) -> None:
    """The installed wheel, run as a user runs it: every command's --help, the quick start
    (README), the man page where man(1) looks. Its dependencies come from this environment's
    site-packages (a .pth line: installed with --no-deps, so this costs seconds, not a download)
    while agenvoy_cli itself is the wheel's (the editable install's finder is not loaded)."""
    import site
    import sysconfig

    purelib = Path(subprocess.run([str(env / "bin" / "python"), "-c",
                                   "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    ours = [p for p in (*site.getsitepackages(), sysconfig.get_path("purelib")) if p]
    (purelib / "deps-from-the-test-venv.pth").write_text("\n".join(ours) + "\n", "utf-8")
    agenvoy = str(env / "bin" / "agenvoy")
    run_env = {**clean, "AGENVOY_HOME": str(home)}
    res = subprocess.run([str(env / "bin" / "python"), "-c", HELP_EVERY_COMMAND],
                         capture_output=True, text=True, timeout=300, env=run_env, cwd=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert int(res.stderr.rsplit("HELPS=", 1)[1]) > 20, res.stderr
    assert subprocess.run([agenvoy, "--help"], capture_output=True, text=True, timeout=120,
                          env=run_env).returncode == 0
    steps = [["append", "s1", "--role", "user", "--content", "the deploy failed again"],
             ["context", "s1", "--json"], ["search", "s1", "deploy", "--mode", "keyword",
                                            "--json"], ["session", "list"]]
    out = []
    for step in steps:
        res = subprocess.run([agenvoy, *step], capture_output=True, text=True, timeout=120,
                             env=run_env, cwd=env)
        assert res.returncode == 0, (step, res.stderr)
        out.append(res.stdout)
    assert "the deploy failed again" in out[1] and '"seq": 0' in out[2] and "s1" in out[3]
    man = env / "share" / "man" / "man1" / "agenvoy.1"
    assert man.read_text("utf-8").startswith(".\\\" Generated")
    assert f'"agenvoy-cli {__version__}"' in man.read_text("utf-8")
    import shutil

    if shutil.which("man") and shutil.which("manpath"):
        # man(1) finds it by PATH alone (man-db looks in each PATH entry's ../share/man),
        # and `agenvoy --man` shows the installed copy
        viewer = {k: v for k, v in run_env.items() if k not in ("MANPATH", "MANPAGER")}
        viewer.update(PATH=f"{env / 'bin'}:{os.environ.get('PATH', '')}", PAGER="cat",
                      MANPAGER="cat")
        found = subprocess.run(["man", "-w", "agenvoy"], capture_output=True, text=True,
                               timeout=60, env=viewer)
        assert found.stdout.strip() == str(man), found
        shown = subprocess.run([agenvoy, "--man"], capture_output=True, text=True,
                               timeout=60, env=viewer, cwd=env)
        assert shown.returncode == 0 and "SYNOPSIS" in shown.stdout, shown.stderr


def test_version_has_one_source(run):
    res = run("--version")
    assert res.exit_code == 0 and res.stdout.strip() == f"agenvoy, version {__version__}"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'version = { attr = "agenvoy_cli.version.__version__" }' in pyproject
    assert '\nversion = "' not in pyproject
