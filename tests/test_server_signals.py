"""A SIGTERM that reaches `agenvoy web` or `mcp --http` just after it said it was serving
(before uvicorn had put its own handlers in place) stops it: it used to be swallowed by a
do-nothing handler, and the process served on until killed.

Real parts: the real program in a subprocess on 127.0.0.1; every wait is bounded."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow
STOP = 60  # seconds a stopped server may take to leave on a busy machine


@pytest.mark.parametrize("args", [["web", "--listen", "127.0.0.1:0"],
                                  ["mcp", "--http", "127.0.0.1:0"]], ids=["web", "mcp-http"])
def test_sigterm_right_after_serving_stops_the_server(home: Path, args: list[str]) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "agenvoy_cli", *args], cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=dict(os.environ))
    try:
        deadline = time.monotonic() + 300
        seen = b""
        while b"serving" not in seen:
            assert time.monotonic() < deadline and proc.poll() is None, seen
            ready, _, _ = select.select([proc.stderr], [], [], 1)
            if ready:
                seen += os.read(proc.stderr.fileno(), 4096)
        proc.send_signal(signal.SIGTERM)  # at once: before uvicorn's handlers, most often
        try:
            code = proc.wait(timeout=STOP)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{args[0]} was still serving {STOP} s after SIGTERM")
        assert code in (0, -signal.SIGTERM), (code, seen)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
