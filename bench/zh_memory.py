"""A harder Chinese / code-switching memory-dialogue set, and its bench through `agenvoy search`.

    python bench/zh_memory.py generate            # (re)writes bench/zh_memory_sets/*.json
    python bench/zh_memory.py run --split heldout # keyword, semantic, hybrid on one split
    python bench/zh_memory.py run --split tune --path inprocess --fusion '{"k": 10}'

The set: several users, each one session of a few months of chat with an assistant, in
Traditional Chinese with English mixed in as Taiwanese office workers write it. Every user
states at least 80 remembered events (bench/zh_memory_data.py: 25 kinds of event, three or
four instances of each kind per user, so the wrong instances share the kind's words with
the right one, plus decoy events that share a query's words but are about something else),
each followed by the assistant's reply, small talk between. A query is the conversation so
far: the user's last turn (often after an earlier turn of the same conversation, newline
between), never phrased as a question to a search engine; "lex" queries name the event's
value, "sem" ones only describe it (沙嗲 for 花生: meaning links them, no shared content
word). The target is the event's own message; 16 filler messages end each session (the
context window).

The split (state kept in the files and the seeds): tune = users u0-u2 (seeds 0-2), held-out
= users u3-u5 (seeds 3-5); tune queries use the even-numbered query phrasings of each kind,
held-out queries the odd-numbered ones, so no held-out query's wording was seen while
tuning. Tune fusion on tune.json only; report heldout.json.

run: one home per split, each user's session written with `agenvoy append` and indexed once
with `agenvoy backfill --vectors` (in process, the embedder behind an on-disk cache: the
real model's vectors); then --path process (default): every search is one
`agenvoy search SESSION --mode M --limit 50 --json -- QUERY` process answered by the home's
`agenvoy mcp --http` server (bench/locomo_cli.py's Server: the CLI's fast path), or --path
inprocess: click's CliRunner over the same command (a tuning aid: --fusion overrides the
fusion's constants in this process only). Reported: R@5, R@10 and MRR (over the 50) of the
target, per mode, and per query kind (lex / sem).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path

import harness  # bench/ is this script's path[0]
import zh_memory_data as data
from harness import Question, RetrievalSet

ROOT = Path(__file__).resolve().parent.parent
SETS = ROOT / "bench" / "zh_memory_sets"
SPLITS = {"tune": (0, 1, 2), "heldout": (3, 4, 5)}
PHRASINGS = {"tune": 0, "heldout": 1}  # query templates at even / odd positions
MIN_EVENTS = 84
QUERIES_PER_USER = 34
FILLER = 16
TOP = 50


# ----------------------------------------------------------------------------- generate


def user_session(seed: int, split: str) -> dict:
    """One user's messages (with the day each was sent) and queries, from its seed."""
    rng = random.Random(seed)
    counts = {k["name"]: min(3, len(k["values"])) for k in data.KINDS}
    while sum(counts.values()) < MIN_EVENTS:
        kind = rng.choice([k for k in data.KINDS if len(k["values"]) > counts[k["name"]]])
        counts[kind["name"]] += 1
    events = []  # (kind, value, is_decoy)
    for kind in data.KINDS:
        for value in rng.sample(kind["values"], counts[kind["name"]]):
            events.append((kind, value, False))
            if value.get("decoy"):
                events.append((kind, value, True))
    rng.shuffle(events)
    messages: list[dict] = []
    where: dict[tuple[str, str], int] = {}
    day = datetime(2026, 1, 5, 9, 0) + timedelta(days=seed)
    for kind, value, decoy in events:
        if rng.random() < 0.6:
            talk = rng.choice(data.SMALL_TALK)
            messages += [{"role": "user", "content": talk[0], "day": day},
                         {"role": "assistant", "content": talk[1], "day": day}]
        if decoy:
            text = value["decoy"]
            reply = rng.choice(["哈哈，不錯耶。", "聽起來很棒。", "好的，記下來了。"])
        else:
            where[(kind["name"], value["v"])] = len(messages)
            text = rng.choice(kind["events"]).format(**value)
            reply = rng.choice(kind["replies"]).format(**value)
        messages += [{"role": "user", "content": text, "day": day},
                     {"role": "assistant", "content": reply, "day": day}]
        day += timedelta(hours=rng.randint(5, 40))
    for i in range(FILLER // 2):
        messages += [{"role": "user", "content": f"好，下一個 {i}", "day": day},
                     {"role": "assistant", "content": "好的", "day": day}]
    targets = rng.sample(sorted(where), QUERIES_PER_USER)
    kinds = {k["name"]: k for k in data.KINDS}
    queries = []
    for i, (name, v) in enumerate(targets):
        kind = kinds[name]
        value = next(x for x in kind["values"] if x["v"] == v)
        how = "lex" if i % 2 == 0 else "sem"
        options = [t for j, (h, t) in enumerate(kind["queries"])
                   if h == how and j % 2 == PHRASINGS[split]]
        turn = rng.choice(data.OPENERS) + rng.choice(options).format(**value)
        if rng.random() < 0.5:
            turn = rng.choice(data.CONTEXT_TURNS) + "\n" + turn
        queries.append({"query": turn, "target": where[(name, v)], "how": how, "kind": name})
    for m in messages:
        m["day"] = m["day"].strftime("%Y-%m-%d %H:%M:%S")
    return {"user": f"u{seed}", "seed": seed, "messages": messages, "queries": queries,
            "events": len(where) + sum(1 for _, _, d in events if d)}


def generate() -> None:
    SETS.mkdir(exist_ok=True)
    for split, seeds in SPLITS.items():
        doc = {"split": split, "seeds": list(seeds), "phrasings": PHRASINGS[split],
               "users": [user_session(s, split) for s in seeds]}
        path = SETS / f"{split}.json"
        path.write_text(json.dumps(doc, ensure_ascii=False, indent=0) + "\n")
        n = sum(len(u["queries"]) for u in doc["users"])
        ev = [u["events"] for u in doc["users"]]
        print(f"{path.relative_to(ROOT)}: {len(seeds)} users, {n} queries, events per user "
              f"{min(ev)}-{max(ev)}")


# ----------------------------------------------------------------------------- run


def build_home(home: Path, users: list[dict], cache: Path) -> None:
    """Each user's session through `agenvoy append` (one batch per day), then indexed."""
    import shutil

    if home.exists():
        shutil.rmtree(home)
    for u in users:
        batches: dict[str, list[dict]] = defaultdict(list)
        for m in u["messages"]:
            batches[m["day"][:10]].append(m)
        for day in sorted(batches):
            batch = [{"role": m["role"], "content": m["content"]} for m in batches[day]]
            harness.home_cli(home, "append", u["user"], "--messages", "-", "--time",
                       batches[day][0]["day"],
                       input=json.dumps(batch, ensure_ascii=False).encode())
    harness.backfill(home, [u["user"] for u in users], cache)
    (home / "bench-built.json").write_text(json.dumps(sorted(u["user"] for u in users)))


def questions(users: list[dict], split: str) -> RetrievalSet:
    """The harness's set: every query of the split's users, gold = the event's message,
    group = lex / sem."""
    return RetrievalSet("zh_memory", split, [Question(u["user"], q["query"], (q["target"],),
                                                      q["how"])
                                             for u in users for q in u["queries"]], top=TOP)


def apply_fusion(over: dict) -> None:
    """Override fusion constants in this process (--path inprocess, tuning only)."""
    from agenvoy_cli.search import candidates, fusion

    for key, value in over.items():
        if key == "pool":
            candidates.POOL = int(value)
        elif key in (fusion.fuse.__kwdefaults__ or {}):
            fusion.fuse.__kwdefaults__[key] = value
        elif hasattr(fusion, key):
            setattr(fusion, key, value)
        else:
            raise SystemExit(f"unknown fusion setting {key!r}")


def run(args) -> dict:
    doc = json.loads((SETS / f"{args.split}.json").read_text())
    users = doc["users"]
    home = args.home / args.split
    built = home / "bench-built.json"
    if not (args.reuse and built.exists()):
        build_home(home, users, args.cache)
    modes = args.modes.split(",")
    if args.path != "process":
        apply_fusion(json.loads(args.fusion) if args.fusion else {})
    rset = questions(users, args.split)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    with harness.searching(home, args.path, args.cache,
                           home.parent / f"{args.split}-server.log") as search:
        res = harness.evaluate(rset, modes, search)
    out = {"split": args.split, "path": args.path, "fusion": args.fusion or "shipped",
           "n": len(rset.questions), "load": [load0, os.getloadavg()[0]],
           "wall_s": time.perf_counter() - t0, "results": res.summary()}
    out["ranks"] = res.rankings
    return out


def show(out: dict) -> None:
    print(f"{out['split']}: {out['n']} queries, path {out['path']}, fusion {out['fusion']}, "
          f"{out['wall_s']:.0f} s, load {out['load'][0]:.1f} -> {out['load'][1]:.1f}")
    print("| mode | R@5 / R@10 / MRR | lex | sem |")
    print("|---|---|---|---|")
    for mode, r in out["results"].items():
        cells = [f"{r[c]['R@5']:.3f} / {r[c]['R@10']:.3f} / {r[c]['MRR']:.3f}"
                 for c in ("all", "lex", "sem")]
        print(f"| {mode} | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["generate", "run"])
    ap.add_argument("--split", choices=sorted(SPLITS), default="heldout")
    ap.add_argument("--modes", default="keyword,semantic,hybrid")
    ap.add_argument("--path", choices=["process", "inprocess"], default="process")
    ap.add_argument("--fusion", default="", help='inprocess only: JSON {"k": 10, ...}')
    ap.add_argument("--home", type=Path, default=Path("/tmp/agenvoy-bench-zh-memory"))
    ap.add_argument("--cache", type=Path, default=Path("/tmp/agenvoy-bench-zh-memory-cache"))
    ap.add_argument("--reuse", action="store_true", help="reuse the split's home")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    os.environ.pop("AGENVOY_HOME", None)
    os.environ.pop("AGENVOY_EMBEDDER", None)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if args.what == "generate":
        return generate()
    if args.fusion and args.path != "inprocess":
        raise SystemExit("--fusion needs --path inprocess")
    out = run(args)
    show(out)
    if args.json:
        args.json.write_text(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
