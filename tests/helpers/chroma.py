"""The vector index shared by processes, for the vector tests: the environment of a
tests/vector_workers.py child, a session indexed through the CLI, Chroma's layers checked by a
fresh process, and the damage a program with a stale warm chromadb client does (an index whose
HNSW layer lacks vectors its metadata has)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import ROOT

PY = [sys.executable, "-m", "tests.vector_workers"]


def env_for(home: Path) -> dict[str, str]:
    return {**os.environ, "AGENVOY_HOME": str(home), "AGENVOY_LOCK_TIMEOUT": "60",
            "AGENVOY_MAX_HISTORY_BYTES": "100000000", "OMP_NUM_THREADS": "1"}


def messages(n: int, tag: str) -> bytes:
    words = ["deploy", "database", "password", "rotation", "nomad", "lunch", "river"]
    return orjson.dumps([{"role": "user" if i % 2 == 0 else "assistant",
                          "content": f"{tag}-{i} {words[i % 7]} {words[(i * 3) % 7]}"}
                         for i in range(n)])


def chroma_check(home: Path) -> dict:
    out = subprocess.run([*PY, "check", str(home / ".store/chroma")], capture_output=True,
                         cwd=ROOT, env=env_for(home), timeout=120)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    return orjson.loads(out.stdout)


def seed_indexed(run, sid: str = "s", n: int = 30) -> None:
    assert run("append", sid, "--messages", "-", input=messages(n, sid)).exit_code == 0
    res = run("backfill", sid, "--vectors")
    assert res.exit_code == 0, res.stderr


def new_process() -> None:
    """In-process CLI runs share chromadb's client; a damage made behind its back is seen by
    the next process, not by a client that keeps its copy in memory: close it, as a new
    process would start."""
    from agenvoy_cli.vectors import context

    context.close_all()


@contextlib.contextmanager
def session_collection(home: Path, sid: str) -> Iterator[Any]:
    """A session's Chroma collection as a new process sees it, under the store's lock."""
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.vectors.hooks import open_store
    from agenvoy_cli.vectors.messages import MessageIndex

    new_process()
    store = open_store(Layout(home))
    try:
        with store.write_lock():
            index = MessageIndex(store).session(sid)
            assert index is not None
            yield index.collection
    finally:
        store.close()


def make_inconsistent(home: Path, run) -> None:
    """Another program with a stale warm client (raw chromadb) writes once: Chroma's HNSW
    index loses the vectors indexed meanwhile, its metadata keeps them."""
    seed_indexed(run, "s", 40)
    stale = subprocess.Popen([sys.executable, "-c", STALE_WRITER, str(home / ".store/chroma")],
                             cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    assert stale.stdout and stale.stdin
    assert stale.stdout.readline().strip() == b"loaded", stale.stderr
    assert run("append", "s", "--messages", "-", input=messages(60, "late")).exit_code == 0
    assert run("backfill", "s", "--vectors").exit_code == 0
    out, err = stale.communicate(b"write\n", timeout=60)
    assert stale.returncode == 0, err.decode()[-2000:]
    report = chroma_check(home)
    assert any(c["missing"] or c["error"] for c in report["collections"].values()), report
    new_process()


STALE_WRITER = """
import sys, chromadb
from chromadb.config import Settings
c = chromadb.PersistentClient(sys.argv[1], Settings(anonymized_telemetry=False))
col = [x for x in c.list_collections() if x.name.startswith("agenvoy_messages")][0]
dim = int(col.metadata["dim"])
col.query(query_embeddings=[[1.0] * dim], n_results=1)  # the HNSW index now in memory
print("loaded", flush=True)
sys.stdin.readline()
meta = col.get(limit=1, include=["metadatas"])["metadatas"][0]
n = 150  # more than Chroma's sync threshold: its stale HNSW index is written to disk
col.upsert(ids=[f"stray{i}" for i in range(n)], embeddings=[[0.5 + i / n] * dim for i in range(n)],
           metadatas=[{**meta, "seq": 10**6 + i} for i in range(n)])
"""
