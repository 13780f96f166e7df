"""The fault sweep: every write path of a home, once per injection point (home/faults.py).

A path is a command run as the real program (a subprocess: its exit code, its stderr) on a
copy of a base home made once. Its reference run, without faults, counts the injection
points it passes (the injector's log) and gives the state the command should leave. Then,
for each point N and each failure (a full disk, a failing disk, kill -9), a fresh copy of the
base runs the command with the Nth call failing, and `check_case` verifies:

- the exit code and message say what happened: a full disk is exit 1 with "no space left on
  <the home's path>", a failing disk exit 1 naming the I/O error, kill -9 the signal; never
  exit 2, never "internal error", never an input file blamed;
- all of the change or none of it (`atomic` paths: after a failure the home is as before),
  or a state the next run completes (`resumable` paths: running the command again gives the
  reference state);
- nothing acknowledged before is lost (every archived message the reference keeps);
- `doctor --repair` exits 0, `doctor` is then clean, and no leftovers remain (*.tmp,
  *.salvage, *.damaged-*).

The state compared is what a user relies on, read as other programs read it: the messages
of every history.json, the archive's rows, the error records, the RAG databases' files and
chunks, summaries' cursors, every vector id (Chroma's own SQLite), import cursors. Caches
(session_stats, folder marks) and times of records are left out.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import ROOT

EMBEDDER = "python:tests.words_embedder:current"  # importable from ROOT, as in CI
TIME = "2024-05-01 10:00:00"
FAILURES = ("enospc", "eio", "kill", "interrupt", "timelimit")
INTERRUPTIONS = ("interrupt", "timelimit")  # in-process: an exception, what runs on the way out
INTERRUPTED = 130  # the CLI's exit code after Ctrl-C
LEFTOVER_SUFFIXES = (".tmp", ".salvage")
LEFTOVER_MARKS = (".damaged-", ".salvage-")
DATA = ROOT / "tests" / "data" / "transfer"


def run(home: Path, *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None,
        timeout: float = 180) -> subprocess.CompletedProcess:
    """`agenvoy ARGS` on `home`, as a user runs it (cwd: the repository, for the embedder)."""
    return subprocess.run([sys.executable, "-m", "agenvoy_cli", *args], input=stdin,
                          capture_output=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, "AGENVOY_EMBEDDER": EMBEDDER, **(env or {}),
                               "AGENVOY_HOME": str(home)})


def ok(home: Path, *args: str, env: dict[str, str] | None = None,
       stdin: bytes | None = None) -> subprocess.CompletedProcess:
    res = run(home, *args, env=env, stdin=stdin)
    assert res.returncode == 0, f"agenvoy {' '.join(args)}: {res.stderr.decode()}"
    return res


def messages(*contents: str) -> bytes:
    return orjson.dumps([{"role": "user" if i % 2 == 0 else "assistant", "content": c}
                         for i, c in enumerate(contents)])


TOPICS = ("the database migration runs on Saturday", "the cat hides under the bed",
          "renew the staging certificate", "the build broke on the linker step",
          "lunch is at noon on Friday", "the deploy key leaked in the log")


def conversation(home: Path, sid: str = "s", n: int = 6) -> None:
    ok(home, "append", sid, "--messages", "-", "--time", TIME,
       stdin=messages(*(f"{TOPICS[i % len(TOPICS)]} ({sid} {i})" for i in range(n))))


def with_vectors(home: Path, n: int = 6) -> None:
    conversation(home, n=n)
    ok(home, "backfill", "--all", "--vectors")
    ok(home, "search", "s", "database migration", "--mode", "semantic")


# -- the state a user relies on ---------------------------------------------------------------

def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    finally:
        conn.close()


def _vectors(chroma: Path) -> dict[str, Any]:
    """Collection name -> its ids (messages: with each entry's hash; error records by count,
    their ids carry a time), read from Chroma's own SQLite."""
    rows = _rows(chroma / "chroma.sqlite3",
                 "SELECT c.name, e.embedding_id, (SELECT string_value FROM embedding_metadata m "
                 "WHERE m.id = e.id AND m.key = 'hash') FROM embeddings e JOIN segments s ON "
                 "s.id = e.segment_id JOIN collections c ON c.id = s.collection")
    out: dict[str, Any] = {}
    for name, vid, digest in rows:
        key = name.split("-")[0] if name.startswith("agenvoy_errors") else name
        out.setdefault(key, []).append(f"{vid}={digest}")
    return {k: sorted(v) if not k.startswith("agenvoy_errors") else len(v)
            for k, v in sorted(out.items())}


