"""Exit codes and the exception family; the CLI maps them to messages in one place."""

from __future__ import annotations

import sys

from agenvoy_cli.secrets import mask

OK = 0
FAILED = 1  # the operation failed (LLM call, doctor found problems, ...)
USAGE = 2  # bad usage or bad input; nothing was changed
NOT_FOUND = 3  # unknown session, record or database
CORRUPT = 4  # a file or store on disk is damaged; refused to touch it
BUSY = 75  # the store lock was not acquired in time (EX_TEMPFAIL): retry
INTERRUPTED = 130  # Ctrl-C / SIGINT

EXIT_CODES: dict[int, str] = {
    OK: "success",
    FAILED: "the operation failed (or doctor found problems that remain)",
    USAGE: "bad usage or bad input; nothing was changed",
    NOT_FOUND: "unknown session, error record, note or RAG database",
    CORRUPT: "a file or store in the home is damaged; nothing was written (see doctor)",
    BUSY: "another process held the store lock too long; retry",
    INTERRUPTED: "interrupted (Ctrl-C)",
}


class TimeLimit(BaseException):
    """A hook's time is up (its SIGALRM raises it wherever the code is; a BaseException, as
    KeyboardInterrupt: no layer's `except Exception` keeps it)."""


class AgenvoyError(Exception):
    """Base of every error the CLI turns into one line on stderr (and, with --json, into
    {"error": {"code", "kind", "message"}} on stdout: `kind` names the family). Its text is
    masked (secrets.mask): a message may quote a server's reply, and servers echo keys."""

    exit_code = FAILED
    kind = "failed"

    def __str__(self) -> str:
        return mask(super().__str__())


class BadInput(AgenvoyError):
    exit_code = USAGE
    kind = "bad_input"


class NotFound(AgenvoyError):
    exit_code = NOT_FOUND
    kind = "not_found"


class CorruptStore(AgenvoyError):
    exit_code = CORRUPT
    kind = "corrupt"


class StoreBusy(AgenvoyError):
    exit_code = BUSY
    kind = "busy"


class OperationFailed(AgenvoyError):
    exit_code = FAILED
    kind = "failed"


class DiskFull(OperationFailed):
    """No space left on the file system holding the home (ENOSPC, EDQUOT, SQLite's
    SQLITE_FULL, Chroma's "database or disk is full"): exit 1, "no space left on <home>".
    Never a damaged store, never bad input."""


# What a full disk leaves, unless the layer that failed knows better (an atomic write says
# "nothing was ...").
AFTER_DISK_FULL = "free some space and run it again (what finished before is kept)"


def no_space(where: object, detail: str = "", outcome: str = AFTER_DISK_FULL) -> DiskFull:
    """The one wording of a full disk: `where` is the home (or, outside it, the folder
    written to), `detail` the file or store that failed, `outcome` what was (not) written."""
    said = f" ({detail})" if detail else ""
    return DiskFull(f"no space left on {where}{said}; {outcome}")


def restated(exc: BaseException, home: object, outcome: str) -> BaseException:
    """`exc` as the documented error that says `outcome` (what was, or was not, written)
    instead of the generic after-words; an exception that is not documented (a bug, an
    interrupt) is returned as it is."""
    known = exc if isinstance(exc, AgenvoyError) else documented(exc, home)
    if known is None:
        return exc
    text = Exception.__str__(known)
    text = text.replace(AFTER_DISK_FULL, outcome) if AFTER_DISK_FULL in text else \
        f"{text}; {outcome}"
    return type(known)(text)


def io_failed(where: object, detail: str = "") -> OperationFailed:
    """The one wording of a failing disk (EIO, SQLite's SQLITE_IOERR)."""
    said = f" ({detail})" if detail else ""
    return OperationFailed(f"I/O error in {where}{said}; the operation was not completed "
                           "(check the disk, then `agenvoy doctor`)")


def disk_error(exc: OSError, home: object) -> AgenvoyError | None:
    """A full (ENOSPC, EDQUOT) or failing (EIO) disk as the documented error naming `home`;
    None for any other OSError (a missing file is the caller's to handle)."""
    import errno

    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
        return documented(exc, home)
    return None


def documented(exc: BaseException, home: object = None) -> AgenvoyError | None:
    """The documented error for an exception no layer mapped: the file system refusing a
    write (full, read-only, permissions), a path of the wrong type, SQLite from a library,
    memory. None for anything else (a bug: "internal error"). `home`: the home the command
    works on (a full disk is named by it)."""
    import errno

    if isinstance(exc, OSError) and exc.errno is not None:
        where = f"{exc.filename}: " if exc.filename else ""
        reason = exc.strerror or str(exc)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return no_space(_volume(exc.filename, home), str(exc.filename or ""))
        if exc.errno == errno.EIO:
            return io_failed(_volume(exc.filename, home), f"{where}{reason}".rstrip(": "))
        if exc.errno == errno.EROFS:
            return OperationFailed(f"{where}the file system is read-only; the operation was "
                                   "not completed")
        if exc.errno in (errno.EACCES, errno.EPERM):
            return OperationFailed(f"{where}permission denied")
        if exc.errno in (errno.ENOTDIR, errno.EISDIR, errno.ELOOP):
            return CorruptStore(f"{where}{reason}: a path in the home is not what its layout "
                                "expects (see `agenvoy doctor`)")
        return OperationFailed(f"{where}{reason}")
    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is not None and isinstance(exc, sqlite3.Error):
        text = str(exc)
        if "disk is full" in text:
            return no_space(home if home is not None else "the disk", f"SQLite: {text}")
        if "malformed" in text or "not a database" in text:
            return CorruptStore(f"a database in the home is damaged ({text}); run `agenvoy "
                                "doctor --repair`")
        return OperationFailed(f"SQLite: {text}")
    if isinstance(exc, MemoryError):
        return OperationFailed("out of memory")
    return None


def _volume(filename: object, home: object) -> object:
    """What a full disk is named by: the home when the file is in it (or unnamed, as
    write(2) and fsync(2) fail), else the folder of the file written (an export's)."""
    import os

    if filename is None:
        return home if home is not None else "the disk"
    path = os.path.abspath(os.fsdecode(filename) if isinstance(filename, (str, bytes))
                           else str(filename))
    if home is not None:
        root = os.path.abspath(str(home))
        if path == root or path.startswith(root + os.sep):
            return home
    return os.path.dirname(path)
