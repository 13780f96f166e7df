"""What each page of `agenvoy web` shows, as plain data for its template: read through the
Memory API (the same calls the commands make) and, for the pages of one session, through the
conversation layer's bounded readers (one page of the archive by place, the tail of
history.json), so that no page loads a whole archive."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import orjson

from agenvoy_cli.api import Memory
from agenvoy_cli.contract import rfc3339

PAGE = 50  # archive messages a page of a session shows
TEXT_MAX = 20_000  # characters of one message a page shows (the rest counted, not sent)
ORIGINS = {"claude-code": "Claude Code", "codex": "Codex", "chatgpt": "ChatGPT",
           "openai": "OpenAI", "agenvoy": "agenvoy export"}
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_THUMB_MAX = 256 * 1024  # bytes of a data: URL an inline thumbnail may have


def when(ns: int | None) -> str:
    """Local time for people, seconds precision ('' when unknown)."""
    text = rfc3339(ns)
    return "" if text is None else text.replace("T", " ")


def ttl_left(expires_ns: int | None, now_ns: int) -> str:
    if expires_ns is None:
        return ""
    left = max(0, expires_ns - now_ns) // 1_000_000_000
    days, rest = divmod(left, 86_400)
    return f"{days} d {rest // 3600} h" if days else f"{rest // 3600} h {rest % 3600 // 60} min"


# -- sessions --------------------------------------------------------------------------------

def sessions_page(memory: Memory) -> dict[str, Any]:
    docs = memory.sessions()["sessions"]
    store = memory.store
    for doc in docs:
        with store.read_lock():
            start_seq, start_at = store.trim_point(doc["session_id"])
        doc["trim_seq"], doc["trim_at"] = start_seq, when(start_at or None)
        doc["origin"] = ORIGINS.get(doc.get("source") or "", doc.get("source")) or "appended"
        doc["persona_text"] = persona_of(doc)
    docs.sort(key=lambda d: d.get("last_message_at_ns") or 0, reverse=True)
    return {"sessions": docs}


def persona_of(doc: dict[str, Any]) -> str:
    """The Agenvoy 1.0 persona a session listing gives (a name, or an object with one)."""
    persona = doc.get("persona")
    if isinstance(persona, dict):  # name (self_id, model), as `session show` gives them
        name = str(persona.get("name") or persona.get("self_id") or persona.get("id") or "")
        more = [str(persona[k]) for k in ("self_id", "model") if persona.get(k)]
        return f"{name} ({', '.join(more)})" if name and more else name
    return "" if persona is None else str(persona)


# -- one session -----------------------------------------------------------------------------

def _image(part: dict[str, Any]) -> dict[str, str]:
    """An image part: a small inline data: image is shown as a thumbnail, anything else
    (a remote URL, a file, a big or odd payload) as a placeholder; no page fetches from
    elsewhere (the Content-Security-Policy allows images from data: only)."""
    url = part.get("image_url")
    url = url.get("url") if isinstance(url, dict) else url
    if isinstance(url, str) and url.startswith("data:") and len(url) <= _THUMB_MAX:
        kind = url[5:].split(";", 1)[0].lower()
        if kind in _IMAGE_TYPES and ";base64," in url[:64]:
            return {"thumb": url, "label": kind}
    shown = url if isinstance(url, str) else part.get("type", "image")
    return {"thumb": "", "label": clip(str(shown), 200)[0]}


def clip(text: str, limit: int = TEXT_MAX) -> tuple[str, int]:
    """(the first `limit` characters, how many more there are)."""
    return (text, 0) if len(text) <= limit else (text[:limit], len(text) - limit)


def message_view(raw: dict[str, Any], seq: int | None, send_at: int | None) -> dict[str, Any]:
    """One message for the page: its text (the time header left out: shown apart), its
    reasoning (folded), its images, its tool calls (their results attached by pair())."""
    from agenvoy_cli.conversation.messages import (
        call_function,
        content_text,
        header_time,
        strip_header,
        tool_calls,
    )

    content = raw.get("content")
    text = content_text(content)
    if send_at is None:
        moment = header_time(text)
        shown_time = moment.strftime("%Y-%m-%d %H:%M:%S") if moment else ""
    else:
        shown_time = when(send_at)
    body, more = clip(strip_header(text))
    images = [_image(p) for p in content if isinstance(p, dict) and p.get("type") in
              ("image_url", "input_image", "image")] if isinstance(content, list) else []
    reasoning = raw.get("reasoning_content") or raw.get("reasoning") or ""
    calls = []
    for call in tool_calls(raw):
        fn = call_function(call)
        args = fn.get("arguments")
        args_text = args if isinstance(args, str) else orjson.dumps(args).decode()
        calls.append({"id": str(call.get("id") or ""), "name": str(fn.get("name") or "?"),
                      "arguments": clip(args_text, 4000)[0], "result": None})
    return {"seq": seq, "role": str(raw.get("role") or "?"), "time": shown_time,
            "text": body, "more": more, "images": images,
            "reasoning": clip(str(reasoning), 4000)[0] if reasoning else "",
            "calls": calls, "call_id": str(raw.get("tool_call_id") or ""),
            "name": str(raw.get("name") or ""), "paired": False}


def pair(views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool results attached to the call they answer (by tool_call_id, within the page);
    a result whose call is not on the page stays a message of its own."""
    calls = {c["id"]: c for v in views for c in v["calls"] if c["id"]}
    out = []
    for view in views:
        call = calls.get(view["call_id"]) if view["role"] == "tool" else None
        if call is not None and call["result"] is None:
            call["result"] = view
            continue
        out.append(view)
    return out


