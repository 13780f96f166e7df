"""agenvoy import / export: per format, exactly once, incrementally, and back out."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest

from tests.helpers.transfer import provider_errors

DATA = Path(__file__).resolve().parent / "data" / "transfer"
CLAUDE = DATA / "claude" / "-home-ada-src-shop" / "7f3c2a10-5b1e-4c2d-9a8f-0e1d2c3b4a59.jsonl"


def context(run, sid: str) -> list[dict]:
    res = run("context", sid, "--max-messages", "1000", "--json")
    assert res.exit_code == 0, res.stderr
    return res.json()["messages"]


def rows(home: Path, sid: str) -> list[tuple]:
    with sqlite3.connect(home / ".store/history.db") as conn:
        return conn.execute("SELECT seq, send_at, role, content, message, gone FROM messages "
                            "WHERE session_id = ? ORDER BY seq", (sid,)).fetchall()


def imported(run, *args: str) -> dict:
    """An import of files that are whole (--now: their last message is not still being
    written, whatever their age)."""
    now = ("--now",) if args and args[0] in ("claude-code", "codex") else ()
    res = run("import", *args, *now, "--json")
    assert res.exit_code == 0, res.stderr
    return res.json()


def test_claude_code_transcript(run, home):
    doc = imported(run, "claude-code", str(DATA / "claude"))
    main, side = doc["sources"]
    assert main["session_id"] == "cc-shop-7f3c2a10" and main["added"] == 7
    assert main["malformed"] == 1 and "line 14" in main["reasons"][0]
    assert side["session_id"] == "cc-shop-7f3c2a10-side" and side["added"] == 2
    msgs = context(run, "cc-shop-7f3c2a10")
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "tool", "assistant",
                                         "user", "assistant"]
    assert provider_errors(msgs) == []
    call = msgs[1]  # thinking, text and two tool_use blocks of one message.id: one message
    assert call["reasoning_content"] == "Check the script's mode first."
    assert [c["id"] for c in call["tool_calls"]] == ["toolu_01", "toolu_02"]
    assert "2025-10-01" in msgs[0]["content"]
    assert msgs[5]["content"][1]["type"] == "image_url"
    assert not any("Sub-agent" in str(m) for m in msgs)  # the sidechain is kept apart
    hits = run("search", "cc-shop-7f3c2a10", "zebrafinch", "--mode", "keyword", "--json")
    assert [h["role"] for h in hits.json()["results"]] == ["tool"]
    listing = run("session", "list", "--json").json()["sessions"]
    assert any(s.get("source", "").startswith("claude-code: /home/ada/src/shop")
               for s in listing)


def test_skip_sidechains(run):
    doc = imported(run, "claude-code", str(CLAUDE), "--sidechains", "skip")
    assert [s["session_id"] for s in doc["sources"]] == ["cc-shop-7f3c2a10"]


def test_codex_rollout(run):
    doc = imported(run, "codex", str(DATA / "codex"))
    (src,) = doc["sources"]
    assert src["session_id"] == "codex-api-0199a1b2" and src["malformed"] == 1
    msgs = context(run, src["session_id"])
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "assistant",
                                         "tool", "assistant"]
    assert msgs[2]["reasoning_content"] == "**Running the tests**"
    assert provider_errors(msgs) == []
    hits = run("search", src["session_id"], "quokka", "--mode", "keyword", "--json").json()
    assert hits["results"] and hits["results"][0]["role"] == "tool"


def test_chatgpt_follows_the_current_branch(run):
    doc = imported(run, "chatgpt", str(DATA / "chatgpt"))
    first = doc["sources"][0]
    assert first["session_id"] == "chatgpt-cat-names-6700aa11"
    msgs = context(run, first["session_id"])
    text = orjson.dumps(msgs).decode()
    assert "Mochi" in text and "Whiskers" not in text
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "tool",
                                         "assistant"]
    # an image the export folder lacks: a text part naming it (a provider takes that), the
    # original part in the archive's full JSON (never sent: context leaves it out)
    assert "file-service://file-abc" in msgs[2]["content"] and "not in the export" in \
        msgs[2]["content"] and "original_parts" not in msgs[2]
    assert provider_errors(msgs) == []
    assert "2024-10-01" in msgs[0]["content"]


def test_openai_messages_and_unknown_format(run):
    doc = imported(run, "openai", str(DATA / "openai.jsonl"), "--session", "mine")
    assert doc["sources"][0]["session_id"] == "mine" and doc["added"] == 4
    assert provider_errors(context(run, "mine")) == []
    bad = run("import", "whatsapp", str(DATA / "openai.jsonl"))
    assert bad.exit_code == 2 and "unknown import format" in bad.stderr


def test_reimport_adds_nothing_and_growth_adds_only_the_new(run, tmp_path, home):
    path = tmp_path / "p" / CLAUDE.name
    path.parent.mkdir()
    lines = CLAUDE.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:8]))  # up to the first tool result
    first = imported(run, "claude-code", str(path), "--sidechains", "skip")
    sid = first["sources"][0]["session_id"]
    assert imported(run, "claude-code", str(path), "--sidechains", "skip")["added"] == 0
    before = len(rows(home, sid))
    path.write_bytes(b"".join(lines))
    grown = imported(run, "claude-code", str(path), "--sidechains", "skip")
    assert grown["added"] == 7 - before and len(rows(home, sid)) == 7
    assert provider_errors(context(run, sid)) == []
    again = imported(run, "claude-code", str(path), "--sidechains", "skip")
    assert again["added"] == 0


def test_changed_old_part_is_reported_not_duplicated(run, tmp_path, home):
    path = tmp_path / CLAUDE.name
    shutil.copy(CLAUDE, path)
    sid = imported(run, "claude-code", str(path))["sources"][0]["session_id"]
    path.write_bytes(path.read_bytes().replace(b"permission denied", b"permission DENIED")
                     + b"\n")
    res = run("import", "claude-code", str(path), "--now", "--json")
    assert res.exit_code == 2 and "has changed" in res.stderr  # nothing written
    doc = run("import", "auto", str(path), str(DATA / "openai.jsonl"), "--now", "--json")
    assert doc.exit_code == 1  # another source written: the document, and why not 0
    assert [s["status"] for s in doc.json()["sources"]] == ["changed", "changed", "imported"]
    assert len(rows(home, sid)) == 7


def test_forgotten_stays_forgotten(run, home):
    sid = imported(run, "openai", str(DATA / "openai.jsonl"))["sources"][0]["session_id"]
    assert run("forget", sid, "--match", "pong-result", "--yes").exit_code == 0
    openai = DATA / "openai.jsonl"
    assert imported(run, "openai", str(openai))["added"] == 0
    assert "pong-result" not in orjson.dumps(context(run, sid)).decode()


def test_strict_imports_nothing_from_a_malformed_file(run, home):
    res = run("import", "codex", str(DATA / "codex"), "--strict")
    assert res.exit_code == 2 and "malformed" in res.stderr
    assert not (home / "sessions").exists() or not list((home / "sessions").iterdir())


def test_dry_run_writes_nothing(run, home):
    doc = imported(run, "chatgpt", str(DATA / "chatgpt" / "conversations.json"), "--dry-run")
    assert doc["added"] == 6 and not (home / "sessions").exists()


def test_export_import_rebuilds_the_session(run, home, tmp_path, monkeypatch):
    imported(run, "claude-code", str(CLAUDE), "--sidechains", "skip")
    sid = "cc-shop-7f3c2a10"
    (home / "sessions" / sid / "summary.json").write_text(orjson.dumps(
        {"key_decisions": ["chmod"], "past_discussions": [], "current_discussion": "部署"}
    ).decode())
    (home / "sessions" / sid / "summary.meta.json").write_text(
        '{"last_message_time": "2025-10-01 09:00:10"}')
    out = tmp_path / "out.jsonl"
    res = run("export", sid, "--output", str(out), "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["message_count"] == 7
    want_ctx, want_rows = context(run, sid), rows(home, sid)
    inside = run("export", sid, "--output", str(home / "x.jsonl"))
    assert inside.exit_code == 2 and not (home / "x.jsonl").exists()
    other = tmp_path / "other"
    monkeypatch.setenv("AGENVOY_HOME", str(other))
    doc = imported(run, "agenvoy", str(out))
    assert doc["sources"][0]["session_id"] == sid and doc["added"] == 7
    assert context(run, sid) == want_ctx
    assert rows(other, sid) == want_rows
    for name in ("summary.json", "summary.meta.json"):
        assert orjson.loads((other / "sessions" / sid / name).read_bytes()) == \
            orjson.loads((home / "sessions" / sid / name).read_bytes())
    assert imported(run, "agenvoy", str(out))["added"] == 0
    third = tmp_path / "third"  # another home's session folder
    monkeypatch.setenv("AGENVOY_HOME", str(third))
    assert imported(run, "agenvoy", str(home / "sessions" / sid))["added"] == 7
    assert rows(third, sid) == want_rows


def test_markdown_export_renders(run, tmp_path):
    imported(run, "claude-code", str(CLAUDE), "--sidechains", "skip")
    out = tmp_path / "md"
    assert run("export", "--all", "--format", "markdown", "--output", str(out)).exit_code == 0
    text = (out / "cc-shop-7f3c2a10.md").read_text("utf-8")
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark", {"html": True}).render(text)
    assert "<details>" in html and "部署失敗" in html and "<h2>" in html
    assert "tool call Bash" in html


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_stream_reader_matches_a_full_parse(chunk):
    import io

    from agenvoy_cli.transfer.stream import elements

    data = (DATA / "chatgpt" / "conversations.json").read_bytes()
    got = [e for e, _ in elements(io.BytesIO(data), chunk)]
    assert got == orjson.loads(data)


def test_session_list_table_shows_the_source(run):
    assert run("append", "plain", "--role", "user", "--content", "hi").exit_code == 0
    imported(run, "claude-code", str(CLAUDE), "--sidechains", "skip")
    table = run("session", "list").stdout.splitlines()
    assert table[0].split()[-1] == "source"
    line = next(x for x in table if x.startswith("cc-shop-7f3c2a10"))
    assert line.rstrip().endswith("claude-code: /home/ada/src/shop (main)")
    plain = next(x for x in table if x.startswith("plain"))
    assert plain.rstrip().endswith("-")


def test_a_malformed_line_counts_once_not_once_per_side(run):
    doc = imported(run, "claude-code", str(CLAUDE))
    assert doc["malformed"] == 1
    assert [s["malformed"] for s in doc["sources"]] == [1, 0]


def test_an_empty_source_then_the_grown_one_imports_every_record(run, tmp_path, home):
    lines = CLAUDE.read_bytes().splitlines(keepends=True)
    side = [x for x in lines if b'"isSidechain": true' in x]
    path = tmp_path / "p" / CLAUDE.name
    path.parent.mkdir()
    path.write_bytes(b"")
    first = imported(run, "claude-code", str(path))
    assert first["added"] == 0 and all(s["record_count"] == 0 for s in first["sources"])
    path.write_bytes(b"".join(x for x in lines if x not in side))  # no sub-agent yet
    grown = imported(run, "claude-code", str(path))
    assert [(s["session_id"], s["added"]) for s in grown["sources"]] == [
        ("cc-shop-7f3c2a10", 7)]  # no sidechain record yet: that pass is not made
    with path.open("ab") as handle:  # the sub-agent starts: its side is read from the start
        handle.writelines(side)
    again = imported(run, "claude-code", str(path))
    assert [s["added"] for s in again["sources"]] == [0, 2]
    assert len(rows(home, "cc-shop-7f3c2a10")) == 7
    assert len(rows(home, "cc-shop-7f3c2a10-side")) == 2
    assert imported(run, "claude-code", str(path))["added"] == 0


def full_rows(home: Path, sid: str) -> list[tuple]:
    with sqlite3.connect(home / ".store/history.db") as conn:
        return conn.execute("SELECT seq, send_at, role, content, message, gone, sender "
                            "FROM messages WHERE session_id = ? ORDER BY seq", (sid,)).fetchall()


def trim_point(run, sid: str) -> dict:
    res = run("session", "show", sid, "--json")
    assert res.exit_code == 0, res.stderr
    return res.json()["trim_point"]


def moved(run, home: Path, other: Path, tmp_path: Path, monkeypatch, *sids: str) -> None:
    """Export sids from home, import them into other, and check nothing differs."""
    out = tmp_path / "moved.jsonl"
    assert run("export", *sids, "--output", str(out)).exit_code == 0
    want = {s: (context(run, s), full_rows(home, s), trim_point(run, s),
                (home / "sessions" / s / "history.json").read_bytes()) for s in sids}
    monkeypatch.setenv("AGENVOY_HOME", str(other))
    doc = imported(run, "agenvoy", str(out))
    assert doc["added"] == sum(len(w[1]) for w in want.values())
    for s, (ctx, got_rows, point, history) in want.items():
        assert context(run, s) == ctx
        assert full_rows(other, s) == got_rows
        assert trim_point(run, s) == point
        assert orjson.loads((other / "sessions" / s / "history.json").read_bytes()) == \
            orjson.loads(history)
    assert imported(run, "agenvoy", str(out))["added"] == 0
    assert run("doctor").exit_code == 0


def test_export_import_keeps_sender_and_the_sendat_format(run, home, tmp_path, monkeypatch):
    for fmt in ("sendat", "header"):
        monkeypatch.setenv("AGENVOY_HISTORY_FORMAT", fmt)
        sid = f"v-{fmt}"
        assert run("append", sid, "--role", "user", "--content", f"你好 {fmt}", "--sender",
                   "alice", "--time", "2025-01-02 03:04:05").exit_code == 0
        assert run("append", sid, "--role", "assistant", "--content", "hi alice",
                   "--time", "2025-01-02 03:04:06").exit_code == 0
    monkeypatch.delenv("AGENVOY_HISTORY_FORMAT")  # the other home writes headers
    assert [r[6] for r in full_rows(home, "v-sendat")] == ["alice", ""]
    moved(run, home, tmp_path / "other", tmp_path, monkeypatch, "v-sendat", "v-header")


def test_export_import_restores_the_trim_point(run, home, tmp_path, monkeypatch):
    sid = "trimmed"
    for i in range(30):
        assert run("append", sid, "--role", "user", "--content", f"question {i} " + "x" * 80,
                   "--time", f"2025-02-01 10:{i:02d}:00", "--no-compact").exit_code == 0
        assert run("append", sid, "--role", "assistant", "--content", f"answer {i}",
                   "--time", f"2025-02-01 10:{i:02d}:30", "--no-compact").exit_code == 0
    assert run("compact", sid, "--max-bytes", "2048").exit_code == 0
    point = trim_point(run, sid)
    assert point["start_seq"] > 0
    kept = len(orjson.loads((home / "sessions" / sid / "history.json").read_bytes()))
    assert kept < 60 and len(full_rows(home, sid)) == 60
    moved(run, home, tmp_path / "other", tmp_path, monkeypatch, sid)


def chatgpt_export(path: Path, conversations: int, turns: int) -> int:
    """A generated conversations.json (a branch in every conversation's first answer, CJK
    in every user turn): the number of messages its current branches import as."""
    out = []
    for c in range(conversations):
        mapping = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
        tip, t = "root", 1_727_773_200.0 + c * 86_400
        for turn in range(turns):
            for role in ("user", "assistant"):
                t += 7
                nid = f"{role[0]}{turn}"
                text = f"conv {c} turn {turn} {role} 第{turn}輪 " + "lorem ipsum " * 40
                mapping[nid] = {"id": nid, "parent": tip, "children": [], "message": {
                    "id": nid, "author": {"role": role}, "create_time": t, "recipient": "all",
                    "content": {"content_type": "text", "parts": [text]}, "metadata": {}}}
                mapping[tip]["children"].append(nid)
                if turn == 0 and role == "assistant":  # the regenerated answer, not shown
                    old = dict(mapping[nid], id="old", message={**mapping[nid]["message"],
                               "content": {"content_type": "text", "parts": ["Whiskers"]}})
                    mapping["old"] = old
                    mapping[tip]["children"].insert(0, "old")
                tip = nid
        out.append({"title": f"Generated {c}", "create_time": t, "mapping": mapping,
                    "current_node": tip, "conversation_id": f"{c:04d}-generated"})
    path.write_bytes(orjson.dumps(out))
    return conversations * turns * 2


def test_progress_lines_within_one_large_file(run, tmp_path, monkeypatch):
    path = tmp_path / "conversations.json"
    chatgpt_export(path, 48, 60)
    size = path.stat().st_size >> 20
    assert size >= 3
    monkeypatch.setenv("AGENVOY_PROGRESS_SECONDS", "0")
    res = run("import", "chatgpt", str(path), "--json")
    assert res.exit_code == 0, res.stderr
    import re

    done = [int(m) for m in re.findall(rf"agenvoy: import (\d+)/{size} MiB \(", res.stderr)]
    assert len(set(done)) >= 3 and done == sorted(done) and done[-1] == size, res.stderr
    assert len(done) == len(set(done))  # each whole MiB once, the last one too
    assert "MiB/s" in res.stderr and "left)" in res.stderr


def test_kill_9_in_the_middle_then_doctor_and_a_second_import_complete_it(home, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import ROOT, agenvoy

    path = tmp_path / "conversations.json"
    total = chatgpt_export(path, 12, 300)  # 600 messages a conversation
    db = home / ".store" / "history.db"

    def archived() -> int:
        if not db.exists():
            return 0
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                return conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        except sqlite3.OperationalError:  # not created yet
            return 0

    proc = subprocess.Popen([sys.executable, "-m", "agenvoy_cli", "import", "chatgpt",
                             str(path)], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=os.environ.copy())
    deadline = time.monotonic() + 180
    try:
        while archived() < total // 4 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, "the import ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    part = archived()
    assert total // 4 <= part < total
    doctor = agenvoy("doctor", "--json")
    problems = orjson.loads(doctor.stdout)["problems"]
    # A kill between a batch's history.json write and its SQLite commit leaves that batch in
    # history.json only (the append's order): the one state doctor may find, and repairs.
    assert all(p["check"] == "archive" and "are not in SQLite" in p["detail"]
               for p in problems), problems
    assert doctor.returncode == (1 if problems else 0), doctor.stderr
    if problems:
        assert agenvoy("doctor", "--repair").returncode == 0
        assert agenvoy("doctor").returncode == 0
    again = agenvoy("import", "chatgpt", str(path), "--json", timeout=300)
    assert again.returncode == 0, again.stderr
    doc = orjson.loads(again.stdout)
    assert len(doc["sources"]) == 12 and doc["malformed"] == 0
    assert archived() == total
    with sqlite3.connect(db) as conn:
        per = conn.execute("SELECT session_id, count(*), count(DISTINCT hash), min(seq), "
                           "max(seq) FROM messages GROUP BY session_id").fetchall()
    assert len(per) == 12 and all(r[1:] == (600, 600, 0, 599) for r in per), per
    assert orjson.loads(agenvoy("import", "chatgpt", str(path), "--json").stdout)["added"] == 0
    assert agenvoy("doctor").returncode == 0


def import_dying_at(module: str, name: str, nth: int, fmt: str, path: Path):
    """`agenvoy import FMT PATH` in a process that exits (9) at the nth call of
    module's `name` (an attribute path: "Store._archive_append"), before it runs."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    owner, _, attr = f"target.{name}".rpartition(".")
    script = (
        "import importlib, os, sys\n"
        f"target = importlib.import_module({module!r})\n"
        f"owner, real, calls = {owner}, {owner}.{attr}, []\n"
        "def dying(*a, **k):\n"
        "    calls.append(1)\n"
        f"    if len(calls) == {nth}:\n"
        "        os._exit(9)\n"
        "    return real(*a, **k)\n"
        f"setattr(owner, {attr!r}, dying)\n"
        "from agenvoy_cli.cli import main\n"
        f"sys.argv = ['agenvoy', 'import', {fmt!r}, sys.argv[1]]\n"
        "main()\n")
    return subprocess.run([sys.executable, "-c", script, str(path)], cwd=ROOT,
                          capture_output=True, timeout=120)


