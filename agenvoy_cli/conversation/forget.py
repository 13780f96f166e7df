"""forget: remove messages from everywhere they live (history.json, the archive and both of
its FTS indexes, and through the index hooks the vectors), e.g. a leaked secret. The rolling
summary is not rewritten (it may still paraphrase them): say so to the user."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from agenvoy_cli.conversation import archive
from agenvoy_cli.conversation.history import dump_history, write_history
from agenvoy_cli.conversation.messages import Message
from agenvoy_cli.errors import AgenvoyError, BadInput, DiskFull, OperationFailed, restated
from agenvoy_cli.home import sqlite
from agenvoy_cli.home.files import atomic_write_json, link_aside, put_back, read_json

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
                    match: str | None = None, *, dry_run: bool = False,
                    warn: Callable[[str], None] | None = None) -> Forgotten:
    """Messages chosen by place (seq, as search and context show them) or by a
    case-insensitive substring of their text, tool calls or full JSON: gone from every layer
    or from none (see _remove)."""
    if bool(seqs) == (match is not None):
        raise BadInput("give either message places (SEQ...) or --match TEXT")
    if match is not None and not match.strip():
        raise BadInput("--match needs some text")
    if store.hooks.active(store) and not dry_run:
        store.hooks.preload()
    with store.write_lock():
        store.require(session_id)
        history = store.history(session_id)
        try:
            synced = store.align(session_id, history)  # every message of history.json has a row
        except (OSError, sqlite3.Error, DiskFull) as exc:  # before anything was removed
            raise restated(exc, store.layout.home, NOTHING) from None
        found = _targets(store, session_id, seqs, match)
        drop = {m.seq for m in found}
        keep = [m for m, seq in zip(history.messages, synced.seqs) if seq not in drop]
        removed = len(history.messages) - len(keep)
        if dry_run:
            return Forgotten(found, removed, True)
        _remove(store, session_id, sorted(drop), keep if removed else None, warn or _quiet)
    return Forgotten(found, removed, False)


def _quiet(text: str) -> None:
    pass


NOTHING = "nothing was forgotten"
PENDING = ("the forget is recorded and was not finished; `agenvoy doctor --repair` "
           "finishes it")


def _remove(store: Store, session_id: str, seqs: list[int],
            keep: list[dict[str, Any]] | None, warn: Callable[[str], None]) -> None:
    """Remove the messages at `seqs` from every layer or from none. Hold the write lock.

    1. the intent (which places, which messages) is written first: a process that dies
       after it leaves a forget `doctor --repair` finishes (and `doctor` reports);
    2. the vectors go (derived data: were the rest to fail, the next semantic search makes
       them again; never is a vector left of a message that is gone);
    3. history.json is rewritten without them (the old file kept by a hard link);
    4. the archive's rows go, in one transaction;
    a failure in 1-4 puts history.json back and deletes the intent: nothing was forgotten.
    Then the intent goes, and what only tidies (freed pages, the trim point) may fail with a
    warning."""
    home = store.layout.home
    intent = store.layout.forget_intent(session_id)
    history = store.layout.history(session_id)
    previous = None
    try:
        atomic_write_json(intent, {"session_id": session_id, "seqs": seqs,
                                   "hashes": _hashes(store, session_id, seqs)})
        store.hooks.after_change(store, session_id, seqs)
        if keep is not None:
            previous = link_aside(history)
            write_history(history, dump_history(keep))
        with store.transaction() as conn:
            archive.forget_rows(conn, session_id, seqs)
    except BaseException as exc:
        undone = _undo(previous, history, intent, keep is not None)
        raise restated(exc, home, NOTHING if undone else PENDING) from None
    finally:
        if previous is not None:
            with contextlib.suppress(OSError):
                previous.unlink()
    intent.unlink(missing_ok=True)
    _tidy(store, session_id, warn)


def _undo(previous: Path | None, history: Path, intent: Path, rewrote: bool) -> bool:
    """history.json as it was and no intent left; False when that could not be done (the
    intent then stays for doctor --repair)."""
    try:
        if rewrote and previous is not None:
            put_back(previous, history)
        intent.unlink(missing_ok=True)
    except OSError:
        return False
    return True


def _hashes(store: Store, session_id: str, seqs: list[int]) -> dict[str, str]:
    """Place -> content hash of the messages to forget (what doctor --repair checks before
    it finishes a forget: a place that holds another message since is left alone)."""
    wanted = set(seqs)
    return {str(seq): digest for seq, digest in store.db().execute(
        "SELECT seq, hash FROM messages WHERE session_id = ?", (session_id,)) if seq in wanted}


def _tidy(store: Store, session_id: str, warn: Callable[[str], None]) -> None:
    """After the messages are gone: give the freed pages back and let the trim point follow
    a forgotten first message. Neither is needed for the forget to hold."""
    try:
        sqlite.reclaim_space(store.db())
        store.align(session_id)
    except (AgenvoyError, OSError) as exc:
        warn(f"agenvoy: warning: the messages are forgotten, but tidying up failed "
             f"({restated(exc, store.layout.home, 'the forget itself is complete')}); "
             "`agenvoy doctor --repair` finishes it")


def pending(store: Store) -> list[str]:
    """Sessions whose forget died half-way (doctor reports them)."""
    return store.layout.forget_intents()


def finish(store: Store, session_id: str) -> str:
    """Finish a forget that died half-way (doctor --repair): the messages it was removing,
    those still archived with the same content, go from every layer. Hold the write lock."""
    intent = store.layout.forget_intent(session_id)
    doc = read_json(intent, default=None) or {}
    wanted = {int(seq): str(digest) for seq, digest in (doc.get("hashes") or {}).items()}
    conn = store.db()
    present = [seq for seq, digest in conn.execute(
        "SELECT seq, hash FROM messages WHERE session_id = ?", (session_id,))
        if wanted.get(seq) == digest]
    if present and store.exists(session_id):
        history = store.history(session_id)
        synced = store.align(session_id, history)
        drop = set(present)
        keep = [m for m, seq in zip(history.messages, synced.seqs) if seq not in drop]
        _remove(store, session_id, sorted(drop),
                keep if len(keep) != len(history.messages) else None, _quiet)
    else:
        store.hooks.after_change(store, session_id, sorted(wanted))
        intent.unlink(missing_ok=True)
    return f"finished an interrupted forget of {len(wanted)} message(s)"
