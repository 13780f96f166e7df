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
built HOME.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SPLITS = {"all": ["tune", "heldout", "fresh", "fresh2"], "both": ["tune", "heldout"]}


def _use(root: Path):  # noqa: ANN202 - bench/floor.py of that checkout
    sys.path[:0] = [str(root), str(root / "bench")]
    import floor  # noqa: PLC0415
    import probes  # noqa: PLC0415

    return floor, probes


def build(home: Path, splits: list[str]) -> None:
    floor, probes = _use(HERE)
    for split in splits:
        for fset, seed in floor.fact_sets(split):
            sid = f"floor-{fset['name']}"
            msgs, _ = floor.session(fset, seed=seed)
            probes.cli("--home", str(home), "append", sid, "--messages", "-", "--no-compact",
                       "--time", "2026-01-05 10:00:00", input=json.dumps(msgs).encode())
            probes.cli("--home", str(home), "backfill", sid, "--vectors")


def run(home: Path, out: Path, root: Path, splits: list[str]) -> None:
    floor, probes = _use(root)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "home"
        shutil.copytree(home, work, symlinks=True)
        for split in splits:
            for fset, seed in floor.fact_sets(split):
                sid = f"floor-{fset['name']}"
                msgs, where = floor.session(fset, seed=seed)
                for q in floor.questions(fset, where):
                    doc = probes.cli("--home", str(work), "search", sid, q["q"], "--mode",
                                     "semantic", "--limit", "8", "--json")
                    rows.append({"split": split, "set": fset["name"], "q": q["q"],
                                 "hits": probes.ranked_hits(doc), "doc": doc})
            print(f"{split}: {len(rows)} questions so far", file=sys.stderr)
    out.write_text(json.dumps(rows, ensure_ascii=False))


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
    d = sub.add_parser("diff")
    d.add_argument("a", type=Path)
    d.add_argument("b", type=Path)
    for p in (b, r):
        p.add_argument("--split", choices=("all", "both", "tune", "heldout", "fresh",
                                           "fresh2"), default="all")
    args = ap.parse_args()
    if args.what == "diff":
        return diff(args.a, args.b)
    splits = SPLITS.get(args.split, [args.split])
    if args.what == "build":
        build(args.home, splits)
    else:
        run(args.home, args.out, args.root.resolve(), splits)
    return 0


if __name__ == "__main__":
    sys.exit(main())
