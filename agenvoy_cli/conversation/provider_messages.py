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


def valid_pairs(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Leave out what a provider rejects: an assistant message with neither content nor tool
    calls, a tool result without its call, a call without its result (its other calls and
    its content stay)."""
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(messages):
        m = messages[i]
        role = m.get("role")
        if role == "tool":
            i += 1  # not after its call (the run of results is read with the call below)
            continue
        if role == "assistant" and m.get("tool_calls"):
            j = i + 1
            results = []
            while j < len(messages) and messages[j].get("role") == "tool":
                results.append(messages[j])
                j += 1
            # a call pairs with its result by a string id (another program's history.json
            # may hold anything there: such a pair is left out, as an unanswered call is)
            ids = [c.get("id") for c in tool_calls(m) if isinstance(c.get("id"), str)]
            answered = {r.get("tool_call_id") for r in results
                        if isinstance(r.get("tool_call_id"), str)}
            calls = [c for c in tool_calls(m) if c.get("id") in ids and c["id"] in answered]
            seen: set[Any] = set()
            kept = []
            for r in results:
                cid = r.get("tool_call_id")
                if isinstance(cid, str) and cid in ids and cid not in seen:
                    seen.add(cid)
                    kept.append(r)
            if calls:
                out.append({**m, "tool_calls": calls})
                out.extend(kept)
            elif _has_content(m):
                out.append({k: v for k, v in m.items() if k != "tool_calls"})
            i = j
            continue
        if role == "assistant" and not _has_content(m):
            i += 1
            continue
        out.append(m)
        i += 1
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