_NOW = re.compile(r"當前時間: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


def _timeless(value: Any) -> Any:
    """Messages without a time of their own get the time of the run that wrote them (an
    OpenAI import): that one time header is not compared."""
    if isinstance(value, str):
        return _NOW.sub("當前時間: (the run's)", value)
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_timeless(v) for v in value)
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items()}
    return value


def state(home: Path) -> dict[str, Any]:
    """What a user relies on in this home (see the module's docstring)."""
    return _timeless(_state(home))


def _state(home: Path) -> dict[str, Any]:
    db = home / ".store" / "history.db"
    sessions: dict[str, Any] = {}
    folder = home / "sessions"
    for sdir in sorted(folder.iterdir()) if folder.is_dir() else []:
        if not any(sdir.iterdir()):
            continue  # the folder of a first append killed before its file: no session
        doc: dict[str, Any] = {}
        for name in ("history.json", "summary.meta.json"):
            path = sdir / name
            if path.exists():
                try:
                    doc[name] = orjson.loads(path.read_bytes())
                except orjson.JSONDecodeError:
                    doc[name] = "<not JSON>"
        summary = sdir / "summary.json"
        if summary.exists():  # the fake LLM numbers its calls: the topic is what is compared
            try:
                doc["summary"] = (orjson.loads(summary.read_bytes()) or {}).get(
                    "current_discussion")
            except orjson.JSONDecodeError:
                doc["summary"] = "<not JSON>"
        sessions[sdir.name] = doc
    return {
        "sessions": sessions,
        "archive": _rows(db, "SELECT session_id, seq, role, content FROM messages "
                             "ORDER BY session_id, seq, content"),
        "trim": _rows(db, "SELECT session_id, start_seq FROM session_meta ORDER BY 1"),
        # rows marked as left history.json: only a user's change may do that (#49)
        "gone": _rows(db, "SELECT session_id, seq FROM messages WHERE gone != 0 ORDER BY 1, 2"),
        # Agenvoy 1.0's trim points and notes (a v0.32 home has neither table)
        "trim_v10": _rows(db, "SELECT session_id, start_at, start_seq FROM message_meta "
                              "ORDER BY 1"),
        "knowledge": _rows(db, "SELECT name, content FROM knowledge ORDER BY 1"),
        # (whether a record has its vector is derived, as message vectors are: it may lag)
        "errors": _rows(db, "SELECT tool_name, keywords, symptom, action, outcome "
                            "FROM error_records ORDER BY 1, 3, 4"),
        "rag": _rows(db, "SELECT d.name, f.path, f.state, (SELECT count(*) FROM rag_chunks c "
                         "WHERE c.file_id = f.id) FROM rag_dbs d LEFT JOIN rag_files f ON "
                         "f.db_id = d.id ORDER BY 1, 2"),
        "imports": _rows(db, "SELECT key, records, seq_end FROM import_sources ORDER BY 1"),
        "notes": _rows(db, "SELECT name, content FROM notes ORDER BY 1"),
        "vectors": _vectors(home / ".store" / "chroma"),
        "vectors_ahead": _ahead(home),
    }


def _ahead(home: Path) -> list[str]:
    """Message vectors whose message the archive does not hold (at their place, with their
    content hash): the index must never be ahead of SQLite."""
    archived = {f"{sid}:{seq}={digest}" for sid, seq, digest in _rows(
        home / ".store" / "history.db", "SELECT session_id, seq, hash FROM messages")}
    vectors = _vectors(home / ".store" / "chroma")
    return sorted(v for name, entries in vectors.items() if name.startswith("agenvoy_messages")
                  for v in entries if v not in archived)


