"""The one place that knows the on-disk layout (upstream Agenvoy compatible)."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from agenvoy_cli.errors import BadInput, CorruptStore

HOME_ENV = "AGENVOY_HOME"
NAME_MAX_BYTES = 200


def default_home() -> Path:
    # Upstream uses ~/.config/agenvoy on every platform (not click.get_app_dir).
    return Path.home() / ".config" / "agenvoy"


def resolve_home(option: str | os.PathLike[str] | None = None,
                 environ: Mapping[str, str] | None = None) -> Path:
    """--home, else AGENVOY_HOME (of `environ`, an entry point's; None: the process's), else
    the default. An empty value is a mistake (an unset shell variable), not a request for the
    default home: refused (exit 2)."""
    if option is not None and not str(option):
        raise BadInput("--home is empty")
    if option:
        return check_home(Path(option).expanduser())
    if environ is None:
        from agenvoy_cli.environment import environment

        environ = environment()
    env = environ.get(HOME_ENV)
    if env is not None:
        if not env:
            raise BadInput(f"{HOME_ENV} is set but empty")
        return check_home(Path(env).expanduser())
    return check_home(default_home())


def check_home(home: Path) -> Path:
    """The home, or its nearest existing ancestor, must be a directory (exit 2 otherwise:
    --home /dev/null is bad usage, not an internal error)."""
    probe = home
    while True:
        try:
            info = probe.stat()
        except FileNotFoundError:
            if probe.parent == probe:
                return home
            probe = probe.parent
            continue
        except NotADirectoryError:
            probe = probe.parent
            continue
        except OSError as exc:
            raise BadInput(f"home {home}: {exc.strerror}") from None
        if not stat.S_ISDIR(info.st_mode):
            raise BadInput(f"home {home}: {probe} is not a directory")
        return home


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


def home_of(path: Path) -> Path:
    """The home a file of it lies in (the folder holding `.store/` or `sessions/`), to name
    it in a message; outside a home, the file's folder."""
    for folder in path.parents:
        if folder.name in (".store", "sessions"):
            return folder.parent
    return path.parent


