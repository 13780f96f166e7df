"""`agenvoy server start|stop|status` (issue #51 item 6): one background server per home, its
pid file and log in the home, an idle timeout, and `server = auto` starting it from the first
search that would load the models.

Real parts: the real program in subprocesses, the real HTTP server on 127.0.0.1 and the home's
Unix socket, the default offline embedder. Every wait is bounded; every server is stopped (and
killed if need be) in a finally."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import signal
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import agenvoy
from tests.helpers.schemas import validate

pytest.importorskip("mcp")

START = 300  # seconds a start may take on a busy CI machine (chromadb, the SDK, the model)


def _json(proc) -> dict:
    assert proc.returncode == 0, proc.stderr
    return orjson.loads(proc.stdout)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@contextlib.contextmanager
def cleanup(home: Path):
    """Stop whatever server this test started, however it ends."""
    try:
        yield
    finally:
        agenvoy("server", "stop", timeout=120)
        pid_file = home / ".store" / "server.pid"
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def _seed(home: Path) -> None:
    msgs = [{"role": "user", "content": "the database migration failed on Friday night"},
            {"role": "assistant", "content": "we rolled the migration back and retried"}]
    assert agenvoy("append", "s", "--messages", "-", input=json.dumps(msgs)).returncode == 0


def test_start_status_stop(home: Path) -> None:
    _seed(home)
    with cleanup(home):
        assert _json(agenvoy("server", "status", "--json"))["running"] is False
        started = _json(agenvoy("server", "start", "--json", timeout=START))
        assert started["running"] and started["started"]
        validate(started, "server-start")
        pid = started["pid"]
        assert (home / ".store" / "server.pid").read_text().strip() == str(pid)
        assert "serving" in (home / ".store" / "server.log").read_text()
        again = _json(agenvoy("server", "start", "--json", timeout=START))
        assert again["pid"] == pid and again["started"] is False
        now = _json(agenvoy("server", "status", "--json"))
        assert now["running"] and now["pid"] == pid and now["url"].startswith("http://127.0.0.1:")
        validate(now, "server-status")
        found = _json(agenvoy("search", "s", "database migration", "--json", timeout=START))
        assert found["served_by"] == "server" and found["query"] == "database migration"
        stopped = _json(agenvoy("server", "stop", "--json", timeout=120))
        assert stopped["stopped"] and stopped["pid"] == pid
        validate(stopped, "server-stop")
        assert not _alive(pid)
        assert not (home / ".store" / "server.pid").exists()
        assert not (home / ".store" / "http.json").exists()
        assert _json(agenvoy("server", "status", "--json"))["running"] is False


def test_a_stale_pid_file_is_reported_and_replaced(home: Path) -> None:
    _seed(home)
    (home / ".store").mkdir(parents=True, exist_ok=True)
    dead = 2 ** 22 + 12345  # above pid_max's default: no such process
    (home / ".store" / "server.pid").write_text(f"{dead}\n")
    now = _json(agenvoy("server", "status", "--json"))
    assert now["running"] is False and now["stale"] is True
    with cleanup(home):
        started = _json(agenvoy("server", "start", "--json", timeout=START))
        assert started["running"] and started["pid"] != dead
        assert (home / ".store" / "server.pid").read_text().strip() == str(started["pid"])


def test_two_racing_starts_make_one_server(home: Path) -> None:
    _seed(home)
    with cleanup(home), concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda _: agenvoy("server", "start", "--json", timeout=START),
                             range(2)))
        docs = [_json(r) for r in runs]
        assert docs[0]["pid"] == docs[1]["pid"]
        assert sorted(d["started"] for d in docs) == [False, True]
        # and a third, in the foreground, is refused while it runs
        third = agenvoy("server", "start", "--foreground", timeout=START)
        assert third.returncode == 75 and "already runs" in third.stderr.decode()


def test_the_server_stops_when_idle(home: Path) -> None:
    _seed(home)
    with cleanup(home):
        started = _json(agenvoy("server", "start", "--idle-timeout", "2", "--json",
                               timeout=START))
        pid = started["pid"]
        deadline = time.monotonic() + 120
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(pid) or _zombie(pid)
        assert "no request for 2 s" in (home / ".store" / "server.log").read_text()
        assert _json(agenvoy("server", "status", "--json"))["running"] is False
        assert not (home / ".store" / "server.pid").exists()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return False


def test_server_auto_starts_it_from_the_first_semantic_search(home: Path) -> None:
    _seed(home)
    (home / "config.json").write_text(json.dumps({"agenvoy": {"server": "auto"}}))
    with cleanup(home):
        keyword = _json(agenvoy("search", "s", "migration", "--mode", "keyword", "--json"))
        assert keyword["served_by"] == "local"  # loads no model: starts nothing
        assert _json(agenvoy("server", "status", "--json"))["running"] is False
        found = _json(agenvoy("search", "s", "database migration", "--json", timeout=START))
        assert found["served_by"] == "server" and found["query"] == "database migration"
        assert _json(agenvoy("server", "status", "--json"))["running"] is True
        second = _json(agenvoy("search", "s", "rolled back", "--json", timeout=START))
        assert second["served_by"] == "server"


def test_a_bad_server_setting_is_one_line(home: Path) -> None:
    _seed(home)
    bad = agenvoy("search", "s", "migration", env={"AGENVOY_SERVER": "sometimes"})
    assert bad.returncode == 2 and b"AGENVOY_SERVER" in bad.stderr
    assert bad.stderr.count(b"\n") == 1


def _start_points(home: Path, tmp_path: Path) -> list[str]:
    """The writes, fsyncs and renames a foreground start makes, in order (a dry counting
    run): "write PATH", "fsync PATH", "rename PATH"."""
    log = tmp_path / "points.log"
    run = agenvoy("server", "start", "--foreground", "--idle-timeout", "1",
                  env={"AGENVOY_FAULTS": f"log={log}"}, timeout=START)
    assert run.returncode == 0, run.stderr
    return [line.split(" ", 1)[1] for line in log.read_text().splitlines()]


def _distinct(points: list[str]) -> list[int]:
    """The points (1-based) whose failure can leave a different home: the first call on
    each file (its temp file begun, or the lock file), each rename (the temp file whole, the
    file not in place) and the call after it (in place: the directory's fsync). A temp
    file's further writes and fsync leave what its first write left. Every point with
    AGENVOY_FAULT_SWEEP=full (each failing start costs a cold start of the server)."""
    if os.environ.get("AGENVOY_FAULT_SWEEP") == "full":
        return list(range(1, len(points) + 1))
    seen: set[str] = set()
    chosen = []
    for n, point in enumerate(points, 1):
        op, _, target = point.partition(" ")
        after_rename = n > 1 and points[n - 2].startswith("rename ")
        if target not in seen or op == "rename" or after_rename:
            chosen.append(n)
        seen.add(target)
    return chosen


@pytest.mark.parametrize("fail", ["enospc", "kill"])
def test_a_start_failing_at_any_write_leaves_nothing_that_blocks_the_next(home: Path,
                                                                          tmp_path: Path,
                                                                          fail: str) -> None:
    """A full disk (or kill -9) at each write of a start (the pid file, the token, the
    announcement): one line, a documented exit code, no server left running, and the next
    start works (a stale pid file or announcement is replaced)."""
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.server.lifecycle import status

    points = _start_points(home, tmp_path)
    assert len(points) >= 10
    for n in _distinct(points):
        run = agenvoy("server", "start", "--foreground", "--idle-timeout", "1",
                      env={"AGENVOY_FAULTS": f"at={n},fail={fail}"}, timeout=START)
        err = run.stderr.decode()
        assert "Traceback" not in err and "internal error" not in err, (n, err)
        assert run.returncode in (0, 1, -signal.SIGKILL), (n, run.returncode, err)
        if run.returncode == 1:  # once the server has its log, its stderr goes there
            said = err or (home / ".store" / "server.log").read_text().splitlines()[-1] + "\n"
            assert said.count("\n") == 1 and said.startswith("agenvoy: error:"), (n, said)
        assert status(Layout(home))["running"] is False, n
    with cleanup(home):
        started = _json(agenvoy("server", "start", "--json", timeout=START))
        assert started["running"] and started["started"]
