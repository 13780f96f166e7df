"""Every note code docs/json-vocabulary.md lists is emitted: the test walks the code
tables (`search`, `rag search`, `notes search`, `errors lookup`) and runs, through the CLI
(the MCP server for `warning`), a scenario that makes each code appear in the --json
document. A code documented but never emitted, or emitted but not documented (the code's
NOTE_CODES, the schemas' enums), fails here."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from tests.helpers.search import add, find

ROOT = Path(__file__).resolve().parent.parent
VOCABULARY = ROOT / "docs" / "json-vocabulary.md"


def documented() -> dict[str, list[str]]:
    """{command: [code, ...]} from the tables headed "| `COMMAND` note code | when |"."""
    out: dict[str, list[str]] = {}
    command = None
    for line in VOCABULARY.read_text(encoding="utf-8").splitlines():
        head = re.match(r"\| `([a-z ]+)` note code \|", line)
        if head:
            command = head.group(1)
            out[command] = []
        elif command and line.startswith("| `"):
            out[command].append(line.split("`")[1])
        elif command and not line.startswith("|"):
            command = None
    return out


def codes(doc: dict) -> list[str]:
    return [n["code"] for n in doc["notes"]]


def _many(run, n: int = 40) -> None:
    add(run, "s", *[f"message {i} about topic{i % 7} and more words" for i in range(n)])


# ----------------------------------------------------------------------------- search


def s_any_term(run, home, tmp_path, monkeypatch) -> dict:
    add(run, "s", "the Redis TTL expired", "TTL of the cache is 60 s")
    return find(run, "s", "ttl memcached")


def s_nothing_searchable(run, home, tmp_path, monkeypatch) -> dict:
    add(run, "s", "some words", "ok")
    return find(run, "s", "???")


def s_context_window(run, home, tmp_path, monkeypatch) -> dict:
    add(run, "s", "only one message")
    return find(run, "s", "message", mode="semantic")


def s_outside_window(run, home, tmp_path, monkeypatch) -> dict:
    add(run, "s", "the redis TTL is 300 seconds", "noted")  # 2024: outside the last day
    return find(run, "s", "redis", extra=("--range", "1d"))


def s_other_script(run, home, tmp_path, monkeypatch) -> dict:
    add(run, "s", "My sister Anna lives in Lisbon.", "Noted.")
    return find(run, "s", "我姐姐住在哪裡", mode="keyword")


def s_not_related(run, home, tmp_path, monkeypatch) -> dict:
    _many(run)
    monkeypatch.setenv("AGENVOY_SEARCH_FLOOR", "2")  # no message clears it
    return find(run, "s", "topic3", mode="semantic")


def s_unindexed(run, home, tmp_path, monkeypatch) -> dict:
    _many(run)
    return find(run, "s", "topic3", mode="semantic", extra=("--budget", "0"))


def s_budget_spent(run, home, tmp_path, monkeypatch) -> dict:
    _many(run)
    return find(run, "s", "topic3", mode="semantic", extra=("--budget", "0.000001"))


def s_unarchived(run, home, tmp_path, monkeypatch) -> dict:
    add(run, "s", "archived words", "ok")
    path = home / "sessions" / "s" / "history.json"
    history = json.loads(path.read_text())
    history.append({"role": "user", "content": "written by another agent, words"})
    path.write_text(json.dumps(history))
    return find(run, "s", "words")


def s_unsearchable(run, home, tmp_path, monkeypatch) -> dict:
    from tests.helpers.chroma import make_inconsistent

    make_inconsistent(home, run)
    return find(run, "s", "deploy", mode="semantic")


def s_warning(run, home, tmp_path, monkeypatch) -> dict:
    """An MCP tool's own warning: get_context over a damaged summary.json."""
    from tests.mcp_client import connect, run_async

    add(run, "s", "hello", "hi")
    (home / "sessions" / "s" / "summary.json").write_text("{not json")

    async def body():
        async with connect("--session", "s") as s:
            res = await s.call_tool("get_context", {})
            return res.structured_content

    return dict(run_async(body))


# ----------------------------------------------------------------------------- rag search


def _docs(run, tmp_path, *extra: str) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Cache\n\nThe Redis TTL expired again.\n")
    (docs / "b.md").write_text("# Other\n\nA TTL of 60 seconds.\n")
    res = run("rag", "create", "docs", "--path", str(docs), *extra)
    assert res.exit_code == 0, res.stderr


def _rag(run, query: str, mode: str = "keyword") -> dict:
    res = run("rag", "search", "docs", query, "--mode", mode, "--json")
    assert res.exit_code == 0, res.stderr
    return res.json()


def r_any_term(run, home, tmp_path, monkeypatch) -> dict:
    _docs(run, tmp_path, "--no-vectors")
    return _rag(run, "ttl memcached")


