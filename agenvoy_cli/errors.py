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


def documented(exc: BaseException) -> AgenvoyError | None:
    """The documented error for an exception no layer mapped: the file system refusing a
    write (full, read-only, permissions), a path of the wrong type, SQLite from a library,
    memory. None for anything else (a bug: "internal error")."""
    import errno

    if isinstance(exc, OSError) and exc.errno is not None:
        where = f"{exc.filename}: " if exc.filename else ""
        reason = exc.strerror or str(exc)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return OperationFailed(f"{where}{reason} (the disk is full); the operation was "
                                   "not completed")
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
        if "malformed" in text or "not a database" in text:
            return CorruptStore(f"a database in the home is damaged ({text}); run `agenvoy "
                                "doctor --repair`")
        return OperationFailed(f"SQLite: {text}")
    if isinstance(exc, MemoryError):
        return OperationFailed("out of memory")
    return None
