"""Who may use `agenvoy web`: the token of `mcp --http` (server.http_server's), given as
`Authorization: Bearer <token>` (scripts) or once through the login link, which sets an
HttpOnly, SameSite=Strict cookie holding a value derived from the token (never the token);
Host and Origin matched exactly by the same settings `mcp --http` gives the SDK's check.
Every form that writes carries a CSRF token derived from the token too."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any
from urllib.parse import parse_qs

COOKIE = "agenvoy_web"
LOGIN = "/login"


def derived(token: str, purpose: str) -> str:
    return hmac.new(token.encode(), f"agenvoy-web {purpose}".encode(),
                    hashlib.sha256).hexdigest()


def _page(status: int, text: str, headers: list[tuple[bytes, bytes]] | None = None
          ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = (f"<!doctype html><meta charset=utf-8><title>agenvoy web</title>"
            f"<p>{text}</p>").encode()
    return status, [(b"content-type", b"text/html; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"cache-control", b"no-store"), *(headers or [])], body


class Guard:
    """ASGI: Host/Origin first (421/403), then the token (401), before any page runs."""

    def __init__(self, app: Any, token: str, checks: Any) -> None:
        from mcp.server.transport_security import TransportSecurityMiddleware

        self.app, self.token = app, token.encode()
        self.cookie = derived(token, "session").encode()
        self.checks = TransportSecurityMiddleware(checks)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from starlette.requests import Request

        refused = await self.checks.validate_request(Request(scope))  # Host, Origin
        if refused is not None:
            await refused(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if scope.get("path") == LOGIN:
            await self._login(scope, send)
            return
        if not (self._bearer(headers) or self._cookie(headers)):
            await self._reply(send, _page(
                401, "Open the login link <code>agenvoy web</code> printed when it started, "
                     "or send <code>Authorization: Bearer &lt;token&gt;</code>.",
                [(b"www-authenticate", b'Bearer realm="agenvoy"')]))
            return
        await self.app(scope, receive, send)

    def _bearer(self, headers: dict[bytes, bytes]) -> bool:
        scheme, _, value = headers.get(b"authorization", b"").partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(value.strip(), self.token)

    def _cookie(self, headers: dict[bytes, bytes]) -> bool:
        for part in headers.get(b"cookie", b"").split(b";"):
            name, _, value = part.strip().partition(b"=")
            if name == COOKIE.encode() and hmac.compare_digest(value, self.cookie):
                return True
        return False

    async def _login(self, scope: Any, send: Any) -> None:
        given = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [""])[0]
        if scope.get("method") != "GET" or not hmac.compare_digest(given.encode(), self.token):
            await self._reply(send, _page(401, "This login link is not valid (the token is "
                                               "wrong): use the one printed at start."))
            return
        await self._reply(send, (303, [
            (b"location", b"/"), (b"content-length", b"0"), (b"cache-control", b"no-store"),
            (b"set-cookie", b"%s=%s; HttpOnly; SameSite=Strict; Path=/"
             % (COOKIE.encode(), self.cookie))], b""))

    @staticmethod
    async def _reply(send: Any, reply: tuple[int, list[tuple[bytes, bytes]], bytes]) -> None:
        status, headers, body = reply
        await send({"type": "http.response.start", "status": status,
                    "headers": [*headers, (b"referrer-policy", b"same-origin")]})
        await send({"type": "http.response.body", "body": body})