def core(doc: dict[str, Any]) -> dict[str, Any]:
    """The state without the vectors themselves: derived data may lag behind (a search or a
    backfill makes them again), never run ahead (`vectors_ahead` stays in)."""
    return {k: v for k, v in doc.items() if k != "vectors"}


def vectors_within(doc: dict[str, Any], *allowed: dict[str, Any]) -> list[str]:
    """Message vectors that are in none of the allowed states."""
    ok = {v for a in allowed for name, entries in a["vectors"].items()
          if name.startswith("agenvoy_messages") for v in entries}
    return sorted(v for name, entries in doc["vectors"].items()
                  if name.startswith("agenvoy_messages") for v in entries if v not in ok)


def acknowledged(home: Path) -> set[tuple[Any, ...]]:
    return set(_rows(home / ".store" / "history.db",
                     "SELECT session_id, seq, role, content FROM messages"))


def leftovers(home: Path) -> list[str]:
    """Files a write or a repair left behind (temp files, salvage copies, things moved
    aside). Lock files and SQLite's own -wal/-shm are the home's."""
    found = []
    for path in home.rglob("*"):
        name = path.name
        if name.endswith(LEFTOVER_SUFFIXES) or any(m in name for m in LEFTOVER_MARKS):
            found.append(str(path.relative_to(home)))
    return sorted(found)


# -- the paths --------------------------------------------------------------------------------

@dataclass(frozen=True)
class WritePath:
    """One write path: `argv` run on a copy of the home `prepare` made."""

    name: str
    family: str  # for the tmpfs cross-check and the docs' table
    prepare: Callable[[Path, Path], None]  # (home, a folder for inputs) -> the base home
    argv: Callable[[Path], list[str]]  # (the inputs folder) -> the command's arguments
    atomic: bool  # all or nothing (else resumable: running it again completes it)
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes | None = None
    mcp: str | None = None  # a tool of `agenvoy mcp` to call instead of the CLI
    # what completes a change whose own part is done (every message the reference archived
    # is archived) but whose tidying is not: an append's compaction (`compact`)
    finish: Callable[[Path], list[str]] | None = None
    event: Callable[[Path], bytes] | None = None  # stdin made from the inputs folder (a hook)

    @property
    def hook(self) -> bool:
        # not from argv: a path's arguments may read inputs its prepare has not written yet
        return self.event is not None

    def takes(self, failure: str) -> bool:
        """The hook's time limit is the hook's; an MCP server handles its own signals."""
        if failure == "timelimit":
            return self.hook
        return failure != "interrupt" or self.mcp is None


def _nothing(home: Path, inputs: Path) -> None:
    pass


def _outside_writer(home: Path, inputs: Path) -> None:
    """Messages another program (Agenvoy) appended to history.json: not archived yet."""
    conversation(home)
    path = home / "sessions" / "s" / "history.json"
    hist = orjson.loads(path.read_bytes())
    hist += [{"role": "user" if i % 2 == 0 else "assistant", "content": f"outside {i}"}
             for i in range(4)]
    path.write_bytes(orjson.dumps(hist))


def _errors(home: Path, inputs: Path) -> None:
    for tool, symptom in (("make", "linker error"), ("pytest", "fixture not found")):
        ok(home, "errors", "record", "--tool", tool, "--symptom", symptom, "--action",
           "fixed it", "--outcome", "resolved", "-k", tool)
    ok(home, "errors", "record", "--tool", "pip", "--symptom", "resolver loop", "--action",
       "pinned", "--outcome", "resolved", "-k", "pip")
    db = home / ".store" / "history.db"
    with sqlite3.connect(db) as conn:  # an old record, expired: what prune removes
        conn.execute("UPDATE error_records SET expires_at = 1 WHERE tool_name = 'pip'")
    conn.close()
    (inputs / "error-id").parent.mkdir(parents=True, exist_ok=True)
    (inputs / "error-id").write_text(str(_rows(db, "SELECT id FROM error_records WHERE "
                                                   "tool_name = 'make'")[0][0]))


def _notes(home: Path, inputs: Path) -> None:
    """A conversation and two knowledge notes (with a legacy folder already taken in)."""
    conversation(home)
    ok(home, "notes", "add", "deploy", "--content", "Deploys go out on Tuesdays after the "
       "staging check.")
    ok(home, "notes", "add", "oncall", "--content", "The on-call rota is in the wiki.")


