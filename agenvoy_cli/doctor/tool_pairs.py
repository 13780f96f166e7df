"""doctor's check that a session's tool calls and results pair up in its archive: a tool
result whose call is missing, and a tool call whose result is missing while the session
went on (a call at the very end is still running: not reported). Providers refuse both in a
context; an import of an older version left them when it archived a message before it was
complete (the next import completes it), or a call Agenvoy never archived left history.json
before this tool read it. Said as notes (doctor's exit stays 0): nothing on disk repairs them,
a result cannot be made up."""

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


def unpaired(rows: Any) -> tuple[list[int], list[tuple[int, str]]]:
    """(places of results without their call, (place, id) of calls without their result)
    over rows (seq, role, message) in order: a call's results are the tool messages right
    after it. A row whose tool fields are not known (Agenvoy wrote it) is judged by nobody:
    neither it nor the rows that would pair with it are reported."""
    orphans: list[int] = []
    missing: list[tuple[int, str]] = []
    waiting: dict[str, int] | None = {}  # the last call's unanswered ids (None: not known)
    for seq, role, raw in rows:
        if role == "tool":
            message = _message(raw)
            answer = message.get("tool_call_id") if message is not None else None
            if waiting is None or message is None:
                continue
            if str(answer) in waiting:
                del waiting[str(answer)]
            else:
                orphans.append(seq)
            continue
        if waiting:
            missing.extend((place, cid) for cid, place in waiting.items())
        waiting = {}
        if role == "assistant" and (raw is None or '"tool_calls"' in raw or not raw):
            message = _message(raw)
            if message is None:
                waiting = None
            else:
                calls = message.get("tool_calls")
                waiting = {str(c.get("id")): seq for c in calls if isinstance(c, dict)} \
                    if isinstance(calls, list) else {}
        elif role == "assistant" and _message(raw) is None:
            waiting = None
    return orphans, missing  # calls still waiting at the end are running, not missing


def _places(seqs: list[int]) -> str:
    shown = ", ".join(map(str, seqs[:SHOWN]))
    return shown + (f" and {len(seqs) - SHOWN} more" if len(seqs) > SHOWN else "")


def check_tool_pairs(doctor: Any, sid: str) -> None:
    conn = doctor.store.db()
    rows = conn.execute("SELECT seq, role, message FROM messages WHERE session_id = ? AND "
                        "seq IS NOT NULL ORDER BY seq", (sid,))
    orphans, missing = unpaired(rows)
    hint = "; if the session was imported, the next import completes a message an " \
        "import archived before its writer had finished it (a split an older version left " \
        "stays)"
    if orphans:
        doctor.report(sid, "tool-pairs", f"{len(orphans)} tool result(s) without their call "
                      f"(seq {_places(orphans)}){hint}", note=True)
    if missing:
        doctor.report(sid, "tool-pairs", f"{len(missing)} tool call(s) without their result "
                      f"(seq {_places([seq for seq, _ in missing])}: "
                      f"{', '.join(cid for _, cid in missing[:SHOWN])}){hint}", note=True)
