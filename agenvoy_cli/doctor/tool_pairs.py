"""doctor's check that a session's tool calls and results pair up in its archive: a tool
result whose call is missing, and a tool call whose result is missing while the session
went on (a call at the very end is still running: not reported). Providers refuse both in a
context; an import of an older version left them when it archived a message before it was
complete (the next import completes it). Nothing is repaired: a result cannot be made up."""

from __future__ import annotations

from typing import Any

import orjson

SHOWN = 5  # places named per finding


def _calls(raw: str | None) -> list[str]:
    if not raw or '"tool_calls"' not in raw:
        return []
    message = orjson.loads(raw)
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    return [str(c.get("id")) for c in calls if isinstance(c, dict)] \
        if isinstance(calls, list) else []


def _answers(raw: str | None) -> str | None:
    message = orjson.loads(raw) if raw else None
    found = message.get("tool_call_id") if isinstance(message, dict) else None
    return str(found) if found is not None else None


def unpaired(rows: Any) -> tuple[list[int], list[tuple[int, str]]]:
    """(places of results without their call, (place, id) of calls without their result)
    over rows (seq, role, message) in order: a call's results are the tool messages right
    after it."""
    orphans: list[int] = []
    missing: list[tuple[int, str]] = []
    waiting: dict[str, int] = {}  # the calls of the last assistant message, unanswered
    for seq, role, raw in rows:
        if role == "tool":
            answer = _answers(raw)
            if answer in waiting:
                del waiting[answer]
            else:
                orphans.append(seq)
            continue
        missing.extend((place, cid) for cid, place in waiting.items())
        waiting = {cid: seq for cid in _calls(raw)} if role == "assistant" else {}
    return orphans, missing  # calls still waiting at the end are running, not missing


def _places(seqs: list[int]) -> str:
    shown = ", ".join(map(str, seqs[:SHOWN]))
    return shown + (f" and {len(seqs) - SHOWN} more" if len(seqs) > SHOWN else "")


def check_tool_pairs(doctor: Any, sid: str) -> None:
    conn = doctor.store.db()
    rows = conn.execute("SELECT seq, role, message FROM messages WHERE session_id = ? AND "
                        "seq IS NOT NULL ORDER BY seq", (sid,))
    orphans, missing = unpaired(rows)
    hint = "; if the session was imported, the next import completes a message an older " \
        "version archived before it was complete"
    if orphans:
        doctor.report(sid, "tool-pairs", f"{len(orphans)} tool result(s) without their call "
                      f"(seq {_places(orphans)}){hint}")
    if missing:
        doctor.report(sid, "tool-pairs", f"{len(missing)} tool call(s) without their result "
                      f"(seq {_places([seq for seq, _ in missing])}: "
                      f"{', '.join(cid for _, cid in missing[:SHOWN])}){hint}")
