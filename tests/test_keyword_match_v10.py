"""The keyword bars (tests/test_keyword_match.py) on a home Agenvoy 1.0 created first: its
messages_fts5 on the trigram tokenizer, its message_meta. Our own index (messages_fts: CJK
bigrams + porter) answers keyword search on either layout, so every promise holds as is."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.agenvoy_sim_v10 import GoAgentV10
from tests.test_keyword_match import *  # noqa: F403 - the same tests, collected here again


@pytest.fixture(autouse=True)
def v10_home(home: Path):
    GoAgentV10(home).close()
    yield
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        fts = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'messages_fts5'"
                           ).fetchone()[0]
    assert "session_meta" not in tables and "trigram" in fts
