"""Each tool on the layers below: (text the model reads, structured content for the host).

Synchronous, and only ever called on the server's store thread (server.worker). Texts follow
upstream Agenvoy's tool results where it has one ("[archive]" / "[recent]" groups,
"no matches with keyword: ...", "Remember the Error: <id>", "NONE"); the structured content
is the document the CLI prints with --json.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from agenvoy_cli.contract import document
from agenvoy_cli.conversation.messages import display_text
from agenvoy_cli.conversation.store import Store
from agenvoy_cli.errors import BadInput
from agenvoy_cli.server import tools as T
from agenvoy_cli.server.args import Args
from agenvoy_cli.server.history_watch import align_if_written_elsewhere

if TYPE_CHECKING:
    from agenvoy_cli.api import Memory
    from agenvoy_cli.search.relevance import Relevance

Reply = tuple[str, dict[str, Any]]


@dataclass
class Context:
    store: Store
    bound: str | None
    touched: Callable[[str], None] = lambda session_id: None  # a session to keep indexed
    warnings: list[str] = field(default_factory=list)
    relevance: Relevance | None = None  # the server's (search/relevance.py), made once

    def warn(self, message: str) -> None:
        self.warnings.append(message.removeprefix("agenvoy: "))

    def memory(self) -> Memory:
        """The Python API over the server's store and Relevance: every tool goes through it,
        as the CLI's commands and the HTTP API do (cheap: nothing is opened or loaded)."""
        from agenvoy_cli.api import Memory

        return Memory(store=self.store, relevance=self.relevance)


def _json(doc: Any) -> str:
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()


def _properties(name: str) -> list[str]:
    for tool in T.definitions("x"):
        if tool["name"] == name:
            return list(tool["inputSchema"]["properties"])
    raise BadInput(f"unknown tool {name!r} (expected {', '.join(TOOLS)})")


# ----------------------------------------------------------------------------- conversation


def render_history(doc: dict[str, Any]) -> str:
    """As upstream's search_chat_history: [archive]/[recent] groups for keyword and hybrid,
    segments separated by a blank line; '[time · role] content' per message."""
    rows = doc["results"]
    if not rows:
        if doc.get("match") == "none":
            return f"nothing searchable in: {doc['query']}"
        hidden = [n["message"] for n in doc.get("notes", ()) if n["code"] == "outside_window"]
        return "\n".join([f"no matches with keyword: {doc['query']}", *hidden])
    from agenvoy_cli.search.results import grouped_lines, who

    out = grouped_lines(doc, lambda row: f"[{row['sent_at']} · {who(row)}] {row['content']}")
    if doc.get("unindexed_count"):
        out.append("")
        out.append(f"({doc['unindexed_count']} newest message(s) not embedded yet: "
                   "searched by keyword only)")
    return "\n".join(out)


def _budget(ctx: Context, a: Args) -> float:
    """The call's budget, else the settings' (AGENVOY_SEARCH_BUDGET, as the CLI), else 3 s."""
    return a.number("budget", lo=0, hi=T.MAX_BUDGET, default=ctx.store.settings.search_budget)


def windowed_search(ctx: Context, session_id: str, keyword: str, mode: str, limit: int,
                    span: str, default: str, budget: float) -> dict[str, Any]:
    """The search of search_chat_history and chat_history (mode=search) over time_range
    `span`; nothing inside the window but matches outside it: a note says so."""
    # Agenvoy's writes to history.json: archived first
    align_if_written_elsewhere(ctx.store, session_id)
    within = f"within time_range {span}" + (" (the default)" if span == default else "")
    doc = ctx.memory().search(session_id, keyword, mode=mode, limit=limit,
                              range="1mo" if span == "1m" else span,  # upstream's 1m: 30 days
                              budget=budget, outside=(within, 'time_range "all"'))
    if mode != "keyword":
        ctx.touched(session_id)
    return doc


def search_chat_history(ctx: Context, raw: dict[str, Any]) -> Reply:
    a = Args("search_chat_history", raw, _properties("search_chat_history"))
    keyword = a.string("keyword", required=True) or ""
    mode = a.choice("mode", T.SEARCH_MODES, "semantic")
    span = a.choice("time_range", T.TIME_RANGES, T.DEFAULT_TIME_RANGE)
    limit = a.choice("limit", T.HISTORY_LIMITS, 8)
    session_id = a.session(ctx.bound)
    doc = windowed_search(ctx, session_id, keyword, mode, limit, span, T.DEFAULT_TIME_RANGE,
                          _budget(ctx, a))
    return render_history(doc), doc