def _v10_notes(home: Path, inputs: Path) -> None:
    """A home Agenvoy 1.0 shares: its messages, a note each side saved, then Agenvoy's
    edit and delete that the next notes command follows (notes/store.follow_knowledge)."""
    from tests.agenvoy_sim_v10 import GoAgentV10

    go = GoAgentV10(home)
    go.say("s", "user", "hello from Agenvoy 1.0")
    ok(home, "notes", "add", "oncall", "--content", "The on-call rota is in the wiki.")
    go.save_note("deploy", "Deploys go out on Tuesdays.")
    ok(home, "notes", "list")
    go.save_note("deploy", "Deploys go out on Fridays.")
    go.save_note("agenvoy", "Saved by Agenvoy's web UI.")
    go.close()


def _v10_notes_followed(home: Path, inputs: Path) -> None:
    """_v10_notes with Agenvoy's changes already followed: a command's own write alone."""
    _v10_notes(home, inputs)
    ok(home, "notes", "list")


def _v10_conversation(home: Path, inputs: Path) -> None:
    """A 1.0 home whose session is long enough to compact (trim point in message_meta)."""
    from tests.agenvoy_sim_v10 import GoAgentV10

    go = GoAgentV10(home)
    go.say("s", "user", "hello from Agenvoy 1.0")
    go.close()
    with_vectors(home, 20)


def _v10_tasks(home: Path, inputs: Path) -> None:
    """A 1.0 home with three finished tasks (action_history, Agenvoy's) and no task vector
    yet: a semantic `session tasks` search writes their vectors first (its catch-up)."""
    from tests.agenvoy_sim_v10 import GoAgentV10

    go = GoAgentV10(home)
    go.say("s", "user", "hello from Agenvoy 1.0")
    go.finish_task("s", "a1", "Rotate the Redis password", reply="Rotated; clients back.")
    go.finish_task("s", "a2", "Renew the TLS certificates", reply="Renewed with certbot.")
    go.finish_task("s", "a3", "Bake sourdough bread", reply="A 75% hydration loaf.")
    go.close()
    ok(home, "session", "tasks", "s")  # our tables beside Agenvoy's


def _docs(inputs: Path) -> Path:
    docs = inputs / "docs"
    if not docs.exists():
        docs.mkdir(parents=True)
        for i, topic in enumerate(TOPICS[:4]):
            (docs / f"note{i}.md").write_text(f"# Note {i}\n\n{topic}.\n\n" +
                                              "More words about it. " * 30)
    return docs


def _rag_created(home: Path, inputs: Path) -> None:
    _docs(inputs)
    ok(home, "rag", "create", "docs")


def _rag_indexed(home: Path, inputs: Path) -> None:
    docs = _docs(inputs)
    ok(home, "rag", "create", "docs", "--path", str(docs))


def _rag_changed(home: Path, inputs: Path) -> None:
    """Indexed, then a file edited, one added, one deleted: what sync picks up."""
    changed = inputs / "changing"
    if not changed.exists():
        changed.mkdir(parents=True)
        for i in range(3):
            (changed / f"doc{i}.md").write_text(f"# Doc {i}\n\n{TOPICS[i]}.\n")
    ok(home, "rag", "create", "docs", "--path", str(changed))
    (changed / "doc0.md").write_text("# Doc 0\n\nedited: the release is on Monday.\n")
    (changed / "doc3.md").write_text("# Doc 3\n\nadded later.\n")
    (changed / "doc2.md").unlink()


def _export(inputs: Path) -> Path:
    return inputs / "export.jsonl"


def _exported(home: Path, inputs: Path) -> None:
    """An export of a session from another home (the agenvoy format's input)."""
    other = inputs / "other-home"
    conversation(other, "moved")
    ok(other, "export", "moved", "--output", str(_export(inputs)))
    conversation(home)


def _damaged(home: Path, inputs: Path) -> None:
    """What doctor --repair mends: messages another program added (not archived), a temp
    file of a write that died, vectors that describe other messages."""
    with_vectors(home)
    _outside_writer_only(home)
    (home / "sessions" / "s" / ".history.json.99999.dead.tmp").write_bytes(b"[]")


