"""Rolling summaries: the messages after the cursor, in chunks (of at most 16 messages and
32,000 characters: conversation/summary_chunks.py), one LLM call per chunk.

The system prompt of each call carries the summary so far, so the merge happens in that
call (no second pass). After each successful chunk summary.json and the cursor are saved;
a failed call stops the session and the next run starts after the last saved chunk.

Locks: the per-session task lock is held for the whole run, so two runs never send the same
chunk (the cursor is re-read inside it); the store lock is held only for the short reads and
writes, never during an LLM call.

The cursor (summary.meta.json) is upstream's {"last_message_time": ...} plus our
`last_seq`/`last_hash` (place and identity of the last summarized message). The time alone
cannot split a batch of messages that share one header time; the place can. When the place
does not check out (a file written by the Go agent, a session reset), the time is used with
upstream's rule: a message is new when its header time is later, or when it has no header.

The mtime gate: a session is pending when history.json is newer than summary.json. After a
run summary.json gets the mtime of the history.json it was built from (older by a second
when chunks remain), so a message appended during a run, or a run that stopped early, keeps
the session pending for us and for upstream's scheduler alike.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import orjson

from agenvoy_cli.contract import local_ns, moment
from agenvoy_cli.conversation import archive
from agenvoy_cli.conversation.history_format import local, send_at
from agenvoy_cli.conversation.messages import (
    NS,
    TIME_FORMAT,
    Message,
    call_line,
    header_time,
    local_to_ns,
    parse_local_time,
    strip_header,
    tool_calls,
)
from agenvoy_cli.conversation.store import Store
from agenvoy_cli.conversation.summary import (
    CURSOR_KEY,
    KEYS,
    LEGACY_KEYS,
    parse_summary_reply,
    read_cursor,
    read_summary,
)
from agenvoy_cli.conversation.summary_chunks import chunk_messages
from agenvoy_cli.errors import StoreBusy
from agenvoy_cli.home.files import atomic_write_json
from agenvoy_cli.models.llm import Client, LLMConfig, LLMError

MAX_DECISIONS = 8
MAX_PAST = 8
PLACEHOLDER = "{{.Summary}}"
SEQ_KEY = "last_seq"
HASH_KEY = "last_hash"
# summary.meta.json written just before this program's first summary.json (see _save): a
# summary with this cursor is not a legacy one
FROM_START = "from_first_message"
INSTRUCTION = ("Merge these messages into the summary now, following the rules above. "
               "Reply with the <summary> block only.")

Progress = Callable[[str], None]


@functools.lru_cache(maxsize=1)
def prompt_template() -> str:
    return (resources.files("agenvoy_cli") / "prompts" / "summarize.md").read_text("utf-8").strip()


# -- cursor ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cursor:
    time: str | None = None
    seq: int | None = None
    hash: str | None = None

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> Cursor:
        seq, digest = meta.get(SEQ_KEY), meta.get(HASH_KEY)
        return cls(meta.get(CURSOR_KEY) or None,
                   seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 else None,
                   digest if isinstance(digest, str) and digest else None)

    def after(self, chunk: Sequence[Message]) -> Cursor:
        """Moved past a chunk: to its latest time (never backwards) and its last place."""
        latest = max(m.time for m in chunk)
        stamp = max(latest, self.time) if self.time else latest
        return Cursor(stamp, chunk[-1].seq, chunk[-1].hash)

    def as_meta(self) -> dict[str, Any]:
        return {CURSOR_KEY: self.time, SEQ_KEY: self.seq, HASH_KEY: self.hash}


def _newer_than(message: Message, stamp: str) -> bool:
    """Upstream's filter: a later time (sendAt, else the header), or no time at all."""
    ns, own = send_at(message.raw), header_time(message.text)
    if ns is not None:
        return local(ns) > stamp
    return own is None or own.strftime(TIME_FORMAT) > stamp


def _at(conn: Any, session_id: str, recent: list[Message], seq: int) -> Message | None:
    if recent and 0 <= seq - recent[0].seq < len(recent):
        return recent[seq - recent[0].seq]
    if conn is None:
        return None
    rows = archive.rows_from(conn, session_id, seq, seq + 1)
    return rows[0] if rows else None


