"""The context window as a provider accepts it, whoever last rewrote history.json.

Agenvoy v0.32 rewrites history.json through its record and drops `tool_calls` and
`tool_call_id` on the way: an assistant message with neither content nor tool calls, and
tool results without their call, are what a provider rejects (HTTP 400). They are restored
from the archive (which keeps the full JSON) when the row is there; what cannot be restored
is left out of the window, never sent broken."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from difflib import SequenceMatcher
from typing import Any

import orjson

from agenvoy_cli.conversation.history_format import model_message, record_key, send_at
from agenvoy_cli.conversation.messages import content_text, header_time, is_blank, tool_calls

RESTORED = ("tool_calls", "tool_call_id", "reasoning_content")


def _has_content(message: dict[str, Any]) -> bool:
    content = message.get("content")
    if isinstance(content, list):
        return bool(content)
    return not is_blank(content_text(content))


def is_broken(message: dict[str, Any]) -> bool:
    role = message.get("role")
    if role == "assistant":
        return not message.get("tool_calls") and not _has_content(message)
    return role == "tool" and not message.get("tool_call_id")


def restore(connect: Callable[[], sqlite3.Connection | None], session_id: str,
            window: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The window with the tool-call fields Agenvoy's rewrite dropped put back from the
    archive (matched by what the rewrite leaves of a message, in order, among the last live
    rows). Reads nothing when nothing is broken."""
    if not any(is_broken(m) for m in window):
        return window
    conn = connect()
    if conn is None:
        return window
    rows = conn.execute(
        "SELECT message FROM messages WHERE session_id = ? AND gone = 0 AND seq IS NOT NULL "
        "AND message IS NOT NULL ORDER BY seq DESC LIMIT ?",
        (session_id, 2 * len(window) + 16)).fetchall()
    archived = [orjson.loads(r[0]) for r in reversed(rows)]
    archived = [m for m in archived if isinstance(m, dict)]
    ours = [record_key(m) for m in window]
    theirs = [record_key(m) for m in archived]
    out = list(window)
    for a, b, size in SequenceMatcher(None, ours, theirs, autojunk=False).get_matching_blocks():
        for k in range(size):
            if is_broken(out[a + k]):
                fixed = dict(out[a + k])
                for key in RESTORED:
                    if archived[b + k].get(key) and not fixed.get(key):
                        fixed[key] = archived[b + k][key]
                out[a + k] = fixed
    return out


def _results_by_id(messages: list[dict[str, Any]]) -> dict[str, list[int]]:
    """The places of the tool results, by the (string) call id they answer, in order."""
    found: dict[str, list[int]] = {}
    for i, m in enumerate(messages):
        cid = m.get("tool_call_id") if m.get("role") == "tool" else None
        if isinstance(cid, str):
            found.setdefault(cid, []).append(i)
    return found


def _answers(calls: list[dict[str, Any]], after: int, places: dict[str, list[int]],
             used: set[int]) -> list[tuple[dict[str, Any], int]]:
    """Each call (by a string id, once) with the first result after `after` that answers
    it and no earlier call took; calls without one are left out."""
    out: list[tuple[dict[str, Any], int]] = []
    seen: set[str] = set()
    for call in calls:
        cid = call.get("id")
        if not isinstance(cid, str) or cid in seen:
            continue
        seen.add(cid)
        place = next((k for k in places.get(cid, ()) if k > after and k not in used), None)
        if place is not None:
            used.add(place)
            out.append((call, place))
    return out


def valid_pairs(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as a provider takes them: each assistant message with tool calls right
    before one result per call. A result written after something else (Claude Code 2.1
    writes one between the tool_use records of one message, Codex a developer message
    between a call and its output) is moved up to its call, so nothing is lost; what cannot
    be paired is left out: an assistant message with neither content nor tool calls, a
    tool result without its call, a call without its result (its other calls and its
    content stay)."""
    places = _results_by_id(messages)
    used: set[int] = set()
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            continue  # placed after its call (or without one: left out)
        if role == "assistant" and m.get("tool_calls"):
            pairs = _answers(tool_calls(m), i, places, used)
            if pairs:
                out.append({**m, "tool_calls": [call for call, _ in pairs]})
                out.extend(messages[k] for _, k in pairs)
            elif _has_content(m):
                out.append({k: v for k, v in m.items() if k != "tool_calls"})
            continue
        if role == "assistant" and not _has_content(m):
            continue
        out.append(m)
    return out


def for_provider(connect: Callable[[], sqlite3.Connection | None], session_id: str,
                 window: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The window as it is sent: connect() is called only when a message needs the
    archive."""
    return valid_pairs([model_message(m) for m in restore(connect, session_id, window)])


def window_cutoff(window: list[dict[str, Any]]) -> datetime | None:
    """Upstream's OldestMessageTime: the time of the first window message that has one
    (sendAt, or a header in a string content), not only window[0]'s."""
    for message in window:
        ns = send_at(message)
        if ns is not None:  # Agenvoy v0.32's format
            return datetime.fromtimestamp(ns // 1_000_000_000)
        content = message.get("content")
        if isinstance(content, str):
            moment = header_time(content)
            if moment is not None:
                return moment
    return None
