"""The ranking's tune and report splits (issue #40), written down before any tuning.

The ranking of semantic and hybrid search (candidate pools, signals, fusion and rerank
rules, their constants) may be chosen by looking at the TUNE data only. Everything else is
a REPORT split: measured through the CLI and written in docs/benchmarks.md, never used to
choose or adjust a rule or a constant. A rule that wins on tune and loses on a report split
is reported as such, not tuned further on that split.

tune
  - LoCoMo conversations 0-4 (every question of categories 1-4; LOCOMO_TUNE)
  - bench/zh_memory_sets/tune.json (users u0-u2, even-numbered phrasings)
  - bench/memorybank_zh.py (#50 item 8; written 2026-12-07 before any figure of it was
    looked at): MemoryBank-SiliconFriend's Chinese memory bank, users 0-6 in the file's
    order (张曼婷 .. 张志强; MEMORYBANK_TUNE)
  - bench/probes_tune.py (`bench/probes.py --split tune`: a second conversation of 20
    facts, written 2026-12-05 after the report probes below had been looked at; the
    attribution of a question about the user and hybrid's incidental keyword matches
    were chosen on it)
report
  - LoCoMo conversations 5-9 (all their questions, categories 1-4; LOCOMO_REPORT)
  - bench/zh_memory_sets/heldout.json (users u3-u5, odd-numbered phrasings)
  - bench/floor_data heldout.json, fresh.json, fresh_dense.json (bench/floor.py splits
    heldout, fresh, fresh2), and the small sessions made from them (the floor on small
    sessions, issue #40)
  - bench/probes.py (zh->en, paraphrase, unrelated)
  - bench/memorybank_zh.py: users 7-14 (宫晓燕 .. 焦彦; MEMORYBANK_REPORT)

MADial-Bench is the CEO's check and in no split here: nothing is tuned or reported on it.

The floor's own tune files (bench/floor_data tune*.json) stay the floor's tune split; the
ranking is not tuned on them either.
"""

from __future__ import annotations

LOCOMO_TUNE = (0, 1, 2, 3, 4)
LOCOMO_REPORT = (5, 6, 7, 8, 9)
ZH_MEMORY_TUNE = "tune"
ZH_MEMORY_REPORT = "heldout"
FLOOR_REPORT = ("heldout", "fresh", "fresh2")
PROBES_REPORT = ("zh->en", "paraphrase", "unrelated")  # bench/probes.py --split report
PROBES_TUNE = "bench/probes_tune.py"
MEMORYBANK_TUNE = (0, 1, 2, 3, 4, 5, 6)  # user index in memory_bank_cn.json's order
MEMORYBANK_REPORT = (7, 8, 9, 10, 11, 12, 13, 14)


def locomo_split(conversation: int) -> str:
    """'tune' or 'report' for a LoCoMo conversation index."""
    return "tune" if conversation in LOCOMO_TUNE else "report"
