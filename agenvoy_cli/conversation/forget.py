"""forget: remove messages from everywhere they live (history.json, the archive and both of
its FTS indexes, and through the index hooks the vectors), e.g. a leaked secret. The rolling
summary is not rewritten (it may still paraphrase them): say so to the user."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from agenvoy_cli.conversation import archive
from agenvoy_cli.conversation.history import dump_history, write_history
from agenvoy_cli.conversation.messages import Message
from agenvoy_cli.errors import BadInput, OperationFailed
from agenvoy_cli.home import sqlite

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store


class Forgotten(NamedTuple):
    messages: list[Message]  # what is (or, with dry_run, would be) removed, by place
    from_history: int  # how many of them were in history.json
    dry_run: bool


def _matches(needle: str, text: str, raw: str | None) -> bool:
    return needle in text.casefold() or (raw is not None and needle in raw.casefold())


def _targets(store: Store, session_id: str, seqs: Sequence[int],
             match: str | None) -> list[Message]:
    conn = store.db()
    found: list[Message] = []
    needle = match.casefold() if match is not None else None
    for seq, send_at, role, content, message in conn.execute(
            "SELECT seq, send_at, role, content, message FROM messages WHERE session_id = ? "
            "AND seq IS NOT NULL ORDER BY seq", (session_id,)):
        raw: dict[str, Any] = orjson.loads(message) if message else {"role": role,
                                                                      "content": content}
        msg = Message(seq, send_at, role, content, raw)
        if seq in seqs or (needle is not None and _matches(needle, msg.body, message)):
            found.append(msg)
    missing = sorted(set(seqs) - {m.seq for m in found})
    if missing:
        raise OperationFailed(f"session {session_id!r} has no message at seq "
                       f"{', '.join(map(str, missing))}")
    if not found:
        raise OperationFailed(f"no message of session {session_id!r} contains {match!r}")
    return found


def forget_messages(store: Store, session_id: str, seqs: Sequence[int] = (),
                    match: str | None = None, *, dry_run: bool = False) -> Forgotten:
    """Messages chosen by place (seq, as search and context show them) or by a
    case-insensitive substring of their text, tool calls or full JSON."""
    if bool(seqs) == (match is not None):
        raise BadInput("give either message places (SEQ...) or --match TEXT")
    if match is not None and not match.strip():
        raise BadInput("--match needs some text")
    if store.hooks.active(store) and not dry_run:
        store.hooks.preload()
    with store.write_lock():
        store.require(session_id)
        history = store.history(session_id)
        synced = store.align(session_id, history)  # every message of history.json has a row
        found = _targets(store, session_id, seqs, match)
        drop = {m.seq for m in found}
        keep = [m for m, seq in zip(history.messages, synced.seqs) if seq not in drop]
        removed = len(history.messages) - len(keep)
        if dry_run:
            return Forgotten(found, removed, True)
        # history.json first: a crash in between leaves rows the next run finds again
        if removed:
            write_history(history.path, dump_history(keep))
        with store.transaction() as conn:
            archive.forget_rows(conn, session_id, sorted(drop))
        sqlite.reclaim_space(store.db())
        store.hooks.after_change(store, session_id, sorted(drop))
        store.align(session_id)  # the trim point follows a forgotten first message
    return Forgotten(found, removed, False)