def _outside_writer_only(home: Path) -> None:
    path = home / "sessions" / "s" / "history.json"
    hist = orjson.loads(path.read_bytes())
    hist += [{"role": "user", "content": "outside 0"}, {"role": "assistant",
                                                          "content": "outside 1"}]
    path.write_bytes(orjson.dumps(hist))


CLAUDE_TURN = DATA / "claude-turn" / "-home-ada-src-shop" / \
    "5b0d8e21-3c4f-4a7e-9d12-8f6a2b7c1e90.jsonl"


def _growing(inputs: Path) -> Path:
    return inputs / "growing" / "-home-ada-src-shop" / CLAUDE_TURN.name


def _transcript_begun(home: Path, inputs: Path) -> None:
    """A Claude Code session imported while its transcript was half-way, then the rest of
    the turn written: what the next Stop hook imports (an append to a session)."""
    conversation(home)
    path = _growing(inputs)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = CLAUDE_TURN.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:4]))
    ok(home, "import", "claude-code", str(path), "--now")
    path.write_bytes(b"".join(lines))


def _stop_event(inputs: Path) -> bytes:
    return orjson.dumps({"hook_event_name": "Stop", "session_id": CLAUDE_TURN.stem,
                         "transcript_path": str(_growing(inputs)), "cwd": "/home/ada/src/shop"})