def test_a_crash_between_a_batchs_two_writes_is_found_by_doctor_and_completed(home, tmp_path):
    """The kill above lands anywhere; this one lands exactly between a batch's history.json
    write and its SQLite commit (the process exits inside the archive write)."""

    from agenvoy_cli.transfer.engine import BATCH
    from tests.conftest import agenvoy

    path = tmp_path / "conversations.json"
    turns = (BATCH + 100) // 2  # two batches a conversation
    total = chatgpt_export(path, 3, turns)
    died = import_dying_at("agenvoy_cli.conversation.store", "Store._archive_append", 3,
                           "chatgpt", path)
    assert died.returncode == 9, died.stderr
    doctor = agenvoy("doctor", "--json")
    problems = orjson.loads(doctor.stdout)["problems"]
    assert doctor.returncode == 1 and len(problems) == 1, problems
    assert problems[0]["check"] == "archive" and f"{BATCH} message(s) of history.json are " \
        "not in SQLite" in problems[0]["detail"], problems
    again = agenvoy("import", "chatgpt", str(path), "--json", timeout=300)
    assert again.returncode == 0, again.stderr
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        per = conn.execute("SELECT count(*), count(DISTINCT hash), min(seq), max(seq) "
                           "FROM messages GROUP BY session_id").fetchall()
    want = (2 * turns, 2 * turns, 0, 2 * turns - 1)
    assert sum(r[0] for r in per) == total and all(r == want for r in per), per
    assert agenvoy("doctor").returncode == 0


