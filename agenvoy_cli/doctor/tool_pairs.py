"""doctor's check that a session's tool calls and results pair up in its archive: a tool
result whose call is missing, and a tool call whose result is missing while the session
went on (a call at the very end is still running: not reported). A result written after
other messages pairs with its call (context moves it up to it). Providers refuse the rest in
a context, which leaves them out; a call Agenvoy never archived left history.json before
this tool read it, or the source never had the other half. Said as notes (doctor's exit
stays 0): nothing on disk repairs them, a result cannot be made up."""

from __future__ import annotations

from typing import Any

import orjson

from agenvoy_cli.conversation.messages import RECORD_KEYS

SHOWN = 5  # places named per finding


_UNKNOWN = None  # what a row without its full JSON (or one Agenvoy's rewrite left) says


def _message(raw: str | None) -> dict[str, Any] | None:
    """The row's full JSON when it tells its tool fields: not a row Agenvoy wrote (no JSON,
    or its record of role, content, sendAt and sender: tool_calls and tool_call_id
    dropped)."""
    if not raw:
        return _UNKNOWN
    message = orjson.loads(raw)
    if not isinstance(message, dict) or message.keys() <= RECORD_KEYS:
        return _UNKNOWN
    return message


def _calls(raw: str | None) -> dict[str, None] | None:
    """The call ids of an assistant row ({} without calls; None: not known)."""
    message = _message(raw)
    if message is None:
        return None
    calls = message.get("tool_calls")
    return {str(c.get("id")): None for c in calls if isinstance(c, dict)} \
        if isinstance(calls, list) else {}


def unpaired(rows: Any) -> tuple[list[int], list[tuple[int, str]]]:
    """(places of results without their call, (place, id) of calls without their result)
    over rows (seq, role, message) in order: a result answers a call before it, wherever
    it was written (context moves it up to its call: Claude Code and Codex write some after
    other messages). A row whose tool fields are not known (Agenvoy wrote it) is judged by
    nobody: neither it nor the results after it that no known call awaits are reported."""
    orphans: list[int] = []
    waiting: dict[str, int] = {}  # unanswered call id -> its place
    last: dict[str, None] = {}  # the last call message's ids, while nothing else followed
    known = True  # whether the last assistant row's tool fields are known
    for seq, role, raw in rows:
        if role == "tool":
            message = _message(raw)
            if message is None:
                continue
            answer = str(message.get("tool_call_id"))
            if answer in waiting:
                del waiting[answer]
            elif known:
                orphans.append(seq)
            continue
        last = {}
        if role != "assistant":
            continue
        calls = _calls(raw)
        known = calls is not None
        for cid in calls or {}:
            waiting[cid] = seq
        last = calls or {}
    # the last call message's unanswered calls are still running, not missing
    missing = [(place, cid) for cid, place in waiting.items() if cid not in last]
    return orphans, missing


def _places(seqs: list[int]) -> str:
    shown = ", ".join(map(str, seqs[:SHOWN]))
    return shown + (f" and {len(seqs) - SHOWN} more" if len(seqs) > SHOWN else "")


def check_tool_pairs(doctor: Any, sid: str) -> None:
    conn = doctor.store.db()
    rows = conn.execute("SELECT seq, role, message FROM messages WHERE session_id = ? AND "
                        "seq IS NOT NULL ORDER BY seq", (sid,))
    orphans, missing = unpaired(rows)
    hint = "; a result cannot be made up: context leaves these out (an import that " \
        "archived a message before its writer had finished it completes it next time)"
    if orphans:
        doctor.report(sid, "tool-pairs", f"{len(orphans)} tool result(s) without their call "
                      f"(seq {_places(orphans)}){hint}", note=True)
    if missing:
        doctor.report(sid, "tool-pairs", f"{len(missing)} tool call(s) without their result "
                      f"(seq {_places([seq for seq, _ in missing])}: "
                      f"{', '.join(cid for _, cid in missing[:SHOWN])}){hint}", note=True)
