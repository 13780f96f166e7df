"""session reset / remove, in the order that keeps the invariants, and upstream's rule that a
reset first folds what the summary has not seen into summary.json ("reset aborted to avoid
context loss", internal/agents/exec/reset.go)."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenvoy_cli.conversation import archive, sessions
from agenvoy_cli.errors import AgenvoyError, BadInput, OperationFailed, StoreBusy
from agenvoy_cli.home import sqlite
from agenvoy_cli.home.files import FileIdentity, file_identity, link_aside, put_back

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.models.llm import Client, LLMConfig

ATTEMPTS = 3  # summary refreshes tried while messages keep arriving


def clear_session(store: Store, session_id: str, *, remove: bool,
                  guard: Callable[[], None] | None = None,
                  summary: bool = False) -> dict[str, Any]:
    """All or nothing (#49: a full disk used to leave history.json deleted and the rows in
    place, and doctor then put history.json back). Vectors first (derived: behind is
    allowed, never ahead); history.json out of the way (a hard link keeps it: putting it
    back needs no disk space); the rows in one transaction. A failure up to that commit
    puts history.json back: nothing changed. After it, what is left (Agenvoy's own session
    files, the summary with `summary`, the folder) is completed by running the command
    again. `guard` runs first under the lock and may refuse (history.json changed since the
    summary was refreshed). `summary`: also summary.json and summary.meta.json (Agenvoy's
    ResetAll)."""
    if store.hooks.active(store):
        store.hooks.preload()
    with store.write_lock():
        store.require(session_id)
        if guard is not None:
            guard()
        store.hooks.before_clear(store)
        layout = store.layout
        folder = layout.session_dir(session_id)
        history = layout.history(session_id)
        store.hooks.after_clear(store, session_id)
        had_history = history.exists()
        previous = link_aside(history) if had_history else None
        try:
            rows = _clear_rows(store, session_id, history, previous, remove=remove)
        finally:
            if previous is not None:
                previous.unlink(missing_ok=True)
        removed = [p.name for p in layout.agent_files(session_id) if _remove(p)]
        if summary:
            removed += [p.name for p in (layout.summary(session_id),
                                         layout.summary_meta(session_id)) if _remove(p)]
        if remove and folder.exists():
            shutil.rmtree(folder)
        return {"session_id": session_id, "action": "removed" if remove else "reset",
                "history_deleted": had_history, "rows_deleted": rows,
                "agent_files_deleted": removed,
                "summary_kept": (not remove) and layout.summary(session_id).exists()}


def _clear_rows(store: Store, session_id: str, history: Path, previous: Path | None, *,
                remove: bool) -> int:
    """history.json deleted, then the session's rows; history.json put back unless the
    rows' deletion committed (an interruption may land right after the COMMIT)."""
    layout = store.layout
    rows = 0
    try:
        history.unlink(missing_ok=True)
        if layout.db.exists():
            with store.transaction() as conn:
                rows = archive.delete_session(conn, session_id)
                sessions.drop(conn, session_id)
                if not remove:  # the folder stays: a row saying it holds no messages
                    sessions.write_stats(conn, session_id, history, 0, 0)
    except BaseException:
        if previous is not None and not _rows_deleted(store, session_id):
            put_back(previous, history)
        raise
    if rows:
        sqlite.reclaim_space(store.db())
    return rows


def _rows_deleted(store: Store, session_id: str) -> bool:
    """Whether the session's rows are gone (a failure to tell is a no)."""
    try:
        conn = store.db()
        if conn.in_transaction:
            return False
        return conn.execute("SELECT 1 FROM messages WHERE session_id = ? LIMIT 1",
                            (session_id,)).fetchone() is None
    except (AgenvoyError, OSError, sqlite3.Error):
        return False


def _remove(path: Path) -> bool:
    """Delete a file or folder of the session; a symbolic link is removed, never followed."""
    if path.is_symlink() or path.is_file():
        path.unlink()
        return True
    if path.is_dir():
        shutil.rmtree(path)
        return True
    return False


def _history_state(store: Store, session_id: str) -> FileIdentity | None:
    return file_identity(store.layout.history(session_id))


class _Changed(Exception):
    """history.json changed between the summary refresh and the reset."""


def unsummarized(store: Store, session_id: str) -> int:
    """How many messages the summary has not seen yet (0: a reset loses no context)."""
    from agenvoy_cli.conversation.summarizer import read_snapshot

    snap = read_snapshot(store, session_id)
    return 0 if snap.legacy else len(snap.new)


def reset_with_summary(store: Store, session_id: str, config: LLMConfig | None,
                       client: Client | None, *, remove: bool = False,
                       progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Refresh the summary from what it has not seen, then reset; abort with nothing changed
    when the refresh fails. A message appended meanwhile is summarized too before the reset
    (at most ATTEMPTS rounds)."""
    from agenvoy_cli.conversation.summarizer import summarize_session

    action = "remove" if remove else "reset"
    for _ in range(ATTEMPTS):
        before = _history_state(store, session_id)
        if config is None or client is None:
            if unsummarized(store, session_id):
                raise NoLLM(session_id, action, unsummarized(store, session_id))
            result = None
        else:
            result = summarize_session(store, session_id, config, client, progress=progress)
            if result.status == "failed":
                error = OperationFailed(f"summary refresh failed; {action} aborted to avoid "
                                        f"context loss (nothing was changed): {result.error}")
                error.exit_code = result.exit_code or error.exit_code
                raise error
        seen = _history_state(store, session_id)
        if seen != before:
            continue  # appended while summarizing: fold that in too

        def guard(seen: tuple[int, int, int] | None = seen) -> None:
            if _history_state(store, session_id) != seen:
                raise _Changed

        try:
            done = clear_session(store, session_id, remove=remove, guard=guard)
        except _Changed:
            continue
        done["summary"] = result.as_dict() if result is not None else None
        return done
    raise StoreBusy(f"messages keep arriving in {session_id!r}: {action} aborted to avoid "
                    "context loss (nothing was changed); retry when the session is quiet")


class NoLLM(BadInput):
    """The summary must be refreshed first and no LLM is configured."""

    def __init__(self, session_id: str, action: str, count: int) -> None:
        super().__init__(
            f"{session_id!r} has {count} message(s) the summary has not seen and no LLM is "
            f"configured to fold them in first: set AGENVOY_LLM_BASE_URL and "
            f"AGENVOY_LLM_MODEL (or --llm-command), or pass --no-summary to {action} anyway "
            "(those messages are then lost from the context); nothing was changed")
