"""`agenvoy server start|stop|status`: one background server per home, the `mcp --http`
server (server/http_server.py) run detached, so that a subprocess agent's search finds the
models warm (the CLI's fast path, server/fastpath.py) without a terminal of its own.

- Its pid file and its log are in the home (home/layout.py `server_pid`, `server_log`); the
  server writes the pid file itself as it starts (so a server run by systemd or launchd in the
  foreground has one too) and removes it as it stops.
- One per home: the running server holds the task lock `server.run` (home/layout.py
  `task_lock`) for its whole life, so a second one refuses to start (exit 75) whoever starts
  it; starters queue on `server.start`, so two racing starts make one server and both report it.
- A stale pid file (its process gone: a kill -9, a reboot) is reported by `status` and
  replaced by the next start.
- It stops after `idle` seconds without a request (0: never; AGENVOY_SERVER_IDLE), on SIGTERM
  (`server stop`), and leaves no announcement, socket or pid file behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from typing import Any

from agenvoy_cli.errors import AgenvoyError, OperationFailed, StoreBusy
from agenvoy_cli.home.files import atomic_write_bytes
from agenvoy_cli.home.layout import Layout
from agenvoy_cli.home.locking import Locks
from agenvoy_cli.server import fastpath
from agenvoy_cli.settings import Settings

START_WAIT = 180.0  # seconds a start waits for the server to answer (chromadb and the SDK
# load first: seconds on a busy machine)
STOP_WAIT = 30.0  # seconds a stop waits for the server to leave (it lets requests finish)
DEFAULT_BIND = "127.0.0.1:0"  # any free port; the CLI asks on the home's Unix socket


def read_pid(layout: Layout) -> int | None:
    """The pid the pid file names, or None (no file, unreadable, not a number)."""
    try:
        return int(layout.server_pid.read_text("utf-8").strip())
    except (OSError, ValueError, AgenvoyError):
        return None


def status(layout: Layout) -> dict[str, Any]:
    """{"running", "pid", "url", "socket", "log", "pid_file", "stale"}: running when the
    pid file's process is alive and announced in the home; stale when the pid file names a
    process that is gone."""
    pid = read_pid(layout)
    info = fastpath.announced(layout, lambda _: None)
    running = pid is not None and fastpath.alive(pid) and info is not None \
        and info["pid"] == pid
    return {"running": running, "pid": pid if running else None,
            "url": info["url"] if running and info else None,
            "socket": info.get("socket") if running and info else None,
            "log": str(layout.server_log), "pid_file": str(layout.server_pid),
            "stale": pid is not None and not fastpath.alive(pid)}


def start(layout: Layout, settings: Settings, idle: float, bind: str = DEFAULT_BIND,
          wait: float = START_WAIT) -> dict[str, Any]:
    """Start the home's background server unless one runs; return status() and "started".
    Waits until it answers on the home's socket (or port). OperationFailed with the log's
    last line when it exits first or does not answer within `wait` seconds."""
    with Locks().hold(layout.task_lock("server", "start"), max(wait, settings.lock_timeout)):
        now = status(layout)
        if now["running"]:
            return {**now, "started": False}
        if now["stale"]:
            with contextlib.suppress(OSError):
                layout.server_pid.unlink()
        cmd = [sys.executable, "-m", "agenvoy_cli", "--home", str(layout.home), "server",
               "start", "--foreground", "--http", bind, "--idle-timeout", f"{idle:g}"]
        child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True,
                                 close_fds=True)
        _wait_ready(layout, settings, child, wait)
    return {**status(layout), "started": True}


def _wait_ready(layout: Layout, settings: Settings, child: subprocess.Popen[bytes],
                wait: float) -> None:
    deadline = time.monotonic() + wait
    delay = 0.02
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise OperationFailed(f"the server exited at start (exit {child.returncode}): "
                                  f"{_last_line(layout)}")
        info = fastpath.announced(layout, lambda _: None)
        if info is not None and info["pid"] == child.pid and fastpath.ping(layout, info,
                                                                           settings):
            return
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    child.terminate()
    raise OperationFailed(f"the server did not answer within {wait:g} s: {_last_line(layout)}")


def _last_line(layout: Layout) -> str:
    try:
        lines = layout.server_log.read_text("utf-8", errors="replace").strip().splitlines()
    except (OSError, AgenvoyError):
        return "no log"
    return lines[-1] if lines else "nothing in its log"


def stop(layout: Layout, wait: float = STOP_WAIT) -> dict[str, Any]:
    """SIGTERM to the home's background server, then wait until it is gone:
    {"stopped": bool, "pid"}. A stale pid file is removed."""
    now = status(layout)
    pid = now["pid"]
    if not now["running"] or pid is None:
        if now["stale"]:
            with contextlib.suppress(OSError):
                layout.server_pid.unlink()
        return {"stopped": False, "pid": None, "stale_removed": now["stale"]}
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while fastpath.alive(pid) and not _reaped(pid):
        if time.monotonic() >= deadline:
            raise OperationFailed(f"the server (pid {pid}) did not stop within {wait:g} s")
        time.sleep(0.05)
    return {"stopped": True, "pid": pid, "stale_removed": False}


def _reaped(pid: int) -> bool:
    """A zombie child of ours (a test that started the server in-process) counts as gone."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == pid


def serve(layout: Layout, settings: Settings, idle: float, bind: str = DEFAULT_BIND) -> int:
    """Run the server in this process until SIGTERM or `idle` seconds without a request:
    what `start` spawns, and what a systemd unit or launchd agent runs. Its pid file says so
    while it runs; StoreBusy when another server runs for this home."""
    from agenvoy_cli.server.http_server import run_http

    with contextlib.ExitStack() as stack:
        try:  # held while this server lives: no second one for the home, however started
            stack.enter_context(Locks().hold(layout.task_lock("server", "run"), 0))
        except StoreBusy:
            raise StoreBusy(f"a server already runs for this home (pid "
                            f"{read_pid(layout)})") from None
        atomic_write_bytes(layout.server_pid, f"{os.getpid()}\n".encode())
        try:
            return run_http(layout, None, bind, None, str(layout.server_log), [],
                            settings=settings, idle=idle or None)
        finally:
            if read_pid(layout) == os.getpid():
                with contextlib.suppress(OSError):
                    layout.server_pid.unlink()