def session_page(memory: Memory, session_id: str, before: int | None) -> dict[str, Any]:
    """The summary and its cursor, the window of history.json the model is fed, and one
    page of the archive (PAGE messages by place, newest first, below `before`)."""
    from agenvoy_cli.conversation import archive
    from agenvoy_cli.conversation.history import read_window
    from agenvoy_cli.conversation.summary import read_cursor, read_summary

    store = memory.store
    info = memory.session(session_id)
    layout = store.layout
    summary = cursor = None
    with contextlib.suppress(Exception):  # a damaged file is doctor's to report
        summary = read_summary(layout.summary(session_id))
    with contextlib.suppress(Exception):
        cursor = read_cursor(layout.summary_meta(session_id)).get("last_message_time")
    limit = store.settings.limits()[0]
    window = pair([message_view(m, None, None) for m in
                   read_window(layout.history(session_id), session_id, limit)])
    rows: list[Any] = []
    top = 0
    with store.read_lock():
        conn = store.db_readonly()
        if conn is not None:
            top = archive.session_rows(conn, session_id).next_seq
            end = top if before is None else max(0, min(before, top))
            # a row another program (Agenvoy, in Go) wrote may hold invalid UTF-8, which
            # sqlite3 refuses to decode: shown with U+FFFD, for this read only (every call
            # into the home runs on the viewer's one worker thread)
            kept = conn.text_factory
            conn.text_factory = _lenient
            try:
                rows = archive.rows_from(conn, session_id, max(0, end - PAGE), end)
            finally:
                conn.text_factory = kept
    page = pair([message_view(m.raw, m.seq, m.send_at) for m in rows])
    page.reverse()  # newest first
    first = rows[0].seq if rows else 0
    return {"info": info, "summary": summary, "summary_json": _pretty(summary),
            "cursor": cursor, "window": window, "limit": limit, "archive": page,
            "next_seq": top, "older": first if first > 0 else None,
            "newer": (rows[-1].seq + 1 + PAGE) if rows and rows[-1].seq + 1 < top else None,
            "persona_text": persona_of(info),
            "origin": ORIGINS.get(info.get("source") or "", info.get("source")) or "appended"}