def paths(llm_url: str) -> list[WritePath]:
    """Every write path of the home."""
    llm = {"AGENVOY_LLM_BASE_URL": llm_url, "AGENVOY_LLM_MODEL": "test-model",
           "AGENVOY_LLM_API_KEY": "sk-test-0123456789", "NO_PROXY": "127.0.0.1",
           "no_proxy": "127.0.0.1"}
    one = messages("a new question about the deploy")
    out = [
        WritePath("append", "conversation", lambda h, i: conversation(h),
                  lambda i: ["append", "s", "--messages", "-", "--time", TIME], True,
                  stdin=one),
        WritePath("append (new session)", "conversation", lambda h, i: conversation(h),
                  lambda i: ["append", "t", "--messages", "-", "--time", TIME], True,
                  stdin=one),
        WritePath("append + compaction", "conversation", lambda h, i: with_vectors(h, 20),
                  lambda i: ["append", "s", "--messages", "-", "--time", TIME], True,
                  env={"AGENVOY_MAX_HISTORY_BYTES": "2000"}, stdin=one,
                  finish=lambda i: ["compact", "s"]),
        WritePath("mcp append_messages", "conversation", lambda h, i: conversation(h),
                  lambda i: [], True, mcp="append_messages"),
        WritePath("forget", "conversation", lambda h, i: with_vectors(h),
                  lambda i: ["forget", "s", "2", "5", "-y"], True),
        WritePath("compact", "conversation", lambda h, i: with_vectors(h, 20),
                  lambda i: ["compact", "s", "--max-bytes", "1024"], False),
        WritePath("session reset", "conversation", lambda h, i: with_vectors(h),
                  lambda i: ["session", "reset", "s", "-y"], False, env=llm),
        # all or nothing (#49): a failure before the rows' commit leaves everything as it
        # was, history.json included (the refreshed summary of a reset with an LLM is a
        # write of its own, before)
        WritePath("session reset --no-summary", "conversation", lambda h, i: with_vectors(h),
                  lambda i: ["session", "reset", "s", "-y", "--no-summary"], True),
        WritePath("session remove", "conversation", lambda h, i: with_vectors(h),
                  lambda i: ["session", "remove", "s", "-y"], True),
        WritePath("summarize", "summary", lambda h, i: conversation(h, n=20),
                  lambda i: ["summarize", "s"], False, env=llm),
        WritePath("backfill", "conversation", _outside_writer,
                  lambda i: ["backfill", "--all"], False),
        WritePath("backfill --vectors", "vectors", lambda h, i: _outside_writer(h, i),
                  lambda i: ["backfill", "--all", "--vectors"], False),
        WritePath("errors record", "errors", _nothing,
                  lambda i: ["errors", "record", "--tool", "cargo", "--symptom",
                             "borrow checker", "--action", "cloned", "--outcome",
                             "resolved", "-k", "rust"], True),
        WritePath("errors forget", "errors", _errors,
                  lambda i: ["errors", "forget", (i / "error-id").read_text(), "-y"], True),
        WritePath("errors prune", "errors", _errors, lambda i: ["errors", "prune"], True),
        WritePath("rag add", "rag", _rag_created,
                  lambda i: ["rag", "add", "docs", str(_docs(i))], False),
        WritePath("rag sync", "rag", _rag_changed, lambda i: ["rag", "sync", "docs"], False),
        WritePath("rag remove", "rag", _rag_indexed, lambda i: ["rag", "remove", "docs", "-y"],
                  False),
        WritePath("doctor --repair", "doctor", _damaged, lambda i: ["doctor", "--repair"],
                  False),
        WritePath("notes add", "notes", _notes,
                  lambda i: ["notes", "add", "release", "--content",
                             "Release notes are drafted on Mondays."], True),
        WritePath("notes add --replace", "notes", _notes,
                  lambda i: ["notes", "add", "deploy", "--replace", "--content",
                             "Deploys go out on Thursdays now."], True),
        WritePath("notes remove", "notes", _notes, lambda i: ["notes", "remove", "oncall", "-y"],
                  True),
        WritePath("hook claude-code", "import", _transcript_begun,
                  lambda i: ["hook", "claude-code"], False, event=_stop_event),
        WritePath("notes list (1.0: follow knowledge)", "notes", _v10_notes,
                  lambda i: ["notes", "list"], True),
        WritePath("notes add (1.0)", "notes", _v10_notes_followed,
                  lambda i: ["notes", "add", "release", "--content", "Drafted on Mondays."],
                  True),
        WritePath("notes remove (1.0)", "notes", _v10_notes_followed,
                  lambda i: ["notes", "remove", "oncall", "-y"], True),
        WritePath("compact (1.0)", "conversation", _v10_conversation,
                  lambda i: ["compact", "s", "--max-bytes", "1024"], False),
        WritePath("session tasks --mode semantic (1.0: task vectors)", "vectors", _v10_tasks,
                  lambda i: ["session", "tasks", "s", "redis password", "--mode", "semantic"],
                  False),
    ]
    for fmt, source in (("claude-code", DATA / "claude"), ("codex", DATA / "codex"),
                        ("chatgpt", DATA / "chatgpt" / "conversations.json"),
                        ("openai", DATA / "openai.jsonl")):
        out.append(WritePath(f"import {fmt}", "import", lambda h, i: conversation(h),
                             lambda i, fmt=fmt, source=source: ["import", fmt, str(source)],
                             False))
    out.append(WritePath("import agenvoy", "import", _exported,
                         lambda i: ["import", "agenvoy", str(_export(i))], False))
    return out


# -- one case ---------------------------------------------------------------------------------

@dataclass
class Outcome:
    code: int | None
    stderr: str
    fired: bool


def execute(path: WritePath, home: Path, inputs: Path, faults: str | None,
            argv: list[str] | None = None) -> Outcome:
    """Run the path once on `home` (or `argv` in its environment), armed with `faults`
    (AGENVOY_FAULTS) or not."""
    env = {**path.env, "AGENVOY_EMBEDDER": EMBEDDER, "AGENVOY_LOCK_TIMEOUT": "20"}
    if faults:
        env["AGENVOY_FAULTS"] = faults
    if path.mcp and argv is None:
        return _execute_mcp(path, home, env)
    stdin = path.event(inputs) if path.event is not None else path.stdin
    res = run(home, *(argv or path.argv(inputs)), env=env, stdin=None if argv else stdin)
    said = res.stderr.decode("utf-8", "replace")
    log = home / ".store" / "hook.log"
    if path.hook and log.exists():  # a hook exits 0 whatever happens: its log says why
        said += log.read_text("utf-8", "replace")
        log.unlink()
    return Outcome(res.returncode, said, False)


