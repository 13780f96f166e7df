"""SQLite errors, mapped once: every connection of the home raises our documented errors
(a damaged file: exit 4 with the way back; read-only or full disk: exit 1; locked: exit 75)
wherever the error surfaces, on execute or halfway through reading rows. The raised classes
are also the original sqlite3 classes, so code that catches sqlite3 errors keeps working."""

from __future__ import annotations

import errno
import os
import sqlite3
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from agenvoy_cli.errors import (
    AgenvoyError,
    CorruptStore,
    DiskFull,
    OperationFailed,
    StoreBusy,
    io_failed,
    no_space,
)
from agenvoy_cli.home import faults
from agenvoy_cli.home.layout import home_of

_CORRUPT = ("malformed", "not a database", "file is not a database", "database corruption")
# Every sqlite3 error class (sqlite3.Error and its subclasses, as the module defines them).
_SQLITE_ERRORS: tuple[type[sqlite3.Error], ...] = tuple(
    cls for cls in vars(sqlite3).values()
    if isinstance(cls, type) and issubclass(cls, sqlite3.Error))


def _both(ours: type[AgenvoyError], theirs: type[sqlite3.Error]) -> type[BaseException]:
    # type() with three arguments builds a class mypy cannot see: it derives from both
    return cast("type[BaseException]",
                type(ours.__name__, (ours, theirs), {"__str__": AgenvoyError.__str__}))


# (our class, the sqlite3 class) -> a class deriving from both (see wrap): every pair
# classify() can produce, built once at import and never changed
_MIXED: Mapping[tuple[type[AgenvoyError], type[sqlite3.Error]], type[BaseException]] = (
    types.MappingProxyType({(ours, theirs): _both(ours, theirs)
                            for ours in (CorruptStore, OperationFailed, DiskFull, StoreBusy)
                            for theirs in _SQLITE_ERRORS}))


def damaged_message(path: Path, detail: str) -> str:
    return (f"{path} is damaged ({detail}); run `agenvoy doctor --repair` to salvage every "
            "readable row into a fresh database (the damaged file is kept aside), or restore "
            "it from a backup")


def _disk_state(path: Path) -> str | None:
    """'read-only' or 'full' when the file system of `path` is, else None."""
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        info = os.statvfs(probe)
    except OSError:
        return None
    if info.f_flag & os.ST_RDONLY:
        return "read-only"
    if info.f_bavail == 0:
        return "full"
    return None


def classify(exc: sqlite3.Error, path: Path) -> AgenvoyError | None:
    """Our error for a SQLite error on the database at `path`, None when it is a bug."""
    text = str(exc)
    if isinstance(exc, AgenvoyError):
        return exc
    if isinstance(exc, sqlite3.DatabaseError) and any(c in text for c in _CORRUPT):
        return CorruptStore(damaged_message(path, text))
    if not isinstance(exc, sqlite3.OperationalError):
        return None
    if "readonly" in text or "read-only" in text:
        return OperationFailed(f"{path} is read-only ({text}); nothing was written")
    if "disk is full" in text:
        return no_space(home_of(path), f"{path.name}: {text}")
    if "locked" in text or "busy" in text:
        return StoreBusy(f"{path} is locked by another process: {text}")
    if "disk I/O error" in text or "unable to open" in text:
        state = _disk_state(path)
        if state == "read-only":
            return OperationFailed(f"{path}: the file system is read-only ({text}); nothing "
                                   "was written")
        if state == "full":
            return no_space(home_of(path), f"{path.name}: {text}")
        if "disk I/O error" in text:
            return io_failed(home_of(path), f"{path.name}: {text}")
        return OperationFailed(f"{path}: {text}")
    return None


def wrap(exc: sqlite3.Error, path: Path) -> BaseException:
    """`exc` as one of our errors that is still an instance of its sqlite3 class."""
    ours = classify(exc, path)
    if ours is None or isinstance(exc, AgenvoyError):
        return exc
    # the nearest sqlite3 class of the error (a subclass made elsewhere maps to its base)
    theirs = next(c for c in type(exc).__mro__ if (type(ours), c) in _MIXED)
    return _MIXED[type(ours), theirs](Exception.__str__(ours))


