"""The pages of `agenvoy web` (Starlette, server-rendered with Jinja2; no script at all).

Read-only unless started with --write: without it no route that writes exists (404, not a
refusal). A write is two POSTs: the first shows what will change and asks (a confirmation
page that works without JavaScript), the second, with confirm=yes, does it; both carry the
CSRF token. Every call into the home runs on one worker thread, in turn, as the MCP
server's store thread does."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agenvoy_cli.api import Memory
from agenvoy_cli.errors import AgenvoyError, BadInput
from agenvoy_cli.web import views, writes
from agenvoy_cli.web.base import HERE, MODES, Web


def build(memory: Memory, token: str, write: bool, state: dict[str, Any]) -> Starlette:
    web = Web(memory, token, write, state)
    routes = [Route("/", _wrap(web, _sessions)), Route("/s/{sid}", _wrap(web, _session)),
              Route("/context/{sid}", _wrap(web, _context)),
              Route("/search", _wrap(web, _search)), Route("/errors", _wrap(web, _errors)),
              Route("/notes", _wrap(web, _notes)), Route("/notes/{name}", _wrap(web, _note)),
              Route("/health", _wrap(web, _health)), Route("/web.css", _css)]
    if write:
        routes += writes.routes(web, _wrap)
    return Starlette(routes=routes)


def _wrap(web: Web, handler: Callable[..., Any]) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        web.state["requests"] = web.state.get("requests", 0) + 1
        started, cpu = time.perf_counter(), time.process_time()
        response = await _answer(web, handler, request)
        # the server's own time for the page (bench/web.py reads it): wall, and the
        # process's CPU (one request at a time runs on the worker thread)
        response.headers["server-timing"] = (
            f"app;dur={(time.perf_counter() - started) * 1000:.2f}, "
            f"cpu;dur={(time.process_time() - cpu) * 1000:.2f}")
        return response
    return endpoint


async def _answer(web: Web, handler: Callable[..., Any], request: Request) -> Response:
    try:
        return await handler(web, request)  # type: ignore[no-any-return]
    except PermissionError as exc:
        return web.page("error.html", 403, message=str(exc))
    except BadInput as exc:
        return web.page("error.html", 400, message=str(exc))
    except AgenvoyError as exc:
        return web.page("error.html", 500, message=str(exc))
    except Exception as exc:  # noqa: BLE001 - one line on the page, the trace on stderr
        traceback.print_exc()
        return web.page("error.html", 500, message=f"internal error: "
                        f"{type(exc).__name__}: {exc}")


async def _css(request: Request) -> Response:
    return Response((HERE / "static" / "web.css").read_bytes(), media_type="text/css",
                    headers={"cache-control": "max-age=3600"})


async def _sessions(web: Web, request: Request) -> Response:
    return await web.show("sessions.html", views.sessions_page)


async def _session(web: Web, request: Request) -> Response:
    raw = request.query_params.get("before")
    if raw is not None and not raw.isdigit():
        raise BadInput(f"before must be a message's place (an integer >= 0), got {raw!r}")
    before = int(raw) if raw else None
    return await web.show("session.html", views.session_page, request.path_params["sid"],
                          before)


async def _context(web: Web, request: Request) -> Response:
    return await web.show("context.html", views.context_page, request.path_params["sid"])


async def _search(web: Web, request: Request) -> Response:
    params = request.query_params
    mode = params.get("mode") or "hybrid"
    if mode not in MODES:
        raise BadInput(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    scopes = [s for s in params.getlist("in") if s in views.SCOPES] or list(views.SCOPES)
    sessions = (await web.call(Memory.sessions, web.memory))["sessions"]
    sessions.sort(key=lambda d: d.get("last_message_at_ns") or 0, reverse=True)
    sid = params.get("session") or (sessions[0]["session_id"] if sessions else None)
    return await _search_page(web, params, mode, sid, scopes, sessions)


async def _search_page(web: Web, params: Any, mode: str, sid: str | None,
                       scopes: list[str], sessions: list[dict[str, Any]]) -> Response:
    try:
        data = await web.call(views.search_page, web.memory, params.get("q", ""), mode, sid,
                              scopes)
    except AgenvoyError as exc:
        return web.page("error.html", 404 if exc.kind == "not_found" else 400,
                        message=str(exc))
    return web.page("search.html", **data, sessions=[s["session_id"] for s in sessions],
                    all_scopes=views.SCOPES, modes=MODES)


async def _errors(web: Web, request: Request) -> Response:
    return await web.show("errors.html", views.errors_page)


async def _notes(web: Web, request: Request) -> Response:
    return await web.show("notes.html", lambda m: m.notes())


async def _note(web: Web, request: Request) -> Response:
    return await web.show("note.html", lambda m, n: {"note": m.note(n)},
                          request.path_params["name"])


async def _health(web: Web, request: Request) -> Response:
    return await web.show("health.html", views.health_page, web.state)