def messages_after(conn: Any, session_id: str, recent: list[Message],
                   cursor: Cursor | None) -> list[Message]:
    """The messages to summarize, oldest first: archived rows that compaction trimmed from
    history.json (never summarized yet), then history.json's own."""
    start = recent[0].seq if recent else None

    def trimmed(lo: int) -> list[Message]:
        if conn is None or (start is not None and lo >= start):
            return []
        return archive.rows_from(conn, session_id, lo, start)

    if cursor is None:
        return trimmed(0) + recent
    if cursor.seq is not None and cursor.hash:
        found = _at(conn, session_id, recent, cursor.seq)
        # The place counts only if it still holds that message and the time was not rewound
        # by hand (rewinding last_message_time is how one re-summarizes from a moment).
        if found is not None and found.hash == cursor.hash and (
                cursor.time is None or cursor.time >= found.time
                or (header_time(found.text) is None and send_at(found.raw) is None)):
            lo = cursor.seq + 1
            return trimmed(lo) + [m for m in recent if m.seq >= lo]
    if cursor.time is None:
        return trimmed(0) + recent
    rows: list[Message] = []
    if conn is not None:
        bound = local_to_ns(parse_local_time(cursor.time)) + NS  # after the cursor's second
        sql = "SELECT min(seq) FROM messages WHERE session_id = ? AND send_at >= ?"
        lo = conn.execute(sql, (session_id, bound)).fetchone()[0]
        rows = trimmed(lo) if lo is not None else []
    return [m for m in rows + recent if _newer_than(m, cursor.time)]


# -- chunks and requests ------------------------------------------------------------------------
SUMMARY_CALL_WIDTH = 240  # characters of a call's arguments the LLM sees (bounded: chunks
#                           are sized by the messages' text alone)


def _shown(m: Message, names: dict[str, str]) -> str:
    """A message as the LLM reads it: its text, then a `→ name(arguments)` line per tool
    call (a call alone was an empty block); a tool result led by its call's name."""
    text = m.text
    call_id = m.raw.get("tool_call_id")
    name = (names.get(call_id) if isinstance(call_id, str) else None) or m.raw.get("name")
    if m.role == "tool" and isinstance(name, str) and name:
        body = strip_header(text)
        text = f"{text[:len(text) - len(body)]}{name} → {body}"
    calls = [call_line(c, SUMMARY_CALL_WIDTH) for c in tool_calls(m.raw)]
    if not calls:
        return text
    return "\n".join([text.rstrip("\n"), *calls] if text.strip() else calls)


def render_chunk(chunk: Sequence[Message]) -> str:
    names = {c["id"]: str(c["function"].get("name") or "") for m in chunk
             for c in tool_calls(m.raw)
             if isinstance(c.get("id"), str) and isinstance(c.get("function"), dict)}
    body = "".join(f"[{m.role}]\n{_shown(m, names)}\n\n" for m in chunk)
    # A fence longer than any backtick run inside, so a message cannot close it.
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{body}{fence}\n\n{INSTRUCTION}"


def summary_json(summary: dict[str, Any] | None) -> str:
    return orjson.dumps(summary or {}, option=orjson.OPT_INDENT_2).decode()


def build_messages(summary_text: str, chunk: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": "system", "content": prompt_template().replace(PLACEHOLDER, summary_text)},
            {"role": "user", "content": render_chunk(chunk)}]


def enforce_limits(summary: dict[str, Any]) -> dict[str, Any]:
    """The prompt's size limits, applied when a model ignores them: the newest 8 decisions,
    the 8 most recently discussed past topics (order kept)."""
    out = dict(summary)
    decisions = out.get("key_decisions")
    if isinstance(decisions, list) and len(decisions) > MAX_DECISIONS:
        out["key_decisions"] = decisions[-MAX_DECISIONS:]
    past = out.get("past_discussions")
    if isinstance(past, list) and len(past) > MAX_PAST:
        def when(i: int) -> str:
            item = past[i]
            return str(item.get("last_discussed") or "") if isinstance(item, dict) else ""

        keep = set(sorted(range(len(past)), key=lambda i: (when(i), i))[-MAX_PAST:])
        out["past_discussions"] = [item for i, item in enumerate(past) if i in keep]
    return out


# -- results --------------------------------------------------------------------------------
@dataclass
class SessionResult:
    session_id: str
    status: str  # summarized | up_to_date | cursor_set | limited | failed | skipped | dry_run
    chunks_done: int = 0
    chunks_total: int = 0
    cursor: str | None = None
    error: str | None = None
    exit_code: int = 0
    requests: list[dict[str, Any]] | None = field(default=None)

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"session_id": self.session_id, "status": self.status,
                               "chunk_count": self.chunks_total, "summarized": self.chunks_done,
                               **moment("cursor", local_ns(self.cursor)),
                               "error": self.error, "exit_code": self.exit_code}
        if self.requests is not None:
            doc["requests"] = self.requests
        return doc


