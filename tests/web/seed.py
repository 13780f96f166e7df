"""A seeded home for the viewer's tests: sessions of every kind of message (tool calls and
their results, reasoning, images), hostile content, an imported session, error records,
notes and a RAG database; and the helper that runs `agenvoy web` as a real process."""

from __future__ import annotations

import base64
import contextlib
import http.client
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
# a 1x1 PNG
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8ffff3f0005fe02fea7d6a4b40000000049454e44ae426082"
)).decode()
SCRIPT = "<script>document.title='pwned'</script>"
JS_LINK = '<a href="javascript:alert(1)">click me</a> and [md](javascript:alert(2))'
RTL = "invoice\u202egnp.exe"
HUGE = "x" * 300_000  # one line, no space
BAD_UTF8 = b"caf\xc3 au lait \xff\xfe done"  # invalid UTF-8 in an imported transcript

TOPICS = [
    ("user", "The deploy to staging failed with a permission denied error on /var/www"),
    ("assistant", "I will check the ownership of /var/www and the deploy user's groups"),
    ("user", "We moved the database backups to the cold storage bucket last Tuesday"),
    ("assistant", "Noted: the nightly backups now go to the cold storage bucket"),
    ("user", "My favourite editor is Helix, with a light theme"),
    ("assistant", "Helix with a light theme, got it"),
    ("user", "The flaky integration test times out when the queue is slow"),
    ("assistant", "We can raise the queue timeout in the integration test fixture"),
]


def seed(home: Path, embedders: Any = None) -> None:
    """`embedders`: the test session's (tests/conftest.py), so no second model loads."""
    from agenvoy_cli.api import Memory

    with Memory(home, embedders=embedders) as memory:
        memory.append("main", [{"role": r, "content": t} for r, t in TOPICS * 3])
        memory.append("main", [
            {"role": "assistant", "content": "", "reasoning_content": "Let me think: list it",
             "tool_calls": [{"id": "call_1", "type": "function", "function": {
                 "name": "bash", "arguments": '{"command": "ls -l /var/www"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "name": "bash",
             "content": "drwxr-x--- root root /var/www"},
            {"role": "user", "content": [
                {"type": "text", "text": "Here is the screenshot of the error"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}]},
            {"role": "assistant", "content": "The screenshot shows the permission error"},
        ])
        memory.record_error("bash", ["permission", "deploy"],
                            "permission denied writing /var/www", "use sudo -u deploy",
                            "resolved", "the deploy user is not in www-data")
        memory.record_error("fetch_page", ["timeout"], "fetch_page timed out after 30 s",
                            "retry with a longer timeout", "failed")
        memory.add_note("Staging runs on host blue-7; deploys go through the deploy user.",
                        "staging")
        memory.add_note("Backups: cold storage bucket, nightly at 02:00.", "backups")
        memory.backfill(vectors=True)
        # after the vectors, as an agent's append is (no model runs on append): the huge line
        # alone would take the model ~10 s to embed, and no test searches this session
        memory.append("hostile", [{"role": "user", "content": SCRIPT},
                                  {"role": "assistant", "content": JS_LINK},
                                  {"role": "user", "content": RTL},
                                  {"role": "assistant", "content": HUGE}])


def seed_import(home: Path, tmp: Path) -> None:
    """A Claude Code transcript holding invalid UTF-8, imported as the CLI would."""
    line = (b'{"type":"user","sessionId":"cc-1","uuid":"u1","timestamp":'
            b'"2026-01-02T03:04:05Z","message":{"role":"user","content":"' + BAD_UTF8
            + b'"}}\n')
    path = tmp / "transcript.jsonl"
    path.write_bytes(line)
    res = cli(home, "import", "claude-code", str(path), "--session", "imported", "--now")
    assert res.returncode == 0, res.stderr


def cli(home: Path, *args: str, timeout: float = 180, input: str | None = None
        ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENVOY_HOME": str(home), "AGENVOY_NO_SERVER": "1"}
    return subprocess.run([sys.executable, "-m", "agenvoy_cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=ROOT, input=input)


def cli_here(embedders: Any, home: Path, *args: str, input: str | None = None
             ) -> subprocess.CompletedProcess[str]:
    """The same CLI run in this process, as `cli` returns it, with the test session's loaded
    models (tests/conftest.py's `embedders`): no interpreter start and no model load per call."""
    from click.testing import CliRunner

    from agenvoy_cli.cli import cli as program

    res = CliRunner().invoke(program, list(args), input=input, catch_exceptions=False,
                             obj={"embedders": embedders},
                             env={"AGENVOY_HOME": str(home), "AGENVOY_NO_SERVER": "1"})
    return subprocess.CompletedProcess(list(args), res.exit_code, res.stdout, res.stderr)


@contextlib.contextmanager
def module_env(model_cache: Path) -> Iterator[None]:
    """For a module-scoped fixture (set up before the autouse `home` of tests/conftest.py):
    the environment that fixture gives a test, so a server started here runs as it would."""
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith(("AGENVOY_", "OPENAI_")):
                mp.delenv(name)
        mp.setenv("AGENVOY_MODEL_CACHE", str(model_cache))
        mp.setenv("TZ", "Asia/Taipei")
        yield


class Viewer:
    """A running `agenvoy web`: its base URL, login link and token."""

    def __init__(self, proc: subprocess.Popen[str], url: str, login: str) -> None:
        self.proc, self.url, self.login = proc, url, login
        self.token = login.rpartition("token=")[2]

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@contextlib.contextmanager
def viewer(home: Path, *args: str, timeout: float = 120) -> Iterator[Viewer]:
    """Start `agenvoy web --listen 127.0.0.1:0 ARGS` and wait (bounded) for its login link;
    killed on the way out whatever happens. Its environment is taken now (os.environ)."""
    with viewers((home, args), timeout=timeout) as started:
        yield started[0]


@contextlib.contextmanager
def viewers(*runs: tuple[Path, tuple[str, ...]], timeout: float = 120
            ) -> Iterator[list[Viewer]]:
    """`viewer` for each (home, ARGS), started side by side (their starts overlap, as their
    stops do); each login link waited for, bounded."""
    procs: list[subprocess.Popen[str]] = []
    try:
        for home, args in runs:
            env = {**os.environ, "AGENVOY_HOME": str(home), "PYTHONUNBUFFERED": "1"}
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "agenvoy_cli", "web", "--listen", "127.0.0.1:0", *args],
                stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT))
        waits = [_watch_login(proc) for proc in procs]
        logins = [wait(timeout) for wait in waits]
        yield [Viewer(proc, login.split("/login", 1)[0], login)
               for proc, login in zip(procs, logins, strict=True)]
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
            if proc.stderr is not None:
                proc.stderr.close()


def _watch_login(proc: subprocess.Popen[Any]) -> Callable[[float], str]:
    """Read the server's stderr from now on; the function returned waits (at most its
    timeout) for the login link."""
    import threading

    found: list[str] = []
    seen: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line)
            match = re.search(r"open (http://\S+/login\?token=\S+)", line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()

    def wait(timeout: float) -> str:
        if not ready.wait(timeout) or not found:
            proc.kill()
            raise AssertionError(f"agenvoy web did not start: {''.join(seen)[-2000:]}")
        return found[0]

    return wait


def request(url: str, path: str, *, method: str = "GET", headers: dict[str, str] | None = None,
            body: bytes | None = None, timeout: float = 120
            ) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request to a viewer: (status, headers by lower-case name, body)."""
    where = urlsplit(url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        res = conn.getresponse()
        return res.status, {k.lower(): v for k, v in res.getheaders()}, res.read()
    finally:
        conn.close()