def append_messages(ctx: Context, raw: dict[str, Any]) -> Reply:
    a = Args("append_messages", raw, _properties("append_messages"))
    session_id = a.session(ctx.bound)
    batch = a.array("messages", required=True) or []
    if len(batch) > T.MAX_APPEND:
        raise BadInput(f"append_messages: {len(batch)} messages (at most {T.MAX_APPEND} per "
                       "call)")
    doc = ctx.memory().append(session_id, batch, warn=ctx.warn)
    ctx.touched(session_id)
    text = (f"appended {doc['appended']} message(s) to {doc['session_id']} "
            f"({doc['message_count']} in history.json)")
    return text, doc


def get_context(ctx: Context, raw: dict[str, Any]) -> Reply:
    a = Args("get_context", raw, _properties("get_context"))
    session_id = a.session(ctx.bound)
    limit = a.integer("max_messages", lo=0)
    doc = ctx.memory().context(session_id, limit, warn=ctx.warn)
    notes = doc["knowledge_note_count"]
    blocks = [f"[{m.get('role')}]\n{display_text(m)}" for m in doc["messages"]]
    text = "\n\n".join(blocks) or "(no messages)"
    if notes:
        text += "\n\n" + knowledge_line(notes)
    return text, doc


# ----------------------------------------------------------------------------- error memory


def record_error(ctx: Context, raw: dict[str, Any]) -> Reply:
    from agenvoy_cli.errormem.records import make_draft

    a = Args("remember_error", raw, _properties("remember_error"))
    draft = make_draft(a.raw.get("tool_name"), a.raw.get("keywords"),
                       a.raw.get("symptom"), a.raw.get("cause"), a.raw.get("action"),
                       a.raw.get("outcome"))
    doc = ctx.memory().record_errors([draft], warn=ctx.warn)
    return f"Remember the Error: {doc['records'][0]['id']}", doc


def search_error_history(ctx: Context, raw: dict[str, Any]) -> Reply:
    from agenvoy_cli.errormem.records import DEFAULT_LIMIT

    a = Args("search_error_history", raw, _properties("search_error_history"))
    keyword = a.string("keyword", required=True) or ""
    limit = a.integer("limit", lo=1, hi=T.ERROR_LIMIT_MAX, default=DEFAULT_LIMIT)
    tool = a.string("tool_name")
    budget = _budget(ctx, a)
    if not keyword.strip():
        raise BadInput("search_error_history: keyword is empty")
    doc = ctx.memory().lookup_errors(keyword, tool=tool, limit=limit or 4, warn=ctx.warn,
                                     budget=budget)
    return doc["hint"] or "NONE", doc


def read_error(ctx: Context, raw: dict[str, Any]) -> Reply:
    a = Args("read_error", raw, _properties("read_error"))
    ref = (a.string("hash", required=True) or "").strip()
    doc = ctx.memory().error(ref)
    return _json(doc), doc


# ----------------------------------------------------------------------------- notes


def render_notes(doc: dict[str, Any]) -> str:
    rows = doc.get("results") or []
    if not rows:
        return f"no matching note: {doc.get('query')}"
    return "\n".join(f"{r['rank']}. {r['name']} — {r['snippet']}" for r in rows) + \
        "\n(read_note NAME for a whole note)"


def search_notes(ctx: Context, raw: dict[str, Any]) -> Reply:
    a = Args("search_notes", raw, _properties("search_notes"))
    query = a.string("query", required=True) or ""
    mode = a.choice("mode", T.NOTE_MODES, "hybrid")
    limit = a.integer("limit", lo=1, hi=T.NOTE_LIMIT_MAX, default=5) or 5
    budget = _budget(ctx, a)
    span = a.choice("time_range", T.TIME_RANGES, "all")
    doc = ctx.memory().search_notes(query, mode=mode, limit=limit, budget=budget,
                                    range="1mo" if span == "1m" else span, warn=ctx.warn)
    return render_notes(doc), doc


def read_note(ctx: Context, raw: dict[str, Any]) -> Reply:
    a = Args("read_note", raw, _properties("read_note"))
    doc = ctx.memory().note(a.string("name", required=True) or "", warn=ctx.warn)
    return f"# {doc['name']}\n\n{doc['content']}", doc


