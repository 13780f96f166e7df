"""The LLM behind `summarize`: an OpenAI-compatible chat-completions endpoint (stdlib urllib)
or a command that reads the request JSON on stdin and prints the reply on stdout.

Configuration, first match wins:
  base_url  AGENVOY_LLM_BASE_URL, config agenvoy.llm.base_url, OPENAI_BASE_URL,
            https://api.openai.com/v1 when only OPENAI_API_KEY is set
  model     AGENVOY_LLM_MODEL, config agenvoy.llm.model
  api key   AGENVOY_LLM_API_KEY, the variable named by agenvoy.llm.api_key_env, OPENAI_API_KEY
  timeout   AGENVOY_LLM_TIMEOUT, config agenvoy.llm.timeout, 120 s
  command   --llm-command / AGENVOY_LLM_COMMAND, config agenvoy.llm.command
The key is never read from the config file, never written anywhere, never put in a message.
HTTP goes through models.http: 429 and 502/503/504 are retried (Retry-After honoured).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
from dataclasses import dataclass, field
from typing import Any, Protocol

from agenvoy_cli.errors import BadInput, OperationFailed
from agenvoy_cli.models.http import Endpoint, HTTPFailure, credentials
from agenvoy_cli.secrets import MASK, mask, register, register_url
from agenvoy_cli.settings import Settings, number_setting

HOW_TO_CONFIGURE = ("set AGENVOY_LLM_BASE_URL and AGENVOY_LLM_MODEL (or agenvoy.llm.base_url "
                    "and agenvoy.llm.model in config.json), or pass --llm-command CMD; see "
                    "docs/summarize.md")
DEFAULT_TIMEOUT = 120.0
OPENAI_BASE_URL = "https://api.openai.com/v1"
_SNIPPET = 200  # characters of a failing reply shown in the error


class LLMError(OperationFailed):
    """A failed call: HTTP error, timeout, unreachable endpoint, failing command."""


class Client(Protocol):
    def complete(self, body: dict[str, Any]) -> str: ...


@dataclass(frozen=True)
class LLMConfig:
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = DEFAULT_TIMEOUT
    command: tuple[str, ...] | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str | None:
        if self.command or not self.base_url:
            return None
        base = self.base_url.rstrip("/")
        return base if base.endswith("/chat/completions") else base + "/chat/completions"

    def headers(self, *, masked: bool = False) -> dict[str, str]:
        out = {"Content-Type": "application/json", "Accept": "application/json",
               "User-Agent": "agenvoy-cli"}
        if self.api_key:
            out["Authorization"] = f"Bearer {MASK if masked else self.api_key}"
        elif self.url and credentials(str(self.url))[1]:  # user:password@ in the base URL
            out["Authorization"] = f"Basic {MASK if masked else credentials(str(self.url))[1]}"
        return out

    def body(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        """The request document; extra `options` (temperature, reasoning_effort, ...) come
        from the config file because servers differ in what they accept."""
        body: dict[str, Any] = {}
        if self.model:
            body["model"] = self.model
        body["messages"] = messages
        body["stream"] = False
        for key, value in self.options.items():
            body.setdefault(key, value)
        return body

    def target(self) -> str:
        return f"command {shlex.join(self.command)}" if self.command else str(self.url)

    def scrub(self, text: str) -> str:
        """Text with the key (and any other secret) masked: servers echo requests."""
        register(self.api_key)
        return mask(text)


def _timeout(raw: Any, where: str) -> float:
    return float(number_setting(raw, where, above=0, unit="seconds"))


class NotConfigured(BadInput):
    """No LLM endpoint or command is configured at all."""


def _env(settings: Settings, name: str) -> str | None:
    return settings.env.get(name, "").strip() or None


def _section(settings: Settings) -> dict[str, Any]:
    """config.json's agenvoy.llm, refused when it holds a key or options not an object."""
    section = settings.section("agenvoy").get("llm")
    conf: dict[str, Any] = section if isinstance(section, dict) else {}
    if any(k in conf for k in ("api_key", "key", "token")):
        raise BadInput("config.json holds agenvoy.llm.api_key: keys do not belong in a file; "
                       "remove it and set AGENVOY_LLM_API_KEY (or agenvoy.llm.api_key_env)")
    if not isinstance(conf.get("options", {}), dict):
        raise BadInput("config.json: agenvoy.llm.options must be an object")
    return conf


def _api_key(settings: Settings, conf: dict[str, Any]) -> str | None:
    key_env = conf.get("api_key_env")
    return (_env(settings, "AGENVOY_LLM_API_KEY")
            or (_env(settings, str(key_env)) if key_env else None)
            or _env(settings, "OPENAI_API_KEY"))


def _argv(cmd: Any) -> tuple[str, ...]:
    """--llm-command (or its setting) as an argv: a list as it is, a string split as a
    shell would."""
    try:
        argv = tuple(cmd) if isinstance(cmd, list) else tuple(shlex.split(str(cmd)))
    except ValueError as exc:  # unbalanced quotes: bad usage
        raise BadInput(f"--llm-command {cmd!r}: {exc}") from None
    if any("\x00" in str(arg) for arg in argv):
        raise BadInput("--llm-command contains a NUL byte")
    if not argv:
        raise BadInput("--llm-command is empty")
    return argv


