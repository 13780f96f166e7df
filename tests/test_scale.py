"""Issue #16: the cost of a command is bounded by the work asked, not by the size of the home.

No timing here (the numbers are bench/scale.py's): these tests assert what makes the cost
bounded. `session list` and completion open no history.json (an audit hook in a child
process records every open()); `context` reads only the file's tail (a damaged head does not
matter); backfill, doctor and compact of a history.json larger than the memory they may use
stay within it (peak RSS of the child)."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import ROOT, agenvoy, vm_steps
from tests.helpers.home import append
from tests.old_schemas import V8_MESSAGES_FTS

AUDIT = r"""
import os, sys
opened = []
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        opened.append(os.fsdecode(args[0]))
sys.addaudithook(hook)
from agenvoy_cli.cli import cli
try:
    cli.main(sys.argv[1:], prog_name="agenvoy")
except SystemExit as exc:
    code = exc.code
sys.stderr.write("\nOPENED " + repr(opened) + "\n")
sys.exit(code)
"""


def audited(*args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run the CLI in a child that records every file it opens."""
    proc = subprocess.run([sys.executable, "-c", AUDIT, *args], capture_output=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=120)
    marker = proc.stderr.rsplit(b"\nOPENED ", 1)
    assert len(marker) == 2, proc.stderr.decode()
    import ast

    return proc, ast.literal_eval(marker[1].decode())


def listing(run) -> dict[str, dict]:
    res = run("session", "list", "--json")
    assert res.exit_code == 0, res.stderr
    return {s["session_id"]: s for s in res.json()["sessions"]}


# ---------------------------------------------------------------------------- session list


def test_session_list_and_show_read_no_history_json(run, home):
    append(run, "alpha", "one", "two", "three")
    append(run, "beta", "uno", "dos")
    proc, opened = audited("session", "list", "--json")
    assert proc.returncode == 0, proc.stderr.decode()
    assert not [p for p in opened if p.endswith("history.json")], opened
    sessions = {s["session_id"]: s for s in json.loads(proc.stdout)["sessions"]}
    assert sessions["alpha"]["message_count"] == 3 and sessions["beta"]["message_count"] == 2
    path = home / "sessions" / "alpha" / "history.json"
    assert sessions["alpha"]["bytes"] == path.stat().st_size
    assert sessions["alpha"]["last_message_at"] == "2024-05-01T10:00:00+08:00"
    assert sessions["alpha"]["has_summary"] is False and sessions["alpha"]["problem"] is None
    proc, opened = audited("session", "show", "alpha", "--json")
    assert proc.returncode == 0, proc.stderr.decode()
    assert not [p for p in opened if p.endswith("history.json")], opened
    shown = json.loads(proc.stdout)
    assert shown["message_count"] == 3 and shown["row_count"] == 3
    assert shown["trim_point"]["start_seq"] == 0


def test_session_completion_reads_no_history_json(run, home):
    append(run, "alpha", "one")
    append(run, "beta", "uno")
    proc, opened = audited("session", "show", "",
                           env={"_AGENVOY_COMPLETE": "bash_complete",
                                "COMP_WORDS": "agenvoy session show ", "COMP_CWORD": "3"})
    assert proc.returncode == 0, proc.stderr.decode()
    assert [line.split(",")[1] for line in proc.stdout.decode().split()] == ["alpha", "beta"]
    assert not [p for p in opened if p.endswith("history.json")], opened


