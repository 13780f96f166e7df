"""One inter-process lock per home: fcntl.flock on a file that is never deleted.

Writers hold it exclusively for the whole of a write; readers hold it shared so
they never see history.json and SQLite from two different moments. Nested use
inside one holder (`Locks`, one per Store) is counted, not re-locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from agenvoy_cli.errors import StoreBusy
from agenvoy_cli.home.files import ensure_dir, open_regular


def _acquire(fd: int, mode: int, timeout: float, path: Path) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise StoreBusy(
                    f"the store is busy: another agenvoy process held {path} for more than "
                    f"{timeout:g}s (set AGENVOY_LOCK_TIMEOUT to wait longer)"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


class Locks:
    """The store locks one holder has taken: per lock file, the one descriptor it locked, the
    mode and how deep its nested uses go.

    flock belongs to an open file description: two descriptors on one file conflict even in
    one process, so whatever may nest (a command inside a command, a second Store of the same
    home opened under the first's lock, transfer/agenvoy.py) must go through the same Locks:
    the Store owns one (`store.locks`) and a Store it opens for the same holder is given it.
    Two holders in one process exclude each other as two processes do. One thread at a time
    (a Store's rule)."""

    def __init__(self) -> None:
        self._held: dict[str, list[int]] = {}  # path -> [fd, mode, depth]

    def holding(self, key: str) -> object | None:
        """This holder's current hold of the lock file `key` (str of its path): the same
        object for the whole of one outermost hold, a new one for the next (None: not
        held). What is read under one hold can be kept for that hold (vectors/guard.py)."""
        return self._held.get(key)

    def is_held(self, path: Path, *, exclusive: bool = False) -> bool:
        """Whether this holder holds the lock (exclusively, if asked)."""
        held = self._held.get(str(path))
        return held is not None and (not exclusive or held[1] == fcntl.LOCK_EX)

    @contextlib.contextmanager
    def hold(self, path: Path, timeout: float, *, shared: bool = False) -> Iterator[None]:
        """Hold the lock. shared=True for readers; a missing lock file means no writer ever
        ran, so a reader needs no lock (and must not create files)."""
        key = str(path)
        held = self._held.get(key)
        if held is not None:
            if held[1] == fcntl.LOCK_SH and not shared:
                raise RuntimeError("cannot upgrade a shared store lock to exclusive")
            held[2] += 1
            try:
                yield
            finally:
                held[2] -= 1
            return
        if shared:
            try:
                fd = open_regular(path)
            except FileNotFoundError:
                yield
                return
        else:
            ensure_dir(path.parent)
            fd = open_regular(path, os.O_RDWR | os.O_CREAT)
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        try:
            _acquire(fd, mode, timeout, path)
            self._held[key] = [fd, mode, 1]
            try:
                yield
            finally:
                del self._held[key]
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
