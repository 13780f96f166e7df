"""Agenvoy v0.32's agent-facing memory tools over MCP: `chat_history` and `error_history`.

Read from agenvoy/Agenvoy v0.32.7 internal/tools/history/action/ (chatHistory.go, list.go,
read.go, record.go, search.go) and internal/tools/history/error/errorHistory.go. The input
schemas are upstream's (names, enums, defaults; no `required`: upstream checks per mode and
says "X is required when mode=..."), plus `session_id` when the server is not bound to a
session (upstream's tools always run inside one). `agenvoy mcp --tools agenvoy|both` serves
them (the vocabulary: vocabulary()).

- chat_history mode=list|read answer from Agenvoy's action log: the finished runs it keeps
  in sessions/<id>/history/<YYYY-MM-DD-HH-MM>-<task id>.json (a run's pending/<task>.json,
  moved there when it ends; askUser.go CleanupPending), read by conversation/action_log.py
  through Memory.action_log, as every tool reads through Memory. A session without that
  folder has no action log (this tool's own appends write none): a tool error says so.
  mode=search is this tool's conversation search (keyword over the archive and recent
  messages, semantic over recent ones), upstream's limits (default 8, at most 32) and time
  ranges.
- error_history mode=search|read|write is the error memory (SQLite here; ToriiDB upstream).
- find_knowledge mode=search|list|read (internal/tools/knowledge/findKnowledge.go): the
  knowledge notes, upstream's parameters, limits and answers (search: keywords as
  case-insensitive substrings of name and content, names and hit counts, most matched
  first, default 5, at most 20; list: every name; read: one note). Served in every
  vocabulary but spec, whose notes tools are search_notes/read_note (ranked, snippets,
  semantic).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from agenvoy_cli.contract import list_document
from agenvoy_cli.errors import BadInput, NotFound
from agenvoy_cli.server import handlers
from agenvoy_cli.server import tools as T
from agenvoy_cli.server.args import Args
from agenvoy_cli.server.handlers import Context, Reply

if TYPE_CHECKING:
    from agenvoy_cli.conversation.action_log import Run

VOCABULARIES = ("spec", "agenvoy", "both")
SPEC_ONLY = ("search_chat_history", "remember_error", "search_error_history", "read_error",
             "search_notes", "read_note")
CHAT_MODES = ["list", "read", "search"]
MATCHES = ["semantic", "keyword"]
TIME_RANGES = ["1d", "1m", "1y", "7d"]  # slices.Sorted(maps.Keys(historyTimeRanges))
ERROR_MODES = ["search", "read", "write"]
LIST_LIMIT, SEARCH_LIMIT, SEARCH_MAX = 10, 8, 32  # chat_history
ERROR_LIMIT, ERROR_MAX = 4, 16  # error_history
KNOWLEDGE_MODES = ["search", "list", "read"]
KNOWLEDGE_LIMIT, KNOWLEDGE_MAX = 5, 20  # knowledge.DefaultLimit, knowledge.MaxLimit


def _string(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", **extra, "description": description}


def _schema(props: dict[str, Any], bound: str | None, per_session: bool) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if per_session and not bound:
        props["session_id"] = T._session(bound)
        schema["required"] = ["session_id"]
    return schema


def definitions(bound: str | None) -> list[dict[str, Any]]:
    """chat_history and error_history, upstream's input schemas."""
    chat = {
        "mode": _string("list: recent runs, one row each, with their task_id. read: one run "
                        "in full, needs task_id. search: past messages, needs keyword. "
                        "Omitted: task_id selects read, keyword selects search, otherwise "
                        "list.", enum=CHAT_MODES, default="list"),
        "task_id": _string("mode=read: task id taken from a list row; required."),
        "keyword": _string("mode=search: the core noun to look for (e.g. 'redis TTL', "
                           "'bwrap sandbox decision')."),
        "match": _string("mode=search: semantic matches meaning in recent messages; keyword "
                         "matches text across the full history including archive.",
                         enum=MATCHES, default="semantic"),
        "time_range": _string("mode=search: how far back to look.", enum=TIME_RANGES,
                              default="1d"),
        "limit": {"type": "integer", "description": "Rows to return, newest first; hit cap "
                  "per source when mode=search. Ignored when mode=read.",
                  "default": LIST_LIMIT},
    }
    error = {
        "mode": _string("search: past records by keyword — resolved means apply it, failed "
                        "or abandoned means avoid it. read: one record by hash. write: "
                        "persist this error. Omitted: hash → read, outcome → write, "
                        "otherwise search.", enum=ERROR_MODES, default="search"),
        "keyword": _string("mode=search: tool name, error symptom, or parameter trait."),
        "limit": {"type": "integer", "description": "mode=search: max records to return. "
                  "Never above 16.", "default": ERROR_LIMIT},
        "hash": _string("mode=read: error hash, 8-char hex (e.g. 'a1b2c3d4')."),
        "tool_name": _string("mode=write: the tool that produced the error (e.g. "
                             "'fetch_page')."),
        "keywords": {"type": "array", "items": {"type": "string"},
                     "description": "mode=write: lookup keywords — tool name, error type, "
                     "parameter traits. Be specific."},
        "symptom": _string("mode=write: observed behavior — what the tool returned or "
                           "failed on."),
        "cause": _string("mode=write: root cause, once confirmed.", default=""),
        "action": _string("mode=write: what was done (e.g. 'retried with English keyword', "
                          "'fell back to search_web')."),
        "outcome": _string("mode=write: resolved = the fix worked; failed = strategy "
                           "confirmed non-working; abandoned = 3+ approaches tried.",
                           enum=list(T.OUTCOMES)),
    }
    knowledge = {
        "mode": _string("search: names of the notes matching the keywords, most matched "
                        "first. list: the name of every note. read: one whole note, by name. "
                        "Omitted: keywords selects search, name selects read, otherwise list.",
                        enum=KNOWLEDGE_MODES, default="search"),
        "keywords": {"type": "array", "items": {"type": "string"}, "description": (
            "mode=search: terms to look for, matched case-insensitively as substrings. Send "
            "several — synonyms and both languages of a term — since a note matching more "
            "of them ranks higher.")},
        "name": _string("mode=read: the note name, exactly as list or a search hit spells "
                        "it."),
        "limit": {"type": "integer", "description": "mode=search: notes to return, most "
                  "matched first; never above 20. Ignored when mode=list.",
                  "default": KNOWLEDGE_LIMIT},
    }
    return [
        {"name": "find_knowledge", "inputSchema": _schema(knowledge, bound, False),
         "description": (
             "Notes the operator wrote — house rules, conventions, background this workspace "
             "assumes.\nmode=search for 我們的規範是什麼 / 這個專案怎麼做, and before answering "
             "anything a local convention would override; mode=list for 有哪些筆記.\nBoth "
             "return names only, never content — judge which names matter, then mode=read "
             "those, one call each, issued together.\nPast runs and conversation → "
             "chat_history; files on disk → find_files.")},
        {"name": "chat_history", "inputSchema": _schema(chat, bound, True), "description": (
            "This session's own record — the action log: what each finished run was asked "
            "for, every tool it called with what came back, the reply it ended on, and the "
            "messages themselves. Use for 最近做了什麼 / 之前處理過這個嗎 / 那次到底做了什麼 / "
            "那個工具回了什麼 / 上一個動作的 action log / 我們之前聊過什麼. mode=list/read need "
            "Agenvoy's action log of the session; mode=search works on every session. "
            "Failures → error_history.")},
        {"name": "error_history", "inputSchema": _schema(error, bound, False), "description": (
            "Tool failures kept across sessions: what broke, why, what was done about it, "
            "and whether that worked. Search it before a second retry when no error hint was "
            "injected, read one by hash when a tool answers \"no data: {hash}\", write once a "
            "non-trivial fix is confirmed or a strategy is confirmed dead. A past run's own "
            "steps → chat_history.")},
    ]


