"""A fake OpenAI-compatible chat-completions server for tests (stdlib only).

    with FakeLLM() as llm:                 # listens on 127.0.0.1, a free port
        llm.plan[2] = "500"                # the 2nd call fails; see BEHAVIOURS
        ... AGENVOY_LLM_BASE_URL=llm.url ...
        llm.calls                          # every request: path, headers, body

A good reply merges like a real model would, deterministically: the summary found in the
system prompt, plus "call N" appended to key_decisions, and the last message of the chunk
as current_discussion. Also runnable as an --llm-command:
    python tests/llm_server.py --stdin --log FILE   (request on stdin, reply on stdout)
"""

from __future__ import annotations

import json
import re
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BEHAVIOURS = {
    "ok": "200 with a valid summary (wrapped as .wrap says)",
    "500": "HTTP 500 with an error body (that echoes the Authorization header) and "
           "Retry-After: .retry_after (a client retries)",
    "garbage": "200, a chat reply of prose with no summary in it",
    "invalid": "200, a chat reply holding JSON that is not a summary",
    "invalid_json": "200 whose body is not JSON at all",
    "empty": "200 with an empty message content",
    "hang": "no answer until release() or stop()",
    "429": "HTTP 429 with Retry-After: .retry_after (rate limited; a client retries)",
    "503": "HTTP 503 with no Retry-After (overloaded; a client retries)",
}
WRAPS = ("tag", "fence", "bracket", "bare")
_PRIOR = re.compile(r"```json\n(.*?)\n```", re.S)
_ROLE_LINE = re.compile(r"^\[(user|assistant|system|tool)\]$", re.M)


def prior_summary(body: dict[str, Any]) -> dict[str, Any]:
    """The summary the client put in the system prompt."""
    match = _PRIOR.search(body["messages"][0]["content"])
    try:
        data = json.loads(match.group(1)) if match else {}
    except ValueError:
        data = {}  # e.g. a dry-run placeholder
    return data if isinstance(data, dict) else {}


def chunk_texts(body: dict[str, Any]) -> list[str]:
    """The message blocks of the chunk, '[role]\\n<content>' each, as the client rendered them."""
    text = body["messages"][1]["content"]
    starts = [m.start() for m in _ROLE_LINE.finditer(text)]
    ends = starts[1:] + [text.rfind("\n`")]
    return [text[a:b].strip() for a, b in zip(starts, ends)]


def merged_summary(body: dict[str, Any], number: int) -> dict[str, Any]:
    prior = prior_summary(body)
    blocks = chunk_texts(body)
    last = blocks[-1].splitlines()[-1] if blocks else ""
    return {
        "key_decisions": [*prior.get("key_decisions", []), f"call {number}"],
        "past_discussions": prior.get("past_discussions", []),
        "current_discussion": {"topic": last, "description": f"{len(blocks)} messages",
                               "perspectives": "", "direction": ""},
    }


def wrap(summary: dict[str, Any], how: str) -> str:
    text = json.dumps(summary, ensure_ascii=False, indent=2)
    return {"tag": f"<summary>\n{text}\n</summary>",
            "fence": f"Updated summary:\n```json\n{text}\n```\n",
            "bracket": f"[summary]\n{text}\n[/summary]",
            "bare": f"Here it is: {text}\nHope this helps."}[how]


def completion(content: str, model: str = "fake") -> dict[str, Any]:
    return {"id": "chatcmpl-fake", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}


@dataclass
class Call:
    number: int
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def messages(self) -> list[str]:
        return chunk_texts(self.body)


class FakeLLM:
    def __init__(self, wrap: str = "tag") -> None:
        self.plan: dict[int, str] = {}  # call number (1-based) -> behaviour
        self.wrap = wrap
        self.calls: list[Call] = []
        self.hold_on: int | None = None  # this call waits for release() before answering
        self.retry_after = "0"  # the Retry-After header of a "429" reply
        self._lock = threading.Condition()
        self._release = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle --------------------------------------------------------------------------
    def __enter__(self) -> FakeLLM:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                fake._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def release(self) -> None:
        self._release.set()

    def wait_for_calls(self, count: int, timeout: float = 20) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: len(self.calls) >= count, timeout)

    # -- requests ---------------------------------------------------------------------------
    def _handle(self, req: BaseHTTPRequestHandler) -> None:
        size = int(req.headers.get("Content-Length") or 0)
        raw = req.rfile.read(size)
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        with self._lock:
            number = len(self.calls) + 1
            self.calls.append(Call(number, req.path, dict(req.headers.items()), body))
            self._lock.notify_all()
        behaviour = self.plan.get(number, "ok")
        if req.path != "/v1/chat/completions":
            return self._send(req, 404, b'{"error": {"message": "not found"}}')
        if behaviour == "hang" or self.hold_on == number:
            self._release.wait(30)
            if behaviour == "hang":
                return None  # the client gave up long ago
        if behaviour == "500":
            echo = req.headers.get("Authorization", "")
            data = json.dumps({"error": {"message": f"boom (got {echo})"}}).encode()
            return self._send(req, 500, data, {"Retry-After": self.retry_after})
        if behaviour == "429":
            return self._send(req, 429, b'{"error": {"message": "rate limited"}}',
                              {"Retry-After": self.retry_after})
        if behaviour == "503":
            return self._send(req, 503, b'{"error": {"message": "overloaded"}}')
        if behaviour == "invalid_json":
            return self._send(req, 200, b"<html>not json {")
        content = {
            "garbage": "I am sorry, I cannot summarize this { conversation }.",
            "invalid": '{"topic": "no summary keys here", "key_decisions": []}',
            "empty": "",
        }.get(behaviour)
        if content is None:
            content = wrap(merged_summary(body, number), self.wrap)
        model = body.get("model", "fake") if isinstance(body, dict) else "fake"
        return self._send(req, 200, json.dumps(completion(content, model)).encode())

    def _send(self, req: BaseHTTPRequestHandler, status: int, data: bytes,
              headers: dict[str, str] | None = None) -> None:
        try:
            req.send_response(status)
            for name, value in (headers or {}).items():
                req.send_header(name, value)
            req.send_header("Content-Type", "application/json")
            req.send_header("Content-Length", str(len(data)))
            req.end_headers()
            req.wfile.write(data)
        except OSError:
            pass  # the client hung up (timeout tests)


def main(argv: list[str]) -> int:
    """--stdin [--log FILE] [--fail]: one --llm-command call."""
    body = json.loads(sys.stdin.read())
    log = argv[argv.index("--log") + 1] if "--log" in argv else None
    number = 1
    if log:
        try:
            with open(log, encoding="utf-8") as handle:
                number = sum(1 for _ in handle) + 1
        except FileNotFoundError:
            pass
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(body, ensure_ascii=False) + "\n")
    if "--fail" in argv:
        print("fake llm: model not found", file=sys.stderr)
        return 3
    print(wrap(merged_summary(body, number), "tag"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
