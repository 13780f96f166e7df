"""`server = "auto"` for every command that would load the models (issue #51 item 6): `notes
search`, `rag search`, `session tasks --mode semantic|hybrid` and an `errors lookup` that
embeds its query start the home's background server and are answered by it, with the same
document as the local answer (`--no-server`); their keyword forms load no model and start
nothing.

Real parts: the real program in subprocesses, the real background server on 127.0.0.1 and
the home's Unix socket, the default offline embedder. Every server is stopped (killed if need
be) in a finally."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.agenvoy_sim_v10 import GoAgentV10
from tests.conftest import agenvoy

pytest.importorskip("mcp")

START = 300  # seconds a command that starts the server may take on a busy CI machine


@contextlib.contextmanager
def auto(home: Path):
    """The home set to `server = auto`; whatever server starts is stopped after."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps({"agenvoy": {"server": "auto"}}))
    try:
        yield
    finally:
        agenvoy("server", "stop", timeout=120)
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((home / ".store" / "server.pid").read_text()), signal.SIGKILL)


def doc(*args: str) -> dict[str, Any]:
    run = agenvoy(*args, "--json", timeout=START)
    assert run.returncode == 0, run.stderr
    return orjson.loads(run.stdout)  # type: ignore[no-any-return]


def running() -> bool:
    return doc("server", "status")["running"]  # type: ignore[no-any-return]


def same(served: dict[str, Any], local: dict[str, Any]) -> None:
    """The server's document is the local one: every field, scores to 4 decimals (the two
    processes embed the query with their own thread counts)."""
    assert served.pop("served_by") == "server" and local.pop("served_by") == "local"

    def rounded(value: Any) -> Any:
        if isinstance(value, float):
            return round(value, 4)
        if isinstance(value, dict):
            return {k: rounded(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rounded(v) for v in value]
        return value
    assert rounded(served) == rounded(local)


def test_notes_search_by_meaning_starts_the_server_and_answers_as_locally(home: Path) -> None:
    for name, text in (("redis", "The cache server's Redis password rotates every month."),
                       ("bread", "Sourdough: 75% hydration, an overnight cold proof."),
                       ("deploy", "Releases go out on Tuesdays after the canary.")):
        assert agenvoy("notes", "add", name, "--content", text).returncode == 0
    with auto(home):
        keyword = doc("notes", "search", "Redis", "--mode", "keyword")
        assert keyword["served_by"] == "local" and keyword["results"]
        assert not running()  # keyword mode loads no model: nothing started
        served = doc("notes", "search", "credentials of the cache", "--mode", "semantic",
                     "--budget", "120")
        assert running()
        local = doc("notes", "search", "credentials of the cache", "--mode", "semantic",
                    "--budget", "120", "--no-server")
        assert served["results"] and served["results"][0]["name"] == "redis"
        same(served, local)
        hybrid = doc("notes", "search", "bread recipe", "--budget", "120")
        assert hybrid["served_by"] == "server"


def test_session_tasks_by_meaning_starts_the_server_and_answers_as_locally(
        home: Path) -> None:
    go = GoAgentV10(home)
    go.say("s", "user", "hello")
    now = int(time.time())
    for task_hash, objective, reply in (
            ("a1", "Rotate the Redis password on the cache server",
             "Rotated the password and restarted the cache."),
            ("a2", "Find a good recipe for sourdough bread",
             "Suggested a 75% hydration loaf with an overnight cold proof.")):
        go.finish_task("s", task_hash, objective, reply=reply, end_at=now - 60)
    go.close()
    with auto(home):
        keyword = doc("session", "tasks", "s", "Redis", "--mode", "keyword")
        assert keyword["served_by"] == "local" and keyword["tasks"]
        listed = doc("session", "tasks", "s")
        assert listed["served_by"] == "local" and listed["count"] == 2
        assert not running()
        served = doc("session", "tasks", "s", "baking", "a", "loaf", "--mode", "semantic",
                     "--budget", "120")
        assert running()
        local = doc("session", "tasks", "s", "baking", "a", "loaf", "--mode", "semantic",
                    "--budget", "120", "--no-server")
        same(served, local)
        assert doc("session", "tasks", "s", "Redis", "--mode", "keyword")[
            "served_by"] == "server"  # a running server answers every mode


def test_errors_lookup_starts_the_server_only_when_it_would_embed(home: Path) -> None:
    for n in range(2):
        run = agenvoy("errors", "record", "--tool", "fetch_page", "-k", "timeout",
                      "--symptom", f"fetch_page timed out on site {n}", "--action", "retried",
                      "--outcome", "failed")
        assert run.returncode == 0, run.stderr
    with auto(home):
        keyword = doc("errors", "lookup", "timeout")  # a known keyword: no vectors
        assert keyword["served_by"] == "local" and keyword["mode"] == "keyword"
        assert not running()
        text = "error: the page fetch took too long and was aborted after 30 s"
        served = doc("errors", "lookup", text, "--budget", "120")
        assert running() and served["mode"] == "semantic"
        local = doc("errors", "lookup", text, "--budget", "120", "--no-server")
        for record in served["records"] + local["records"]:
            record.pop("expires_at", None)  # each lookup renews what it returns
            record.pop("expires_at_ns", None)
            record.pop("last_used_at", None)
            record.pop("last_used_at_ns", None)
        same(served, local)


def test_rag_search_by_meaning_starts_the_server(home: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "cache.md").write_text("# Cache\n\nThe Redis password rotates every month.\n")
    (docs / "bread.md").write_text("# Bread\n\nSourdough needs an overnight cold proof.\n")
    run = agenvoy("rag", "create", "kb", "--path", str(docs), timeout=START)
    assert run.returncode == 0, run.stderr
    with auto(home):
        keyword = doc("rag", "search", "kb", "Redis", "--mode", "keyword")
        assert keyword["served_by"] == "local" and keyword["results"]
        assert not running()
        served = doc("rag", "search", "kb", "credentials of the cache", "--mode", "semantic")
        assert running()
        local = doc("rag", "search", "kb", "credentials of the cache", "--mode", "semantic",
                    "--no-server")
        same(served, local)