@dataclass(frozen=True)
class Snapshot:
    summary: dict[str, Any] | None
    cursor: Cursor | None  # None: summarize from the first message
    legacy: bool  # a summary without a cursor: only set the cursor
    new: list[Message]
    latest: Message | None
    history_mtime_ns: int | None


def read_snapshot(store: Store, session_id: str, progress: Progress | None = None) -> Snapshot:
    layout = store.layout
    store.db_readonly()  # a pending schema upgrade takes the write lock: not inside read_lock
    with store.read_lock():
        store.require(session_id)
        try:
            mtime: int | None = layout.history(session_id).stat().st_mtime_ns
        except FileNotFoundError:
            mtime = None
        summary = read_summary(layout.summary(session_id))
        meta = read_cursor(layout.summary_meta(session_id))
        stored = Cursor.from_meta(meta)
        recent = store.recent(session_id)
        conn = store.db_readonly()
        latest = recent[-1] if recent else None
        if latest is None and conn is not None:
            top = archive.session_rows(conn, session_id).next_seq
            rows = archive.rows_from(conn, session_id, top - 1) if top else []
            latest = rows[-1] if rows else None
        legacy = summary is not None and stored.time is None and not meta.get(FROM_START)
        cursor = stored if stored.time is not None else None
        if summary is None and cursor is not None:
            # A cursor means nothing without the summary it belongs to: rebuild.
            if progress:
                progress(f"{session_id}: summary.json is missing or empty; the cursor is "
                         "ignored and the summary rebuilt from the first message")
            cursor = None
        new = [] if legacy else messages_after(conn, session_id, recent, cursor)
    return Snapshot(summary, cursor, legacy, new, latest, mtime)


# -- the run --------------------------------------------------------------------------------
def _set_gate(path: os.PathLike[str], history_mtime_ns: int | None, done: bool) -> None:
    if history_mtime_ns is None:
        return
    with contextlib.suppress(FileNotFoundError):
        mtime = history_mtime_ns if done else history_mtime_ns - NS
        os.utime(path, ns=(mtime, mtime))


def _save(store: Store, session_id: str, summary: dict[str, Any] | None, cursor: Cursor,
          history_mtime_ns: int | None, done: bool) -> None:
    """summary.json, then its cursor. Before the first summary.json this program writes, a
    cursor saying "from the first message" (FROM_START) comes first: had the disk filled
    between the two files, a summary.json without summary.meta.json would read as one
    written before cursors (legacy: it covers everything, and the rest would never be
    summarized); with it, the next run folds every message in again."""
    layout = store.layout
    with store.write_lock():
        if summary is not None:
            meta = layout.summary_meta(session_id)
            if not meta.exists():
                atomic_write_json(meta, {**Cursor().as_meta(), FROM_START: True},
                                  indent=False)
            atomic_write_json(layout.summary(session_id), summary, indent=False)
        atomic_write_json(layout.summary_meta(session_id), cursor.as_meta(), indent=False)
        _set_gate(layout.summary(session_id), history_mtime_ns, done)


def _close_gate(store: Store, session_id: str, history_mtime_ns: int | None) -> None:
    """Nothing new to summarize: make summary.json as new as the history it covers."""
    with store.write_lock():
        path = store.layout.history(session_id)
        try:
            unchanged = path.stat().st_mtime_ns == history_mtime_ns
        except FileNotFoundError:
            unchanged = False
        if unchanged:  # else a message arrived meanwhile: stay pending
            _set_gate(store.layout.summary(session_id), history_mtime_ns, True)


def summarize_session(store: Store, session_id: str, config: LLMConfig, client: Client, *,
                      wait: bool = True, max_chunks: int | None = None,
                      progress: Progress | None = None) -> SessionResult:
    """Summarize one session under its task lock. wait=False skips a session another run
    holds (--pending); wait=True waits for it up to the lock timeout."""
    timeout = store.settings.lock_timeout if wait else 0.0
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(store.locks.hold(store.layout.task_lock("summarize", session_id),
                                           timeout))
        except StoreBusy:
            if not wait:
                return SessionResult(session_id, "skipped")
            raise StoreBusy(f"another `agenvoy summarize` has been working on {session_id!r} "
                            f"for more than {timeout:g}s (AGENVOY_LOCK_TIMEOUT); "
                            "retry later") from None
        return _run(store, session_id, config, client, max_chunks, progress)


