"""A home shared with Agenvoy v0.32 (tests/agenvoy_sim_v032.py, written from its Go source):
history.json entries in the sendAt/sender format, rewritten whole on every Agenvoy append."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.agenvoy_sim_v032 import GoAgentV032, go_marshal, normalize

SID = "s"
TOKEN = re.compile(r"\btok\d+\b")
PROVIDER_KEYS = {"role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content",
                 "refusal", "audio", "function_call"}


def validate_openai(messages: list[dict[str, Any]]) -> None:
    """The OpenAI chat-completions message rules a provider enforces (400 otherwise)."""
    open_calls: set[str] = set()
    for i, m in enumerate(messages):
        assert set(m) <= PROVIDER_KEYS, f"message {i}: unknown keys {set(m) - PROVIDER_KEYS}"
        role = m["role"]
        assert role in ("system", "user", "assistant", "tool"), i
        content = m.get("content")
        assert content is None or isinstance(content, (str, list)), i
        if role == "tool":
            assert m.get("tool_call_id") in open_calls, f"message {i}: tool without its call"
            open_calls.discard(m["tool_call_id"])
            continue
        assert not open_calls, f"message {i}: tool calls {open_calls} never answered"
        if role == "assistant":
            calls = m.get("tool_calls") or []
            has_text = bool(content) if not isinstance(content, list) else bool(content)
            assert has_text or calls, f"message {i}: assistant with neither content nor calls"
            open_calls = {c["id"] for c in calls}
        else:
            assert content not in (None, "", []), f"message {i}: empty {role} message"
    assert not open_calls, f"tool calls {open_calls} never answered"


def own_append(run, *messages: dict[str, Any], when: str = "2026-01-05 12:00:00") -> None:
    res = run("append", SID, "--messages", "-", "--time", when,
              input=orjson.dumps(list(messages)))
    assert res.exit_code == 0, res.stderr


def archive_rows(home: Path, sid: str = SID) -> list[tuple[Any, ...]]:
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        return conn.execute("SELECT id, seq, role, content, message, send_at FROM messages "
                            "WHERE session_id = ? ORDER BY seq IS NULL, seq, id", (sid,)).fetchall()


def tokens(home: Path) -> list[str]:
    return [t for row in archive_rows(home) for t in TOKEN.findall(row[3])]


def doctor_clean(run) -> None:
    res = run("doctor", "--json")
    assert res.exit_code == 0, res.stdout + res.stderr


def context(run) -> list[dict[str, Any]]:
    res = run("context", SID, "--json")
    assert res.exit_code == 0, res.stderr
    return res.json()["messages"]


@pytest.fixture
def go(home: Path):
    agent = GoAgentV032(home)
    yield agent
    agent.close()


def tool_exchange(n: int) -> list[dict[str, Any]]:
    call = {"id": f"call_{n}", "type": "function",
            "function": {"name": "read_file", "arguments": f'{{"path": "/etc/tok{n + 1}"}}'}}
    return [{"role": "user", "content": f"question tok{n}"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{n}", "content": f"file body tok{n + 2}"},
            {"role": "assistant", "content": f"answer tok{n + 3}"}]


# ------------------------------------------------------------------ exactly once, both writers

def test_agenvoy_first_then_alternating_writers_lose_and_duplicate_nothing(run, home, go):
    go.say(SID, "user", "hello tok0", sender="alice")
    expected, seqs = ["tok0"], {}
    for n in range(1, 201, 2):
        own_append(run, {"role": "assistant", "content": f"ours tok{n}"})
        go.say(SID, "user", f"theirs tok{n + 1}", sender="alice")
        expected += [f"tok{n}", f"tok{n + 1}"]
        if n % 40 == 1:
            for _, seq, _, content, *_ in archive_rows(home):
                for t in TOKEN.findall(content) if seq is not None else ():
                    assert seqs.setdefault(t, seq) == seq  # places never move
    own_append(run, {"role": "assistant", "content": "last tok201"})
    expected.append("tok201")
    assert tokens(home) == expected  # 0 lost, 0 duplicated, in order
    for _, seq, _, content, *_ in archive_rows(home):
        for t in TOKEN.findall(content) if seq is not None else ():
            assert seqs.setdefault(t, seq) == seq
    doctor_clean(run)
    # new messages are in the session's format: sendAt, no header
    last = orjson.loads((home / "sessions" / SID / "history.json").read_bytes())[-1]
    assert isinstance(last.get("sendAt"), int) and "當前時間" not in last["content"]


def test_ours_first_then_normalise_rewrite_is_not_an_edit(run, home, go):
    own_append(run, {"role": "user", "content": "question tok1"},
               {"role": "assistant", "content": "answer tok2", "reasoning_content": "why"})
    before = archive_rows(home)
    go.say(SID, "user", "then tok3")
    entries = orjson.loads((home / "sessions" / SID / "history.json").read_bytes())
    assert all("當前時間" not in e["content"] and "sendAt" in e for e in entries)
    doctor_clean(run)  # today: "2 message(s) of history.json were edited"
    after = archive_rows(home)
    assert after[:2] == before  # no row rewritten, none renumbered, full JSON kept
    assert orjson.loads(after[1][4])["reasoning_content"] == "why"
    res = run("search", SID, "tok2", "--mode", "keyword", "--json")
    assert res.exit_code == 0 and len(res.json()["results"]) == 1
    # a real edit of the words is still an edit
    entries[0]["content"] = "question tok9"
    (home / "sessions" / SID / "history.json").write_bytes(orjson.dumps(entries))
    own_append(run, {"role": "assistant", "content": "more tok4"})
    assert tokens(home) == ["tok9", "tok2", "tok3", "tok4"]
    doctor_clean(run)


def test_context_after_rewrite_is_provider_valid_with_times(run, home, go):
    own_append(run, *tool_exchange(1))
    go.say(SID, "user", "next tok9", sender="bob")
    messages = context(run)
    validate_openai(messages)  # today: sendAt keys, an assistant with no content nor calls
    assert [m.get("tool_calls", [{}])[0].get("id") for m in messages
            if m["role"] == "assistant" and m.get("tool_calls")] == ["call_1"]
    assert messages[-1]["content"].startswith("sendAt: ")
    assert messages[-1]["content"].split("\n")[0].endswith(", sender: bob")
    doctor_clean(run)


def test_a_tool_pair_the_archive_lacks_is_left_out(run, home, go):
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    path = home / "sessions" / SID / "history.json"
    path.parent.mkdir(parents=True)
    go.say(SID, "user", "first tok1")
    entries = orjson.loads(path.read_bytes())
    entries += [{"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "result tok2"}]
    path.write_bytes(orjson.dumps(entries))
    go.say(SID, "assistant", "done tok3")  # the rewrite drops tool_calls / tool_call_id
    with sqlite3.connect(home / ".store" / "history.db") as conn:  # ...and nobody archived it
        conn.execute("DELETE FROM messages WHERE content = 'result tok2'")
    messages = context(run)
    validate_openai(messages)
    assert [TOKEN.findall(m["content"]) for m in messages] == [["tok1"], ["tok3"]]


# ------------------------------------------------------------------ summary cursors

def test_summarize_honours_agenvoys_sendat_cursor(run, home, go):
    for n in range(4):
        go.append(SID, [{"role": "user" if n % 2 == 0 else "assistant",
                         "content": f"message tok{n}",
                         "sendAt": 1767261600_000000000 + n * 60_000_000_000}])
    folder = home / "sessions" / SID
    (folder / "summary.json").write_text('{"topic": "x"}')
    # Agenvoy's cursor: formatted from sendAt (local time) of the second message
    import time
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1767261600 + 60))
    (folder / "summary.meta.json").write_text(orjson.dumps({"last_message_time": stamp}).decode())
    res = run("summarize", SID, "--dry-run", "--json")
    assert res.exit_code == 0, res.stderr
    sent = orjson.dumps(res.json()).decode()
    assert "tok2" in sent and "tok3" in sent
    assert "tok0" not in sent and "tok1" not in sent


# ------------------------------------------------------------------ history.db both ways

def test_history_db_shared_both_ways(run, home):
    own_append(run, {"role": "user", "content": "ours tok1"})
    go = GoAgentV032(home)  # its schema script + ALTER TABLE on our database
    go.say(SID, "assistant", "theirs tok2", sender="bot")
    go.close()
    own_append(run, {"role": "user", "content": "ours tok3"})
    assert tokens(home) == ["tok1", "tok2", "tok3"]
    doctor_clean(run)


def test_our_code_accepts_a_database_agenvoy_created(run, home):
    go = GoAgentV032(home)
    go.conn.execute("INSERT INTO file_history (dir, name, action, changed_at) "
                    "VALUES ('/d', 'f', 'write', 1)")
    go.say("other", "user", "theirs tok1")
    go.close()
    own_append(run, {"role": "user", "content": "ours tok2"})
    doctor_clean(run)
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        assert conn.execute("SELECT count(*) FROM file_history").fetchone()[0] == 1
        cols = [r[1] for r in conn.execute("PRAGMA table_info(messages)")]
    assert cols.count("sender") == 1


# ------------------------------------------------------------------ reset, sender, bad input

def test_session_reset_all_removes_the_summary_as_reset_all_does(run, home, go):
    go.say(SID, "user", "hello tok1")
    folder = home / "sessions" / SID
    (folder / "summary.json").write_text('{"topic": "x"}')
    (folder / "summary.meta.json").write_text('{"last_message_time": "2026-01-01 00:00:00"}')
    res = run("session", "reset", SID, "--all", "--yes", "--json")
    assert res.exit_code == 0, res.stderr
    assert not (folder / "summary.json").exists() and not (folder / "summary.meta.json").exists()
    assert not res.json()["has_summary"]


def test_sender_goes_into_the_format_of_the_session(run, home, go):
    res = run("append", SID, "--role", "user", "--content", "hi tok1", "--sender", "alice",
              "--time", "2026-01-05 12:00:00")
    assert res.exit_code == 0, res.stderr
    entry = orjson.loads((home / "sessions" / SID / "history.json").read_bytes())[0]
    assert entry["content"] == "---\n當前時間: 2026-01-05 12:00:00\n傳送者: alice\n---\nhi tok1"
    go.say(SID, "assistant", "ok tok2")  # normalise: sender from 傳送者, block stripped
    own_append(run, {"role": "user", "content": "more tok3", "sender": "bob"})
    entries = orjson.loads((home / "sessions" / SID / "history.json").read_bytes())
    assert entries[0]["sender"] == "alice" and entries[-1]["sender"] == "bob"
    assert "sendAt" in entries[-1] and "當前時間" not in entries[-1]["content"]
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        senders = [r[0] for r in conn.execute(
            "SELECT sender FROM messages WHERE session_id = ? ORDER BY seq", (SID,))]
    assert senders == ["alice", "", "bob"]
    doctor_clean(run)
    assert context(run)[-1]["content"].startswith("sendAt: ")


@pytest.mark.parametrize("extra", [{"sendAt": -1}, {"sendAt": "soon"}, {"sendAt": 1.5},
                                   {"sendAt": True}, {"sender": "a\nb"}, {"sender": "x" * 257},
                                   {"sender": 7}])
def test_bad_send_at_or_sender_changes_nothing(run, home, extra):
    own_append(run, {"role": "user", "content": "first tok1"})
    before = (home / "sessions" / SID / "history.json").read_bytes()
    res = run("append", SID, "--messages", "-",
              input=orjson.dumps([{"role": "user", "content": "x", **extra}]))
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert (home / "sessions" / SID / "history.json").read_bytes() == before


def test_bad_sender_option_is_refused(run, home):
    res = run("append", SID, "--role", "user", "--content", "x", "--sender", "a\x07b")
    assert res.exit_code == 2 and not (home / "sessions").exists()


def test_new_sessions_follow_the_history_format_setting(run, home, monkeypatch):
    monkeypatch.setenv("AGENVOY_HISTORY_FORMAT", "sendat")
    own_append(run, {"role": "user", "content": "hi tok1"})
    entry = orjson.loads((home / "sessions" / SID / "history.json").read_bytes())[0]
    assert entry["content"] == "hi tok1" and isinstance(entry["sendAt"], int)
    monkeypatch.setenv("AGENVOY_HISTORY_FORMAT", "header")  # the file's format wins
    own_append(run, {"role": "assistant", "content": "ok tok2"})
    entry = orjson.loads((home / "sessions" / SID / "history.json").read_bytes())[-1]
    assert "sendAt" in entry
    monkeypatch.setenv("AGENVOY_HISTORY_FORMAT", "v9")
    res = run("append", SID, "--role", "user", "--content", "x")
    assert res.exit_code == 2


def test_a_file_mixing_both_generations_is_normal(run, home, go):
    own_append(run, {"role": "user", "content": "old tok1"},
               {"role": "assistant", "content": "old tok2"})
    path = home / "sessions" / SID / "history.json"
    entries = orjson.loads(path.read_bytes())
    entries.append({"role": "user", "content": "new tok3", "sendAt": 1767585700_000000000})
    path.write_bytes(orjson.dumps(entries))  # Agenvoy upgraded mid-session, one entry later
    own_append(run, {"role": "assistant", "content": "reply tok4"})
    assert tokens(home) == ["tok1", "tok2", "tok3", "tok4"]
    doctor_clean(run)
    validate_openai(context(run))


# ------------------------------------------------------------------ sender in the output

@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_search_hits_carry_their_sender(run, home, go, words, monkeypatch, mode):
    monkeypatch.setenv("AGENVOY_MAX_HISTORY_MESSAGES", "1")
    res = run("append", SID, "--role", "user", "--content", "zebra stripes tok1", "--sender",
              "alice", "--time", "2026-01-05 12:00:00")  # a header session: 傳送者 line
    assert res.exit_code == 0, res.stderr
    own_append(run, {"role": "assistant", "content": "zebra answer tok2"})
    go.say(SID, "user", "zebra again tok3", sender="bob")  # the sendAt format from now on
    own_append(run, *[{"role": "assistant", "content": f"filler {n} tok{n}"} for n in (4, 5)])
    res = run("search", SID, "zebra", "--mode", mode, "--limit", "8", "--json")
    assert res.exit_code == 0, res.stderr
    rows = {TOKEN.findall(r["content"])[0]: r for r in res.json()["results"]}
    assert rows["tok1"]["sender"] == "alice" and rows["tok3"]["sender"] == "bob"
    assert rows["tok2"]["sender"] is None  # the key is there, null: nobody named
    assert all("sender" in r for r in rows.values())


def test_forget_lists_the_sender_and_context_keeps_no_sender_key(run, home, go):
    go.say(SID, "user", "hello tok1", sender="alice")
    own_append(run, {"role": "assistant", "content": "hi tok2"})
    res = run("forget", SID, "--match", "tok1", "--dry-run", "--json")
    assert res.exit_code == 0, res.stderr
    assert [m["sender"] for m in res.json()["messages"]] == ["alice"]
    assert all(set(m) <= PROVIDER_KEYS for m in context(run))


@pytest.mark.parametrize("key", ["SendAt", "SENDAT", "sendat", "Sender", "SENDER"])
def test_case_variant_keys_are_refused(run, home, key):
    own_append(run, {"role": "user", "content": "first tok1"})
    path = home / "sessions" / SID / "history.json"
    before = path.read_bytes()
    value: Any = 1767585700_000000000 if key.lower() == "sendat" else "alice"
    res = run("append", SID, "--messages", "-",
              input=orjson.dumps([{"role": "user", "content": "x", key: value}]))
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert key in res.stderr
    assert path.read_bytes() == before


def test_search_text_names_the_sender_as_upstream(run, home, go):
    go.say(SID, "user", "zebra tok1", sender="alice")
    own_append(run, {"role": "assistant", "content": "zebra tok2"})
    text = run("search", SID, "zebra", "--mode", "keyword").stdout
    assert " · user · alice] zebra tok1" in text and " · assistant] zebra tok2" in text


# ------------------------------------------------------------------ content parts, header format

def test_content_parts_in_a_header_session_keep_their_time(run, home, go):
    """Agenvoy v0.32's normalise leaves part lists alone (record.go: string content only), so
    a part list keeps its header; one without text gets a text part first holding it (where
    Record.WithPrefix puts a prefix when a list has no text part)."""
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    own_append(run, {"role": "user", "content": [image]},
               {"role": "user", "content": [image, {"type": "text", "text": "what tok1"}]},
               when="2026-01-05 12:00:00")
    own_append(run, {"role": "assistant", "content": "a cat tok2"}, when="2026-01-05 12:01:00")
    go.say(SID, "user", "thanks tok3")  # the rewrite: sorted part keys, Go's escaping
    import time
    at = int(time.mktime((2026, 1, 5, 12, 0, 0, 0, 0, -1))) * 1_000_000_000
    rows = archive_rows(home)
    assert [r[5] for r in rows[:2]] == [at, at]  # today: the image-only one has no time
    entries = orjson.loads((home / "sessions" / SID / "history.json").read_bytes())
    assert entries[0]["content"][0] == {"text": "---\n當前時間: 2026-01-05 12:00:00\n---\n",
                                        "type": "text"}
    assert tokens(home) == ["tok1", "tok2", "tok3"]
    doctor_clean(run)
    messages = context(run)
    validate_openai(messages)
    assert messages[0]["content"][0]["text"].startswith("---\n當前時間: 2026-01-05 12:00:00")


# ------------------------------------------------------------------ more of Agenvoy v0.32

def test_turn_saves_skip_tool_messages_and_share_one_send_at(run, home, go):
    """saveHistory.go: no tool / tool-call messages in history.json, one sendAt per save."""
    for n in range(0, 40, 8):
        go.save_turn(SID, tool_exchange(n), sender="alice")
        own_append(run, *tool_exchange(n + 4))
    entries = orjson.loads((home / "sessions" / SID / "history.json").read_bytes())
    theirs = [e for e in entries if e.get("sender") == "alice"]
    assert len(theirs) == 5 and all(e["role"] == "user" for e in theirs)
    saved = [e for e in entries if e["content"] in ("question tok0", "answer tok3")]
    assert len(saved) == 2 and saved[0]["sendAt"] == saved[1]["sendAt"]
    expected = []
    for n in range(0, 40, 8):
        expected += [f"tok{n}", f"tok{n + 3}"]  # Agenvoy saved neither the call nor its result
        expected += [f"tok{n + 4}", f"tok{n + 6}", f"tok{n + 7}"]  # tok{n+5}: in the call
    assert tokens(home) == expected
    doctor_clean(run)
    messages = context(run)
    validate_openai(messages)


def test_agenvoys_size_trim_keeps_exactly_once(run, home, go, monkeypatch):
    """compact.go: over limits.max_history_bytes Agenvoy drops the oldest entries (to 80 %,
    cut after an assistant) and sets session_meta.start_at; the archive keeps them."""
    (home / "config.json").write_text('{"limits": {"max_history_bytes": 16384}}')
    monkeypatch.setenv("AGENVOY_MAX_HISTORY_BYTES", "10000000")  # only Agenvoy trims here
    expected = []
    for n in range(0, 120, 2):
        go.say(SID, "user", f"question tok{n} " + "x" * 300)
        own_append(run, {"role": "assistant", "content": f"answer tok{n + 1} " + "y" * 300})
        expected += [f"tok{n}", f"tok{n + 1}"]
    path = home / "sessions" / SID / "history.json"
    entries = orjson.loads(path.read_bytes())
    assert len(path.read_bytes()) <= 16384 + 400 and len(entries) < 240
    assert go.trims > 0
    assert tokens(home) == expected  # 0 lost, 0 duplicated
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        assert conn.execute("SELECT start_at FROM session_meta WHERE session_id = ?",
                            (SID,)).fetchone()[0] > 0
    doctor_clean(run)
    res = run("search", SID, "tok3", "--mode", "keyword", "--json")
    assert res.exit_code == 0 and len([r for r in res.json()["results"] if r["hit"]]) == 1
    validate_openai(context(run))


def test_agenvoys_reset_then_both_writers_again(run, home, go):
    """reset.go: history.json, history/, pending/, action.log and the rows go."""
    own_append(run, {"role": "user", "content": "before tok1"})
    go.say(SID, "assistant", "before tok2")
    folder = home / "sessions" / SID
    (folder / "history").mkdir()
    (folder / "history" / "2026-01-05-12-00-t1.json").write_text("{}")
    (folder / "pending").mkdir()
    (folder / "action.log").write_text("log\n")
    go.reset(SID)
    assert sorted(p.name for p in folder.iterdir()) == []
    own_append(run, {"role": "user", "content": "after tok3"})
    go.say(SID, "assistant", "after tok4")
    own_append(run, {"role": "user", "content": "after tok5"})
    assert tokens(home) == ["tok3", "tok4", "tok5"]
    doctor_clean(run)
    validate_openai(context(run))


# ------------------------------------------------------------------ the rewrite's cost (#25 speed)

def header_session_with_tools(run, exchanges: int) -> None:
    for n in range(0, exchanges * 4, 4):
        batch = tool_exchange(n)
        batch[0]["sender"] = "alice" if n % 8 else ""
        batch[0] = {k: v for k, v in batch[0].items() if v}
        own_append(run, *batch, when=f"2026-01-05 12:{n // 4 % 60:02d}:00")


def test_the_rewrite_is_recognised_at_one_identity_per_message(run, home, go, monkeypatch):
    import time as clock
    from types import SimpleNamespace

    from agenvoy_cli.conversation import alignment, big_sync, history_format, messages
    from agenvoy_cli.home import sqlite as home_sqlite

    header_session_with_tools(run, 30)
    before = archive_rows(home)
    go.say(SID, "user", "then tok999")  # normalises the whole file, then appends
    entries = orjson.loads((home / "sessions" / SID / "history.json").read_bytes())
    assert not any("tool_calls" in e or "當前時間" in (e["content"] or "") for e in entries)
    hashed, handed, stamps, looked, framed, walked = [0], [], [0], [], [0], [0]
    real_digest, real_apply, real_other = messages._blake2b, alignment.apply, \
        big_sync._first_other
    real_identity, real_walk = messages.message_identity, big_sync._walk
    read: list[str] = []

    def identity(message):  # an identity made by a call of its own, not in the batch's loop
        framed[0] += 1
        return real_identity(message)

    def walk(*args):
        walked[0] += 1
        return real_walk(*args)

    def configure(conn, busy_ms):  # every statement of every connection
        real_configure(conn, busy_ms)
        conn.set_trace_callback(read.append)

    def digest(*args, **kwargs):  # every identity computed, whichever function computes it
        hashed[0] += 1
        return real_digest(*args, **kwargs)

    def strftime(*args):
        stamps[0] += 1
        return clock.strftime(*args)

    def apply(conn, session_id, history, *rest):
        handed.append(len(history))
        return real_apply(conn, session_id, history, *rest)

    def first_other(conn, session_id, first, size, unknown, derived):
        looked.append(len(unknown))
        return real_other(conn, session_id, first, size, unknown, derived)

    monkeypatch.setattr(messages, "_blake2b", digest)
    monkeypatch.setattr(history_format, "time", SimpleNamespace(strftime=strftime,
                                                       localtime=clock.localtime))
    monkeypatch.setattr(alignment, "apply", apply)
    monkeypatch.setattr(big_sync, "_first_other", first_other)
    monkeypatch.setattr(messages, "message_identity", identity)
    monkeypatch.setattr(big_sync, "message_identity", identity, raising=False)  # (older code)
    monkeypatch.setattr(big_sync, "_walk", walk)
    real_configure = home_sqlite._configure
    monkeypatch.setattr(home_sqlite, "_configure", configure)
    own_append(run, {"role": "assistant", "content": "ours tok1000"})
    # before: the plain identity, then up to two header identities per message, and the
    # whole file after the first tool call aligned again (its fields dropped); then one
    # header identity per message, its local time formatted once an hour (<= 4 strftime)
    # and the tool calls' rows told by the start of their JSON. Now: the plain identity of
    # each message against the two its row has (record_hash), no time formatted, no row read
    assert hashed[0] <= len(entries) + 4, (hashed[0], len(entries))
    assert handed in ([], [1]), handed  # only Agenvoy's new message, if anything
    assert stamps[0] == 0, stamps
    assert not looked, looked
    # and the same work as for a file we wrote: every text's identity made in the batch's
    # one loop (messages.identities), a call of its own only for the tool calls' null
    # contents; the batch compared whole (no walk a message at a time) with one column of
    # the rows (their record_hash): no range of rows read with both identities
    blank = sum(not isinstance(e["content"], str) or not e["content"].strip() for e in entries)
    assert blank and framed[0] == blank, (framed[0], blank, len(entries))
    assert walked[0] == 0, walked
    ranges = [q for q in read if "FROM messages" in q and "seq >= " in q and "seq < " in q]
    assert ranges and all(q.count("hash") == 1 for q in ranges), ranges
    monkeypatch.undo()
    after = archive_rows(home)
    assert after[:len(before)] == before  # nothing rewritten or renumbered
    assert tokens(home)[-2:] == ["tok999", "tok1000"]
    doctor_clean(run)


def test_rows_older_than_their_record_hash_are_derived_once(run, home, go, monkeypatch):
    """Rows archived before migration 016 (record_hash NULL) are told from their JSON when a
    rewrite needs them, and keep what was derived: the next walk reads no row."""
    from agenvoy_cli.conversation import alignment, big_sync

    header_session_with_tools(run, 5)
    db = home / ".store" / "history.db"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE messages SET record_hash = NULL")
    before = archive_rows(home)
    go.say(SID, "user", "then tok999")
    looked, handed = [], []
    real_other, real_apply = big_sync._first_other, alignment.apply

    def first_other(conn, session_id, first, size, unknown, derived):
        looked.append(len(unknown))
        return real_other(conn, session_id, first, size, unknown, derived)

    def apply(conn, session_id, history, *rest):
        handed.append(len(history))
        return real_apply(conn, session_id, history, *rest)

    monkeypatch.setattr(big_sync, "_first_other", first_other)
    monkeypatch.setattr(alignment, "apply", apply)
    own_append(run, {"role": "assistant", "content": "ours tok1000"})
    assert looked == [20] and handed in ([], [1]), (looked, handed)  # every row had a header
    assert archive_rows(home)[:len(before)] == before
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM messages WHERE record_hash IS NULL "
                            "AND seq < 20").fetchone()[0] == 0
    go.say(SID, "user", "again tok1001")
    looked.clear()
    own_append(run, {"role": "assistant", "content": "ours tok1002"})
    assert not looked, looked
    assert tokens(home)[-4:] == ["tok999", "tok1000", "tok1001", "tok1002"]
    doctor_clean(run)


def count_walks(monkeypatch) -> list[int]:
    """How many messages each batch the walk decided a message at a time had."""
    from agenvoy_cli.conversation import big_sync

    walked: list[int] = []
    real = big_sync._walk

    def walk(conn, session_id, first, part, *rest):
        walked.append(len(part))
        return real(conn, session_id, first, part, *rest)

    monkeypatch.setattr(big_sync, "_walk", walk)
    return walked


def rewrite_in_place(home: Path) -> None:
    """Agenvoy's normalise of the whole file (as before an append), without the append."""
    path = home / "sessions" / SID / "history.json"
    path.write_bytes(go_marshal(normalize(orjson.loads(path.read_bytes()))))


