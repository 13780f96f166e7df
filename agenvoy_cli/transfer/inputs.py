"""The files an import reads: regular files only (a FIFO named *.jsonl would block an open
until a writer comes: a cron import piling up), every read bounded (a line, a JSON
element at most `limit` bytes in memory)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from agenvoy_cli.transfer.records import ReadFailure

MAX_RECORD_BYTES = 32 << 20  # one line or array element; a longer one is skipped
# a file this long untouched is not being written: what its writer left open is complete
QUIET_SECONDS = 120.0
_CHUNK = 1 << 20
# read buffer: the default (the block size, 4 KiB) costs a read call per few records
READ_BUFFER = 256 << 10
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR,
          "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"))


class NotRegular(ReadFailure):
    """A path that is not a regular file (never opened)."""


def kind(mode: int) -> str | None:
    """What a path is when it is not a regular file (None: it is one)."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_regular(path: Path) -> int:
    """The file's size; NotRegular for a FIFO, socket, device or folder, ReadFailure when it
    cannot be looked at."""
    try:
        info = path.stat()
    except OSError as exc:
        raise ReadFailure(exc.strerror or str(exc)) from None
    what = kind(info.st_mode)
    if what is not None:
        raise NotRegular(f"not a regular file ({what}): skipped")
    return info.st_size


def open_input(path: Path) -> BinaryIO:
    """A regular file, opened without ever waiting: O_NONBLOCK (which a regular file
    ignores) in case the path became a FIFO since it was looked at, and checked again on the
    open descriptor."""
    check_regular(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ReadFailure(exc.strerror or str(exc)) from None
    what = kind(os.fstat(fd).st_mode)
    if what is not None:
        os.close(fd)
        raise NotRegular(f"not a regular file ({what}): skipped")
    return os.fdopen(fd, "rb", buffering=READ_BUFFER)


class Line:
    """One line of a JSON Lines file: its bytes (None when longer than the bound: skipped,
    never held), whether its newline is there (a last line without one is still being
    written), and its place."""

    __slots__ = ("complete", "data", "number", "size")

    def __init__(self, number: int, data: bytes | None, complete: bool, size: int) -> None:
        self.number, self.data, self.complete, self.size = number, data, complete, size

    @property
    def raw(self) -> bytes:
        """The bytes its digest covers (a skipped long line: its place and size)."""
        return self.data if self.data is not None else \
            f"\x00long line {self.number}: {self.size} bytes".encode()


def lines(handle: BinaryIO, limit: int = MAX_RECORD_BYTES) -> Iterator[Line]:
    """The non-blank lines of a file, at most `limit` bytes of one in memory."""
    number = 0
    while True:
        data = handle.readline(limit + 1)
        if not data:
            return
        number += 1
        if len(data) > limit and not data.endswith(b"\n"):
            size = len(data)
            data = b""
            while True:  # the rest of the long line, a chunk at a time
                more = handle.readline(_CHUNK)
                size += len(more)
                if not more or more.endswith(b"\n"):
                    break
            yield Line(number, None, bool(more), size)
            continue
        if data.isspace():
            continue
        yield Line(number, data, data.endswith(b"\n"), len(data))


def too_long(line: Line, limit: int = MAX_RECORD_BYTES) -> str:
    return f"line {line.number}: longer than {limit:,} bytes ({line.size:,}): skipped"


def files(folder: Path, suffixes: tuple[str, ...], pattern: str = "*") -> Iterator[Path]:
    """The files under a folder whose names end in `suffixes`, sorted, symbolic links to
    folders not followed (a loop); anything that is not a regular file is yielded too, for
    its source to say why it was not read."""
    found: list[Path] = []
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        base = Path(root)
        found.extend(base / n for n in names if n.endswith(suffixes)
                     and Path(n).match(pattern))
    yield from sorted(found)
