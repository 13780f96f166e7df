"""Imports run by another agent at the moment its turn ends: Claude Code's hooks (JSON on
stdin: session_id, transcript_path, cwd, hook_event_name) and Codex CLI's `notify` program
(JSON as the last argument: type agent-turn-complete, thread-id, cwd).

On Stop, PreCompact and SessionEnd the turn has ended: nothing of the session's transcript
is half-written, so its import takes everything now. On SubagentStop the sub-agent's own
transcript is taken whole, the parent's by the usual rule (its turn goes on). SessionStart
may return a bounded context for the model (the session's rolling summary, or the latest
one of its project, and the knowledge notes' names): the caller prints it, when asked to."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from agenvoy_cli.conversation.store import Store
from agenvoy_cli.conversation.summary import context_message, read_summary
from agenvoy_cli.errors import BadInput
from agenvoy_cli.home.files import ensure_dir, open_regular
from agenvoy_cli.home.layout import Layout, validate_name
from agenvoy_cli.secrets import mask
from agenvoy_cli.transfer import sources
from agenvoy_cli.transfer.service import import_

MAX_INPUT = 1 << 20  # a hook's JSON on stdin at most
CONTEXT_CHARS = 8000  # what SessionStart gives the model at most
CONTEXT_NOTES = 50  # note names SessionStart lists at most (the rest counted)
TURN_ENDS = ("Stop", "PreCompact", "SessionEnd")


class Event(NamedTuple):
    name: str
    session_id: str
    transcript: Path | None
    agent_transcript: Path | None
    cwd: str
    source: str  # SessionStart: startup, resume, clear, compact


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) else ""


def _path(value: str) -> Path | None:
    return Path(value).expanduser() if value and "\x00" not in value else None


def _document(data: bytes | str, what: str) -> Any:
    """The JSON a host handed over (BadInput when too long or not JSON)."""
    if len(data) > MAX_INPUT:
        raise BadInput(f"{what} is over {MAX_INPUT:,} bytes")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"{what} is not JSON ({exc})") from None


def parse_event(data: bytes) -> Event:
    """Claude Code's hook input (BadInput when it is not one)."""
    doc = _document(data, "the hook's input")
    if not isinstance(doc, dict) or not _text(doc, "hook_event_name"):
        raise BadInput("the hook's input has no hook_event_name")
    return Event(_text(doc, "hook_event_name"), _text(doc, "session_id"),
                 _path(_text(doc, "transcript_path")),
                 _path(_text(doc, "agent_transcript_path")), _text(doc, "cwd"),
                 _text(doc, "source"))


def _one_file(path: Path | None) -> None:
    """A hook names one transcript: a folder would import every .jsonl under it."""
    if path is not None and path.is_dir():
        raise BadInput(f"{path} is a folder, not a transcript file: nothing imported")


def claude_code_event(store: Store, event: Event, *, context: bool = False) -> tuple[list[dict[str,
                                                                               Any]], str]:
    """(the import results, the context for the model: "" unless SessionStart and asked)."""
    done: list[dict[str, Any]] = []
    if event.name in (*TURN_ENDS, "SubagentStop"):
        _one_file(event.transcript)
        _one_file(event.agent_transcript)
    if event.name in TURN_ENDS and event.transcript is not None:
        done.append(import_(store, "claude-code", [str(event.transcript)], now=True))
    elif event.name == "SubagentStop":
        if event.agent_transcript is not None:
            done.append(import_(store, "claude-code", [str(event.agent_transcript)], now=True))
        if event.transcript is not None:
            done.append(import_(store, "claude-code", [str(event.transcript)]))
    if event.name == "SessionStart" and context:
        return done, session_context(store, event)
    return done, ""


def session_context(store: Store, event: Event) -> str:
    """The rolling summary of the session (resumed, cleared, compacted), else the latest of
    the sessions imported from the same folder, as the system text `context` starts with;
    at most CONTEXT_CHARS."""
    with store.read_lock():
        conn = store.db_readonly()
        found = sources.get(conn, f"claude-code:{event.session_id}") if event.session_id \
            else None
        candidates = [found.session_id] if found is not None else []
        candidates += sources.sessions_from(conn, "claude-code", event.cwd)
    text = ""
    for sid in candidates:
        try:
            summary = read_summary(store.layout.summary(validate_name(sid)))
        except Exception:  # noqa: BLE001 - a damaged summary: the next one, or none
            continue
        if summary:
            text = context_message(summary, None)["content"]
            break
    notes = notes_line(store)
    room = CONTEXT_CHARS - (len(notes) + 2 if notes else 0)
    if len(text) > room:
        text = text[:room - 20].rstrip() + "\n[... shortened]"
    return "\n\n".join(part for part in (text, notes) if part)


def notes_line(store: Store) -> str:
    """The knowledge notes' names, as Agenvoy tells its model they exist (the operator's
    notes outrank anything else; the model reads one when a request touches it)."""
    from agenvoy_cli.notes.store import names

    first, total = names(store, CONTEXT_NOTES)
    if not total:
        return ""
    more = f" (and {total - len(first)} more: `find_knowledge` mode list)" \
        if total > len(first) else ""
    return ("Knowledge notes (the operator's; read one with `find_knowledge` mode read, or "
            f"`agenvoy notes show NAME`, before answering what it covers): "
            f"{', '.join(first)}{more}")


def codex_rollout(codex_home: Path, thread_id: str) -> Path | None:
    """The rollout file of a Codex thread (rollout-<time>-<thread id>.jsonl under
    sessions/YYYY/MM/DD), newest days first."""
    if not thread_id or "/" in thread_id or "\x00" in thread_id:
        return None
    suffix = f"-{thread_id}.jsonl"
    base = codex_home / "sessions"
    for root, dirs, names in os.walk(base):
        dirs.sort(reverse=True)
        for name in names:
            if name.startswith("rollout-") and name.endswith(suffix):
                return Path(root) / name
    return None


def codex_notify(store: Store, payload: str, codex_home: Path) -> list[dict[str, Any]]:
    """Codex's notify: on agent-turn-complete, the thread's rollout taken whole."""
    doc = _document(payload, "the notification")
    if not isinstance(doc, dict) or doc.get("type") != "agent-turn-complete":
        return []
    thread = doc.get("thread-id")
    rollout = codex_rollout(codex_home, thread) if isinstance(thread, str) else None
    if rollout is None:
        raise BadInput(f"no rollout of thread {thread!r} under {codex_home / 'sessions'}")
    return [import_(store, "codex", [str(rollout)], now=True)]


LOG_BYTES = 1 << 20  # hook.log is moved to hook.log.1 beyond this


def log_line(layout: Layout, line: str) -> None:
    """Append a line to the home's hook log (the previous log kept as hook.log.1 once it
    is over LOG_BYTES)."""
    path = layout.hook_log
    ensure_dir(path.parent)
    with contextlib.suppress(FileNotFoundError):
        if path.stat().st_size > LOG_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
    fd = open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, f"{time.strftime('%Y-%m-%d %H:%M:%S')} {mask(line)}\n".encode(
            "utf-8", "replace"))
    finally:
        os.close(fd)
