"""Long Chinese dialogue queries through `agenvoy search`, against a character-bigram BM25.

    python bench/zh_dialogue.py                       # keyword, semantic, hybrid
    python bench/zh_dialogue.py --modes keyword

A Chinese conversation written for this bench (a user telling an assistant about their
life, each fact followed by the assistant's reply, small talk between), 16 filler messages
after it, and queries that are whole dialogue turns as an agent would pass them: long,
colloquial, no spaces, asking about one fact in other words. Each query is one in-process
`agenvoy search SESSION QUERY --mode M --limit 10 --json` (click's CliRunner over the real
command). The baseline is Okapi BM25 (k1 1.2, b 0.75) over character bigrams of CJK runs
and lower-cased words, over the same messages, implemented here. Reported: hit@1, hit@5,
hit@10 and MRR (top 10) of the fact's message. With --path process the session is indexed
once (`agenvoy backfill --vectors`) and every query is one `agenvoy search ... --json`
process answered by the home's `agenvoy mcp --http` server (bench/locomo_cli.py's Served).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import tempfile
from collections import Counter
from pathlib import Path

import harness  # bench/ is this script's path[0]
from harness import cli, ranked_hits
from probes import UNRELATED

FACTS: list[tuple[str, str]] = [
    ("我表哥在台中開了一家咖啡店，店名叫「慢慢來」，招牌是桂花拿鐵。",
     "聽起來很有特色，下次去台中可以去捧場。"),
    ("我下個月十五號要搬家，新房子在新店，離捷運站走路五分鐘。", "恭喜！需要我幫你列搬家清單嗎？"),
    ("醫生說我的膽固醇偏高，要少吃炸的東西，每週運動三次。",
     "好的，之後推薦食譜我會避開油炸料理。"),
    ("我女兒今年九月上小學一年級，學校在我們家巷口。", "時間過得好快，她一定很期待。"),
    ("公司的年終尾牙改到一月二十日，地點在圓山飯店。", "我會在一月十五號提醒你。"),
    ("我最近開始學烏克麗麗，老師說我的和弦轉換太慢。", "多練習就會越來越順。"),
    ("我們家的狗叫豆花，是一隻米克斯，去年從收容所領養的。", "豆花這個名字好可愛！"),
    ("上週颱風把陽台的花盆都吹倒了，種了三年的九重葛也斷了。", "太可惜了，九重葛很難養那麼大。"),
    ("我的碩士論文題目從機器翻譯改成了台語語音辨識。", "這是很有意義的方向。"),
    ("我的健保卡掉了，要記得去健保署補辦，工本費兩百元。", "補辦的時候記得帶身分證。"),
    ("我上個月第一次跑全程馬拉松，在台北跑完花了四小時四十分。", "恭喜完賽！第一次全馬很不容易。"),
    ("房東說明年開始房租要從兩萬二漲到兩萬五。", "漲幅不小，可以跟房東談談看。"),
    ("我對花生過敏，吃到會起疹子，出門都要帶抗組織胺。", "了解，我會記住你對花生過敏。"),
    ("我爸七十歲生日我們打算在礁溪泡溫泉慶祝。", "很棒的安排，溫泉很適合長輩。"),
    ("我的筆電鍵盤進水了，送修要等兩個禮拜，維修費三千八。", "這段時間可以先用平板或舊電腦。"),
    ("我們部門新來的主管姓林，以前在竹科做半導體。", "希望跟新主管合作順利。"),
    ("我報名了日文檢定N3，考試在十二月第一個星期日。", "加油，還有時間可以準備。"),
    ("阿嬤在嘉義的老家要改建，全家過年會回去討論。", "老房子改建是大事，要好好討論。"),
    ("我把信用卡的自動扣繳改成了每個月五號。", "好的，五號前記得確認帳戶餘額。"),
    ("我老婆懷孕了，預產期是明年三月底。", "恭喜你們！這是天大的好消息。"),
]
SMALL_TALK = [
    ("早安，今天好冷。", "早安，出門記得多穿一件。"),
    ("中午吃了牛肉麵，有點太鹹。", "下次可以請老闆湯少放一點鹽。"),
    ("今天捷運好擠。", "通勤時間總是這樣。"),
    ("昨天看了一部很好笑的電影。", "是哪一部？"),
]
# (query: a whole dialogue turn, index into FACTS)
QUERIES: list[tuple[str, int]] = [
    ("欸我突然想到上次跟你說過我表哥在台中那間咖啡店到底叫什麼名字你還記得嗎", 0),
    ("我搬家的日期是哪一天啊新家是在哪一區我有點忘了", 1),
    ("醫生上次檢查完叮嚀我飲食要注意什麼還有運動要多頻繁", 2),
    ("我女兒什麼時候開始讀小學學校離我們家遠不遠", 3),
    ("今年公司尾牙是哪一天在哪裡舉辦我要先排假", 4),
    ("我之前說我在學什麼樂器來著老師對我有什麼建議", 5),
    ("我們家那隻從收容所帶回來的狗狗叫什麼名字", 6),
    ("之前颱風來的時候我家陽台發生了什麼事情", 7),
    ("我研究所論文後來改成做什麼主題了", 8),
    ("我的健保卡不見了要去哪裡補辦要花多少錢", 9),
    ("我第一次跑全馬是在哪裡跑的成績大概多少", 10),
    ("房東說房租明年要漲到多少錢", 11),
    ("我到底是對什麼食物過敏吃到會怎樣", 12),
    ("我爸過七十大壽我們全家打算去哪裡慶祝", 13),
    ("我電腦送修要多久修理費大概多少", 14),
    ("新來的部門主管叫什麼之前在哪裡工作", 15),
    ("我報名的日文檢定是哪一級什麼時候考試", 16),
    ("嘉義老家的房子後來打算怎麼處理", 17),
    ("信用卡自動扣款我改成每個月幾號了", 18),
    ("我老婆的預產期是什麼時候", 19),
]
FILLER = 16


def conversation() -> tuple[list[dict], dict[int, int]]:
    msgs: list[dict] = []
    where: dict[int, int] = {}
    for i, (fact, reply) in enumerate(FACTS):
        talk = SMALL_TALK[i % len(SMALL_TALK)]
        msgs += [{"role": "user", "content": talk[0]}, {"role": "assistant", "content": talk[1]}]
        where[i] = len(msgs)
        msgs += [{"role": "user", "content": fact}, {"role": "assistant", "content": reply}]
    for i in range(FILLER // 2):
        msgs += [{"role": "user", "content": f"好，下一個 {i}"},
                 {"role": "assistant", "content": "好的"}]
    return msgs, where


_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")


def bigram_tokens(text: str) -> list[str]:
    """Character bigrams of CJK runs (a run of one character is itself) and lower-cased
    alphanumeric words."""
    out: list[str] = []
    for run in _CJK.findall(text):
        out += [run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)]
    out += re.findall(r"[a-z0-9]+", _CJK.sub(" ", text.lower()))
    return out


def bm25_baseline(docs: list[str], query: str, k1: float = 1.2, b: float = 0.75) -> list[int]:
    toks = [Counter(bigram_tokens(d)) for d in docs]
    n = len(docs)
    avg = sum(sum(t.values()) for t in toks) / n
    df = Counter(t for c in toks for t in c)
    q = set(bigram_tokens(query))
    scores = []
    for i, c in enumerate(toks):
        length = sum(c.values())
        s = sum(math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * c[t] * (k1 + 1)
                / (c[t] + k1 * (1 - b + b * length / avg)) for t in q if t in c)
        if s > 0:
            scores.append((s, i))
    return [i for _, i in sorted(scores, key=lambda x: (-x[0], -x[1]))]


def measure(ranked: list[list[int]], targets: list[int]) -> dict[str, float]:
    """hit@1, hit@5, hit@10 and MRR (top 10) of the fact's message (harness.scores)."""
    return harness.mean([harness.scores(r[:10], [t], recall=(), hit=(1, 5, 10))
                         for r, t in zip(ranked, targets)])