def vocabulary(bound: str | None, which: str) -> list[dict[str, Any]]:
    """The tools `agenvoy mcp --tools WHICH` lists: spec (the spec's names), agenvoy (v0.32's
    chat_history/error_history in place of the spec's four memory tools), or both."""
    if which not in VOCABULARIES:
        raise BadInput(f"--tools {which!r}: expected one of {', '.join(VOCABULARIES)}")
    spec = T.definitions(bound)
    if which == "spec":
        return spec
    kept = [t for t in spec if t["name"] not in SPEC_ONLY] if which == "agenvoy" else spec
    return [*definitions(bound), *kept]


AGENVOY_INSTRUCTIONS = (
    "Agenvoy memory, with Agenvoy v0.32's tools: this conversation (chat_history: "
    "mode=search for past messages; mode=list/read for the runs Agenvoy's action log "
    "recorded; get_context, append_messages), a cross-session memory of tool failures "
    "(error_history: search before a 2nd retry, write once an error is resolved or given up, "
    "read by hash), the operator's notes, which outrank anything else (find_knowledge: "
    "search with a request's key terms before answering when get_context says notes exist, "
    "then read; save_note) and document knowledge bases (list_rag, search_rag). Each session's "
    "rolling summary is a resource: agenvoy://sessions/<id>/summary.")


