"""agenvoy import with inputs that are wrong, odd or hostile: a record it cannot use is
skipped with its reason, a file it cannot read is reported for that file, the other files
are imported, and nothing reaches "internal error"."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path

import orjson
import pytest

DATA = Path(__file__).resolve().parent / "data" / "transfer"
CLAUDE = DATA / "claude" / "-home-ada-src-shop" / "7f3c2a10-5b1e-4c2d-9a8f-0e1d2c3b4a59.jsonl"
CODEX = next((DATA / "codex").rglob("rollout-*.jsonl"))
CHATGPT = DATA / "chatgpt" / "conversations.json"
EDGE = "0001-01-01T00:00:00Z"


@pytest.fixture
def west(monkeypatch):
    """A zone west of UTC: the first day of year 1 there is in year 0, out of datetime's range."""
    monkeypatch.setenv("TZ", "America/Los_Angeles")
    time.tzset()
    yield
    monkeypatch.setenv("TZ", "Asia/Taipei")
    time.tzset()


def archived(home: Path) -> dict[str, int]:
    db = home / ".store" / "history.db"
    if not db.exists():
        return {}
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT session_id, count(*) FROM messages GROUP BY 1"))


def check(res, *codes: int) -> None:
    assert res.exit_code in codes, (res.exit_code, res.stderr)
    assert "internal error" not in res.stderr and "Traceback" not in res.stderr, res.stderr


def edge_claude(folder: Path) -> tuple[Path, Path]:
    """Two transcripts; the first has a record at the edge of the calendar."""
    lines = CLAUDE.read_bytes().splitlines(keepends=True)
    first = folder / "p" / "00000000-0000-4000-8000-000000000001.jsonl"
    second = folder / "p" / "00000000-0000-4000-8000-000000000002.jsonl"
    first.parent.mkdir(parents=True)
    first.write_bytes(b"".join(lines).replace(b"2025-10-01T09:00:05.000Z", EDGE.encode()))
    second.write_bytes(b"".join(lines))
    return first, second


def test_a_time_at_the_edge_of_the_calendar_west_of_utc_claude_code(run, home, tmp_path, west):
    edge_claude(tmp_path)
    res = run("import", "claude-code", str(tmp_path / "p"), "--sidechains", "skip", "--now",
              "--json")
    check(res, 0)
    doc = res.json()
    assert [s["added"] for s in doc["sources"]] == [7, 7]  # the message kept, its time guessed
    assert sorted(archived(home).values()) == [7, 7]


def test_a_time_at_the_edge_of_the_calendar_west_of_utc_codex(run, home, tmp_path, west):
    folder = tmp_path / "sessions"
    for n in (1, 2):
        path = folder / f"rollout-2025-10-02T10-00-00-0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5{n}.jsonl"
        path.parent.mkdir(exist_ok=True)
        data = CODEX.read_bytes().replace(b"0c1d2e3f4a5b", f"0c1d2e3f4a5{n}".encode())
        if n == 1:
            data = data.replace(b"2025-10-02T10:00:01.000Z", EDGE.encode())
        path.write_bytes(data)
    res = run("import", "codex", str(folder), "--json")
    check(res, 0)
    assert [s["added"] for s in res.json()["sources"]] == [7, 7]


def test_a_time_at_the_edge_of_the_calendar_west_of_utc_chatgpt(run, home, tmp_path, west):
    conversations = orjson.loads(CHATGPT.read_bytes())
    first = conversations[0]
    first["mapping"]["u1"]["message"]["create_time"] = -62135596800.0  # 0001-01-01 UTC
    first["create_time"] = EDGE
    path = tmp_path / "conversations.json"
    path.write_bytes(orjson.dumps(conversations))
    res = run("import", "chatgpt", str(path), "--json")
    check(res, 0)
    assert [s["added"] for s in res.json()["sources"]] == [6, 0]


def write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def test_openai_send_at_above_64_bits_is_one_skipped_record(run, home, tmp_path):
    path = write(tmp_path / "big.jsonl",
                 '{"role": "user", "content": "before"}\n'
                 f'{{"role": "user", "content": "hi", "sendAt": {2**64 + 5}}}\n'
                 f'{{"role": "user", "content": "hi", "sendAt": {2**70}}}\n'
                 '{"role": "assistant", "content": "after"}\n')
    res = run("import", "openai", str(path), "--json")
    check(res, 0)
    (src,) = res.json()["sources"]
    assert src["added"] == 2 and src["skipped"] == 2
    assert all("sendAt" in r for r in src["reasons"]), src["reasons"]


def test_openai_lone_surrogate_in_an_array(run, home, tmp_path):
    path = write(tmp_path / "sur.json", '[{"role": "user", "content": "a\\ud800b"}, '
                                        '{"role": "assistant", "content": "fine"}]')
    res = run("import", "openai", str(path), "--json")
    check(res, 0)
    (src,) = res.json()["sources"]
    assert src["added"] == 1 and src["skipped"] == 1
    assert "surrogate" in src["reasons"][0]


@pytest.mark.parametrize("name,fmt", [("deep.json", "openai"), ("deep.jsonl", "openai"),
                                      ("conversations.json", "chatgpt")])
