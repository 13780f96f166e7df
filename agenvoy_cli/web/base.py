"""What every page of `agenvoy web` shares: the templates (Jinja2, autoescaped), the
worker thread every call into the home runs on, the headers every page carries."""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from agenvoy_cli.api import Memory
from agenvoy_cli.errors import AgenvoyError
from agenvoy_cli.web import views
from agenvoy_cli.web.guard import derived

HERE = Path(__file__).resolve().parent
# same-origin, not no-referrer: under no-referrer a browser sends `Origin: null` with a
# form's POST, which the exact Origin check refuses
CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
MODES = ("keyword", "semantic", "hybrid")
# shown as visible marks, never applied: bidirectional overrides and isolates (a message
# must not reorder the page around it); lone surrogates (invalid UTF-8 read as text)
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def inert(text: Any) -> str:
    """Text as a page may show it: bidi controls as ⟦U+202E⟧ marks (escaping is Jinja's)."""
    return _BIDI.sub(lambda m: f"⟦U+{ord(m.group()):04X}⟧", str(text))


class Web:
    """The viewer's state: the home, the templates, the worker thread, --write."""

    def __init__(self, memory: Memory, token: str, write: bool, state: dict[str, Any]
                 ) -> None:
        import jinja2

        self.memory, self.write, self.state = memory, write, state
        self.csrf = derived(token, "csrf")
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
            trim_blocks=True, lstrip_blocks=True)
        self.env.filters["inert"] = inert
        self.env.filters["when"] = views.when
        self.limiter = anyio.CapacityLimiter(1)

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args, limiter=self.limiter)

    def page(self, name: str, status: int = 200, **data: Any) -> Response:
        html = self.env.get_template(name).render(write=self.write, csrf=self.csrf, **data)
        body = _SURROGATE.sub("\ufffd", html).encode("utf-8")
        return Response(body, status, media_type="text/html; charset=utf-8", headers={
            "content-security-policy": CSP, "x-content-type-options": "nosniff",
            "referrer-policy": "same-origin", "cache-control": "no-store"})

    async def show(self, name: str, fn: Callable[..., Any], *args: Any) -> Response:
        """A page whose data `fn` reads; an error of the home is the page's one line."""
        try:
            data = await self.call(fn, self.memory, *args)
        except AgenvoyError as exc:
            status = 404 if exc.kind == "not_found" else 400 if exc.exit_code == 2 else 500
            return self.page("error.html", status, message=str(exc))
        return self.page(name, **data)

    async def form(self, request: Request) -> dict[str, str]:
        """A write's fields, after its CSRF token is checked (403 otherwise)."""
        fields = {k: str(v) for k, v in (await request.form()).items()}
        if not hmac.compare_digest(fields.get("csrf", ""), self.csrf):
            raise PermissionError("missing or wrong CSRF token")
        return fields