def test_session_list_follows_every_writer(run, home):
    append(run, "alpha", "one", "two", "three", "four")
    append(run, "beta", "uno", "dos")
    append(run, "gamma", "eins")
    # compact: history.json trimmed, the archive keeps everything
    big = "x" * 700
    append(run, "alpha", *[f"{big} {i}" for i in range(6)])
    assert run("compact", "alpha", "--max-bytes", "2048").exit_code == 0
    hist = orjson.loads((home / "sessions/alpha/history.json").read_bytes())
    got = listing(run)["alpha"]
    assert got["message_count"] == len(hist) < 10
    assert got["bytes"] == (home / "sessions/alpha/history.json").stat().st_size
    # reset keeps the folder (and summary.json), no messages left; remove drops the session
    assert run("session", "reset", "beta", "--yes", "--no-summary").exit_code == 0
    assert listing(run)["beta"]["message_count"] == 0
    assert run("session", "remove", "gamma", "--yes").exit_code == 0
    assert "gamma" not in listing(run)
    # backfill of a session another program wrote (no rows, no summary entry yet)
    folder = home / "sessions" / "delta"
    folder.mkdir(parents=True)
    (folder / "history.json").write_bytes(orjson.dumps(
        [{"role": "user", "content": "---\n當前時間: 2024-06-01 08:00:00\n---\nhi"},
         {"role": "assistant", "content": "hello"}]))
    assert run("backfill", "delta").exit_code == 0
    proc, opened = audited("session", "list", "--json")
    assert not [p for p in opened if p.endswith("history.json")], opened
    delta = {s["session_id"]: s for s in json.loads(proc.stdout)["sessions"]}["delta"]
    assert delta["message_count"] == 2 and delta["last_message_at"] == "2024-06-01T08:00:00+08:00"