def r_nothing_searchable(run, home, tmp_path, monkeypatch) -> dict:
    _docs(run, tmp_path, "--no-vectors")
    return _rag(run, "!!! ()")


def r_no_vectors(run, home, tmp_path, monkeypatch) -> dict:
    _docs(run, tmp_path, "--no-vectors")
    return _rag(run, "redis", "semantic")


def r_pending(run, home, tmp_path, monkeypatch) -> dict:
    """The state an interrupted sync leaves (tests/rag: test_interrupted_sync_...): a file
    still 'pending'."""
    _docs(run, tmp_path)
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        conn.execute("UPDATE rag_files SET state = 'pending' WHERE path LIKE '%b.md'")
    return _rag(run, "ttl", "hybrid")


# ----------------------------------------------------------------------------- notes search


def _notes(run, query: str, mode: str = "keyword", *extra: str) -> dict:
    for text in ("# Redis\n\nThe Redis TTL is 60 s.", "# Cache\n\nTTL of the cache."):
        assert run("notes", "add", "--content", text).exit_code == 0
    res = run("notes", "search", query, "--mode", mode, *extra, "--json")
    assert res.exit_code == 0, res.stderr
    return res.json()


def n_any_term(run, home, tmp_path, monkeypatch) -> dict:
    return _notes(run, "ttl memcached")


def n_nothing_searchable(run, home, tmp_path, monkeypatch) -> dict:
    return _notes(run, "???")


def n_no_notes(run, home, tmp_path, monkeypatch) -> dict:
    res = run("notes", "search", "redis", "--json")
    assert res.exit_code == 0, res.stderr
    return res.json()


def n_unindexed(run, home, tmp_path, monkeypatch) -> dict:
    return _notes(run, "redis", "semantic", "--budget", "0")


def n_no_vectors(run, home, tmp_path, monkeypatch) -> dict:
    monkeypatch.setenv("AGENVOY_EMBEDDER", "python:no_such_module_here:Embedder")
    return _notes(run, "redis", "hybrid")


def n_warning(run, home, tmp_path, monkeypatch) -> dict:
    """An MCP tool's own warning: search_notes when a legacy knowledge/ file is not text."""
    from tests.mcp_client import connect, run_async

    (home / "knowledge").mkdir(parents=True)
    (home / "knowledge" / "logo.md").write_bytes(b"\x89PNG\x00")

    async def body():
        async with connect() as s:
            res = await s.call_tool("search_notes", {"query": "redis", "mode": "keyword"})
            return res.structured_content

    return dict(run_async(body))


# ----------------------------------------------------------------------------- errors lookup


def e_not_related(run, home, tmp_path, monkeypatch) -> dict:
    monkeypatch.setenv("AGENVOY_ERRORS_SEMANTIC", "0")
    res = run("errors", "record", "--tool", "bash", "-k", "permission", "--symptom",
              "bash: ./deploy.sh: Permission denied", "--action", "sudo", "--outcome", "failed")
    assert res.exit_code == 0, res.stderr
    res = run("errors", "lookup", "--json", "--", "bash: jq: command not found")
    assert res.exit_code == 0, res.stderr
    return res.json()


def e_warning(run, home, tmp_path, monkeypatch) -> dict:
    """An MCP tool's own warning: search_error_history when the embedder the records were
    embedded with cannot be loaded (the words decide)."""
    from tests.mcp_client import connect, run_async

    res = run("errors", "record", "--tool", "bash", "-k", "permission", "--symptom",
              "bash: ./deploy.sh: Permission denied", "--action", "sudo", "--outcome", "failed")
    assert res.exit_code == 0, res.stderr

    async def body():
        async with connect(env={"AGENVOY_EMBEDDER": "python:no_such_module_here:Embedder"}) as s:
            res = await s.call_tool("search_error_history",
                                    {"keyword": "bash: ./build.sh: Permission denied"})
            return res.structured_content

    return dict(run_async(body))


# ----------------------------------------------------------------------------- any corpus


def _no_profile(monkeypatch) -> None:
    """The stand-in embedder: a model without a calibration profile (models/profiles.py)."""
    from tests import words_embedder

    words_embedder.use(monkeypatch, words_embedder.WordsEmbedder())


def s_uncalibrated(run, home, tmp_path, monkeypatch) -> dict:
    _no_profile(monkeypatch)
    _many(run)
    return find(run, "s", "topic3", mode="semantic")


def n_uncalibrated(run, home, tmp_path, monkeypatch) -> dict:
    _no_profile(monkeypatch)
    return _notes(run, "redis", "semantic")


def r_uncalibrated(run, home, tmp_path, monkeypatch) -> dict:
    _no_profile(monkeypatch)
    _docs(run, tmp_path)
    return _rag(run, "redis", "semantic")