def test_a_crash_before_the_cursor_of_messages_without_times_adds_them_once(home, tmp_path):
    """OpenAI messages carry no time: a run gives them the file's (not its own clock), so
    the next run knows the batch a killed one appended before writing its cursor."""

    from agenvoy_cli.transfer.engine import BATCH
    from tests.conftest import agenvoy

    path = tmp_path / "chat.jsonl"
    total = BATCH + 300  # two batches
    path.write_bytes(b"".join(orjson.dumps({"role": ("user", "assistant")[i % 2],
                                            "content": f"message {i}"}) + b"\n"
                              for i in range(total)))
    # the claim, then the first batch's cursor
    died = import_dying_at("agenvoy_cli.transfer.sources", "put", 2, "openai", path)
    assert died.returncode == 9, died.stderr
    db = home / ".store" / "history.db"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == BATCH
    again = agenvoy("import", "openai", str(path), "--json", timeout=300)
    assert again.returncode == 0, again.stderr
    assert orjson.loads(again.stdout)["added"] == total - BATCH
    with sqlite3.connect(db) as conn:
        got = conn.execute("SELECT count(*), count(DISTINCT hash), min(seq), max(seq) "
                           "FROM messages").fetchone()
    assert got == (total, total, 0, total - 1)
    assert agenvoy("doctor").returncode == 0