# What SQLite answers when the disk is full or failing (its extended codes: SQLITE_FULL 13,
# SQLITE_IOERR 10), for the fault injector to fail a commit the way SQLite would.
_SQLITE_FAILURES = {errno.ENOSPC: ("database or disk is full", 13, "SQLITE_FULL"),
                    errno.EIO: ("disk I/O error", 10, "SQLITE_IOERR")}
# Statements that write by themselves outside a transaction (each one is a commit).
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER", "VACUUM",
           "PRAGMA INCREMENTAL_VACUUM")


def _sqlite_failure(code: int) -> sqlite3.Error:
    text, number, name = _SQLITE_FAILURES[code]
    exc = sqlite3.OperationalError(text)
    exc.sqlite_errorcode, exc.sqlite_errorname = number, name  # type: ignore[attr-defined]
    return exc


def _injection_point(cursor: sqlite3.Cursor, sql: str) -> None:
    """The fault injector's commit point: a COMMIT, or a write outside a transaction."""
    head = " ".join(sql.split()[:2]).upper()
    if head.startswith(("COMMIT", "END")) or "COMMIT;" in sql.upper() or (
            not cursor.connection.in_transaction and head.startswith(_WRITES)):
        faults.hit("commit", head, _sqlite_failure)


class GuardedCursor(sqlite3.Cursor):
    path: Path

    def execute(self, sql: str, parameters: Any = ()) -> GuardedCursor:
        try:
            if faults.is_armed():
                _injection_point(self, sql)
                done = super().execute(sql, parameters)
                faults.passed()
                return done
            return super().execute(sql, parameters)
        except sqlite3.Error as exc:
            raise wrap(exc, self.path) from None

    def executemany(self, sql: str, seq: Any) -> GuardedCursor:
        try:
            if faults.is_armed():
                _injection_point(self, sql)
                done = super().executemany(sql, seq)
                faults.passed()
                return done
            return super().executemany(sql, seq)
        except sqlite3.Error as exc:
            raise wrap(exc, self.path) from None

    def executescript(self, script: str) -> sqlite3.Cursor:  # typeshed: Cursor, not Self
        try:
            if faults.is_armed():
                _injection_point(self, script)
                ran = super().executescript(script)
                faults.passed()
                return ran
            return super().executescript(script)
        except sqlite3.Error as exc:
            raise wrap(exc, self.path) from None

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite3.Error as exc:
            raise wrap(exc, self.path) from None

    def fetchmany(self, size: int | None = None) -> list[Any]:
        try:
            return super().fetchmany(self.arraysize if size is None else size)
        except sqlite3.Error as exc:
            raise wrap(exc, self.path) from None

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite3.Error as exc:
            raise wrap(exc, self.path) from None

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except sqlite3.Error as exc:
            raise wrap(exc, self.path) from None


class GuardedConnection(sqlite3.Connection):
    """sqlite3.connect(..., factory=GuardedConnection); set .path right after."""

    path: Path = Path("history.db")
    # (schema version, Layout) as home/generation.py last detected it on this connection
    layout_seen: tuple[int, Any] | None = None

    def cursor(self, factory: Any = GuardedCursor) -> Any:
        cur = super().cursor(factory)
        cur.path = self.path
        return cur

    def execute(self, sql: str, parameters: Any = ()) -> Any:
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, seq: Any) -> Any:
        return self.cursor().executemany(sql, seq)

    def executescript(self, script: str) -> Any:
        return self.cursor().executescript(script)


def open_guarded(target: str | Path, path: Path, **kwargs: Any) -> GuardedConnection:
    try:
        conn = sqlite3.connect(target, factory=GuardedConnection, **kwargs)
    except sqlite3.Error as exc:
        raise wrap(exc, path) from None
    conn.path = path
    return conn
