"""Child processes for the multi-process vector tests: `python -m tests.vector_workers KIND ...`.

Every worker runs the real CLI in-process (so chromadb's client stays warm between commands,
as in a long-lived agent or server) with the stand-in embedder of tests/words_embedder.py.

- serve: read one JSON list of CLI arguments per stdin line, run it, answer one JSON line
  {"code", "stderr"}; the parent decides the order of every step.
- index SESSION SECONDS: append a batch, then `backfill SESSION --vectors`, until the time is up.
- search SESSIONS SECONDS: semantic/hybrid searches over the comma-separated sessions.
Loop workers print one JSON line per command: {"cmd", "code", "stderr"}.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import sys
import time

import orjson

from agenvoy_cli.cli import cli

WORDS = ["deploy", "database", "password", "rotation", "nomad", "lunch", "river", "部署"]


def install_words() -> None:
    """The stand-in embedder for this process, through the supported setting (no model,
    deterministic)."""
    os.environ["AGENVOY_EMBEDDER"] = "python:tests.words_embedder:WordsEmbedder"


def invoke(args: list[str], stdin: bytes | None = None) -> tuple[int, str]:
    err = io.StringIO()
    old_stdin = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            try:
                code = cli.main(args, prog_name="agenvoy", standalone_mode=False)
            except SystemExit as exc:
                code = exc.code
            except Exception as exc:  # noqa: BLE001 - reported to the parent, never hidden
                return 99, f"{type(exc).__name__}: {exc}"
    finally:
        sys.stdin = old_stdin
    return int(code or 0), err.getvalue()


def batch(rng: random.Random, tag: str, n: int) -> bytes:
    return orjson.dumps([{"role": "user" if i % 2 == 0 else "assistant",
                          "content": f"{tag}-{i} " + " ".join(rng.choices(WORDS, k=12))}
                         for i in range(n)])


def check(chroma_dir: str) -> dict:
    """Every layer of every collection, read by a fresh client: the ids Chroma's metadata
    holds, those its HNSW layer knows (restricted queries: an unfiltered one for all of them
    is no census, HNSW being approximate), and the (session_id, seq) of every message vector."""
    import chromadb
    from chromadb.config import Settings

    from agenvoy_cli.vectors.check import hnsw_missing

    client = chromadb.PersistentClient(chroma_dir, Settings(anonymized_telemetry=False))
    out: dict = {"collections": {}, "messages": []}
    for col in client.list_collections():
        got = col.get(include=["metadatas"])
        ids = got["ids"]
        entry: dict = {"count": col.count(), "ids": len(ids), "hnsw": 0, "missing": 0,
                       "error": None}
        if ids:
            try:  # the id -> label map of HNSW, probed by restricted queries
                missing = hnsw_missing(col, ids)
                entry["hnsw"] = len(ids) - len(missing)
                entry["duplicates"] = len(ids) - len(set(ids))
                entry["missing"] = len(missing)
                # and the vectors are really there: a query restricted to a few returns them
                few = ids[:8]
                found = col.query(query_embeddings=[[1.0] + [0.0] * (_dim(col) - 1)], ids=few,
                                  n_results=len(few), include=[])["ids"][0]
                if sorted(found) != sorted(few) and not missing:
                    entry["error"] = f"restricted query returned {len(found)} of {len(few)}"
            except Exception as exc:  # noqa: BLE001
                entry["error"] = f"{type(exc).__name__}: {exc}"
        if col.name.startswith("agenvoy_messages"):  # one for the home, or one per session
            out["messages"] += [[m["session_id"], int(m["seq"])] for m in got["metadatas"]]
        out["collections"][col.name] = entry
    return out


def _dim(col) -> int:
    return int((col.metadata or {}).get("dim") or 512)


def main() -> None:
    kind, *rest = sys.argv[1:]
    if kind == "check":
        print(orjson.dumps(check(rest[0])).decode())
        return
    install_words()
    if kind == "serve":
        for line in sys.stdin:
            req = orjson.loads(line)
            args, data = req["args"], req.get("stdin")
            code, err = invoke(args, data.encode() if data is not None else None)
            print(orjson.dumps({"code": code, "stderr": err}).decode(), flush=True)
        return
    rng = random.Random(hash(tuple(rest)) & 0xFFFF)
    deadline = time.monotonic() + float(rest[1])
    n = 0
    while time.monotonic() < deadline:
        if kind == "index":
            sid = rest[0]
            steps = [(["append", sid, "--messages", "-"], batch(rng, f"{sid}-{n}", 8)),
                     (["backfill", sid, "--vectors"], None)]
        else:
            sid = rng.choice(rest[0].split(","))
            mode = "semantic" if n % 3 else "hybrid"
            steps = [(["search", sid, rng.choice(WORDS), "--mode", mode, "--json"], None)]
        for args, data in steps:
            code, err = invoke(args, data)
            print(orjson.dumps({"cmd": args[0], "code": code, "stderr": err}).decode(),
                  flush=True)
        n += 1


if __name__ == "__main__":
    main()