def instructions(spec: str, which: str) -> str:
    """The server's instructions, naming only the tools of the vocabulary served."""
    if which == "spec":
        return spec
    if which == "agenvoy":
        return AGENVOY_INSTRUCTIONS
    return spec + (" Agenvoy v0.32's names are served too: chat_history (search, or list/read "
                   "Agenvoy's action log), error_history (search, read, write) and "
                   "find_knowledge (search, list, read).")


def _args(name: str, raw: dict[str, Any], bound: str | None) -> Args:
    props = next(t for t in definitions(bound) if t["name"] == name)["inputSchema"]
    extra = ["session_id"] if name == "chat_history" else []  # bound: may still name one
    return Args(name, raw, sorted({*props["properties"], *extra}))


def _limit(a: Args, default: int, most: int) -> int:
    value = a.integer("limit", lo=-2**31) or 0  # upstream: <= 0 is the default
    return min(value if value > 0 else default, most)


# ----------------------------------------------------------------------------- chat_history


def _runs(ctx: Context, session_id: str, *, limit: int | None = None,
          task_id: str | None = None) -> list[Run]:
    """The action log's finished runs, newest first, through Memory."""
    found = ctx.memory().action_log(session_id, limit=limit, task_id=task_id)
    if found is None:
        raise NotFound(f"chat_history: session {session_id!r} has no action log (Agenvoy "
                       f"v0.32 keeps one in sessions/{session_id}/history/ when its runs "
                       "finish); mode=search searches its messages")
    return found