def _execute_mcp(path: WritePath, home: Path, env: dict[str, str]) -> Outcome:
    from tests.mcp_client import RawServer

    server = RawServer(env={**env, "AGENVOY_HOME": str(home)})
    text = ""
    try:
        server.initialize()
        said = f"---\n當前時間: {TIME}\n---\na new question about the deploy"  # its own time
        reply = server.call(path.mcp or "", {"session_id": "s", "messages": [
            {"role": "user", "content": said}]})
        result = reply.get("result") or {}
        text = " ".join(c.get("text", "") for c in result.get("content", []))
        code = 1 if result.get("isError") or "error" in reply else 0
    except (EOFError, BrokenPipeError, ValueError):
        code = None
    finally:
        assert server.proc.stdin is not None
        try:
            server.proc.stdin.close()
        except BrokenPipeError:
            pass
        rc = server.proc.wait(60)
        stderr = server.proc.stderr.read().decode("utf-8", "replace") if server.proc.stderr \
            else ""
    if rc == -signal.SIGKILL:
        code = rc
    return Outcome(code, f"{text}\n{stderr}", False)


def fired(log: Path) -> bool:
    return log.exists() and any(line.startswith("fired ") for line in
                                log.read_text().splitlines())


def points(log: Path) -> list[str]:
    """The injection points a run passed, in order ("write /path", "commit COMMIT", ...)."""
    if not log.exists():
        return []
    return [line.split(" ", 1)[1] for line in log.read_text().splitlines()
            if not line.startswith("fired ")]


