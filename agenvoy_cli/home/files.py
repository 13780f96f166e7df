"""Atomic JSON files: readers see the old file or the new one, never a torn one."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from agenvoy_cli.errors import CorruptStore
from agenvoy_cli.home.faults import hit, os_error

_MISSING = object()
FILE_MODE = 0o600
DIR_MODE = 0o700


def ensure_dir(path: Path) -> None:
    """Create a private directory (and parents) if missing."""
    if path.is_dir():
        return
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        hit("write", folder, _error_at(folder))
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:
            pass


def _error_at(path: Path) -> Callable[[int], BaseException]:
    """How a failure creating `path` reads (for the fault injector)."""
    return lambda code: os_error(code, path)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        hit("fsync", path)
        os.fsync(fd)
    finally:
        os.close(fd)


def _copy_prefix(source: Path, length: int, dest_fd: int) -> None:
    """The first `length` bytes of source into dest, in the kernel where it can."""
    with open(source, "rb") as src:
        done = 0
        try:
            while done < length:
                n = os.copy_file_range(src.fileno(), dest_fd, length - done, done)
                if n == 0:
                    raise CorruptStore(f"{source} shrank while being copied")
                done += n
        except (AttributeError, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno not in (18, 22, 38, 95):  # EXDEV..ENOTSUP
                raise
            src.seek(done)
            os.lseek(dest_fd, done, os.SEEK_SET)
            os.write(dest_fd, src.read(length - done))
        os.lseek(dest_fd, length, os.SEEK_SET)


def atomic_write_bytes(path: Path, data: bytes, *, prefix: tuple[Path, int] | None = None) -> None:
    """Temp file in the same directory, fsync, replace, fsync the directory. With `prefix`
    (file, length), the new file starts with that many bytes of the file (an append that
    must not copy megabytes through Python)."""
    ensure_dir(path.parent)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    hit("write", tmp, lambda code: os_error(code, tmp))  # creating it takes an inode
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        if prefix is not None:
            hit("write", tmp)
            _copy_prefix(prefix[0], prefix[1], fd)
        with os.fdopen(fd, "wb") as handle:
            hit("write", tmp)
            handle.write(data)
            handle.flush()
            hit("fsync", tmp)
            os.fsync(handle.fileno())
        hit("rename", path, lambda code: os_error(code, tmp))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def dumps(obj: Any, *, indent: bool = False) -> bytes:
    option = orjson.OPT_INDENT_2 if indent else 0
    return orjson.dumps(obj, option=option)


def atomic_write_json(path: Path, obj: Any, *, indent: bool = True) -> None:
    atomic_write_bytes(path, dumps(obj, indent=indent) + b"\n")


def open_regular(path: Path, flags: int = os.O_RDONLY, mode: int = FILE_MODE) -> int:
    """A descriptor of a regular file in the home, never through a symlink (O_NOFOLLOW) and
    never blocking on a FIFO or a device (O_NONBLOCK, then refused). FileNotFoundError when
    it does not exist (and O_CREAT was not asked)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CorruptStore(f"{path} is a symbolic link; refusing to follow it out of "
                               "the home") from None
        if exc.errno == errno.EISDIR:
            raise CorruptStore(f"{path} is a directory, expected a file") from None
        if exc.errno == errno.ENXIO:  # a FIFO opened for writing without a reader
            raise CorruptStore(f"{path} is not a regular file") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CorruptStore(f"{path} is not a regular file ({_kind(info.st_mode)}); "
                               "refusing to use it")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a file"


def read_bytes(path: Path) -> bytes | None:
    """The whole of a regular file of the home; None when it does not exist."""
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def parse_json(data: bytes, path: Path, hint: str = "") -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        detail = f"{path} is not valid JSON ({exc})"
        raise CorruptStore(detail + (f"; {hint}" if hint else "")) from None


def read_json(path: Path, default: Any = _MISSING, hint: str = "") -> Any:
    data = read_bytes(path)
    if data is None:
        if default is _MISSING:
            raise FileNotFoundError(path)
        return default
    if not data.strip():
        raise CorruptStore(f"{path} is empty" + (f"; {hint}" if hint else ""))
    return parse_json(data, path, hint)


def stale_temp_files(directory: Path) -> list[Path]:
    """Temp files left by a writer that died between create and replace."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob(".*.tmp") if p.is_file())


def kept_aside(folder: Path) -> list[Path]:
    """What move_aside() kept in `folder` (damaged files and directories, never deleted by
    this program: doctor lists them with how to remove them)."""
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(folder / n for n in names if ".damaged-" in n)


def move_aside(path: Path, companions: tuple[str, ...] = ()) -> Path:
    """Keep a damaged file (or directory) beside the original instead of deleting it:
    `<name>.damaged-<time>`, `-1`, `-2` ... when that name is taken (two repairs in one second).
    Each companion suffix (a database's "-wal", "-shm") follows under the same new name. The
    one helper for every damaged file of a home (history.db, history.json, config, chroma/)."""
    import time

    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while any(os.path.lexists(f"{target}{suffix}") for suffix in ("", *companions)):
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
        n += 1
    for suffix in companions:
        with contextlib.suppress(FileNotFoundError):
            _rename(f"{path}{suffix}", f"{target}{suffix}")
    if companions:  # a database may be gone with its -wal left: that goes aside alone
        with contextlib.suppress(FileNotFoundError):
            _rename(path, target)
    else:
        _rename(path, target)
    fsync_dir(path.parent)
    return target


def _rename(source: os.PathLike[str] | str, target: os.PathLike[str] | str) -> None:
    if os.path.lexists(source):  # a missing one is no call (FileNotFoundError follows)
        hit("rename", source, lambda code: os_error(code, source))
    os.rename(source, target)


def link_aside(path: Path) -> Path:
    """A hard link to `path` beside it (`.<name>.<pid>.prev.tmp`): the file as it is now,
    kept without needing disk space, for put_back() to restore after a failed change.
    Remove it with unlink when the change succeeded."""
    previous = path.with_name(f".{path.name}.{os.getpid()}.prev.tmp")
    previous.unlink(missing_ok=True)
    hit("write", previous, lambda code: os_error(code, previous))  # a directory entry
    os.link(path, previous)
    return previous


def put_back(previous: Path | None, path: Path) -> None:
    """Undo a change of `path`: the link_aside() copy back in its place (None: the file
    did not exist before, so it goes). A rename needs no space: it works on a full disk."""
    if previous is None:
        path.unlink(missing_ok=True)
    else:
        _rename(previous, path)


class FileIdentity(NamedTuple):
    """What says a file is still the one seen before: the session_stats row's order."""

    size: int
    ino: int
    mtime_ns: int


def file_identity(path: os.PathLike[str] | str) -> FileIdentity | None:
    """The file's (size, inode, mtime) by one stat, None when it is missing or unreadable:
    the one stat helper (history.json, history.db, summary.json watched for changes)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return FileIdentity(st.st_size, st.st_ino, st.st_mtime_ns)
