"""Whether two versions of the package answer bench/floor.py's questions the same, through
`agenvoy search --mode semantic --json` (a refactor's check: behaviour unchanged).

    python bench/same_answers.py build HOME                 # the sessions, embedded (once)
    python bench/same_answers.py run HOME OUT.json [--root DIR] [--split all]
    python bench/same_answers.py diff A.json B.json

`build` appends and embeds every fact set's session (bench/floor.py's sets and seeds) with the
package this file sits in; `run` copies HOME aside (every run starts from the same index: a
search keeps message-text vectors it embedded, which the next search reads) and asks every
question with the package under --root (default: this checkout), keeping each question's
whole JSON document; `diff` counts the questions whose documents, and whose ranked hits, are
identical. Run a main checkout (`git archive main | tar -x -C DIR`) and this branch on one
built HOME. The calls and the figures are bench/harness.py's (the package they run is
--root's: its path goes first); `run` also prints each split's hit@1, hit@8 and MRR of the
answerable questions and how many unanswerable ones got nothing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import harness  # bench/ is this script's path[0]  # noqa: E402

HERE = Path(__file__).resolve().parent.parent
SPLITS = {"all": ["tune", "heldout", "fresh", "fresh2"], "both": ["tune", "heldout"]}
LIMIT = 8


def _use(root: Path):  # noqa: ANN202 - bench/floor.py of that checkout
    sys.path[:0] = [str(root), str(root / "bench")]
    import floor  # noqa: PLC0415

    return floor


def build(home: Path, splits: list[str]) -> None:
    floor = _use(HERE)
    for split in splits:
        for fset, seed in floor.fact_sets(split):
            sid = f"floor-{fset['name']}"
            msgs, _ = floor.session(fset, seed=seed)
            harness.home_cli(home, "append", sid, "--messages", "-", "--no-compact",
                             "--time", "2026-01-05 10:00:00", input=json.dumps(msgs).encode())
            harness.home_cli(home, "backfill", sid, "--vectors")


def figures(rows: list[dict]) -> dict[str, dict]:
    """Per split: hit@1, hit@8 and MRR of the answerable questions, and the unanswerable ones
    answered with nothing (harness.scores, harness.empty_rate)."""
    out = {}
    for split in dict.fromkeys(r["split"] for r in rows):
        mine = [r for r in rows if r["split"] == split]
        answerable = [harness.scores(r["hits"][:LIMIT], [r["gold"]], recall=(), hit=(1, LIMIT))
                      for r in mine if r["gold"] is not None]
        empty, n = harness.empty_rate(r["doc"] for r in mine if r["gold"] is None)
        out[split] = {**harness.mean(answerable), "n": len(answerable),
                      "unanswerable_empty": empty, "unanswerable": n}
    return out


def show(figs: dict[str, dict]) -> None:
    for split, f in figs.items():
        print(f"{split:8} answerable {f['n']}: hit@1 {f['hit@1']:.3f} hit@{LIMIT} "
              f"{f[f'hit@{LIMIT}']:.3f} MRR {f['MRR']:.3f}; unanswerable answered with "
              f"nothing {f['unanswerable_empty']}/{f['unanswerable']}")


def run(home: Path, out: Path, root: Path, splits: list[str], only: set[str] | None = None
        ) -> None:
    floor = _use(root)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "home"
        shutil.copytree(home, work, symlinks=True)
        search = harness.inprocess_search(work)
        for split in splits:
            for fset, seed in floor.fact_sets(split):
                sid = f"floor-{fset['name']}"
                if only is not None and fset["name"] not in only:
                    continue
                msgs, where = floor.session(fset, seed=seed)
                for q in floor.questions(fset, where):
                    doc = search(sid, q["q"], "semantic", LIMIT)
                    rows.append({"split": split, "set": fset["name"], "q": q["q"],
                                 "gold": q["gold"], "hits": harness.ranked_hits(doc),
                                 "doc": doc})
            print(f"{split}: {len(rows)} questions so far", file=sys.stderr)
    out.write_text(json.dumps(rows, ensure_ascii=False))
    show(figures(rows))


def diff(a_path: Path, b_path: Path) -> int:
    a = json.loads(a_path.read_text(encoding="utf-8"))
    b = json.loads(b_path.read_text(encoding="utf-8"))
    if [(r["split"], r["set"], r["q"]) for r in a] != [(r["split"], r["set"], r["q"])
                                                        for r in b]:
        print("the two runs asked different questions")
        return 1
    same_docs = sum(x["doc"] == y["doc"] for x, y in zip(a, b))
    same_hits = sum(x["hits"] == y["hits"] for x, y in zip(a, b))
    print(f"{len(a)} questions: identical documents {same_docs}, identical ranked hits "
          f"{same_hits}")
    for split in dict.fromkeys(r["split"] for r in a):
        pairs = [(x, y) for x, y in zip(a, b) if x["split"] == split]
        print(f"  {split}: {len(pairs)} questions, identical documents "
              f"{sum(x['doc'] == y['doc'] for x, y in pairs)}, identical ranked hits "
              f"{sum(x['hits'] == y['hits'] for x, y in pairs)}")
    if all("gold" in r for r in a + b):
        print("A:")
        show(figures(a))
        print("B:")
        show(figures(b))
    for x, y in zip(a, b):
        if x["doc"] != y["doc"]:
            print(f"  differs: {x['split']} {x['set']} {x['q']!r}: {x['hits']} / {y['hits']}")
    return 0 if same_docs == len(a) else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    b = sub.add_parser("build")
    b.add_argument("home", type=Path)
    r = sub.add_parser("run")
    r.add_argument("home", type=Path)
    r.add_argument("out", type=Path)
    r.add_argument("--root", type=Path, default=HERE)
    r.add_argument("--sets", default="", help="only these fact sets (names joined by commas)")
    d = sub.add_parser("diff")
    d.add_argument("a", type=Path)
    d.add_argument("b", type=Path)
    for p in (b, r):
        p.add_argument("--split", default="all",
                       help="all, both (tune, heldout), or splits joined by commas "
                            "(tune, heldout, fresh, fresh2)")
    args = ap.parse_args()
    if args.what == "diff":
        return diff(args.a, args.b)
    splits = SPLITS.get(args.split, args.split.split(","))
    if not set(splits) <= set(SPLITS["all"]):
        raise SystemExit(f"unknown split in {args.split!r}")
    if args.what == "build":
        build(args.home, splits)
    else:
        run(args.home, args.out, args.root.resolve(), splits,
            set(args.sets.split(",")) if args.sets else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