def test_a_rewrite_over_rows_of_both_formats_is_still_one_column(run, home, go, monkeypatch):
    """Rows we archived with a header (record_hash: the identity without it) and rows already
    in the sendAt format (record_hash "": their own identity) in one batch: the record_hash
    column as it is does not match, the rewrite's identity of each row does (hash where
    record_hash is ""), and the batch is still taken whole, no message walked one by one."""
    header_session_with_tools(run, 5)
    go.say(SID, "user", "theirs tok900")  # the rewrite, and a row of Agenvoy's own
    own_append(run, {"role": "assistant", "content": "ours tok901"})  # in the sendAt format
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        told = [r for r, in conn.execute("SELECT record_hash FROM messages ORDER BY seq")]
    assert "" in told and any(told), told  # both kinds, and every one derived
    before = archive_rows(home)
    rewrite_in_place(home)
    walked = count_walks(monkeypatch)
    own_append(run, {"role": "assistant", "content": "ours tok902"})
    assert walked == [], walked
    monkeypatch.undo()
    assert archive_rows(home)[:len(before)] == before
    assert tokens(home)[-3:] == ["tok900", "tok901", "tok902"]
    doctor_clean(run)


def test_a_rewrite_read_in_small_batches_is_taken_a_batch_at_a_time(run, home, go, monkeypatch):
    """Batches of 7 (a file walked as a big one): each batch's first row, a header text or a
    tool call's null content, says the column, and every batch is taken whole."""
    from agenvoy_cli.conversation import history, history_view

    header_session_with_tools(run, 10)
    before = archive_rows(home)
    go.say(SID, "user", "then tok999")
    monkeypatch.setattr(history_view, "STREAM_BYTES", 0)
    monkeypatch.setattr(history_view, "INSERT_ROWS", 7)
    monkeypatch.setattr(history, "CHUNK", 512)
    walked = count_walks(monkeypatch)
    own_append(run, {"role": "assistant", "content": "ours tok1000"})
    assert walked == [], walked
    monkeypatch.undo()
    assert archive_rows(home)[:len(before)] == before
    assert tokens(home)[-2:] == ["tok999", "tok1000"]
    doctor_clean(run)