def save_note(ctx: Context, raw: dict[str, Any]) -> Reply:
    a = Args("save_note", raw, _properties("save_note"))
    content = a.string("content", required=True)
    name = a.string("name")
    replace = bool(a.raw.get("replace", False))
    if not isinstance(a.raw.get("replace", False), bool):
        raise BadInput("save_note: replace must be true or false")
    doc = ctx.memory().add_note(content or "", name, replace=replace, source="mcp",
                                           warn=ctx.warn)
    return f"saved note {doc['name']} ({doc['action']})", doc


def knowledge_line(count: int) -> str:
    """What get_context tells a model when notes exist (upstream's rule, systemPrompt.go)."""
    return (f"[knowledge] The operator keeps {count} note(s) here; they outrank anything else "
            "you find: for every request that is not smalltalk, search them with its key "
            "terms before answering, then read the ones that look relevant.")


# ----------------------------------------------------------------------------- RAG


def list_rag(ctx: Context, raw: dict[str, Any]) -> Reply:
    Args("list_rag", raw, [])
    doc = ctx.memory().rag_databases()
    databases = doc["databases"]
    if not databases:
        return "no RAG databases (create one with `agenvoy rag create NAME PATH...`)", doc
    return _json(databases), doc


def render_rag(doc: dict[str, Any]) -> str:
    rows = doc.get("results") or []
    if not rows:
        return f"no matches with query: {doc.get('query')}"
    out = []
    for n, row in enumerate(rows, 1):
        where = f"{row.get('relpath')}:{row.get('line_start')}-{row.get('line_end')}"
        head = f"[{n}] {row.get('database')} · {where}"
        if row.get("heading"):
            head += f" · {row['heading']}"
        out.append(f"{head}\n{row.get('text', '').strip()}")
    return "\n\n".join(out)


def search_rag(ctx: Context, raw: dict[str, Any]) -> Reply:
    from agenvoy_cli import rag

    a = Args("search_rag", raw, _properties("search_rag"))
    query = a.string("q", required=True) or ""
    mode = a.choice("mode", T.SEARCH_MODES, rag.DEFAULT_MODE)
    db = a.string("db")
    limit = a.integer("limit", lo=1, hi=T.RAG_LIMIT_MAX, default=10) or 10
    span = a.choice("time_range", T.TIME_RANGES, "all")
    doc = ctx.memory().rag_search(query, [db] if db else None, mode=mode, limit=limit,
                                  range="1mo" if span == "1m" else span)  # 1m: 30 days
    return render_rag(doc), doc


TOOLS: dict[str, Callable[[Context, dict[str, Any]], Reply]] = {
    "search_chat_history": search_chat_history,
    "remember_error": record_error,
    "search_error_history": search_error_history,
    "read_error": read_error,
    "list_rag": list_rag,
    "search_rag": search_rag,
    "search_notes": search_notes,
    "read_note": read_note,
    "save_note": save_note,
    "append_messages": append_messages,
    "get_context": get_context,
}


def call(ctx: Context, name: str, raw: dict[str, Any] | None,
         handler: Callable[[Context, dict[str, Any]], Reply] | None = None) -> Reply:
    handler = handler or TOOLS.get(name)
    if handler is None:
        raise BadInput(f"unknown tool {name!r} (expected {', '.join(TOOLS)})")
    if raw is not None and not isinstance(raw, dict):
        raise BadInput(f"{name}: the arguments must be an object")
    ctx.warnings.clear()
    text, doc = handler(ctx, dict(raw or {}))
    if ctx.warnings:
        doc.setdefault("notes", [])
        doc["notes"] = [*doc["notes"], *({"code": "warning", "message": w}
                                          for w in ctx.warnings)]
    return text, document(doc)  # the CLI's --json document (schema_version first)


# ----------------------------------------------------------------------------- resources


def summaries(store: Store) -> list[str]:
    """Sessions that have a rolling summary (summary.json), sorted."""
    try:
        folders = sorted(p for p in store.layout.sessions.iterdir() if p.is_dir())
    except OSError:
        return []
    return [p.name for p in folders if (p / "summary.json").is_file()]


def read_summary(store: Store, session_id: str) -> str:
    from agenvoy_cli.conversation.summary import read_summary as read
    from agenvoy_cli.errors import NotFound

    with store.read_lock():
        data = read(store.layout.summary(session_id))
    if data is None:
        raise NotFound(f"session {session_id!r} has no summary yet")
    return _json(data)
