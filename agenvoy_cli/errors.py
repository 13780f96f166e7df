"""Exit codes and the exception family; the CLI maps them to messages in one place."""

from __future__ import annotations

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
    NOT_FOUND: "unknown session, error record or RAG database",
    CORRUPT: "a file or store in the home is damaged; nothing was written (see doctor)",
    BUSY: "another process held the store lock too long; retry",
    INTERRUPTED: "interrupted (Ctrl-C)",
}


class AgenvoyError(Exception):
    """Base of every error the CLI turns into one line on stderr (and, with --json, into
    {"error": {"code", "kind", "message"}} on stdout: `kind` names the family)."""

    exit_code = FAILED
    kind = "failed"


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