def test_a_rewritten_message_with_a_key_beyond_the_record_is_left_to_the_exact_rule(
        run, home, go, monkeypatch):
    """A message whose identity is its row's record_hash but that carries a key the rewrite
    never leaves (not is_record) is not taken by the batch's column: the walk decides it a
    message at a time, as the identity rule does (an edit), and nothing is lost or doubled."""
    header_session_with_tools(run, 3)
    go.say(SID, "user", "then tok999")
    path = home / "sessions" / SID / "history.json"
    entries = orjson.loads(path.read_bytes())
    entries[3]["name"] = "helper"  # "answer tok3", its header gone, one key more
    path.write_bytes(orjson.dumps(entries))
    walked = count_walks(monkeypatch)
    own_append(run, {"role": "assistant", "content": "ours tok1000"})
    assert walked, walked
    monkeypatch.undo()
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        row = conn.execute("SELECT message FROM messages WHERE seq = 3").fetchone()[0]
    assert orjson.loads(row).get("name") == "helper"  # the row now holds what the file holds
    assert tokens(home) == ["tok0", "tok2", "tok3", "tok4", "tok6", "tok7", "tok8", "tok10",
                            "tok11", "tok999", "tok1000"]
    doctor_clean(run)


@pytest.mark.parametrize("extra", [{}, {"sendAt": 5}, {"sender": "a", "sendAt": 5},
                                   {"name": "x"}, {"sendAt": 5, "tool_call_id": "c"}])
