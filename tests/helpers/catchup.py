"""What the tests of the search budget share (tests/test_catchup.py, test_budget_rate.py):
a conversation with one fact among small talk, and the stand-in embedder on a clock."""

from __future__ import annotations

import json
from pathlib import Path

from tests.words_embedder import WordsEmbedder


def conversation(n: int) -> list[dict[str, str]]:
    out = []
    for i in range(n):
        text = f"turn {i}: small talk about the weather and lunch plans"
        if i == 3:
            text = "turn 3: my cat Mochi hides under the bed from the vacuum cleaner"
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return out


def append(run, session: str, n: int, tmp_path: Path) -> None:
    path = tmp_path / f"{session}-{n}.json"
    path.write_text(json.dumps(conversation(n)))
    res = run("append", session, "--messages", str(path))
    assert res.exit_code == 0, res.stderr


class CharClock(WordsEmbedder):
    """The stand-in at a cost per character, charged to a clock of its own that the
    catch-up reads (search/catchup.py's `time`): what a budget buys is then counted in
    characters, the same on a quiet machine and a busy one."""

    per_char = 0.0005  # 2,000 characters: 1 s

    def __init__(self) -> None:
        super().__init__()
        self.now = 1000.0
        self.charged = 0.0  # seconds of embedding work charged so far
        self.costs: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        cost = sum(min(len(t), 2000) for t in texts) * self.per_char
        self.now += cost
        self.charged += cost
        self.costs += [min(len(t), 2000) * self.per_char for t in texts]
        return super().embed_documents(texts)
