"""One HTTP client for the model providers (the summarizer's LLM, the embedding APIs).

``post_json(url, payload, ...)`` sends one JSON POST with the stdlib (urllib; imported on
first use, http.client + ssl cost ~50 ms) and returns the decoded reply. It retries
RETRY_STATUSES (429 rate limits; 500, which OpenAI documents as retryable; 502/503/504 from
proxies and overloaded servers) up to ``retries`` times, waiting what ``Retry-After`` says
(seconds or an HTTP date, at most MAX_RETRY_WAIT) or else 0.5 s, 1 s, 2 s, ... The whole
exchange is bounded: the socket timeout bounds each read and ``timeout`` also bounds a
server that trickles its reply. ``user:password@`` in the URL is sent as Basic auth (urllib
would take it for the host) unless the headers already carry an Authorization.

Every failure is an HTTPFailure with a ``kind`` (status | timeout | connect | not_json |
too_large), the status and the server's error detail; callers word the message for their
user. Secrets (API keys, Basic credentials) are masked in every text this module makes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

from agenvoy_cli.secrets import MASK, mask

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
RETRIES = 2
MAX_RETRY_WAIT = 10.0
MAX_REPLY = 16 * 1024 * 1024
_SNIPPET = 200


def mask_secrets(text: str, secrets: Iterable[str | None]) -> str:
    """text with these secrets, and every other one known (agenvoy_cli.secrets.mask: keys
    of the environment, URL credentials, Authorization values), replaced by ****."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, MASK)
    return mask(text)


def credentials(url: str) -> tuple[str, str | None]:
    """(url without its user:password@, the Basic token of that pair or None); the password
    is registered with agenvoy_cli.secrets so that no message shows it."""
    import urllib.parse

    from agenvoy_cli.secrets import register, register_url

    if "@" not in url:
        return url, None
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, None
    import base64

    register_url(url)
    pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
    token = base64.b64encode(pair.encode()).decode()
    register(token)
    clean = urllib.parse.urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path,
                                     parts.query, parts.fragment))
    return clean, token


def one_line(text: Any, limit: int = _SNIPPET) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class HTTPFailure(Exception):
    kind: str  # status | timeout | connect | not_json | too_large
    detail: str = ""  # the server's error message, or the reason
    status: int | None = None
    reason: str = ""  # HTTP reason phrase
    attempts: int = 1

    def __str__(self) -> str:
        if self.kind == "status":
            return f"HTTP {self.status}" + (f": {self.detail}" if self.detail else "")
        return self.detail or self.kind


def error_detail(body: bytes) -> str:
    """The message of an error reply: error.message, detail, message, or the text."""
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        return one_line(text)
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message")))
        if isinstance(err, dict):
            err = err.get("message", err)
        if err is not None:
            return one_line(err)
    return one_line(text)


def retry_wait(headers: Any, attempt: int) -> float:
    """Seconds to wait before retry number attempt+1: Retry-After, else exponential."""
    raw = (headers.get("Retry-After") if headers is not None else None) or ""
    wait: float
    try:
        wait = float(raw)
    except ValueError:
        try:
            wait = parsedate_to_datetime(raw).timestamp() - time.time()
        except (TypeError, ValueError, IndexError):
            wait = 0.5 * 2**attempt
    return max(0.0, min(wait, MAX_RETRY_WAIT))


@dataclass
class Endpoint:
    """Where to post and how: headers (with the key), timeout, retries, secrets to mask."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 60.0
    retries: int = RETRIES
    secrets: tuple[str, ...] = ()
    sleep: Any = time.sleep  # tests may shorten waits

    def __post_init__(self) -> None:
        self.url, basic = credentials(self.url)
        if basic is not None:
            self.secrets = (*self.secrets, basic)
            if not any(k.lower() == "authorization" for k in self.headers):
                self.headers = {**self.headers, "Authorization": f"Basic {basic}"}

    def mask(self, text: str) -> str:
        return mask_secrets(text, self.secrets)

    def post_json(self, payload: Any) -> Any:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        attempt = 0
        while True:
            try:
                return self._once(data)
            except _Retry as retry:
                if attempt >= self.retries:
                    retry.failure.attempts = attempt + 1
                    raise retry.failure from None
                self.sleep(retry_wait(retry.headers, attempt))
                attempt += 1

    def _once(self, data: bytes) -> Any:
        import http.client
        import urllib.error
        import urllib.request

        request = urllib.request.Request(self.url, data=data, headers=self.headers,
                                         method="POST")
        deadline = time.monotonic() + self.timeout
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = _read(response, deadline)
        except urllib.error.HTTPError as exc:
            try:
                detail = self.mask(error_detail(exc.read(_SNIPPET * 8)))
            except Exception:  # noqa: BLE001 - a broken error body
                detail = ""
            failure = HTTPFailure("status", detail, exc.code, str(exc.reason or ""))
            if exc.code in RETRY_STATUSES:
                raise _Retry(failure, exc.headers) from None
            raise failure from None
        except TimeoutError:
            raise HTTPFailure("timeout", f"no answer within {self.timeout:g}s") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise HTTPFailure("timeout", f"no answer within {self.timeout:g}s") from None
            raise HTTPFailure("connect", self.mask(one_line(exc.reason))) from None
        except _TooLarge:
            raise HTTPFailure("too_large", f"the reply is larger than {MAX_REPLY} bytes"
                              ) from None
        except (http.client.HTTPException, OSError, ValueError) as exc:
            raise HTTPFailure("connect", self.mask(one_line(f"{type(exc).__name__}: {exc}"))
                              ) from None
        try:
            return json.loads(body)
        except ValueError:
            raise HTTPFailure("not_json", self.mask(one_line(
                body[:_SNIPPET * 2].decode("utf-8", "replace")))) from None


class _Retry(Exception):
    def __init__(self, failure: HTTPFailure, headers: Any) -> None:
        self.failure, self.headers = failure, headers


class _TooLarge(Exception):
    pass


def _read(response: Any, deadline: float) -> bytes:
    # The socket timeout bounds each read; the deadline bounds a server that trickles.
    parts: list[bytes] = []
    size = 0
    while True:
        chunk = response.read(65536)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        size += len(chunk)
        if size > MAX_REPLY:
            raise _TooLarge
        if time.monotonic() > deadline:
            raise TimeoutError