def _checked(path: Path, want: str = "file") -> Path:
    """Refuse what is not what the layout expects: a symlink planted inside the home could
    lead reads and writes outside it (another program's database, a lock file anywhere), and
    a FIFO or device where a file belongs would hang or feed garbage. Missing is fine."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return path  # NotADirectoryError: a parent is a file, refused by its own check
    if stat.S_ISLNK(mode):
        raise CorruptStore(f"{path} is a symbolic link; refusing to follow it out of the home")
    if want == "dir" and not stat.S_ISDIR(mode):
        raise CorruptStore(f"{path} is not a directory; move it out of the way")
    if want == "socket" and not stat.S_ISSOCK(mode):
        raise CorruptStore(f"{path} is not a socket; move it out of the way")
    if want == "file" and not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise CorruptStore(f"{path} is {kind}; move it out of the way")
    return path



def _no_links_below(folder: Path, depth: int) -> None:
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if entry.is_symlink():
            raise CorruptStore(f"{entry.path} is a symbolic link; refusing to follow it out "
                               "of the home")
        if depth > 1 and entry.is_dir(follow_symlinks=False):
            _no_links_below(Path(entry.path), depth - 1)


class Layout(NamedTuple):
    home: Path

    @property
    def config(self) -> Path:
        return _checked(self.home / "config.json")

    @property
    def sessions(self) -> Path:
        return _checked(self.home / "sessions", "dir")

    def session_dir(self, session_id: str) -> Path:
        return _checked(self.sessions / validate_name(session_id), "dir")

    def history(self, session_id: str) -> Path:
        return _checked(self.session_dir(session_id) / "history.json")

    def action_log(self, session_id: str) -> Path:
        """Agenvoy v0.32's finished runs: history/<YYYY-MM-DD-HH-MM>-<task>.json."""
        return _checked(self.session_dir(session_id) / "history", "dir")

    def summary(self, session_id: str) -> Path:
        return _checked(self.session_dir(session_id) / "summary.json")

    def summary_meta(self, session_id: str) -> Path:
        return _checked(self.session_dir(session_id) / "summary.meta.json")

    def agent_files(self, session_id: str) -> list[Path]:
        """What Agenvoy itself keeps in a session folder and deletes on reset
        (internal/session/reset.go): the history/ folder, pending/ and action.log."""
        folder = self.session_dir(session_id)
        return [folder / "history", folder / "pending", folder / "action.log"]

    @property
    def knowledge(self) -> Path:
        """Agenvoy's knowledge notes through v0.32.5, one <name>.md each (v0.32.6 moved them
        into its own store; agenvoy notes takes them in once, notes/files.py). Only ever
        read: a linked folder is followed, a linked file in it is not (as upstream)."""
        return self.home / "knowledge"

    @property
    def store(self) -> Path:
        return _checked(self.home / ".store", "dir")

    @property
    def db(self) -> Path:
        db = _checked(self.store / "history.db")
        for suffix in ("-wal", "-shm", "-journal"):  # SQLite opens these beside it
            _checked(db.with_name(db.name + suffix))
        return db

    def forget_intent(self, session_id: str) -> Path:
        """A `forget` in progress (conversation/forget.py): what it removes, written before
        and deleted after, so that `doctor --repair` completes a forget that died."""
        return _checked(self.store / f"forget.{validate_name(session_id)}.json")

    def forget_intents(self) -> list[str]:
        """The sessions with a forget in progress."""
        try:
            names = os.listdir(self.store)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(n[len("forget."):-len(".json")] for n in names
                      if n.startswith("forget.") and n.endswith(".json"))

    @property
    def chroma(self) -> Path:
        """Chroma's directory; chromadb opens what is inside it itself, so its files and
        collection folders (two levels) are checked for symlinks here: ~360 directory scans
        at 100 sessions, so the vector layer asks for it where it opens a client (once per
        generation of the directory, vectors/collection.py client) and for `chroma_dir`,
        the directory alone, everywhere else."""
        chroma = self.chroma_dir
        _no_links_below(chroma, depth=2)
        return chroma

    @property
    def chroma_dir(self) -> Path:
        """Chroma's directory, itself checked, not what is inside it (see `chroma`)."""
        return _checked(self.store / "chroma", "dir")

    @property
    def embed_rates(self) -> Path:
        """The embedding rate last measured per model (seconds per character), a hint that
        sizes a fresh process's first budgeted batch (search/catchup.py Pacer.recall)."""
        return _checked(self.store / "embed-rates.json")

    @property
    def lock(self) -> Path:
        # Never deleted: deleting a flock file lets two holders in at once.
        return _checked(self.store / "agenvoy.lock")

    @property
    def http_token(self) -> Path:
        """`agenvoy mcp --http`'s bearer token (mode 0600, made at its first start); beside
        it `http.json`, where a running HTTP server announces its URL (server/fastpath.py)."""
        return _checked(self.store / "http-token")

    @property
    def http_announce(self) -> Path:
        return _checked(self.store / "http.json")

    @property
    def hook_log(self) -> Path:
        """Where `agenvoy hook` writes a line on any trouble (it never fails the host's turn,
        and its stdout is the host's)."""
        return _checked(self.store / "hook.log")

    @property
    def server_pid(self) -> Path:
        """`agenvoy server`'s pid file: the process id of the home's background server,
        written by that process as it starts and removed as it stops (server/lifecycle.py)."""
        return _checked(self.store / "server.pid")

    @property
    def server_log(self) -> Path:
        """`agenvoy server`'s log: its stderr (start, stop, warnings), appended."""
        return _checked(self.store / "server.log")

    @property
    def http_socket(self) -> Path:
        """The running HTTP server's Unix socket for the CLI's fast path: only the home's
        owner can reach it (0600, in `.store/run/`, 0700), so it needs no token."""
        return _checked(_checked(self.store / "run", "dir") / "http.sock", "socket")

    def task_lock(self, task: str, name: str) -> Path:
        """Lock file of one long task (e.g. summarizing one session) that must not hold the
        store lock for its whole length (an LLM call). Never deleted, like the store lock."""
        folder = _checked(self.store / "locks", "dir")
        return _checked(folder / f"{task}.{validate_name(name)}.lock")
