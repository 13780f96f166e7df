"""Time windows on the corpora of the one pipeline (search/pipeline.py `within`): `notes
search` by when a note last changed, `rag search` by when a document was last modified,
with the options and parser of `search` (--range, --since, --until; timespec.py), through
the CLI, the API and the HTTP server's fast path."""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

import pytest

from tests.helpers.rag import ok

DAY = 86_400

NOTES = {  # name: (content, days ago)
    "redis-password": ("The Redis password on the cache server is rotated every month.", 2),
    "deploy-checklist": ("Release checklist: freeze, tag, build, canary, announce. The "
                         "Redis cache is flushed after the canary.", 20),
    "sourdough": ("Sourdough: 75% hydration, an overnight cold proof, bake at 250 C.", 40),
}


def names(doc: dict[str, Any], key: str = "name") -> list[str]:
    return [r[key] for r in doc["results"]]


@pytest.fixture
def dated_notes(run, home):
    for name, (content, _) in NOTES.items():
        ok(run("notes", "add", name, "--content", content))
    now = time.time_ns()
    with sqlite3.connect(home / ".store" / "history.db") as conn:  # written days ago
        for name, (_, ago) in NOTES.items():
            conn.execute("UPDATE notes SET updated_at = ?, created_at = ? WHERE name = ?",
                         (now - ago * DAY * 10**9, now - ago * DAY * 10**9, name))


@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_notes_search_keeps_the_notes_changed_in_the_window(run, dated_notes, mode):
    def found(*args: str) -> list[str]:
        return names(ok(run("notes", "search", "redis cache", "--mode", mode, "--json",
                            *args)))

    assert set(found()) >= {"redis-password", "deploy-checklist"}
    assert found("--range", "7d") == ["redis-password"]
    assert "redis-password" not in found("--until", "7 days ago")
    assert "deploy-checklist" in found("--until", "7 days ago")
    assert found("--since", "30 days ago", "--until", "10 days ago") == ["deploy-checklist"]


def test_notes_window_through_the_api_and_bad_times(run, dated_notes):
    from agenvoy_cli import Memory

    with Memory() as mem:
        doc = mem.search_notes("sourdough bread", mode="hybrid", since="60 days ago",
                               until="30 days ago")
        assert names(doc) == ["sourdough"]
        assert mem.search_notes("sourdough bread", mode="keyword", range="7d")["results"] == []
    res = run("notes", "search", "redis", "--since", "next tuesday-ish")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    res = run("notes", "search", "redis", "--since", "1d ago", "--until", "3d ago")
    assert res.exit_code == 2 and "empty" in res.stderr


@pytest.fixture
def dated_docs(run, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    files = {"backup.md": ("# Backups\n\nThe nightly backup runs at 02:00 and keeps "
                           "fourteen days of snapshots.\n", 3),
             "restore.md": ("# Restore\n\nRestore a backup snapshot with the restore "
                            "script; the nightly job must be paused first.\n", 50)}
    now = time.time()
    for name, (content, ago) in files.items():
        path = docs / name
        path.write_text(content)
        os.utime(path, (now - ago * DAY, now - ago * DAY))
    ok(run("rag", "create", "docs", "--path", str(docs)))
    return docs


@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_rag_search_keeps_the_documents_modified_in_the_window(run, dated_docs, mode):
    def found(*args: str) -> list[str]:
        doc = ok(run("rag", "search", "docs", "nightly backup snapshot", "--mode", mode,
                     "--no-server", "--json", *args))
        return sorted({os.path.basename(r["path"]) for r in doc["results"]})

    assert found() == ["backup.md", "restore.md"]
    assert found("--range", "1mo") == ["backup.md"]
    assert found("--until", "1mo ago") == ["restore.md"]
    assert found("--since", "2d ago") == []


def test_rag_window_through_the_api(run, dated_docs):
    from agenvoy_cli import Memory

    with Memory() as mem:
        doc = mem.rag_search("restore script", ["docs"], mode="keyword", until="10 days ago")
        assert [os.path.basename(r["path"]) for r in doc["results"]] == ["restore.md"]
        assert mem.rag_search("restore script", ["docs"], mode="keyword",
                              range="7d")["results"] == []


def test_the_mcp_tools_take_a_time_range(run, dated_notes, dated_docs):
    pytest.importorskip("mcp")
    from tests.mcp_client import connect, run_async

    async def body() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with connect() as s:
            for span in ("all", "7d"):
                res = await s.call_tool("search_notes", {"query": "redis cache",
                                                         "mode": "keyword",
                                                         "time_range": span})
                out["notes", span] = names(res.structured_content)
                res = await s.call_tool("search_rag", {"q": "nightly backup snapshot",
                                                       "mode": "hybrid", "db": "docs",
                                                       "time_range": span})
                out["rag", span] = sorted({os.path.basename(r["path"])
                                           for r in res.structured_content["results"]})
            res = await s.call_tool("search_notes", {"query": "redis", "time_range": "2d"})
            out["bad"] = res.is_error
        return out

    out = run_async(body)
    assert set(out["notes", "all"]) == {"redis-password", "deploy-checklist"}
    assert out["notes", "7d"] == ["redis-password"]
    assert out["rag", "all"] == ["backup.md", "restore.md"]
    assert out["rag", "7d"] == ["backup.md"]
    assert out["bad"]
