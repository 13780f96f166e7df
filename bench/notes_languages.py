#!/usr/bin/env python3
"""Knowledge notes found across languages (#39), through the CLI.

Twelve operator notes (six English, six Chinese) and 24 questions, each asked in the other
language than its note's and in the same one; every question runs as `agenvoy notes search
--json --mode M` in a new process. Reports top-1 and top-3 per mode and language pair.

    python bench/notes_languages.py [--modes hybrid,semantic,keyword]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import harness  # bench/ is this script's path[0]: top-1 / top-3 are its hit@1 / hit@3

ROOT = Path(__file__).resolve().parent.parent

NOTES = {
    "deploy": "# Deploy rules\n\nProduction deploys go through the release branch only; never "
              "run database migrations by hand on production.",
    "oncall": "# On-call\n\nThe on-call engineer answers pages within 15 minutes and writes a "
              "post-mortem for every outage.",
    "style": "# Python style\n\nUse ruff and mypy in strict mode; every public function has "
             "type hints and a docstring.",
    "secrets": "# Secrets\n\nAPI keys live in the vault; never commit them, rotate them every "
               "90 days.",
    "reviews": "# Code review\n\nEvery change needs one approving review; the author merges "
               "after CI is green.",
    "coffee": "# Office coffee\n\nThe team drinks oat milk flat whites; the machine is "
              "descaled on Fridays.",
    "charset": "# 資料庫規範\n\n所有資料表都使用 utf8mb4 字元集，主鍵一律用 bigint 自增。",
    "leave": "# 請假流程\n\n請假需提前三天在人資系統申請，並通知直屬主管。",
    "backup": "# 備份策略\n\n每天凌晨兩點做完整備份，保留三十天，每月演練一次還原。",
    "meeting": "# 週會\n\n每週一早上十點開週會，每人報告上週進度與本週計畫。",
    "logging": "# 日誌格式\n\n服務日誌一律輸出 JSON，必須包含 request_id 與時間戳記。",
    "lunch": "# 午餐\n\n週五中午團隊一起吃飯，費用由部門預算支出。",
}
QUESTIONS = [  # (note, question, same language as the note?)
    ("deploy", "how do we ship to production?", True),
    ("deploy", "怎麼部署到正式環境？", False),
    ("oncall", "how fast must on-call answer a page?", True),
    ("oncall", "值班的人多久要回應告警？", False),
    ("style", "which linters do we use for Python?", True),
    ("style", "Python 程式碼要用什麼檢查工具？", False),
    ("secrets", "where do API keys go?", True),
    ("secrets", "API 金鑰應該放在哪裡？", False),
    ("reviews", "who merges a pull request?", True),
    ("reviews", "程式碼審查的規定是什麼？", False),
    ("coffee", "what milk does the team like in coffee?", True),
    ("coffee", "大家喝咖啡加什麼奶？", False),
    ("charset", "資料表用什麼字元集？", True),
    ("charset", "which character set do database tables use?", False),
    ("leave", "請假要多早申請？", True),
    ("leave", "how early must I request time off?", False),
    ("backup", "備份保留多久？", True),
    ("backup", "how long are backups kept?", False),
    ("meeting", "週會是什麼時候？", True),
    ("meeting", "when is the weekly meeting?", False),
    ("logging", "日誌要用什麼格式？", True),
    ("logging", "what format must service logs use?", False),
    ("lunch", "團隊聚餐是哪一天？", True),
    ("lunch", "which day is the team lunch?", False),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="hybrid,semantic,keyword")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "AGENVOY_HOME": str(Path(tmp) / "home")}

        def agenvoy(*a: str) -> dict:
            res = subprocess.run([sys.executable, "-m", "agenvoy_cli", *a, "--json"],
                                 capture_output=True, cwd=ROOT, env=env, timeout=300)
            if res.returncode != 0:
                raise SystemExit(res.stderr.decode())
            return json.loads(res.stdout)

        names = {key: agenvoy("notes", "add", "--content", text)["name"]
                 for key, text in NOTES.items()}
        out = {}
        for mode in args.modes.split(","):
            for same in (True, False):
                asked = [q for q in QUESTIONS if q[2] == same]
                rows = [harness.scores([h["name"] for h in agenvoy(
                    "notes", "search", "-q", question, "--mode", mode, "-n", "3")["results"]],
                    [names[key]], recall=(), hit=(1, 3)) for key, question, _ in asked]
                top1 = int(sum(r["hit@1"] for r in rows))
                top3 = int(sum(r["hit@3"] for r in rows))
                label = f"{mode} / {'same language' if same else 'across languages'}"
                out[label] = f"top-1 {top1}/{len(asked)}, top-3 {top3}/{len(asked)}"
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
