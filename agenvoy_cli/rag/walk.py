"""Which files a RAG database indexes: walking a folder, honouring ignore files.

A folder is walked without following symlinked directories (so a symlink loop cannot hang
it and no link leads out of the folder); a symlinked file is indexed only when its target
is inside the folder, under the target's path. Version control folders (.git, .hg, .svn)
are never entered; hidden files and folders are left out unless asked for (dotfiles such
as .env often hold secrets).

``.gitignore`` files are matched by ``pathspec`` (git's wildmatch rules), from the folder
itself, every folder below it, and -- when the folder is inside a git work tree -- every
folder from the top of that tree down, plus ``.git/info/exclude``. Git's global
excludesFile is not read. An ignored folder is not entered, so a file in it cannot be
re-included (git's rule too). tests/rag/test_rag_libraries.py checks the result against
``git check-ignore`` on a pattern corpus. No git binary is needed at run time.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VCS_DIRS = frozenset({".git", ".hg", ".svn", ".bzr", "_darcs", ".jj"})

# POSIX classes inside brackets, which git supports and pathspec does not (it would read
# `[[:digit:]]` as a set of the characters "[:digt" and warn).
_POSIX = {"alpha": "a-zA-Z", "digit": "0-9", "alnum": "a-zA-Z0-9", "upper": "A-Z",
          "lower": "a-z", "xdigit": "0-9A-Fa-f", "space": " \t\n\r\f\v", "blank": " \t"}
_POSIX_CLASS = re.compile(r"\[:([a-z]+):\]")


def _posix_classes(pattern: str) -> str | None:
    """The pattern with [:class:] spelt out; None when it uses a class we cannot spell."""
    if "[:" not in pattern:
        return pattern
    unknown = False

    def spell(match: re.Match[str]) -> str:
        nonlocal unknown
        body = _POSIX.get(match.group(1))
        if body is None:
            unknown = True
            return match.group(0)
        return body

    out = _POSIX_CLASS.sub(spell, pattern)
    return None if unknown else out


def ignore_spec(lines: list[str]) -> Any | None:
    """A pathspec GitIgnoreSpec of a .gitignore's lines; patterns git would not match
    (a trailing backslash, an unknown class) are left out, as git leaves them."""
    from pathspec import GitIgnoreSpec
    from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

    patterns = []
    for raw in lines:
        line = _posix_classes(raw.rstrip("\r"))
        if line is None:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # re's FutureWarning on odd bracket sets
                pattern = GitIgnoreSpecPattern(line)
        except (ValueError, re.error):  # GitIgnorePatternError is a ValueError
            continue
        if pattern.include is not None:
            patterns.append(pattern)
    return GitIgnoreSpec(patterns) if patterns else None


class Ignores:
    """The ignore rules in effect: a list of (folder, spec), outermost first; the last
    matching pattern of the deepest file decides (git's precedence)."""

    def __init__(self, layers: list[tuple[str, Any]] | None = None) -> None:
        self.layers = layers or []

    def below(self, folder: str) -> Ignores:
        """The rules for inside `folder` (its own .gitignore added, when it has one)."""
        spec = _read_spec(os.path.join(folder, ".gitignore"))
        return Ignores([*self.layers, (folder, spec)]) if spec else self

    def ignored(self, path: str, is_dir: bool) -> bool:
        verdict = False
        for folder, spec in self.layers:
            rel = os.path.relpath(path, folder)
            if rel.startswith(".."):
                continue
            rel = rel.replace(os.sep, "/") + ("/" if is_dir else "")
            include = spec.check_file(rel).include
            if include is not None:
                verdict = include
        return verdict


def _read_spec(path: str) -> Any | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(1 << 20)
    except OSError:
        return None
    return ignore_spec(data.decode("utf-8", "replace").split("\n"))


def repository_ignores(root: Path) -> Ignores:
    """Rules that apply to root from above it: the git work tree containing it (if any),
    its .git/info/exclude and the .gitignore of every folder from the top down to root's
    parent. Root's own .gitignore is added by the walk."""
    top = None
    for folder in (root, *root.parents):
        if (folder / ".git").exists():
            top = folder
            break
    if top is None:
        return Ignores()
    layers: list[tuple[str, Any]] = []
    exclude = _read_spec(str(top / ".git" / "info" / "exclude"))
    if exclude:
        layers.append((str(top), exclude))
    parts = root.relative_to(top).parts
    for k in range(len(parts)):  # top, ..., root's parent
        folder = top.joinpath(*parts[:k])
        spec = _read_spec(str(folder / ".gitignore"))
        if spec:
            layers.append((str(folder), spec))
    return Ignores(layers)


@dataclass
class Found:
    path: Path  # resolved, inside the root
    size: int
    mtime_ns: int


@dataclass
class Skipped:
    path: Path
    reason: str
    size: int = 0
    mtime_ns: int = 0
    remember: bool = False  # record it in the database (binary, too large)


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def walk(root: Path, *, hidden: bool = False) -> Iterator[Found | Skipped]:
    """Every indexable file under root (a resolved folder), in a stable order."""
    ignores = repository_ignores(root)
    yield from _walk_dir(root, root, ignores, hidden, set())


def _walk_dir(root: Path, folder: Path, ignores: Ignores, hidden: bool,
              visited: set[tuple[int, int]]) -> Iterator[Found | Skipped]:
    try:
        stat = folder.stat()
    except OSError as exc:
        yield Skipped(folder, f"cannot read folder: {exc.strerror or exc}")
        return
    key = (stat.st_dev, stat.st_ino)
    if key in visited:  # bind mounts and the like: never twice
        return
    visited.add(key)
    ignores = ignores.below(str(folder))
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        yield Skipped(folder, f"cannot read folder: {exc.strerror or exc}")
        return
    subdirs: list[Path] = []
    for entry in entries:
        name = entry.name
        path = Path(entry.path)
        if name in VCS_DIRS:
            continue
        if name.startswith(".") and not hidden:
            continue
        try:
            is_link = entry.is_symlink()
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if ignores.ignored(entry.path, is_dir or (is_link and path.is_dir())):
            continue
        if is_dir:
            subdirs.append(path)
            continue
        if is_link:
            yield from _link(root, path)
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            yield Skipped(path, f"cannot stat: {exc.strerror or exc}")
            continue
        if entry.is_file(follow_symlinks=False):
            yield Found(path, st.st_size, st.st_mtime_ns)
    for sub in subdirs:
        yield from _walk_dir(root, sub, ignores, hidden, visited)


def _link(root: Path, path: Path) -> Iterator[Found | Skipped]:
    """A symlink met in a walk: its target when it is a file inside root."""
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):
        yield Skipped(path, "broken symlink or symlink loop")
        return
    if target.is_dir():
        return  # symlinked folders are never followed
    if not _within(target, root):
        yield Skipped(path, "symlink to a file outside the folder")
        return
    try:
        st = target.stat()
    except OSError as exc:
        yield Skipped(path, f"cannot stat: {exc.strerror or exc}")
        return
    if target.is_file():
        yield Found(target, st.st_size, st.st_mtime_ns)
