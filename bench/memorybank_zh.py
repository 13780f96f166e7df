"""MemoryBank-SiliconFriend's Chinese long-term memory set through `agenvoy search` (#50 item 8).

    python bench/memorybank_zh.py convert SRC [--commit SHA]   # SRC: the source repository
    python bench/memorybank_zh.py run --split tune             # keyword, semantic, hybrid
    python bench/memorybank_zh.py run --split report --path process

The set is public and not ours: Zhong et al., "MemoryBank: Enhancing Large Language Models with
Long-Term Memory" (github.com/zhongwanjun/MemoryBank-SiliconFriend, MIT licence), its Chinese
evaluation data (eval_data/cn): 15 users, each ten days of chat with an AI companion (566
exchanges in all), and 100 probing questions a user asks later ("我曾经和你推荐过一部科幻电影，
它的名字是？"). bench/memorybank_zh/ holds the converted copy with the licence and the source
commit (SOURCE.md). The source gives no evidence for its questions: the EVIDENCE below (the
message(s) holding each answer, "day.exchange" + u for the user's turn / a for the reply) was
written by hand for this bench on 2026-12-07, before any search was run on the set, and is ours.

Protocol (bench/zh_memory.py's): one home, one session per user, each day one `agenvoy append`
batch (the user's turn as user, the companion's as assistant, the day at 20:00), 16 filler
messages after (the context window), indexed once with `agenvoy backfill --vectors` (the
built-in model behind the harness's cache). Each question is one `agenvoy search USER --mode M
--limit 50 --json -- QUESTION`, in process (default) or, with --path process, one process
answered by the home's `agenvoy mcp --http`. R@5, R@10 and MRR of the evidence messages,
macro-averaged, per mode, and per question kind (dated: the question names a day; undated).
The split (bench/splits.py, written before any figure): tune = users 0-6, report = users 7-14.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import harness  # bench/ is this script's path[0]
import splits
from harness import Question, RetrievalSet

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "memorybank_zh"
SOURCE = "https://github.com/zhongwanjun/MemoryBank-SiliconFriend"
FILLER = 16
TOP = 50
SPLITS = {"tune": splits.MEMORYBANK_TUNE, "report": splits.MEMORYBANK_REPORT}
_DATED = re.compile(r"\d+\s*[月号日]")

# user index, question index, evidence keys (written by hand before any search, see above)
EVIDENCE = """
U0 Q0 3.3u
U0 Q1 4.0u
U0 Q2 6.2a
U0 Q3 1.1u
U0 Q4 3.2u
U0 Q5 5.1u
U0 Q6 7.1u
U1 Q0 0.2u
U1 Q1 1.8u
U1 Q2 2.1a
U1 Q3 8.1u
U1 Q4 9.1u
U1 Q5 3.1u
U1 Q6 1.2a
U2 Q0 0.3u
U2 Q1 2.1u 2.2u
U2 Q2 1.1u
U2 Q3 3.1u
U2 Q4 6.0a 3.2a
U2 Q5 5.1a
U2 Q6 1.1u
U3 Q0 1.1u
U3 Q1 0.4u
U3 Q2 6.1a
U3 Q3 4.1u
U3 Q4 0.2u
U3 Q5 3.1a
U3 Q6 7.0a
U4 Q0 1.2u
U4 Q1 2.3u
U4 Q2 1.2u
U4 Q3 0.4a
U4 Q4 4.1u
U4 Q5 5.3u
U4 Q6 7.1a
U5 Q0 9.1u
U5 Q1 9.3u
U5 Q2 0.2u 0.3u
U5 Q3 1.2a
U5 Q4 5.1u
U5 Q5 4.1u
U5 Q6 7.1u
U6 Q0 1.1u
U6 Q1 2.0u 2.1u
U6 Q2 1.2u
U6 Q3 3.0u
U6 Q4 8.0u
U6 Q5 7.0u
U6 Q6 9.0u
U7 Q0 0.1u 0.2u
U7 Q1 9.1u 9.2u
U7 Q2 5.0u
U7 Q3 1.2u
U7 Q4 0.3u
U7 Q5 8.0a
U7 Q6 5.0a
U8 Q0 0.1u
U8 Q1 3.0u
U8 Q2 3.1a
U8 Q3 7.1a
U8 Q4 9.1u
U8 Q5 1.2a
U8 Q6 5.0a
U9 Q0 1.2u
U9 Q1 7.0a
U9 Q2 8.1a
U9 Q3 7.1a
U9 Q4 5.0u 5.1u
U9 Q5 3.0a
U9 Q6 6.0a
U10 Q0 0.2a
U10 Q1 0.2a
U10 Q2 8.2u
U10 Q3 3.1u
U10 Q4 6.1u
U10 Q5 5.1a
U10 Q6 7.0u
U11 Q0 3.1a
U11 Q1 3.2a
U11 Q2 3.1u 3.2u
U11 Q3 5.1u
U11 Q4 1.1a 1.2a
U11 Q5 0.2u
U12 Q0 0.1u 0.2u
U12 Q1 0.2u
U12 Q2 3.1u
U12 Q3 2.1u
U12 Q4 7.1a
U13 Q0 1.2u
U13 Q1 3.1u 3.2u
U13 Q2 7.0u
U13 Q3 6.2a
U13 Q4 1.4u
U14 Q0 0.2u
U14 Q1 5.1u
U14 Q2 5.2u
U14 Q3 6.1a
U14 Q4 6.1a
U14 Q5 7.1a
U14 Q6 9.0u
"""


def evidence() -> dict[tuple[int, int], tuple[str, ...]]:
    out = {}
    for line in EVIDENCE.strip().splitlines():
        user, q, *keys = line.split()
        out[(int(user[1:]), int(q[1:]))] = tuple(keys)
    return out


def convert(src: Path, commit: str = "") -> None:
    """bench/memorybank_zh/set.json from a checkout of the source repository (its eval_data/cn),
    with the licence and the commit it came from."""
    bank = json.loads((src / "eval_data" / "cn" / "memory_bank_cn.json").read_text("utf-8"))
    asked: dict[str, list[str]] = {}
    for line in (src / "eval_data" / "cn" / "probing_questions_cn.jsonl").read_text(
            "utf-8").splitlines():
        if line.strip():
            asked.update(json.loads(line))
    gold = evidence()
    users = []
    for ui, (name, person) in enumerate(bank.items()):
        days = []
        for day, exchanges in person["history"].items():
            days.append({"day": day, "exchanges": [
                {"user": e["query"], "assistant": e["response"]} for e in exchanges]})
        users.append({"index": ui, "name": name, "days": days, "questions": [
            {"q": q, "evidence": list(gold[(ui, qi)])} for qi, q in enumerate(asked[name])]})
    if set(gold) != {(u["index"], qi) for u in users for qi in range(len(u["questions"]))}:
        raise SystemExit("the evidence does not cover the questions one for one")
    commit = commit or subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"],
                                      capture_output=True, text=True).stdout.strip() or "unknown"
    DATA.mkdir(exist_ok=True)
    (DATA / "set.json").write_text(json.dumps({"source": SOURCE, "commit": commit,
                                               "users": users}, ensure_ascii=False, indent=0)
                                   + "\n", "utf-8")
    shutil.copyfile(src / "LICENSE", DATA / "LICENSE")
    print(f"{len(users)} users, {sum(len(u['questions']) for u in users)} questions, "
          f"{sum(len(d['exchanges']) for u in users for d in u['days'])} exchanges; "
          f"source commit {commit}")


def load(split: str) -> tuple[list[dict], RetrievalSet]:
    """The split's users and the harness's set (gold: evidence keys; a seq maps to its key)."""
    doc = json.loads((DATA / "set.json").read_text("utf-8"))
    users = [u for u in doc["users"] if u["index"] in SPLITS[split]]
    keys: dict[str, dict[int, str]] = {}
    questions = []
    for u in users:
        seq, mine = 0, {}
        for di, day in enumerate(u["days"]):
            for ei in range(len(day["exchanges"])):
                mine[seq], mine[seq + 1] = f"{di}.{ei}u", f"{di}.{ei}a"
                seq += 2
        keys[f"u{u['index']}"] = mine
        questions += [Question(f"u{u['index']}", q["q"], tuple(q["evidence"]),
                               "dated" if _DATED.search(q["q"]) else "undated")
                      for q in u["questions"]]
    return users, RetrievalSet("memorybank_zh", split, questions, keys, top=TOP)


def build_home(home: Path, users: list[dict], cache: Path) -> None:
    """Each user's days through `agenvoy append` (one batch a day), filler, then indexed."""
    if home.exists():
        shutil.rmtree(home)
    for u in users:
        session = f"u{u['index']}"
        for day in u["days"]:
            batch = [m for e in day["exchanges"] for m in (
                {"role": "user", "content": e["user"]},
                {"role": "assistant", "content": e["assistant"]})]
            harness.home_cli(home, "append", session, "--messages", "-", "--time",
                             f"{day['day']} 20:00:00",
                             input=json.dumps(batch, ensure_ascii=False).encode())
        filler = [{"role": "user" if i % 2 == 0 else "assistant",
                   "content": f"好，下一個 {i // 2}" if i % 2 == 0 else "好的"}
                  for i in range(FILLER)]
        harness.home_cli(home, "append", session, "--messages", "-", "--time",
                         f"{u['days'][-1]['day']} 23:59:00",
                         input=json.dumps(filler, ensure_ascii=False).encode())
    harness.backfill(home, [f"u{u['index']}" for u in users], cache)
    (home / "bench-built.json").write_text(json.dumps(sorted(u["index"] for u in users)))


