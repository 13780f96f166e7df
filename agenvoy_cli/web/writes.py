"""The routes of `agenvoy web --write` (none of them exists without it). Each write is asked
first: a POST without confirm=yes shows what will change; with it, the change is made
through the Memory call the matching command makes (`errors forget`, `notes add/edit/
remove`, `forget`), and the page redirects to what changed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agenvoy_cli.errors import AgenvoyError, BadInput

if TYPE_CHECKING:
    from agenvoy_cli.api import Memory
    from agenvoy_cli.web.base import Web


def routes(web: Web, wrap: Any) -> list[Route]:
    return [Route("/errors/{rid}/edit", wrap(web, _error_edit), methods=["GET", "POST"]),
            Route("/errors/{rid}/forget", wrap(web, _error_forget), methods=["POST"]),
            Route("/notes-new", wrap(web, _note_new), methods=["GET", "POST"]),
            Route("/notes/{name}/edit", wrap(web, _note_edit), methods=["GET", "POST"]),
            Route("/notes/{name}/remove", wrap(web, _note_remove), methods=["POST"]),
            Route("/forget/{sid}", wrap(web, _forget), methods=["GET", "POST"])]


async def _apply(web: Web, fn: Any, *args: Any, **kwargs: Any) -> Any:
    return await web.call(lambda: fn(*args, **kwargs))


def _failed(web: Web, exc: AgenvoyError) -> Response:
    status = 404 if exc.kind == "not_found" else 400 if exc.exit_code == 2 else 500
    return web.page("error.html", status, message=str(exc))


def _confirm(web: Web, action: str, question: str, fields: dict[str, str],
             preview: Any = None) -> Response:
    kept = {k: v for k, v in fields.items() if k not in ("csrf", "confirm")}
    return web.page("confirm.html", action=action, question=question, fields=kept,
                    preview=preview)


# -- error memory ----------------------------------------------------------------------------

def replace_fix(memory: Memory, rid: str, action: str, outcome: str) -> dict[str, Any]:
    """A new fix for a record: the record again with the new action and outcome (its
    keywords, symptom and cause as they are), then the old one forgotten. Recorded first,
    so a failure between the two leaves both, never neither; the new record starts a new
    TTL and hit count, as a record the agent remembers again does."""
    from agenvoy_cli.errormem.records import plain

    old = memory.error(rid)
    new = memory.record_error(old["tool_name"], plain(old["keywords"]), old["symptom"],
                              action, outcome, old["cause"] or None)["records"][0]
    memory.forget_error(old["id"])
    return dict(new)


async def _error_edit(web: Web, request: Request) -> Response:
    rid = request.path_params["rid"]
    try:
        record = await _apply(web, web.memory.error, rid)
    except AgenvoyError as exc:
        return _failed(web, exc)
    if request.method == "GET":
        return web.page("error_edit.html", record=record)
    fields = await web.form(request)
    action, outcome = fields.get("action", "").strip(), fields.get("outcome", "")
    if not action:
        raise BadInput("the fix is empty")
    if outcome not in ("resolved", "failed", "abandoned"):
        raise BadInput(f"outcome must be resolved, failed or abandoned, got {outcome!r}")
    if fields.get("confirm") != "yes":
        return _confirm(web, f"/errors/{quote(rid)}/edit",
                        f"Replace the fix of {record['tool_name']} record {rid[:12]}?",
                        fields, {"before": f"{record['action']} ({record['outcome']})",
                                 "after": f"{action} ({outcome})"})
    try:
        await _apply(web, replace_fix, web.memory, rid, action, outcome)
    except AgenvoyError as exc:
        return _failed(web, exc)
    return _done(web, "/errors", "The fix was replaced.")


async def _error_forget(web: Web, request: Request) -> Response:
    rid = request.path_params["rid"]
    fields = await web.form(request)
    try:
        record = await _apply(web, web.memory.error, rid)
        if fields.get("confirm") != "yes":
            return _confirm(web, f"/errors/{quote(rid)}/forget",
                            f"Forget the {record['tool_name']} record {rid[:12]} "
                            "(its row and its vector)?", fields,
                            {"before": record["symptom"], "after": "(gone)"})
        await _apply(web, web.memory.forget_error, rid)
    except AgenvoyError as exc:
        return _failed(web, exc)
    return _done(web, "/errors", "The record was forgotten.")


# -- notes -----------------------------------------------------------------------------------

async def _note_new(web: Web, request: Request) -> Response:
    if request.method == "GET":
        return web.page("note_edit.html", note=None)
    fields = await web.form(request)
    content, name = fields.get("content", ""), fields.get("name", "").strip() or None
    if fields.get("confirm") != "yes":
        return _confirm(web, "/notes-new", f"Add the note {name or '(named by its first line)'}?",
                        fields, {"before": "", "after": content})
    try:
        doc = await _apply(web, web.memory.add_note, content, name)
    except AgenvoyError as exc:
        return _failed(web, exc)
    return _done(web, f"/notes/{quote(doc['name'], safe='')}", "The note was added.")


async def _note_edit(web: Web, request: Request) -> Response:
    name = request.path_params["name"]
    try:
        note = await _apply(web, web.memory.note, name)
    except AgenvoyError as exc:
        return _failed(web, exc)
    if request.method == "GET":
        return web.page("note_edit.html", note=note)
    fields = await web.form(request)
    content = fields.get("content", "")
    rename = fields.get("name", "").strip()
    rename_to = rename if rename and rename != name else None
    if fields.get("confirm") != "yes":
        return _confirm(web, f"/notes/{quote(name, safe='')}/edit",
                        f"Save the note {name}" + (f" as {rename_to}" if rename_to else "") + "?",
                        fields, {"before": note["content"], "after": content})
    try:
        doc = await _apply(web, web.memory.edit_note, name, content, rename=rename_to)
    except AgenvoyError as exc:
        return _failed(web, exc)
    return _done(web, f"/notes/{quote(doc['name'], safe='')}", "The note was saved.")


async def _note_remove(web: Web, request: Request) -> Response:
    name = request.path_params["name"]
    fields = await web.form(request)
    try:
        note = await _apply(web, web.memory.note, name)
        if fields.get("confirm") != "yes":
            return _confirm(web, f"/notes/{quote(name, safe='')}/remove",
                            f"Remove the note {name} (its row, full-text entry and vectors)?",
                            fields, {"before": note["content"], "after": "(gone)"})
        await _apply(web, web.memory.remove_note, name)
    except AgenvoyError as exc:
        return _failed(web, exc)
    return _done(web, "/notes", "The note was removed.")


# -- forget ----------------------------------------------------------------------------------

def _seqs(raw: str) -> list[int]:
    parts = [p for p in raw.replace(",", " ").split() if p]
    if not parts or not all(p.isdigit() for p in parts):
        raise BadInput(f"seq must be one or more message places (integers), got {raw!r}")
    return sorted({int(p) for p in parts})


async def _forget(web: Web, request: Request) -> Response:
    """GET ?seq=N: the preview (the dry run of `agenvoy forget SESSION N`: the messages and
    the layers it touches); POST: asked, then done, all or nothing."""
    sid = request.path_params["sid"]
    fields = dict(request.query_params) if request.method == "GET" else await web.form(request)
    seqs = _seqs(fields.get("seq", ""))
    try:
        preview = await _apply(web, web.memory.forget, sid, seqs, dry_run=True)
        if request.method == "GET" or fields.get("confirm") != "yes":
            return web.page("forget.html", session_id=sid, seq=" ".join(map(str, seqs)),
                            preview=preview, layers=_layers(preview))
        done = await _apply(web, web.memory.forget, sid, seqs)
    except AgenvoyError as exc:
        return _failed(web, exc)
    return _done(web, f"/s/{quote(sid, safe='')}",
                 f"{done['forgotten']} message(s) forgotten from every layer.")


def _layers(preview: dict[str, Any]) -> list[tuple[str, str]]:
    n = len(preview["messages"])
    return [("history.json", f"{preview['removed_from_history']} of {n} message(s) are in it: "
             "rewritten without them" if preview["removed_from_history"] else
             "none of them is in it: untouched"),
            ("history.db (archive and both full-text indexes)", f"{n} row(s) deleted"),
            ("vector index", "their vectors deleted (those embedded)"),
            ("summary.json", preview["notes"][0])]


def _done(web: Web, where: str, message: str) -> Response:
    return web.page("done.html", where=where, message=message)
