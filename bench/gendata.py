"""Generated chat text shared by the benches (bench/scale.py, bench/search_speed.py): a
Zipf-ish mix of agent-work words, every fifth message with a few Chinese characters, so that
common, rare and CJK queries all have something to find."""

from __future__ import annotations

import random

_WORDS = ("memory agent session search archive vector index compact summary error tool retry "
         "deploy server database migration timeout config backup restore network cache "
         "python golang sqlite chroma embed model query result token window context user "
         "assistant message history budget meeting travel dinner project release bug fix "
         "review test build docker kernel queue worker cron schedule alert metric log")
WORDS = _WORDS.split()
ZH = "記憶錯誤會話搜尋向量索引壓縮摘要工具部署伺服器資料庫遷移逾時設定備份網路快取"


def text(rng: random.Random, i: int) -> str:
    """Message `i`: 8-40 words (half from a Pareto head), CJK in every fifth."""
    n = rng.randint(8, 40)
    words = [WORDS[min(int(rng.paretovariate(1.1)) - 1, len(WORDS) - 1)]
             if rng.random() < 0.5 else rng.choice(WORDS) for _ in range(n)]
    if i % 5 == 0:
        a = rng.randrange(len(ZH) - 4)
        words.append(ZH[a:a + rng.randint(2, 6)])
    return f"message {i}: " + " ".join(words)