def test_stream_offsets_grow_to_the_size(tmp_path):
    import io

    from agenvoy_cli.transfer.stream import elements

    path = tmp_path / "conversations.json"
    chatgpt_export(path, 40, 20)
    data = path.read_bytes()
    offsets = [at for _, at in elements(io.BytesIO(data), 1 << 16)]
    assert offsets == sorted(offsets) and offsets[-1] == len(data) - 1  # all but "]"
    assert len(set(offsets)) == 40  # one place per element, not one per chunk read


def test_stream_reads_a_large_element_in_few_tries():
    import io

    from agenvoy_cli.transfer.stream import elements

    class Counting(io.BytesIO):
        reads = 0

        def read(self, size: int | None = -1) -> bytes:
            self.reads += 1
            return super().read(size)

    big = [{"text": "長" * 100_000, "n": i} for i in range(3)]
    handle = Counting(orjson.dumps(big))
    assert [e for e, _ in elements(handle, 1024)] == big
    assert handle.reads < 40  # not one per 1 KiB of the ~900 KiB (doubling reads)


@pytest.mark.parametrize("chunk", [5, 64, 1 << 20])
def test_stream_stops_at_a_bad_element_without_reading_on(chunk):
    import io

    from agenvoy_cli.transfer.stream import Malformed, elements

    data = b'[{"a": "x\\u12"}, {"b": 1 2}, ' + b'{"c": "' + b"z" * 5_000_000 + b'"}]'
    handle = io.BytesIO(data)
    with pytest.raises(Malformed, match="bad JSON"):
        list(elements(handle, chunk))
    assert handle.tell() < 1 << 21  # not the whole file into memory to say so
    good = b'[{"a": "\\u00e9\\u9577"}, 12345678, "' + "長".encode() * 50 + b'", true]'
    assert [e for e, _ in elements(io.BytesIO(good), chunk)] == orjson.loads(good)