def test_nesting_100000_deep_is_a_clear_refusal(run, home, tmp_path, name, fmt):
    path = write(tmp_path / name, "[" * 100_000 + "]" * 100_000 + ("\n" if "l" in name else ""))
    res = run("import", fmt, str(path), "--json")
    check(res, 2)
    assert "nested" in res.stderr and name in res.stderr, res.stderr
    assert archived(home) == {}


def test_nesting_100000_deep_in_one_record_skips_that_record(run, home, tmp_path):
    deep = '{"role": "user", "content": "x", "extra": ' + "[" * 100_000 + "]" * 100_000 + "}"
    path = write(tmp_path / "m.jsonl", '{"role": "user", "content": "kept"}\n' + deep + "\n")
    res = run("import", "openai", str(path), "--json")
    check(res, 0)
    (src,) = res.json()["sources"]
    assert src["added"] == 1 and src["skipped"] == 1 and "nested" in src["reasons"][0]


def test_an_extra_field_nested_500_deep_names_the_nesting(run, home, tmp_path):
    value: object = 1
    for _ in range(500):
        value = {"x": value}
    path = write(tmp_path / "nest.jsonl", json.dumps(
        {"role": "user", "content": "hi", "extra": value}) + "\n"
        + '{"role": "user", "content": "kept"}\n')
    res = run("import", "openai", str(path), "--json")
    check(res, 0)
    (src,) = res.json()["sources"]
    assert src["added"] == 1 and src["skipped"] == 1
    assert "nested" in src["reasons"][0] and "surrogate" not in src["reasons"][0]


def test_codex_session_meta_whose_git_is_a_string(run, home, tmp_path):
    data = CODEX.read_bytes().replace(b'"git": {"branch": "main", "commit_hash": "abc"}',
                                      b'"git": "main"')
    assert b'"git": "main"' in data
    path = write(tmp_path / CODEX.name, data)
    res = run("import", "codex", str(path), "--json")
    check(res, 0)
    assert res.json()["sources"][0]["added"] == 7


def fifo_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "projects" / "p"
    folder.mkdir(parents=True)
    shutil.copy(CLAUDE, folder / CLAUDE.name)
    os.mkfifo(folder / "zz-a-fifo.jsonl")
    return folder.parent


def test_a_fifo_named_jsonl_is_skipped_not_waited_on(home, tmp_path):
    from tests.conftest import agenvoy

    folder = fifo_folder(tmp_path)
    started = time.monotonic()
    res = agenvoy("import", "claude-code", str(folder), "--now", "--json", timeout=60)
    assert time.monotonic() - started < 60
    assert res.returncode == 1, res.stderr  # one source not read: not "every source whole"
    doc = orjson.loads(res.stdout)
    fifo = [s for s in doc["sources"] if s["source"].endswith("zz-a-fifo.jsonl")]
    assert fifo and fifo[0]["status"] == "unreadable" and "not a regular file" in \
        fifo[0]["reasons"][0]
    assert archived(home)["cc-shop-7f3c2a10"] == 7


@pytest.mark.parametrize("fmt", ["openai", "codex", "chatgpt"])
def test_a_fifo_given_by_name_is_refused(run, home, tmp_path, fmt):
    path = tmp_path / "rollout-x.jsonl"
    os.mkfifo(path)
    done = threading.Event()

    def unblock() -> None:  # a reader that opened the FIFO would wait for a writer forever
        if not done.wait(20):
            with open(path, "wb"):
                pass

    threading.Thread(target=unblock, daemon=True).start()
    try:
        res = run("import", fmt, str(path))
    finally:
        done.set()
    check(res, 2)
    assert "not a regular file" in res.stderr


def test_a_file_that_cannot_be_read_does_not_stop_the_others(run, home, tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    write(folder / "a.jsonl", '{"role": "user", "content": "one"}\n')
    write(folder / "b.json", '[{"role": "user", "content": "two"}, {"role": ')  # cut short
    write(folder / "c.jsonl", '{"role": "user", "content": "three"}\n')
    res = run("import", "openai", str(folder), "--json")
    check(res, 1)
    doc = res.json()
    status = {Path(s["source"]).name: s["status"] for s in doc["sources"]}
    assert status["a.jsonl"] == "imported" and status["c.jsonl"] == "imported"
    assert status["b.json"] == "partial"
    assert sorted(archived(home)) == ["openai-a", "openai-b", "openai-c"]


def test_a_record_longer_than_the_bound_is_skipped_with_its_reason(run, home, tmp_path,
                                                                  monkeypatch):
    monkeypatch.setenv("AGENVOY_IMPORT_MAX_RECORD_BYTES", str(1 << 20))
    huge = orjson.dumps({"role": "user", "content": "x" * (3 << 20)}).decode()
    path = write(tmp_path / "h.jsonl", '{"role": "user", "content": "kept"}\n' + huge + "\n"
                 + '{"role": "assistant", "content": "after"}\n')
    res = run("import", "openai", str(path), "--json")
    check(res, 0)
    (src,) = res.json()["sources"]
    assert src["added"] == 2 and src["skipped"] == 1 and "longer than" in src["reasons"][0]