def copy_home(base: Path, dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    if base.exists():
        shutil.copytree(base, dest, symlinks=True)
    else:
        dest.mkdir(parents=True)
    return dest


@dataclass
class Reference:
    """A path's base home, its reference run's state and its injection points."""

    path: WritePath
    base: Path
    inputs: Path
    before: dict[str, Any]
    after: dict[str, Any]
    points: list[str]
    code: int | None


def slug(path: WritePath) -> str:
    """The path's name as a folder name (its base home is workdir/base-SLUG)."""
    return "".join(c if c.isalnum() else "-" for c in path.name)


def reference(path: WritePath, workdir: Path) -> Reference:
    name = slug(path)
    inputs = workdir / "inputs"
    base = workdir / f"base-{name}"
    if not base.exists():
        path.prepare(base, inputs)
        base.mkdir(parents=True, exist_ok=True)
    home = copy_home(base, workdir / f"ref-{name}")
    log = workdir / f"ref-{name}.log"
    log.unlink(missing_ok=True)
    outcome = execute(path, home, inputs, f"log={log}")
    assert outcome.code == 0, f"{path.name}: the reference run failed: {outcome.stderr}"
    return Reference(path, base, inputs, state(base), state(home), points(log), outcome.code)


def check_case(ref: Reference, at: int, failure: str, workdir: Path) -> list[str]:
    """Run the path with call `at` failing as `failure`; what went wrong (empty: nothing)."""
    path = ref.path
    home = copy_home(ref.base, workdir / "case")
    log = workdir / "case.log"
    log.unlink(missing_ok=True)
    outcome = execute(path, home, ref.inputs, f"at={at},fail={failure},log={log}")
    where = f"{path.name} @{at} ({ref.points[at - 1] if at <= len(ref.points) else '?'}) " \
            f"{failure}"
    problems: list[str] = []
    said = " ".join(outcome.stderr.split())[:400]
    if not fired(log):
        return []  # the run took another way before reaching the point (nothing to check)
    problems += _check_report(home, outcome, failure, said)
    before, want = core(ref.before), core(ref.after)
    now = state(home)
    # an interruption after the change's last write: done (or its tidying left, `finish`)
    interrupted = failure in INTERRUPTIONS and outcome.code in (0, INTERRUPTED) and (
        core(now) == want or (path.finish is not None and
                              acknowledged_in(now) >= acknowledged_in(ref.after)))
    if path.atomic and outcome.code not in (0, None, -signal.SIGKILL) and core(now) != before \
            and not interrupted:
        problems.append(f"failed (exit {outcome.code}) but changed the home: "
                        f"{_diff(before, core(now))}")
    repaired = run(home, "doctor", "--repair", env={"AGENVOY_EMBEDDER": EMBEDDER})
    if repaired.returncode != 0:
        problems.append(f"doctor --repair exit {repaired.returncode}: "
                        f"{(repaired.stdout + repaired.stderr).decode()[-400:]}")
    after = state(home)
    done = acknowledged_in(after) >= acknowledged_in(ref.after)
    tidying = path.finish is not None and done  # its own part done, the tidying left
    if path.atomic and outcome.code == 0 and core(after) != want and not tidying:
        problems.append(f"exit 0 but the change is not complete: {_diff(want, core(after))}")
    if path.atomic and core(after) not in (before, want) and not tidying:
        problems.append(f"neither all nor nothing after doctor --repair: "
                        f"{_diff(want, core(after))}")
    stray = vectors_within(after, ref.before, ref.after)
    if stray:
        problems.append(f"vectors that neither the start nor the end has: {stray[:3]}")
    lost = (acknowledged_in(ref.before) & acknowledged_in(ref.after)) - acknowledged_in(after)
    if lost:
        problems.append(f"lost {len(lost)} acknowledged message(s): {sorted(lost)[:3]}")
    vectors_owed = path.family == "vectors" and after["vectors"] != ref.after["vectors"]
    if core(after) != want or vectors_owed:
        argv = path.finish(ref.inputs) if tidying and path.finish else None
        again = execute(path, home, ref.inputs, None, argv)
        if again.code != 0:
            problems.append(f"running it again: exit {again.code}: {again.stderr[-300:]}")
        final = state(home)
        if core(final) != want:
            problems.append(f"running it again did not complete it: {_diff(want, core(final))}")
        if path.family == "vectors" and final["vectors"] != ref.after["vectors"]:
            problems.append(f"running it again did not complete the vectors: "
                            f"{_diff(ref.after, final)}")
    checked = run(home, "doctor", env={"AGENVOY_EMBEDDER": EMBEDDER})
    if checked.returncode != 0:
        problems.append(f"doctor not clean after the repair: {checked.stdout.decode()[-400:]}")
    left = leftovers(home)
    if left:
        problems.append(f"leftovers: {left}")
    return [f"{where}: {p} [stderr: {said}]" for p in problems]


def acknowledged_in(doc: dict[str, Any]) -> set[tuple[Any, ...]]:
    return {tuple(r) for r in doc["archive"]}


def _check_report(home: Path, outcome: Outcome, failure: str, said: str) -> list[str]:
    out = []
    text = outcome.stderr
    if "internal error" in text or "Traceback" in text:
        out.append("an internal error")
    if "cannot be read as" in text:
        out.append("an input blamed for a write failure")
    if failure == "kill":
        if outcome.code not in (-signal.SIGKILL, None):
            out.append(f"exit {outcome.code} after kill -9")
        return out
    if failure in INTERRUPTIONS:
        if outcome.code not in (0, INTERRUPTED):
            out.append(f"exit {outcome.code} after an interruption (130, or 0 for a hook)")
        return out
    if outcome.code == 0:
        return out  # absorbed (a best-effort write); the state checks judge it
    if outcome.code != 1:
        out.append(f"exit {outcome.code} (a {failure} failure is exit 1)")
    if failure == "enospc" and f"no space left on {home}" not in text:
        out.append(f"the message does not say 'no space left on {home}'")
    if failure == "eio" and "I/O error" not in text and "Input/output error" not in text:
        out.append("the message does not name the I/O error")
    return out


def _diff(want: dict[str, Any], got: dict[str, Any]) -> str:
    keys = [k for k in want if want[k] != got.get(k)]
    parts = []
    for k in keys:
        a, b = want[k], got.get(k)
        if isinstance(a, list) and isinstance(b, list):
            sa, sb = {orjson.dumps(x).decode() for x in a}, {orjson.dumps(x).decode() for x in b}
            parts.append(f"{k}: missing {sorted(sa - sb)[:2]} extra {sorted(sb - sa)[:2]}")
        else:
            parts.append(f"{k}: differs ({hashlib.md5(orjson.dumps(a)).hexdigest()[:6]} vs "
                         f"{hashlib.md5(orjson.dumps(b)).hexdigest()[:6]})")
    return "; ".join(parts)[:600]
