"""The fault injector of the home's writes, the way SQLite tests itself (its test VFS fails
the Nth I/O call and the harness checks the database after each one).

Every write, fsync and rename of a home's file (home/files.py, the generation token, the
marker line), every SQLite commit of a home connection (home/dbguard.py: COMMIT, and a write
statement outside a transaction, which commits by itself) and every write to the vector
index (vectors/collection.py: add, delete, create, drop) first calls `hit(point)`. Armed,
the Nth of those calls fails as a full disk (ENOSPC) or a failing disk (EIO) would fail
there, or the process ends as under kill -9 (SIGKILL to itself: no cleanup, no flush), or
an in-process interruption lands there (KeyboardInterrupt as Ctrl-C raises it, the hook's
TimeLimit as its SIGALRM does: an exception wherever the code happens to be, and what runs
on the way out runs).
Unarmed (always, outside tests), hit() is the test of one empty list.

A process is armed once, at its entry: `cli.main` takes AGENVOY_FAULTS from its settings
(settings.py `Settings.faults`) and calls `arm(parse(value))`; a test in the same process
uses `armed(plan)`. The value is comma-separated `key=value` pairs:

    at=N          fail the Nth call (1-based) among `point`; without it nothing fails and
                  the calls are only counted (a dry counting run)
    point=P       any (default), write, fsync, rename, commit or chroma
    fail=F        enospc (default), eio, kill, interrupt (KeyboardInterrupt) or
                  timelimit (errors.TimeLimit); an interruption lands before the call,
                  but right after a commit (passed(): the moment a signal most often
                  lands, SQLite's fsync, and the one a failure never shows)
    once=1        a full disk fails only that one call (by default it stays full: every
                  later write, fsync, commit and vector write of the process fails too;
                  renames need no space and pass); eio and kill are always once
    log=PATH      every call reached is appended to PATH as "N point what", and a fired
                  fault as "fired N point what" (how a test counts a path's points)

The process-wide list of armed plans is what SQLite's VFS shim is to SQLite: the calls it
watches come from every layer, most with no object of the caller's to carry it on;
tests/test_architecture.py (KNOWN_STATE) lists it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Callable, Iterator

ENV = "AGENVOY_FAULTS"
POINTS = ("write", "fsync", "rename", "commit", "chroma")
FAILURES = {"enospc": errno.ENOSPC, "eio": errno.EIO, "kill": 0, "interrupt": 0,
            "timelimit": 0}
INTERRUPTIONS = ("interrupt", "timelimit")
# (an interruption at a commit is raised after it, by passed())
_AFTER = ("commit",)
# What a full disk keeps failing once it is full (a rename needs no new block).
_NEED_SPACE = ("write", "fsync", "commit", "chroma")

# How a failure looks at a call site: the error that call raises for an errno.
ErrorFor = Callable[[int], BaseException]


def os_error(code: int, path: str | os.PathLike[str] | None = None) -> OSError:
    """What the kernel gives: write(2) and fsync(2) name no file, rename(2) does."""
    if path is None:
        return OSError(code, os.strerror(code))
    return OSError(code, os.strerror(code), os.fspath(path))


class Plan:
    """Which call fails and how; counts the calls it sees. (A plain class: a dataclass costs
    every append ~0.5 ms to build at import, bench/append.py.)"""

    def __init__(self, at: int | None = None, point: str = "any", failure: str = "enospc",
                 once: bool = False, log: str | None = None) -> None:
        self.at, self.point, self.failure, self.once, self.log = at, point, failure, once, log
        self.reached = 0  # calls of `point` seen so far
        self.fired = False
        self.pending: BaseException | None = None  # an interruption due after the call
        self._lock = threading.Lock()

    def reach(self, point: str, what: str, error: ErrorFor | None) -> None:
        with self._lock:
            if self.point not in ("any", point):
                return
            if self.fired and not self.once and self.failure == "enospc" \
                    and point in _NEED_SPACE:
                raise _error(error, FAILURES["enospc"], what)
            self.reached += 1
            n = self.reached
            fire = self.at is not None and n == self.at and not self.fired
            self._note(f"{'fired ' if fire else ''}{n} {point} {what}")
            if not fire:
                return
            self.fired = True
        if self.failure == "kill":
            import signal  # here: its import (~0.7 ms) is not paid by every append

            os.kill(os.getpid(), signal.SIGKILL)
        if self.failure in INTERRUPTIONS:
            stop = _interruption(self.failure)
            if point in _AFTER:
                self.pending = stop
                return
            raise stop
        raise _error(error, FAILURES[self.failure], what)

    def _note(self, line: str) -> None:
        if self.log is None:
            return
        # O_APPEND, one write per line: lines of several threads or processes never mix
        fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line.replace("\n", " ").encode("utf-8", "replace") + b"\n")
        finally:
            os.close(fd)


def _interruption(failure: str) -> BaseException:
    if failure == "timelimit":
        from agenvoy_cli.errors import TimeLimit

        return TimeLimit()
    return KeyboardInterrupt()


def _error(error: ErrorFor | None, code: int, what: str) -> BaseException:
    return error(code) if error is not None else os_error(code)


_plans: list[Plan] = []  # the armed plan (at most one); see the module's docstring


def hit(point: str, what: object = "", error: ErrorFor | None = None) -> None:
    """Called before each write, fsync, rename, commit or vector write of the home
    (`point`, one of POINTS); `what` names the file or statement (the log's label) and
    `error` says how a failure surfaces there (by default an OSError without a file name,
    as write(2) and fsync(2) give). Does nothing unless armed."""
    if _plans:
        _plans[0].reach(point, str(what), error)


def passed() -> None:
    """Called right after a call hit() saw (a commit): an interruption due then lands."""
    if _plans and _plans[0].pending is not None:
        stop, _plans[0].pending = _plans[0].pending, None
        raise stop


def is_armed() -> bool:
    """Whether hit() can fail (the SQLite layer asks before it looks at a statement)."""
    return bool(_plans)


def parse(value: str) -> Plan:
    """A plan from AGENVOY_FAULTS's text (see the module's docstring); ValueError names
    what is wrong."""
    plan = Plan()
    for item in value.split(","):
        if not item.strip():
            continue
        key, sep, raw = item.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep:
            raise ValueError(f"{ENV}: {item!r} is not key=value")
        if key == "at":
            plan.at = int(raw)
            if plan.at < 1:
                raise ValueError(f"{ENV}: at={raw} (the first call is 1)")
        elif key == "point":
            if raw not in ("any", *POINTS):
                raise ValueError(f"{ENV}: point={raw} (one of any, {', '.join(POINTS)})")
            plan.point = raw
        elif key == "fail":
            if raw not in FAILURES:
                raise ValueError(f"{ENV}: fail={raw} (one of {', '.join(FAILURES)})")
            plan.failure = raw
        elif key == "once":
            plan.once = raw not in ("", "0")
        elif key == "log":
            plan.log = raw
        else:
            raise ValueError(f"{ENV}: unknown key {key!r}")
    return plan


def arm(plan: Plan) -> None:
    """Arm the process (its entry does this once; see armed() for a test)."""
    _plans[:] = [plan]


@contextlib.contextmanager
def armed(plan: Plan) -> Iterator[Plan]:
    """Arm this process for the block (a test in the process that runs the code)."""
    before = list(_plans)
    _plans[:] = [plan]
    try:
        yield plan
    finally:
        _plans[:] = before