def _lenient(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _pretty(data: Any) -> str:
    return "" if data is None else orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()


# -- context ---------------------------------------------------------------------------------

def context_page(memory: Memory, session_id: str) -> dict[str, Any]:
    """`agenvoy context --json`'s document, as it prints it, and its size."""
    warnings: list[str] = []
    memory.store.require(session_id)
    doc = memory.context(session_id, warn=warnings.append)
    messages = doc["messages"]
    sent = orjson.dumps(messages)
    return {"session_id": session_id, "doc": doc, "messages_json": _pretty(messages),
            "bytes": len(sent), "chars": sum(len(str(m.get("content") or ""))
                                             for m in messages),
            "count": len(messages), "warnings": warnings}


# -- search ----------------------------------------------------------------------------------

SCOPES = ("messages", "notes", "rag", "errors")


def search_page(memory: Memory, q: str, mode: str, session_id: str | None,
                scopes: list[str]) -> dict[str, Any]:
    """Every scope asked for, through the Memory calls `agenvoy search`, `notes search`,
    `rag search` and `errors lookup` make, with their CLI defaults."""
    from agenvoy_cli.search.defaults import DEFAULT_LIMIT

    out: dict[str, Any] = {"q": q, "mode": mode, "session_id": session_id, "scopes": scopes}
    if not q.strip():
        return out
    budget = memory.store.settings.search_budget
    if "messages" in scopes and session_id:
        doc = memory.search(session_id, q, mode=mode, limit=DEFAULT_LIMIT, budget=budget)
        if mode == "hybrid":
            _sides(memory, doc, session_id, q, budget)
        out["message_hits"] = doc
    if "notes" in scopes:
        out["note_hits"] = memory.search_notes(q, mode=mode)
    if "rag" in scopes and memory.rag_databases()["databases"]:
        out["rag_hits"] = memory.rag_search(q, mode=mode)
    if "errors" in scopes:
        warnings: list[str] = []
        out["error_hits"] = memory.lookup_errors(q, semantic=mode != "keyword",
                                             warn=warnings.append)
    return out


def _sides(memory: Memory, doc: dict[str, Any], session_id: str, q: str,
           budget: float) -> None:
    """Hybrid: which side found each hit, by running each side alone with the same
    options (a hit either side lists; a hit neither lists alone was lifted by fusion)."""
    from agenvoy_cli.search.defaults import DEFAULT_LIMIT

    found: dict[str, set[tuple[str, int]]] = {}
    for side in ("keyword", "semantic"):
        alone = memory.search(session_id, q, mode=side, limit=DEFAULT_LIMIT, budget=budget)
        found[side] = {(r["source"], r["seq"]) for r in alone["results"] if r["hit"]}
    for row in doc["results"]:
        if not row["hit"]:
            continue
        key = (row["source"], row["seq"])
        sides = [s for s in ("keyword", "semantic") if key in found[s]]
        if not sides:
            sides = ["keyword"] if row.get("matched_terms") else ["semantic"]
        row["found_by"] = row.get("found_by") or " + ".join(sides)


# -- errors, notes, health -------------------------------------------------------------------

def errors_page(memory: Memory) -> dict[str, Any]:
    now = time.time_ns()
    groups: dict[str, list[dict[str, Any]]] = {}
    for rec in memory.errors()["records"]:
        rec["ttl_left"] = ttl_left(rec.get("expires_at_ns"), now)
        groups.setdefault(rec["tool_name"], []).append(rec)
    return {"groups": sorted(groups.items())}


def health_page(memory: Memory, server: dict[str, Any]) -> dict[str, Any]:
    from agenvoy_cli.server import fastpath

    doctor = memory.doctor()
    store = memory.store
    unindexed: list[tuple[str, int | str]] = []
    for sid in store.session_ids():
        unindexed.append((sid, _pending(store, sid)))
    errors = memory.errors()["records"]
    return {"doctor": doctor, "unindexed": unindexed,
            "errors_unindexed": sum(1 for r in errors if not r["has_vector"]),
            "imports": imports(memory), "hook_log": hook_log(memory),
            "mcp": fastpath.announced(store.layout, lambda _: None), "server": server}


def _pending(store: Any, session_id: str) -> int | str:
    from agenvoy_cli.search.catchup import pending_vectors

    try:
        return pending_vectors(store, session_id)
    except Exception as exc:  # noqa: BLE001 - shown on the page, the others still counted
        return f"unknown ({type(exc).__name__})"


def imports(memory: Memory) -> list[dict[str, Any]]:
    """The import sources the home follows (`import`, hooks, cron), newest source first:
    format, session, records read and when the source last changed."""
    store = memory.store
    rows: list[Any] = []
    with store.read_lock():
        conn = store.db_readonly()
        if conn is not None:
            with contextlib.suppress(Exception):  # a home that never imported has no table
                rows = conn.execute("SELECT key, format, session_id, records, mtime_ns "
                                    "FROM import_sources ORDER BY mtime_ns DESC").fetchall()
    latest: dict[str, dict[str, Any]] = {}
    for key, fmt, sid, records, mtime in rows:
        latest.setdefault(fmt, {"format": ORIGINS.get(fmt, fmt), "source": key,
                                "session_id": sid, "records": records,
                                "changed": when(mtime), "sources": 0})
        latest[fmt]["sources"] += 1
    return list(latest.values())


def hook_log(memory: Memory, lines: int = 10) -> list[str]:
    """The last lines of the hooks' log (.store/hook.log: what a hook could not import)."""
    path = memory.store.layout.hook_log
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - 8192))
            tail = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    return tail[-lines:] if size <= 8192 else tail[1:][-lines:]