def run(args: argparse.Namespace) -> dict:
    users, rset = load(args.split)
    home = args.home / args.split
    if not (args.reuse and (home / "bench-built.json").exists()):
        build_home(home, users, args.cache)
    modes = args.modes.split(",")
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    with harness.searching(home, args.path, args.cache,
                           home.parent / f"{args.split}-server.log") as search:
        res = harness.evaluate(rset, modes, search)
    return {"split": args.split, "path": args.path, "n": len(rset.questions),
            "load": [load0[0], os.getloadavg()[0]], "wall_s": time.perf_counter() - t0,
            "results": res.summary(), "ranks": res.rankings}


def show(out: dict) -> None:
    print(f"MemoryBank-SiliconFriend cn, {out['split']} split: {out['n']} questions, path "
          f"{out['path']}, {out['wall_s']:.0f} s, load {out['load'][0]:.1f} -> "
          f"{out['load'][1]:.1f}")
    print("| mode | R@5 / R@10 / MRR | dated | undated |")
    print("|---|---|---|---|")
    for mode, r in out["results"].items():
        print(f"| {mode} | " + " | ".join(harness.cells(r.get(c, {}))
                                          for c in ("all", "dated", "undated")) + " |")
    n = out["results"][next(iter(out["results"]))]["n"]
    print(f"(dated {n.get('dated', 0)}, undated {n.get('undated', 0)} questions)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["convert", "run"])
    ap.add_argument("src", nargs="?", type=Path, help="convert: the source checkout")
    ap.add_argument("--commit", default="", help="convert: the source commit (else git's HEAD)")
    ap.add_argument("--split", choices=sorted(SPLITS), default="tune")
    ap.add_argument("--modes", default="keyword,semantic,hybrid")
    ap.add_argument("--path", choices=["process", "inprocess"], default="inprocess")
    ap.add_argument("--home", type=Path, default=Path("/tmp/agenvoy-bench-memorybank"))
    ap.add_argument("--cache", type=Path, default=Path("/tmp/agenvoy-bench-memorybank-cache"))
    ap.add_argument("--reuse", action="store_true", help="reuse the split's home")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    os.environ.pop("AGENVOY_HOME", None)
    os.environ.pop("AGENVOY_EMBEDDER", None)
    if args.what == "convert":
        if args.src is None:
            raise SystemExit("convert needs the source checkout (SRC)")
        return convert(args.src, args.commit)
    out = run(args)
    show(out)
    if args.json:
        args.json.write_text(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    sys.exit(main())