def _items(record: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = record.get(key)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _tools_used(record: dict[str, Any]) -> list[str]:
    used: list[str] = []
    for item in [*_items(record, "tool_results"), *_items(record, "tool_attempts")]:
        name = str(item.get("name") or "")
        if name not in used:
            used.append(name)
    return used


def _at(at: datetime) -> str:
    return at.astimezone().isoformat(timespec="seconds")


def _list(ctx: Context, session_id: str, limit: int) -> Reply:
    rows, docs = [], []
    for run in _runs(ctx, session_id, limit=limit):
        task_id, at, record = run.task_id, run.at, run.record
        row: dict[str, Any] = {"task_id": task_id, "at": at.strftime("%Y-%m-%d %H:%M")}
        doc: dict[str, Any] = {"task_id": task_id, "finished_at": _at(at), "objective": None,
                               "tools": [], "model": None, "problem": None}
        if record is None:
            row["unreadable"] = doc["problem"] = run.problem
        else:
            used = _tools_used(record)  # Go: a nil slice, null when the run called none
            row.update(objective=record.get("objective", ""), did=used or None,
                       model=record.get("model", ""))
            doc.update(objective=record.get("objective"), tools=used,
                       model=record.get("model"))
            for key, name in (("answer", "answered_questions"), ("todos", "todos")):
                if _items(record, key):
                    row[name] = len(_items(record, key))
        rows.append(row)
        docs.append(doc)
    text = go_json(rows) if rows else "no finished tasks yet"
    return text, {"session_id": session_id, **list_document("tasks", docs)}


def go_json(value: Any) -> str:
    """encoding/json.Marshal of maps: sorted keys, compact, <, > and & escaped."""
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    for char, escape in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


def render_task(task_id: str, at: datetime, r: dict[str, Any]) -> str:
    """read.go render()."""
    out = [f"task {task_id} — {at.strftime('%Y-%m-%d %H:%M')}"]
    if r.get("model"):
        out.append(f" · {r['model']}")
    if r.get("reasoning"):
        out.append(f" · reasoning {r['reasoning']}")
    if r.get("objective"):
        out.append(f"\n\nobjective:\n{r['objective']}")
    for title, key in (("completed", "completed"), ("next steps", "next_steps")):
        lines = r.get(key) if isinstance(r.get(key), list) else []
        if lines:
            out.append(f"\n\n{title}:" + "".join(f"\n- {line}" for line in lines))
    out += [f"\n\nasked: {a.get('question', '')}\nanswered: {a.get('answer', '')}"
            for a in _items(r, "answer")]
    out += [f"\n\ntodo [{t.get('status', '')}] {t.get('content', '')}"
            for t in _items(r, "todos")]
    out += [f"\n\nattempted {a.get('name', '')} {a.get('args', '')}"
            for a in _items(r, "tool_attempts")]
    out += [f"\n\ncalled {t.get('name', '')}:\n{t.get('result', '')}"
            for t in _items(r, "tool_results")]
    if r.get("reply"):
        out.append(f"\n\nreplied:\n{r['reply']}")
    return "".join(out)


def _read(ctx: Context, session_id: str, task_id: str) -> Reply:
    for run in _runs(ctx, session_id, task_id=task_id):
        if run.record is None:
            raise BadInput(str(run.problem))
        return render_task(run.task_id, run.at, run.record), {
            "session_id": session_id, "task_id": run.task_id, "finished_at": _at(run.at),
            "path": str(run.path), "record": run.record}
    raise NotFound(f"no finished task with id {task_id} in this session")


def chat_history(ctx: Context, raw: dict[str, Any]) -> Reply:
    a = _args("chat_history", raw, ctx.bound)
    task_id = (a.string("task_id") or "").strip()
    keyword = (a.string("keyword") or "").strip()
    mode = (a.string("mode") or "").strip() or \
        ("read" if task_id else "search" if keyword else "list")
    match = a.choice("match", MATCHES, "semantic")
    span = a.choice("time_range", TIME_RANGES, "1d")
    if mode not in CHAT_MODES:
        raise BadInput(f"unknown mode {mode!r}; available: list, read, search")
    session_id = a.session(ctx.bound)
    if mode == "list":
        return _list(ctx, session_id, _limit(a, LIST_LIMIT, 2**31))
    if mode == "read":
        if not task_id:
            raise BadInput("task_id is required when mode=read")
        return _read(ctx, session_id, task_id)
    if not keyword:
        raise BadInput("keyword is required when mode=search")
    doc = handlers.windowed_search(ctx, session_id, keyword, match,
                                   _limit(a, SEARCH_LIMIT, SEARCH_MAX), span, "1d",
                                   handlers._budget(ctx, Args("chat_history", {}, [])))
    return handlers.render_history(doc), doc


# ----------------------------------------------------------------------------- error_history

WRITE_FIELDS = ("tool_name", "keywords", "symptom", "action", "outcome")


def error_history(ctx: Context, raw: dict[str, Any]) -> Reply:
    a = _args("error_history", raw, ctx.bound)
    hash_ = (a.string("hash") or "").strip()
    outcome = (a.string("outcome") or "").strip()
    mode = (a.string("mode") or "").strip() or \
        ("read" if hash_ else "write" if outcome else "search")
    if mode == "search":
        keyword = (a.string("keyword") or "").strip()
        if not keyword:
            raise BadInput("keyword is required when mode=search")
        return handlers.search_error_history(ctx, {
            "keyword": keyword, "limit": _limit(a, ERROR_LIMIT, ERROR_MAX)})
    if mode == "read":
        if not hash_:
            raise BadInput("hash is required when mode=read")
        return handlers.read_error(ctx, {"hash": hash_})
    if mode == "write":
        fields = {k: a.raw.get(k) for k in (*WRITE_FIELDS, "cause")}
        for name in WRITE_FIELDS:  # requireRecord's order and words
            value = fields[name]
            if value in (None, "", []) or (isinstance(value, str) and not value.strip()):
                raise BadInput(f"{name} is required when mode=write")
        _, doc = handlers.record_error(ctx, {k: v for k, v in fields.items()
                                               if v is not None})
        return "recorded", doc
    raise BadInput(f"unknown mode {mode!r}; available: search, read, write")


# ----------------------------------------------------------------------------- find_knowledge


def go_struct_json(value: Any) -> str:
    """encoding/json.Marshal of a struct or a slice: fields in declaration order (not
    sorted, as maps are), compact, <, > and & escaped."""
    text = orjson.dumps(value).decode()
    for char, escape in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


def go_quote(text: str) -> str:
    """Go's %q of a string (a JSON string is the same for printable text)."""
    return orjson.dumps(text).decode()


def _keywords(a: Args) -> list[str]:
    keywords = a.raw.get("keywords")
    if keywords is not None and (not isinstance(keywords, list)
                                 or not all(isinstance(k, str) for k in keywords)):
        raise BadInput("find_knowledge: keywords must be an array of strings")
    return keywords or []


def _knowledge_list(ctx: Context) -> Reply:
    names = ctx.memory().note_names(warn=ctx.warn)
    doc = {"mode": "list", "names": names, "count": len(names)}
    return (go_struct_json(names) if names else "no note"), doc


def _knowledge_read(ctx: Context, name: str) -> Reply:
    from agenvoy_cli.notes.names import go_trim_space

    name = go_trim_space(name)
    if not name:
        raise BadInput("name is required when mode=read")
    note = ctx.memory().note_named(name, warn=ctx.warn)
    if note is None:
        raise NotFound(f"no note named {go_quote(name)}")
    record = {"name": note["name"], "content": note["content"],
              "updated_at": note["updated_at_ns"] // 1_000_000_000}
    return go_struct_json(record), {"mode": "read", **note}


def _knowledge_search(ctx: Context, keywords: list[str], limit: int) -> Reply:
    if not keywords:
        raise BadInput("keywords is required when mode=search")
    doc = {"mode": "search", **ctx.memory().notes_holding(keywords, limit, warn=ctx.warn)}
    rows = doc["results"]
    return (go_struct_json(rows) if rows else "no matching note"), doc


def find_knowledge(ctx: Context, raw: dict[str, Any]) -> Reply:
    from agenvoy_cli.notes.names import go_trim_space

    a = _args("find_knowledge", raw, ctx.bound)
    keywords = _keywords(a)
    name = a.string("name") or ""
    limit = a.integer("limit", lo=-2**31) or 0  # upstream: outside 1..20 is the default
    mode = go_trim_space(a.string("mode") or "").lower() or \
        ("search" if keywords else "read" if go_trim_space(name) else "list")
    if mode not in KNOWLEDGE_MODES:
        raise BadInput(f"unknown mode {go_quote(mode)}; available: search, list, read")
    # every mode takes in the legacy folder first, as Agenvoy at start (Memory does)
    if mode == "list":
        return _knowledge_list(ctx)
    if mode == "read":
        return _knowledge_read(ctx, name)
    return _knowledge_search(ctx, keywords, limit)


TOOLS: dict[str, Callable[[Context, dict[str, Any]], Reply]] = {
    "find_knowledge": find_knowledge,
    "chat_history": chat_history,
    "error_history": error_history,
}


def call(ctx: Context, name: str, raw: dict[str, Any] | None, which: str = "spec") -> Reply:
    """A tool of the vocabulary `which`; a name it does not list is an unknown tool."""
    names = [t["name"] for t in vocabulary(ctx.bound, which)]
    if name not in names:
        raise BadInput(f"unknown tool {name!r} (expected {', '.join(names)})")
    return handlers.call(ctx, name, raw, TOOLS.get(name))