def _base_url(settings: Settings, conf: dict[str, Any]) -> str | None:
    return (_env(settings, "AGENVOY_LLM_BASE_URL")
            or (str(conf["base_url"]) if conf.get("base_url") else None)
            or _env(settings, "OPENAI_BASE_URL")
            or (OPENAI_BASE_URL if _env(settings, "OPENAI_API_KEY") else None))


def load_config(settings: Settings, command: str | None = None) -> LLMConfig:
    """The LLM settings, or BadInput naming what to set (checked before anything is done)."""
    conf = _section(settings)
    options = conf.get("options", {})
    raw_timeout = _env(settings, "AGENVOY_LLM_TIMEOUT")
    timeout = (_timeout(raw_timeout, "AGENVOY_LLM_TIMEOUT") if raw_timeout
               else _timeout(conf.get("timeout", DEFAULT_TIMEOUT), "agenvoy.llm.timeout"))
    api_key = _api_key(settings, conf)
    register(api_key)  # masked in every message, whatever variable it came from
    model = _env(settings, "AGENVOY_LLM_MODEL") or (str(conf["model"]) if conf.get("model")
                                                     else None)
    cmd = command or _env(settings, "AGENVOY_LLM_COMMAND") or conf.get("command")
    if cmd:
        return LLMConfig(None, model, api_key, timeout, _argv(cmd), options)
    base_url = _base_url(settings, conf)
    missing = [name for name, value in (("AGENVOY_LLM_BASE_URL", base_url),
                                        ("AGENVOY_LLM_MODEL", model)) if not value]
    if missing:
        raise NotConfigured(
            f"no LLM configured: set {' and '.join(missing)} (or agenvoy.llm.base_url and "
            "agenvoy.llm.model in config.json), or pass --llm-command CMD; nothing was changed")
    assert base_url is not None
    register_url(base_url)
    if not base_url.startswith(("http://", "https://")):
        raise BadInput(f"LLM base URL {base_url!r} must start with http:// or https://")
    return LLMConfig(base_url, model, api_key, timeout, None, options)


def make_client(config: LLMConfig) -> Client:
    return CommandClient(config) if config.command else HTTPClient(config)


def reply_text(doc: Any) -> str:
    """choices[0].message.content of a chat-completions response (string or text parts)."""
    try:
        content = doc["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise LLMError("the response has no choices[0].message.content") from None
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if not isinstance(content, str) or not content.strip():
        raise LLMError("the reply is empty")
    return content


class HTTPClient:
    def __init__(self, config: LLMConfig) -> None:
        self.config = config

    def _fail(self, reason: str) -> LLMError:
        return LLMError(self.config.scrub(f"LLM call to {self.config.url} failed: {reason}"))

    def complete(self, body: dict[str, Any]) -> str:
        config = self.config
        endpoint = Endpoint(str(config.url), config.headers(), config.timeout,
                            secrets=(config.api_key or "",))
        try:
            doc = endpoint.post_json(body)
        except HTTPFailure as failure:
            raise self._fail(self._reason(failure)) from None
        try:
            return reply_text(doc)
        except LLMError as exc:
            raise self._fail(str(exc)) from None

    def _reason(self, failure: HTTPFailure) -> str:
        if failure.kind == "status":
            hint = " (does the base URL end with /v1?)" if failure.status == 404 else ""
            retried = f" (after {failure.attempts} attempts)" if failure.attempts > 1 else ""
            return (f"HTTP {failure.status} {failure.reason}{hint}{retried}: "
                    f"{failure.detail}")
        if failure.kind == "timeout":
            return (f"no answer within {self.config.timeout:g}s "
                    "(set AGENVOY_LLM_TIMEOUT to wait longer)")
        if failure.kind == "not_json":
            return f"the response is not JSON: {failure.detail}"
        if failure.kind == "connect":
            return f"cannot connect: {failure.detail}"
        return failure.detail


class CommandClient:
    """`--llm-command CMD`: the request JSON on stdin, the reply on stdout (plain text, or a
    chat-completions response document). Run without a shell; killed with its process group
    when it overruns the timeout."""

    def __init__(self, config: LLMConfig) -> None:
        self.config = config

    def _fail(self, reason: str) -> LLMError:
        return LLMError(self.config.scrub(f"LLM {self.config.target()} failed: {reason}"))

    def complete(self, body: dict[str, Any]) -> str:
        argv = list(self.config.command or ())
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise self._fail(f"cannot run it: {exc.strerror or exc}") from None
        data = json.dumps(body, ensure_ascii=False).encode()
        try:
            out, err = proc.communicate(data, timeout=self.config.timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise self._fail(f"no answer within {self.config.timeout:g}s") from None
        except BaseException:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        if proc.returncode != 0:
            lines = err.decode("utf-8", "replace").strip().splitlines()
            tail = _snippet(lines[-1]) if lines else ""
            raise self._fail(f"exit status {proc.returncode}" + (f": {tail}" if tail else ""))
        text = out.decode("utf-8", "replace")
        if text.lstrip().startswith("{") and '"choices"' in text:
            with contextlib.suppress(ValueError, LLMError):
                return reply_text(json.loads(text))
        if not text.strip():
            raise self._fail("it printed nothing")
        return text


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…"