def modes(args, out: dict, targets: list[int], where: dict[int, int], search) -> None:
    """Every query in every mode through search(session, query, mode, limit)."""
    for mode in args.modes.split(","):
        ranked = [ranked_hits(search("zh", q, mode, 10)) for q, _ in QUERIES]
        out[mode] = measure(ranked, targets)
        if mode != "keyword":  # the relevance floor: unrelated questions get nothing
            out[mode]["unrelated_empty"] = harness.empty_rate(
                (search("zh", q, mode, 10) for q in UNRELATED), hits_only=False)[0]
        if args.verbose:
            for (q, f), r in zip(QUERIES, ranked):
                print(f"  {mode} {q}: target {where[f]}, hits {r[:5]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", default="keyword,semantic,hybrid")
    ap.add_argument("--json", type=Path)
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--path", choices=["inprocess", "process"], default="inprocess")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/agenvoy-bench-probes-cache"))
    args = ap.parse_args()
    msgs, where = conversation()
    targets = [where[f] for _, f in QUERIES]
    out = {}
    base = [bm25_baseline([m["content"] for m in msgs], q)[:10] for q, _ in QUERIES]
    out["bigram BM25 (baseline)"] = measure(base, targets)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["AGENVOY_HOME"] = tmp
        cli("append", "zh", "--messages", "-", "--time", "2026-01-05 10:00:00",
            input=json.dumps(msgs, ensure_ascii=False).encode())
        if args.path == "process":
            with harness.Served(Path(tmp), ["zh"], args.cache) as served:
                modes(args, out, targets, where, served.search)
        else:
            modes(args, out, targets, where, lambda session, query, mode, limit: cli(
                "search", session, query, "--mode", mode, "--limit", str(limit), "--json"))
    print(f"{len(QUERIES)} long Chinese dialogue queries, {len(msgs)} messages "
          f"({FILLER} filler in the context window)")
    for name, m in out.items():
        empty = (f"  unrelated returned nothing {m['unrelated_empty']}/{len(UNRELATED)}"
                 if "unrelated_empty" in m else "")
        print(f"  {name:24s} hit@1 {m['hit@1']:.2f}  hit@5 {m['hit@5']:.2f}  hit@10 "
              f"{m['hit@10']:.2f}  MRR {m['MRR']:.3f}{empty}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