@pytest.mark.parametrize("base", [
    {"role": "user", "content": "words"}, {"role": "user", "content": "中文 \udc80 half"},
    {"role": "assistant", "content": None}, {"role": "assistant", "content": ""},
    {"role": "user", "content": " \n\u3000"}, {"role": "user", "content": "  padded  "},
    {"role": "tool", "content": [{"type": "text", "text": "x"}]}, {"role": 5, "content": "x"},
    {"role": None, "content": "x"}, {"content": "no role"}, {"role": "user"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
])
def test_identities_are_each_messages_identity_and_count_what_is_not_a_record(base, extra):
    """messages.identities (the walk's one loop over a batch): message_identity of each
    message, and how many are not records (history_format.is_record), for every kind of message."""
    from agenvoy_cli.conversation.history_format import is_record
    from agenvoy_cli.conversation.messages import identities, message_identity

    message = {**base, **extra}
    batch = [message, {"role": "user", "content": "x", "sendAt": 1}, dict(message)]
    keys, odd = identities(batch)
    assert keys == [message_identity(m) for m in batch]
    assert odd == sum(not is_record(m) for m in batch)


@pytest.mark.parametrize("zone", ["Asia/Taipei", "Europe/London", "America/St_Johns",
                                  "Australia/Lord_Howe", "Asia/Kathmandu", "UTC"])
def test_header_identity_formats_the_local_time_as_strftime(zone, monkeypatch):
    """HeaderIdentity formats an hour's times by arithmetic: the same text as time.strftime every
    second, across DST changes, half-hour changes and odd offsets."""
    import random
    import time as clock

    from agenvoy_cli.conversation.history_format import HeaderIdentity
    from agenvoy_cli.conversation.messages import TIME_FORMAT

    monkeypatch.setenv("TZ", zone)
    clock.tzset()
    try:
        rng = random.Random(zone)
        seconds: list[int] = []
        sec = 1_600_000_000
        while len(seconds) < 20_000:  # messages seconds to hours apart, two per hour or more
            sec += rng.choice((1, 59, 61, 600, 1799, 3599, 3600, 3601, 86400 * 7))
            seconds.append(sec)
        for start in (1_711_846_800, 1_729_990_800, 1_680_372_000, 1_696_089_600):
            seconds += range(start - 7200, start + 7200, 7)  # every DST change of 2023/24
        header_identity = HeaderIdentity()
        for sec in seconds:
            assert header_identity.stamp(sec).decode() == clock.strftime(TIME_FORMAT,
                                                                  clock.localtime(sec)), sec
    finally:
        monkeypatch.undo()
        clock.tzset()


@pytest.mark.parametrize("who", ["", "alice", "名字 \ud800", "a\nb"])
@pytest.mark.parametrize("content", ["plain words", "中文的內容 and ascii", "lone \udc80 half",
                                     "  padded  "])
def test_header_identity_key_is_the_identity_of_the_header_we_wrote(who, content):
    """What the rewrite leaves of a header message we wrote is matched by exactly that
    message's identity (history_format.in_format), and by nothing once a word or the time
    changes."""
    from datetime import datetime

    from agenvoy_cli.conversation.history_format import HeaderIdentity, in_format
    from agenvoy_cli.conversation.messages import message_identity

    at = 1_767_600_000 * 1_000_000_000
    record = {"role": "user", "content": content, "sendAt": at}
    if who:
        record["sender"] = who
    ours = message_identity(in_format(record, datetime(2000, 1, 1), "header", who))
    header_identity = HeaderIdentity()
    for _ in range(3):  # the first message of an hour, the second, then from the table
        assert header_identity.key(record, {ours}) == ours
        assert header_identity.key(record, {ours}, True) == ours
    assert HeaderIdentity().key(record, {ours}) == ours  # a fresh one: strftime's own text
    assert header_identity.key({**record, "content": content + "!"}, {ours}) is None
    assert header_identity.key({**record, "sendAt": at + 1_000_000_000}, {ours}) is None
    assert header_identity.key({**record, "name": "x"}, {ours}, True) is None  # not a record


def test_after_the_rewrite_a_real_edit_past_a_tool_call_is_still_an_edit(run, home, go):
    header_session_with_tools(run, 3)
    go.say(SID, "user", "then tok999")
    path = home / "sessions" / SID / "history.json"
    entries = orjson.loads(path.read_bytes())
    assert entries[5] == {"role": "assistant", "content": None}  # exchange 2's tool call
    entries[7]["content"] = "answer tok77"  # was tok7
    entries[9]["content"] = "now words tok99"  # exchange 3's tool call, given words
    path.write_bytes(orjson.dumps(entries))
    own_append(run, {"role": "assistant", "content": "ours tok1000"})
    # (tok1, tok5, tok9: in tool calls' arguments, not in content)
    assert tokens(home) == ["tok0", "tok2", "tok3", "tok4", "tok6", "tok77", "tok8", "tok99",
                            "tok10", "tok11", "tok999", "tok1000"]
    rows = archive_rows(home)
    assert [r[1] for r in rows] == list(range(len(rows)))  # edited in place, none added
    doctor_clean(run)


@pytest.mark.parametrize("stored", [
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
    {"role": "assistant", "content": None},
    {"role": "assistant", "content": ""},
    {"role": "tool", "content": "---\n當前時間: 2026-01-05 12:00:00\n---\nbody",
     "tool_call_id": "c"},
    {"role": "user", "content": "---\n當前時間: 2026-01-05 12:00:00\n傳送者: alice\n---\nhi"},
    {"role": "user", "content": " \n---\n當前時間: 2026-01-05 12:00:00\n工作目錄: /x\n---\nhi"},
    {"role": "user", "content": "當前時間: 2026-01-05 12:00:00\nhi"},
    {"role": "user", "content": "sendAt: 2026-01-05 12:00:00\nhi"},
    {"role": "user", "content": "senders are many"},
    {"role": "user", "content": "--- a rule, no header"},
    {"role": "user", "content": "plain words", "reasoning_content": "why"},
    {"role": "user", "content": "   "},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
    {"role": "user", "content": [{"type": "text", "text": "---\n當前時間: 2026-01-05 "
                                                          "12:00:00\n---\n"},
                                 {"type": "image_url", "image_url": {"url": "x"}}]},
    {"role": "user", "content": [{"type": "text", "text": "words"}]},
])
def test_a_rows_record_hash_is_what_the_rewrite_leaves_of_it(stored):
    """record_hash: record_key (the identity of the rewrite's record of the message), ""
    when that is the row's own identity; the shortcut for texts with nothing to strip gives
    what the whole computation gives. The rewrite's record has that identity."""
    from agenvoy_cli.conversation.history_format import record_hash, record_key
    from agenvoy_cli.conversation.messages import message_identity
    from tests.agenvoy_sim_v032 import normalize

    ident = message_identity(stored)
    full = record_key(stored)
    assert record_hash(stored, ident) == ("" if full == ident else full)
    rewritten = normalize([dict(stored)])[0]
    assert message_identity(rewritten) in (ident, full)