def agenvoy_write(path: Path, data: bytes) -> None:
    """As Agenvoy writes history.json and summary.json (go-pkg filesystem.WriteFile):
    `<path>.tmp` written, then renamed over the file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.rename(tmp, path)


def test_session_list_sees_what_another_program_wrote(run, home):
    """Agenvoy rewrites history.json and writes summary.json: the listing is still right
    (only the changed session's files are read)."""
    append(run, "alpha", "one", "two")
    append(run, "beta", "uno")
    path = home / "sessions" / "alpha" / "history.json"
    messages = orjson.loads(path.read_bytes())
    messages.append({"role": "user", "content": "---\n當前時間: 2024-07-01 09:30:00\n---\nmore"})
    agenvoy_write(path, orjson.dumps(messages, option=orjson.OPT_INDENT_2))
    agenvoy_write(home / "sessions" / "beta" / "summary.json", json.dumps(
        {"key_decisions": ["x"], "past_discussions": [], "current_discussion": "y"}).encode())
    proc, opened = audited("session", "list", "--json")
    got = {s["session_id"]: s for s in json.loads(proc.stdout)["sessions"]}
    assert got["alpha"]["message_count"] == 3 and got["alpha"]["bytes"] == path.stat().st_size
    assert got["alpha"]["last_message_at"] == "2024-07-01T09:30:00+08:00"
    assert got["beta"]["has_summary"] is True and got["alpha"]["has_summary"] is False
    assert not [p for p in opened if p.endswith("beta/history.json")], opened


def test_session_list_trusts_an_unchanged_folder_and_reads_a_changed_one(run, home,
                                                                          monkeypatch):
    """One stat per unchanged session (its folder's mtime is still the writer's); any entry
    created, renamed or removed in the folder since (even within the same clock tick) sends
    the listing to the files. A file rewritten in place is doctor's to find."""
    append(run, "alpha", "one", "two")
    append(run, "beta", "uno")
    stats: list[str] = []
    real_stat = os.stat

    def counted(path, *args, **kwargs):
        name = os.fspath(path)
        if kwargs.get("dir_fd") is not None:  # relative to an open folder
            name = os.path.join(os.readlink(f"/proc/self/fd/{kwargs['dir_fd']}"), name)
        if "/sessions/" in name:
            stats.append(name)
        return real_stat(path, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(os, "stat", counted)
        assert set(listing(run)) == {"alpha", "beta"}
    assert sorted(stats) == [str(home / "sessions" / "alpha"), str(home / "sessions" / "beta")]
    beta = home / "sessions" / "beta"
    for change in ("summary", "remove", "history"):
        if change == "summary":
            agenvoy_write(beta / "summary.json", b'{"current_discussion": "z"}')
            want = (1, True)
        elif change == "remove":
            (beta / "summary.json").unlink()
            want = (1, False)
        else:
            agenvoy_write(beta / "history.json", orjson.dumps(
                [{"role": "user", "content": c} for c in ("uno", "dos", "tres")]))
            want = (3, False)
        got = listing(run)["beta"]
        assert (got["message_count"], got["has_summary"]) == want, change
    # rewritten in place: the folder does not change, doctor sees it and --repair fixes it
    append(run, "alpha", "three")
    path = home / "sessions" / "alpha" / "history.json"
    with open(path, "r+b") as out:
        out.write(orjson.dumps([{"role": "user", "content": "only"}]).ljust(
            path.stat().st_size))
    assert run("doctor").exit_code != 0  # history.json no longer matches its rows
    assert run("doctor", "--repair").exit_code == 0
    assert listing(run)["alpha"]["message_count"] == 1


def test_doctor_checks_and_repairs_the_session_table(run, home):
    append(run, "alpha", "one", "two", "three")
    conn = sqlite3.connect(home / ".store" / "history.db")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "session_stats" in tables
    with conn:
        conn.execute("UPDATE session_stats SET messages = 99 WHERE session_id = 'alpha'")
    conn.close()
    res = run("doctor", "--json")
    assert res.exit_code == 1
    assert [p["check"] for p in res.json()["problems"]] == ["session-stats"]
    assert run("doctor", "--repair").exit_code == 0
    assert run("doctor").exit_code == 0
    assert listing(run)["alpha"]["message_count"] == 3


def test_a_long_listing_is_formatted_as_tabulate_would():
    from tabulate import tabulate

    from agenvoy_cli.output import table

    rng = random.Random(5)
    heads = ["session", "messages", "bytes", "last message", "summary"]
    for _ in range(20):
        rows = [(f"s{rng.randrange(10 ** rng.randint(1, 8))}", rng.randrange(10 ** 6),
                 rng.randrange(10 ** 9), rng.choice(["-", "2024-01-01 00:00:00"]),
                 rng.choice(["yes", "no"])) for _ in range(rng.randint(0, 90))]
        assert table(rows, heads) == tabulate(rows, headers=heads, tablefmt="simple",
                                              disable_numparse=True)


# ---------------------------------------------------------------------------- context

NASTY = ['plain', 'a ] b } c , d', '{"role": "user", "content": "fake"}', 'back\\slash\\',
         'quote " and \\" and ]', '記憶 部署 ,]}', 'tab\tnew\nline', '\\', '"', '}],[{',
         'emoji 🎉 \u2028']


def nasty_history(rng: random.Random, count: int) -> list[dict]:
    out = []
    for i in range(count):
        msg: dict = {"role": rng.choice(["user", "assistant"]),
                     "content": f"{i} " + "".join(rng.choice(NASTY) for _ in range(3))}
        if rng.random() < 0.2:
            msg["content"] = [{"type": "text", "text": msg["content"]},
                              {"type": "text", "text": "]"}]
        if rng.random() < 0.1:
            msg["extra"] = {"nested": [1, {"a": "]"}], "s": '\\"'}
        out.append(msg)
    return out


@pytest.mark.parametrize("style", ["orjson", "indent", "ascii"])
def test_context_tail_matches_a_full_parse(run, home, style):
    rng = random.Random(style)
    folder = home / "sessions" / "s"
    folder.mkdir(parents=True)
    for count in (0, 1, 2, 5, 40):
        history = nasty_history(rng, count)
        if style == "orjson":
            data = orjson.dumps(history)
        elif style == "indent":  # as Go's json.MarshalIndent writes it
            data = json.dumps(history, indent="\t", ensure_ascii=False).encode()
        else:
            data = b"  \n" + json.dumps(history).encode() + b"\n\n"
        (folder / "history.json").write_bytes(data)
        for n in (0, 1, 3, 16, 100):
            res = run("context", "s", "-n", str(n), "--json")
            assert res.exit_code == 0, res.stderr
            assert res.json()["messages"] == (history[-n:] if n else []), (count, n)


def test_context_reads_only_the_tail(run, home):
    """A history.json whose head is damaged: context still serves the last N (it never
    parses the head), while a full read refuses the file."""
    tail = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i} " + "w " * 50}
            for i in range(20)]
    folder = home / "sessions" / "s"
    folder.mkdir(parents=True)
    body = b",".join(orjson.dumps(m) for m in tail)
    (folder / "history.json").write_bytes(b"[{not json at all" + b"#" * 200_000 + b"}," + body
                                          + b"]\n")
    res = run("context", "s", "-n", "4", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["messages"] == tail[-4:]
    assert run("search", "s", "m3", "--mode", "keyword").exit_code == 4  # a full read refuses


def test_context_with_a_big_message_in_the_window(run, home):
    history = [{"role": "user", "content": "small"},
               {"role": "assistant", "content": "big " + "]}," * 300_000},
               {"role": "user", "content": "last"}]
    folder = home / "sessions" / "s"
    folder.mkdir(parents=True)
    (folder / "history.json").write_bytes(orjson.dumps(history))
    res = run("context", "s", "-n", "2", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["messages"] == history[-2:]


@pytest.mark.parametrize("data", [b'[{"role": "user", "content": "a"}, {"role": "us',
                                  b'[{"role": "user", "content": "a"}, 3]',
                                  b'{"role": "user", "content": "a"}', b"", b"]"])
def test_context_of_a_damaged_tail_is_refused(run, home, data):
    folder = home / "sessions" / "s"
    folder.mkdir(parents=True)
    (folder / "history.json").write_bytes(data)
    res = run("context", "s", "--json")
    assert res.exit_code == 4 and "history.json" in res.stderr
    assert res.json()["error"]["kind"] == "corrupt"  # with --json the error is JSON too


# ---------------------------------------------------------------------------- bounded memory

MEMORY = r"""
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
err = proc.stderr.read()
_, status, usage = os.wait4(proc.pid, 0)
sys.stdout.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss // 1024}\n")
sys.stderr.write(err.decode())
"""


def peak_rss(*args: str, env: dict | None = None) -> tuple[int, int, str]:
    """(exit code, peak RSS in MiB, stderr) of `agenvoy ARGS` in a fresh process."""
    proc = subprocess.run([sys.executable, "-c", MEMORY, sys.executable, "-m", "agenvoy_cli",
                           *args], capture_output=True, cwd=ROOT, timeout=600,
                          env={**os.environ, **(env or {})})
    code, rss = proc.stdout.split()
    return int(code), int(rss), proc.stderr.decode()


def write_big_history(path: Path, count: int, size: int) -> int:
    """`count` messages of about `size` bytes each; the bulk is in a field that is kept but
    not indexed (as a tool result's metadata would be), so the test stays quick."""
    path.parent.mkdir(parents=True, exist_ok=True)
    filler = "lorem ipsum dolor sit amet " * (size // 27)
    with open(path, "wb") as out:
        out.write(b"[")
        for lo in range(0, count, 1000):
            part = [orjson.dumps({"role": "user" if i % 2 == 0 else "assistant",
                                  "content": f"---\n當前時間: 2024-01-01 00:00:00\n---\n"
                                             f"needle{i} and a few words",
                                  "x_trace": filler})
                    for i in range(lo, min(lo + 1000, count))]
            out.write((b"," if lo else b"") + b",".join(part))
        out.write(b"]\n")
    return path.stat().st_size


def test_backfill_doctor_compact_in_bounded_memory(home):
    """A history.json of ~80 MiB: backfill, doctor and compact each peak well below the
    file's size (before #16 they held it whole, parsed, and several copies: 3-4x its size)."""
    count = 10_000
    path = home / "sessions" / "big" / "history.json"
    size = write_big_history(path, count, 8500) >> 20
    assert size >= 80
    bound = 100  # MiB: the interpreter and its imports (~30), plus chunks of the file
    code, rss, err = peak_rss("backfill", "big")
    assert code == 0, err
    assert rss < bound, f"backfill peaked at {rss} MiB for a {size} MiB history.json"
    conn = sqlite3.connect(home / ".store" / "history.db")
    assert conn.execute("SELECT count(*), count(DISTINCT seq) FROM messages").fetchone() == \
        (count, count)
    conn.close()
    res = agenvoy("search", "big", "needle7337", "--mode", "keyword", "--json")
    assert res.returncode == 0 and "needle7337" in res.stdout.decode()
    code, rss, err = peak_rss("doctor", "big")
    assert code == 0, err
    assert rss < bound, f"doctor peaked at {rss} MiB for a {size} MiB history.json"
    code, rss, err = peak_rss("compact", "big", "--max-bytes", str(1 << 20))
    assert code == 0, err
    assert rss < bound, f"compact peaked at {rss} MiB for a {size} MiB history.json"
    kept = orjson.loads(path.read_bytes())
    assert 0 < len(kept) < count and path.stat().st_size <= 1 << 20
    assert kept[-1]["content"].split("\n---\n", 1)[1].startswith(f"needle{count - 1} ")
    assert agenvoy("doctor", "big").returncode == 0


@pytest.fixture
def streamed(monkeypatch):
    """Every history.json walked as a big one: through the chunked view, in small pieces."""
    from agenvoy_cli.conversation import history, history_view

    monkeypatch.setattr(history_view, "STREAM_BYTES", 0)
    monkeypatch.setattr(history_view, "INSERT_ROWS", 7)
    monkeypatch.setattr(history, "CHUNK", 512)


def rows_of(home: Path, sid: str) -> list[tuple]:
    conn = sqlite3.connect(home / ".store" / "history.db")
    try:
        return conn.execute("SELECT seq, role, content, gone FROM messages WHERE session_id = ?"
                            " ORDER BY seq", (sid,)).fetchall()
    finally:
        conn.close()


def test_streamed_sync_follows_the_identity_rule(run, home, streamed):
    """The bounded-memory path (chunked view, batched inserts, archived prefix skipped)
    archives what the whole-file path archives: once, edits followed, nothing duplicated."""
    path = home / "sessions" / "s" / "history.json"
    path.parent.mkdir(parents=True)
    history = [{"role": "user" if i % 2 == 0 else "assistant",
                "content": f"---\n當前時間: 2024-03-01 10:{i // 60:02d}:{i % 60:02d}\n---\n"
                           f"message {i} " + "]}," * (i % 5)} for i in range(120)]
    path.write_bytes(orjson.dumps(history))
    assert run("backfill", "s", "--json").json()["inserted"] == 120
    assert run("backfill", "s", "--json").json()["inserted"] == 0  # a second run: nothing
    assert [r[0] for r in rows_of(home, "s")] == list(range(120))
    # Agenvoy appends two messages, a person edits one in the middle
    history[60] = {**history[60], "content": history[60]["content"] + " (edited)"}
    history += [{"role": "user", "content": "new one"}, {"role": "assistant", "content": "new two"}]
    path.write_bytes(orjson.dumps(history, option=orjson.OPT_INDENT_2))
    assert run("doctor", "s").exit_code == 1  # the edit and the new messages are seen
    assert run("backfill", "s", "--json").json()["inserted"] == 2
    rows = rows_of(home, "s")
    assert len(rows) == 122 and [r[0] for r in rows] == list(range(122))
    assert rows[60][2].endswith("(edited)") and rows[121][2] == "new two"
    assert run("doctor", "s").exit_code == 0
    assert listing(run)["s"]["message_count"] == 122
    res = run("compact", "s", "--max-bytes", "4096", "--json")
    assert res.exit_code == 0 and res.json()["removed"] > 0
    kept = orjson.loads(path.read_bytes())
    assert kept == history[-len(kept):]
    assert len(rows_of(home, "s")) == 122 and run("doctor", "s").exit_code == 0


# ---------------------------------------------------------------------------- keyword search
# The session is a column of messages_fts (migration 009): a MATCH seeks to the session's
# rows. Cost is counted in SQLite VM steps (a progress handler), not in time.

def _fill(conn: sqlite3.Connection, sid: str, first_seq: int, count: int, word: str) -> None:
    from agenvoy_cli.home import fts

    rows = [(sid, 1_700_000_000_000_000_000 + i, "user", f"{word} note {i}", first_seq + i,
             None, None, fts.index_text(f"{word} note {i}")) for i in range(count)]
    conn.executemany("INSERT INTO messages (session_id, send_at, role, content, seq, hash, "
                     "message, tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)


def _steps(conn: sqlite3.Connection, sid: str, query: str) -> tuple[int, list]:
    from agenvoy_cli.search.keyword import keyword_ranking
    from agenvoy_cli.search.query import Query

    steps, (ranked, _) = vm_steps(conn, lambda: keyword_ranking(conn, sid, Query.of(query),
                                                                20))
    return steps, ranked


def test_keyword_cost_follows_the_session_not_the_home(tmp_path):
    """An old session that gets one new message after 20,000 matching messages of other
    sessions: its search walks its own matches, not the home's (before migration 009 the
    scan spanned the session's rowid range, i.e. the whole home)."""
    from agenvoy_cli.home import sqlite as db

    alone = db.connect(tmp_path / "alone.db", 5.0)
    crowded = db.connect(tmp_path / "crowded.db", 5.0)
    for conn in (alone, crowded):
        with db.transaction(conn):
            _fill(conn, "old", 0, 300, "memory")
            if conn is crowded:
                for k in range(20):
                    _fill(conn, f"other{k}", 0, 1000, "memory")
            _fill(conn, "old", 300, 1, "memory")
    base, ranked_alone = _steps(alone, "old", "memory")
    cost, ranked = _steps(crowded, "old", "memory")
    assert ranked == ranked_alone and len(ranked) == 20
    assert cost <= 1.5 * base + 20, (cost, base)
    # a term absent from the session but in 5,000 messages of others costs nothing either
    with db.transaction(crowded):
        for k in range(5):
            _fill(crowded, f"other{k}", 1000, 1000, "zebra")
    empty, _ = _steps(alone, "old", "zebra")
    cost, ranked = _steps(crowded, "old", "zebra")
    assert ranked == [] and cost <= 1.5 * empty + 20, (cost, empty)



def version_8_home(run, home) -> None:
    """A home as the release before migration 009 left it (messages_fts without the
    session column), with messages in two sessions."""
    append(run, "alpha", "deploy the memory layer", "memory saved", "nothing here")
    append(run, "beta", "memory of beta", "deploy beta")
    conn = sqlite3.connect(home / ".store" / "history.db")
    conn.executescript(V8_MESSAGES_FTS)
    conn.close()


def keyword_hits(run, sid: str, query: str) -> list[tuple[int, str]]:
    res = run("search", sid, query, "--mode", "keyword", "--json")
    assert res.exit_code == 0, res.stderr
    return [(h["seq"], h["content"]) for h in res.json()["results"]]


def test_migration_009_puts_the_session_into_the_index(run, home):
    from agenvoy_cli.home.schema import SCHEMA_VERSION

    version_8_home(run, home)
    db = home / ".store" / "history.db"
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 8
    cols = [r[1] for r in conn.execute("PRAGMA table_info(messages_fts)")]
    assert cols == ["tokens"]
    conn.close()
    # a read-only command upgrades the schema first (under the write lock)
    hits = keyword_hits(run, "alpha", "memory")
    assert sorted(s for s, _ in hits) == [0, 1]
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert [r[1] for r in conn.execute("PRAGMA table_info(messages_fts)")] == [
        "tokens", "session"]
    conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
    conn.close()
    assert sorted(s for s, _ in keyword_hits(run, "beta", "memory")) == [0]
    # writers after the migration keep it filled: one at a time and set-wise
    append(run, "beta", "more memory")
    append(run, "gamma", *[f"memory bulk {i}" for i in range(600)])
    assert len(keyword_hits(run, "beta", "memory")) == 2
    res = run("search", "gamma", "bulk", "--mode", "keyword", "--json", "--limit", "1000")
    assert len(res.json()["results"]) == 600
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
    conn.close()


def test_migration_009_is_all_or_nothing(run, home, monkeypatch):
    from agenvoy_cli.home import schema

    version_8_home(run, home)

    def crash(conn):
        conn.execute("DROP TABLE messages_fts")  # half done, then the process dies
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(schema, "_messages_fts", crash)
        res = run("search", "alpha", "memory", "--mode", "keyword", "--json")
    assert res.exit_code != 0
    conn = sqlite3.connect(home / ".store" / "history.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 8
    assert [r[1] for r in conn.execute("PRAGMA table_info(messages_fts)")] == ["tokens"]
    assert conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'memory'"
                        ).fetchone()[0] == 3
    conn.close()
    assert sorted(s for s, _ in keyword_hits(run, "alpha", "memory")) == [0, 1]


def test_forget_and_remove_keep_the_session_index_consistent(run, home):
    append(run, "alpha", "memory one", "memory two", "memory three")
    append(run, "beta", "memory beta")
    assert run("forget", "alpha", "1", "--yes").exit_code == 0
    assert sorted(s for s, _ in keyword_hits(run, "alpha", "memory")) == [0, 2]
    assert run("session", "remove", "beta", "--yes").exit_code == 0
    conn = sqlite3.connect(home / ".store" / "history.db")
    conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
    assert conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?",
                        ['session : "' + b"beta".hex() + '"']).fetchone()[0] == 0
    conn.close()


def test_a_plain_session_list_does_not_import_tabulate(run, home):
    """Its import (with wcwidth and importlib.metadata) costs ~60 ms, more than formatting
    10,000 rows; a plain listing of any length is formatted without it."""
    append(run, "alpha", "one")
    append(run, "beta", "uno", "dos")
    code = ("import sys\nfrom agenvoy_cli.cli import cli\n"
            "try:\n    cli.main(['session', 'list'], prog_name='agenvoy')\n"
            "except SystemExit as e:\n    assert not e.code\n"
            "print('tabulate' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[-1] == "False" and lines[0].startswith("session ") and len(lines) == 5


def test_the_session_list_table_is_output_table():
    """list_table's rows are the documents' (times as human_time shows them): the same text
    as output.table (and so tabulate's), short, damaged, without any time or summary alike."""
    from agenvoy_cli.commands.session import HEADERS, list_table
    from agenvoy_cli.contract import rfc3339
    from agenvoy_cli.conversation.sessions import as_dicts
    from agenvoy_cli.output import human_time, table

    rng = random.Random(6)
    day = 1_704_074_400 * 10 ** 9
    times = [None, day, day + 86_399_999_999_999]
    for n, moments, summaries, damaged in ((0, times, 0.5, 0), (3, times, 0.5, 0),
                                           (51, times, 0.5, 0), (80, times, 0.5, 0.1),
                                           (200, times, 0.5, 0), (200, [None], 0, 0),
                                           (120, [day], 1, 0), (1, [None], 0, 0),
                                           (2, [day], 1, 0), (4, times, 0.5, 0.3)):
        entries = [(f"s{rng.randrange(10 ** rng.randint(1, 8))}",
                    rng.randrange(10 ** rng.randint(1, 6)), rng.randrange(10 ** rng.randint(1, 9)),
                    rng.choice(moments), rng.random() < summaries,
                    "damaged" if rng.random() < damaged else None)
                   for _ in range(n)]
        want = table([(sid, count, size, human_time(rfc3339(last)), summary)
                      + (("DAMAGED",) if problem else ())
                      for sid, count, size, last, summary, problem in entries], list(HEADERS))
        assert list_table(as_dicts(entries)) == want, n


@pytest.mark.parametrize("zone", ["Asia/Taipei", "America/New_York", "Asia/Kolkata",
                                  "Australia/Lord_Howe", "Europe/London", "UTC",
                                  "America/St_Johns", "Pacific/Chatham"])
def test_the_listing_times_are_contract_rfc3339(zone, monkeypatch):
    """session list formats 10,000 times its own way: the same strings as contract.rfc3339,
    across DST changes (every hour around them) and half-hour and odd offsets."""
    import time as clock

    from agenvoy_cli.contract import rfc3339
    from agenvoy_cli.conversation.sessions import local_rfc3339

    monkeypatch.setenv("TZ", zone)
    clock.tzset()
    try:
        rng = random.Random(zone)
        seconds = [rng.randrange(-2 * 10 ** 9, 4 * 10 ** 9) for _ in range(3000)]
        for year_start in (1_698_000_000, 1_710_000_000, 1_680_000_000, 1_667_000_000):
            seconds += range(year_start, year_start + 120 * 86400, 1800)  # DST changes in
        local, wall = local_rfc3339(), local_rfc3339(zone=False)
        for sec in seconds:
            ns = sec * 1_000_000_000 + rng.randrange(10 ** 9)
            want = rfc3339(ns)
            assert local(ns) == want, (zone, sec)
            assert wall(ns) == f"{want[:10]} {want[11:19]}", (zone, sec)  # the table's
    finally:
        monkeypatch.undo()
        clock.tzset()


@pytest.mark.parametrize("zone", ["America/New_York", "Australia/Lord_Howe", "Europe/London",
                                  "UTC", "America/St_Johns", "Pacific/Chatham",
                                  "Europe/Dublin"])
def test_batch_times_and_headers_are_mktime_and_strftime(zone, monkeypatch):
    """assign_times turns an hour of header times into unix time by arithmetic
    (LocalHours) and headers are formatted by hand (stamp_of): the same numbers as mktime
    and the same text as strftime, time after time, across DST changes (folds, gaps,
    half-hour ones) with the times close together (as a batch's are) and far apart."""
    import time as clock
    from datetime import datetime, timedelta

    from agenvoy_cli.conversation.history_format import stamp_of
    from agenvoy_cli.conversation.messages import (
        TIME_FORMAT,
        LocalHours,
        header_time,
        local_to_ns,
    )

    monkeypatch.setenv("TZ", zone)
    clock.tzset()
    try:
        rng = random.Random(zone)
        for start in (datetime(2025, 3, 8), datetime(2025, 10, 25), datetime(2025, 11, 1),
                      datetime(2024, 4, 5), datetime(2024, 9, 27), datetime(1678, 1, 2),
                      datetime(2261, 12, 1)):
            hours, stamps, moment = LocalHours(), LocalHours(), start
            for _ in range(6000):
                moment += timedelta(seconds=rng.randint(1, 1500) if rng.random() < 0.3
                                    else rng.randint(0, 20), microseconds=rng.randrange(2))
                assert hours.ns(moment) == local_to_ns(moment), (zone, moment)
                stamp = stamp_of(moment)
                assert stamp == moment.strftime(TIME_FORMAT), moment
                assert header_time(f"---\n當前時間: {stamp}\n---\nhi") == moment.replace(
                    microsecond=0)
                assert stamps.stamp_ns(stamp) == local_to_ns(moment.replace(microsecond=0))
                for bad in (f"{stamp[:14]}60{stamp[16:]}", f"{stamp[:17]}99"):  # no such time
                    assert stamps.stamp_ns(bad) is None
                    assert header_time(f"---\n當前時間: {bad}\n---\nhi") is None
        assert LocalHours().stamp_ns("2025-02-29 10:00:00") is None  # no such day
        assert stamp_of(datetime(999, 1, 2, 3, 4, 5)) == datetime(999, 1, 2, 3, 4, 5).strftime(
            TIME_FORMAT)
    finally:
        monkeypatch.undo()
        clock.tzset()
