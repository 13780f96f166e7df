"""The one place that knows the on-disk layout (upstream Agenvoy compatible)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from agenvoy_cli.errors import BadInput, CorruptStore

HOME_ENV = "AGENVOY_HOME"
NAME_MAX_BYTES = 200


def default_home() -> Path:
    # Upstream uses ~/.config/agenvoy on every platform (not click.get_app_dir).
    return Path.home() / ".config" / "agenvoy"


def resolve_home(option: str | os.PathLike[str] | None = None) -> Path:
    if option:
        return Path(option).expanduser()
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env).expanduser()
    return default_home()


def validate_name(name: str, kind: str = "session id") -> str:
    """Names are names, not paths: refuse anything that could escape its folder."""
    if not name:
        raise BadInput(f"{kind} is empty")
    if "\x00" in name:
        raise BadInput(f"{kind} contains a NUL byte")
    if "/" in name or "\\" in name:
        raise BadInput(f"{kind} {name!r} contains a path separator")
    if name.startswith("."):
        raise BadInput(f"{kind} {name!r} starts with '.'")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise BadInput(f"{kind} {name!r} contains a control character")
    if name != name.strip():
        raise BadInput(f"{kind} {name!r} has leading or trailing whitespace")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise BadInput(f"{kind} is not valid UTF-8") from None
    if size > NAME_MAX_BYTES:
        raise BadInput(f"{kind} is {size} bytes long (at most {NAME_MAX_BYTES})")
    return name


def _no_symlink(path: Path) -> Path:
    """A symlink planted inside the home could lead reads and writes outside it."""
    if path.is_symlink():
        raise CorruptStore(f"{path} is a symbolic link; refusing to follow it out of the home")
    return path


class Layout(NamedTuple):
    home: Path

    @property
    def config(self) -> Path:
        return self.home / "config.json"

    @property
    def sessions(self) -> Path:
        return _no_symlink(self.home / "sessions")

    def session_dir(self, session_id: str) -> Path:
        return _no_symlink(self.sessions / validate_name(session_id))

    def history(self, session_id: str) -> Path:
        return _no_symlink(self.session_dir(session_id) / "history.json")

    def summary(self, session_id: str) -> Path:
        return _no_symlink(self.session_dir(session_id) / "summary.json")

    def summary_meta(self, session_id: str) -> Path:
        return _no_symlink(self.session_dir(session_id) / "summary.meta.json")

    def agent_files(self, session_id: str) -> list[Path]:
        """What Agenvoy itself keeps in a session folder and deletes on reset
        (internal/session/reset.go): the history/ folder, pending/ and action.log."""
        folder = self.session_dir(session_id)
        return [folder / "history", folder / "pending", folder / "action.log"]

    @property
    def store(self) -> Path:
        return self.home / ".store"

    @property
    def db(self) -> Path:
        return self.store / "history.db"

    @property
    def chroma(self) -> Path:
        return self.store / "chroma"

    @property
    def lock(self) -> Path:
        # Never deleted: deleting a flock file lets two holders in at once.
        return self.store / "agenvoy.lock"

    def task_lock(self, task: str, name: str) -> Path:
        """Lock file of one long task (e.g. summarizing one session) that must not hold the
        store lock for its whole length (an LLM call). Never deleted, like the store lock."""
        return self.store / "locks" / f"{task}.{validate_name(name)}.lock"