def _run(store: Store, session_id: str, config: LLMConfig, client: Client,
         max_chunks: int | None, progress: Progress | None) -> SessionResult:
    snap = read_snapshot(store, session_id, progress)
    if snap.legacy:
        if snap.latest is None:
            return SessionResult(session_id, "up_to_date")
        cursor = Cursor().after([snap.latest])
        _save(store, session_id, None, cursor, snap.history_mtime_ns, True)
        if progress:
            progress(f"{session_id}: summary without a cursor: cursor set to {cursor.time}, "
                     "no LLM call")
        return SessionResult(session_id, "cursor_set", cursor=cursor.time)
    cursor = snap.cursor or Cursor()
    chunks = chunk_messages(snap.new)
    total = len(chunks)
    if not chunks:
        if snap.summary is not None:
            _close_gate(store, session_id, snap.history_mtime_ns)
        return SessionResult(session_id, "up_to_date", cursor=cursor.time)
    summary = snap.summary
    todo = chunks[:max_chunks] if max_chunks else chunks
    for number, chunk in enumerate(todo, 1):
        where = f"chunk {number}/{total}"
        body = config.body(build_messages(summary_json(summary), chunk))
        try:
            reply = client.complete(body)
        except LLMError as exc:
            return SessionResult(session_id, "failed", number - 1, total, cursor.time,
                                 f"{where}: {exc}", exc.exit_code)
        parsed = parse_summary_reply(reply)
        if parsed is None:
            return SessionResult(session_id, "failed", number - 1, total, cursor.time,
                                 f"{where}: the LLM reply is not a valid summary (it needs two "
                                 f"of {', '.join(KEYS)} or of {', '.join(LEGACY_KEYS)}): "
                                 f"{_snippet(reply)}", 1)
        summary = enforce_limits(parsed)
        cursor = cursor.after(chunk)
        _save(store, session_id, summary, cursor, snap.history_mtime_ns, number == total)
        if progress:
            progress(f"{session_id}: {where} summarized ({len(chunk)} messages, cursor "
                     f"{cursor.time})")
    status = "summarized" if len(todo) == total else "limited"
    return SessionResult(session_id, status, len(todo), total, cursor.time)


def dry_run(store: Store, session_id: str, config: LLMConfig, *,
            max_chunks: int | None = None) -> SessionResult:
    """The chunks and the exact requests, with the key masked. Calls nothing, writes nothing;
    a later chunk's prompt names the summary the earlier chunk would return."""
    snap = read_snapshot(store, session_id)
    cursor = snap.cursor.time if snap.cursor else None
    if snap.legacy:
        notes = ([{"chunk": None, "note": "no LLM call: the cursor would be set to "
                   f"{snap.latest.time}"}] if snap.latest else [])
        return SessionResult(session_id, "dry_run", cursor=cursor, requests=notes)
    chunks = chunk_messages(snap.new)
    todo = chunks[:max_chunks] if max_chunks else chunks
    requests = []
    for number, chunk in enumerate(todo, 1):
        text = (summary_json(snap.summary) if number == 1
                else f"<the summary returned for chunk {number - 1}>")
        requests.append({
            "chunk": number, "message_count": len(chunk),
            **moment("from", chunk[0].send_at), **moment("to", chunk[-1].send_at),
            "url": config.url, "command": list(config.command) if config.command else None,
            "headers": config.headers(masked=True) if not config.command else {},
            "body": config.body(build_messages(text, chunk)),
        })
    return SessionResult(session_id, "dry_run", 0, len(chunks), cursor, requests=requests)


def is_pending(store: Store, session_id: str) -> bool:
    """Upstream's gate: history.json newer than summary.json (or no summary.json yet)."""
    try:
        history = store.layout.history(session_id).stat().st_mtime_ns
    except FileNotFoundError:
        return False
    try:
        return history > store.layout.summary(session_id).stat().st_mtime_ns
    except FileNotFoundError:
        return True


def pending_sessions(store: Store) -> list[str]:
    return [sid for sid in store.session_ids() if is_pending(store, sid)]


def _snippet(text: str, size: int = 160) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= size else text[:size] + "…")