def e_uncalibrated(run, home, tmp_path, monkeypatch) -> dict:
    _no_profile(monkeypatch)
    res = run("errors", "record", "--tool", "bash", "-k", "permission", "--symptom",
              "bash: ./deploy.sh: Permission denied", "--action", "sudo", "--outcome", "failed")
    assert res.exit_code == 0, res.stderr
    res = run("errors", "lookup", "--json", "--semantic", "--",
              "bash: ./deploy.sh: Permission denied")
    assert res.exit_code == 0, res.stderr
    return res.json()


def n_not_related(run, home, tmp_path, monkeypatch) -> dict:
    monkeypatch.delenv("AGENVOY_EMBEDDER")  # the built-in model: the floor is calibrated
    return _notes(run, "What is the capital of France?", "semantic")


def r_not_related(run, home, tmp_path, monkeypatch) -> dict:
    monkeypatch.delenv("AGENVOY_EMBEDDER")  # the built-in model: the floor is calibrated
    _docs(run, tmp_path)
    return _rag(run, "What is the capital of France?", "semantic")


SCENARIOS: dict[tuple[str, str], Callable[..., dict]] = {
    ("notes search", "not_related"): n_not_related,
    ("rag search", "not_related"): r_not_related,
    ("search", "uncalibrated"): s_uncalibrated,
    ("notes search", "uncalibrated"): n_uncalibrated,
    ("rag search", "uncalibrated"): r_uncalibrated,
    ("errors lookup", "uncalibrated"): e_uncalibrated,
    ("errors lookup", "not_related"): e_not_related,
    ("errors lookup", "warning"): e_warning,
    ("notes search", "any_term"): n_any_term,
    ("notes search", "nothing_searchable"): n_nothing_searchable,
    ("notes search", "no_notes"): n_no_notes,
    ("notes search", "unindexed"): n_unindexed,
    ("notes search", "no_vectors"): n_no_vectors,
    ("notes search", "warning"): n_warning,
    ("search", "any_term"): s_any_term,
    ("search", "nothing_searchable"): s_nothing_searchable,
    ("search", "context_window"): s_context_window,
    ("search", "outside_window"): s_outside_window,
    ("search", "not_related"): s_not_related,
    ("search", "other_script"): s_other_script,
    ("search", "unindexed"): s_unindexed,
    ("search", "budget_spent"): s_budget_spent,
    ("search", "unarchived"): s_unarchived,
    ("search", "unsearchable"): s_unsearchable,
    ("search", "warning"): s_warning,
    ("rag search", "any_term"): r_any_term,
    ("rag search", "nothing_searchable"): r_nothing_searchable,
    ("rag search", "no_vectors"): r_no_vectors,
    ("rag search", "pending"): r_pending,
}


def _documented_pairs() -> list[tuple[str, str]]:
    return [(cmd, code) for cmd, cs in documented().items() for code in cs]


@pytest.mark.parametrize(("command", "code"), _documented_pairs())
def test_every_documented_note_code_is_emitted(command, code, run, home, words,
                                               tmp_path, monkeypatch):
    scenario = SCENARIOS.get((command, code))
    assert scenario is not None, f"{command}: note code {code!r} has no scenario here"
    doc = scenario(run, home, tmp_path, monkeypatch)
    assert code in codes(doc), (command, code, doc.get("notes"))
    note = next(n for n in doc["notes"] if n["code"] == code)
    assert set(note) == {"code", "message"} and note["message"].strip()


def test_the_documented_codes_are_the_emitted_ones_and_the_schemas():
    from agenvoy_cli.errormem.ranking import NOTE_CODES as ERRORS_CODES
    from agenvoy_cli.notes.search import NOTE_CODES as NOTES_CODES
    from agenvoy_cli.rag.search import NOTE_CODES as RAG_CODES
    from agenvoy_cli.search.results import NOTE_CODES

    doc = documented()
    assert set(doc) == {"search", "rag search", "notes search", "errors lookup"}
    assert set(doc["errors lookup"]) == set(ERRORS_CODES) | {"warning"}
    assert set(doc["search"]) == set(NOTE_CODES) | {"warning"}  # warning: server/handlers
    assert set(doc["rag search"]) == set(RAG_CODES)
    assert set(doc["notes search"]) == set(NOTES_CODES) | {"warning"}
    assert set(SCENARIOS) == set(_documented_pairs())
    for name, command in (("search", "search"), ("rag-search", "rag search"),
                          ("notes-search", "notes search"),
                          ("errors-lookup", "errors lookup")):
        schema = orjson.loads((ROOT / "docs" / "schema" / f"{name}.json").read_bytes())
        enum = schema["$defs"]["note"]["properties"]["code"]["enum"]
        assert set(enum) == set(doc[command]), name