KILLED_AFTER_APPEND = """
import os, signal, sys
from agenvoy_cli.conversation.store import Store
real, calls, after = Store.append, [], int(sys.argv[1])
def append(self, *args, **kwargs):
    done = real(self, *args, **kwargs)
    calls.append(1)
    if len(calls) == after:  # the archive has the batch, its cursor is not written
        os.kill(os.getpid(), signal.SIGKILL)
    return done
Store.append = append
sys.argv = ["agenvoy", "import", "chatgpt", sys.argv[2]]
from agenvoy_cli.cli import main
main()
"""


@pytest.mark.parametrize("appends", [1, 2, 3])
def test_killed_between_a_batch_and_its_cursor(home, tmp_path, appends):
    import signal
    import subprocess
    import sys

    from agenvoy_cli.transfer.engine import BATCH
    from tests.conftest import ROOT, agenvoy

    path = tmp_path / "conversations.json"
    turns = (BATCH + 100) // 2
    total = chatgpt_export(path, 2, turns)  # two batches a conversation
    child = subprocess.run([sys.executable, "-c", KILLED_AFTER_APPEND, str(appends),
                            str(path)], cwd=ROOT, capture_output=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert agenvoy("doctor").returncode == 0
    doc = orjson.loads(agenvoy("import", "chatgpt", str(path), "--json").stdout)
    assert sorted(s["session_id"] for s in doc["sources"]) == [
        "chatgpt-generated-0-0000-gen", "chatgpt-generated-1-0001-gen"]
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        per = conn.execute("SELECT session_id, count(*), count(DISTINCT hash) FROM messages "
                           "GROUP BY session_id ORDER BY 1").fetchall()
    assert per == [("chatgpt-generated-0-0000-gen", 2 * turns, 2 * turns),
                   ("chatgpt-generated-1-0001-gen", 2 * turns, 2 * turns)]
    assert sum(len(orjson.loads((home / "sessions" / s / "history.json").read_bytes()))
               for s, _, _ in per) <= total


def test_export_takes_what_agenvoy_itself_trimmed_and_appended(run, home, tmp_path,
                                                                monkeypatch):
    for i in range(10):
        assert run("append", "s", "--role", ("user", "assistant")[i % 2], "--content",
                   f"msg {i}", "--time", f"2025-01-01 10:00:0{i}").exit_code == 0
    path = home / "sessions" / "s" / "history.json"
    kept = orjson.loads(path.read_bytes())[4:]  # Agenvoy trimmed, then appended: not synced
    kept += [{"role": "user", "content": "---\n當前時間: 2025-01-01 11:00:00\n---\nnew 1"},
             {"role": "assistant", "content": "---\n當前時間: 2025-01-01 11:00:01\n---\nnew 2"}]
    path.write_bytes(orjson.dumps(kept))
    want = context(run, "s")
    moved(run, home, tmp_path / "other", tmp_path, monkeypatch, "s")
    assert context(run, "s") == want and trim_point(run, "s")["start_seq"] == 4


def test_import_of_a_folder_takes_what_agenvoy_itself_wrote_there(run, home, tmp_path,
                                                                  monkeypatch):
    for i in range(6):
        assert run("append", "s", "--role", ("user", "assistant")[i % 2], "--content",
                   f"msg {i}", "--time", f"2025-01-01 10:00:0{i}").exit_code == 0
    path = home / "sessions" / "s" / "history.json"
    kept = orjson.loads(path.read_bytes())[2:]  # Agenvoy trimmed, then appended: not synced
    kept.append({"role": "user", "content": "---\n當前時間: 2025-01-01 11:00:00\n---\nnew"})
    path.write_bytes(orjson.dumps(kept))
    want, before = context(run, "s"), path.read_bytes()
    monkeypatch.setenv("AGENVOY_HOME", str(tmp_path / "other"))
    doc = imported(run, "agenvoy", str(home / "sessions" / "s"))
    assert doc["added"] == 7
    assert context(run, "s") == want and trim_point(run, "s")["start_seq"] == 2
    assert path.read_bytes() == before  # the other home's session is only read


def test_a_side_pass_cut_short_is_finished_when_the_main_one_is_unchanged(run, home):
    """A run killed (or out of disk) during a transcript's sidechain pass, after its main
    pass was marked read whole: the next run finds the main pass unchanged and reads
    nothing of the file, yet finishes the side pass its cursor says is not whole (the
    fault sweep's kills after the side's first commit; before, the side was never read
    again). A transcript re-run with both passes whole lists no side source."""
    first = imported(run, "claude-code", str(CLAUDE))
    side = next(s for s in first["sources"] if s["source"].endswith("#sidechain"))
    side_rows = rows(home, side["session_id"])
    assert side_rows
    with sqlite3.connect(home / ".store/history.db") as conn:  # as a kill leaves it
        conn.execute("UPDATE import_sources SET size = NULL, mtime_ns = NULL WHERE key = ?",
                     (side["source"],))
    again = imported(run, "claude-code", str(CLAUDE))
    assert [s["source"] for s in again["sources"]] == [s["source"] for s in first["sources"]]
    assert again["added"] == 0 and rows(home, side["session_id"]) == side_rows
    with sqlite3.connect(home / ".store/history.db") as conn:
        assert conn.execute("SELECT size FROM import_sources WHERE key = ?",
                            (side["source"],)).fetchone()[0] == CLAUDE.stat().st_size
    third = imported(run, "claude-code", str(CLAUDE))
    assert [s["source"] for s in third["sources"]] == [first["sources"][0]["source"]]
