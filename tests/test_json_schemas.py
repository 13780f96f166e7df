"""Issue #18: every command's --json output (success and error) validates against its JSON
Schema in docs/schema/, and follows the vocabulary (docs/json-vocabulary.md) wherever a
field is: `*_at` an RFC 3339 time, `*_at_ns` and `*_count` integers, schema_version first."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers.schemas import RFC3339, SCHEMAS, validate
from tests.helpers.summaries import build


def ok(run, *args: str, input: str | None = None) -> dict:
    res = run(*args, "--json", input=input)
    assert res.exit_code == 0, (args, res.stderr)
    return json.loads(res.stdout)


def test_every_schema_is_valid_and_used():
    names = {p.stem for p in SCHEMAS.glob("*.json")}
    # the server's start is validated where a server is started (tests/test_server_lifecycle.py)
    text = Path(__file__).read_text() + (Path(__file__).parent /
                                         "test_server_lifecycle.py").read_text()
    used = set(re.findall(r'[)cd], "([a-z][a-z-]*)"\)$', text, re.M))
    assert names == used, (names - used, used - names)


def test_conversation_commands(run, home, llm):
    validate(ok(run, "append", "s", "--role", "user", "--content", "hello world"), "append")
    build(run, "s", 6, first=1, first_role="assistant")
    validate(ok(run, "context", "s"), "context")
    validate(ok(run, "compact", "s"), "compact")
    validate(ok(run, "compact", "--all"), "compact-all")
    validate(ok(run, "search", "s", "-q", "hello", "--mode", "keyword"), "search")
    validate(ok(run, "summarize", "s", "--dry-run"), "summarize")
    doc = ok(run, "summarize", "s")
    validate(doc, "summarize")
    assert doc["sessions"][0]["summarized"] == doc["sessions"][0]["chunk_count"] == 1
    assert RFC3339.match(doc["sessions"][0]["cursor_at"])
    doc = ok(run, "forget", "s", "--match", "hello", "--dry-run")
    validate(doc, "forget")
    assert doc["count"] == 1 and doc["forgotten"] == 0 and RFC3339.match(
        doc["messages"][0]["sent_at"])
    validate(ok(run, "forget", "s", "--match", "hello", "--yes"), "forget")
    validate(ok(run, "backfill", "s"), "backfill")
    validate(ok(run, "session", "list"), "session-list")
    validate(ok(run, "session", "show", "s"), "session-show")
    validate(ok(run, "doctor"), "doctor")
    validate(ok(run, "session", "tasks", "s", "deploy"), "session-tasks")
    ok(run, "append", "t", "--role", "user", "--content", "x")
    doc = ok(run, "session", "remove", "t", "--yes")
    validate(doc, "session-clear")
    assert doc["deleted"] == 1 and doc["has_summary"] is False and doc["summary"] is None
    doc = ok(run, "session", "reset", "s", "--yes")  # the summary has seen everything
    validate(doc, "session-clear")
    assert doc["action"] == "reset" and doc["has_summary"] is True and doc["deleted"] == 6


def test_import_and_export(run, home, tmp_path):
    data = Path(__file__).parent / "data" / "transfer"
    doc = ok(run, "import", "claude-code", str(data / "claude"))
    validate(doc, "import")
    assert doc["sources"][0]["record_count"] > doc["sources"][0]["added"] > 0
    validate(ok(run, "import", "chatgpt", str(data / "chatgpt" / "conversations.json"),
                "--dry-run"), "import")
    sid = doc["sources"][0]["session_id"]
    validate(ok(run, "export", sid, "--output", str(tmp_path / "out.jsonl")), "export")
    validate(ok(run, "export", "--all", "--format", "markdown", "--output",
                str(tmp_path / "md")), "export")


def test_error_memory_commands(run, home):
    common = ("--tool", "bash", "--keyword", "perm", "--symptom", "permission denied",
              "--action", "use sudo", "--outcome", "resolved", "--no-semantic")
    doc = ok(run, "errors", "record", *common)
    validate(doc, "errors-list")
    rid = doc["records"][0]["id"]
    validate(ok(run, "errors", "lookup", "--tool", "bash", "-q", "permission denied",
                "--no-semantic"), "errors-lookup")
    validate(ok(run, "errors", "show", rid), "errors-show")
    validate(ok(run, "errors", "list"), "errors-list")
    validate(ok(run, "errors", "prune", "--dry-run"), "errors-prune")
    validate(ok(run, "errors", "forget", rid, "--yes"), "errors-forget")


def test_rag_commands(run, home, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# Notes\n\nhello world\n")
    (folder / "b.bin").write_bytes(b"\x00\x01")
    validate(ok(run, "rag", "create", "d", "--path", str(folder), "--no-vectors"), "rag-create")
    validate(ok(run, "rag", "add", "d", str(folder)), "rag-sync")
    validate(ok(run, "rag", "sync", "d"), "rag-sync")
    validate(ok(run, "rag", "sync", "--all"), "rag-sync-all")
    validate(ok(run, "rag", "list"), "rag-list")
    validate(ok(run, "rag", "files", "d"), "rag-files")
    doc = ok(run, "rag", "search", "d", "-q", "hello", "--mode", "keyword")
    assert doc["results"] and doc["results"][0]["rank"] == 1
    validate(doc, "rag-search")
    validate(ok(run, "rag", "remove", "d", "--yes"), "rag-remove")


def test_notes_commands(run, home, tmp_path):
    doc = ok(run, "notes", "add", "--content", "# Deploy\n\nvia the pipeline")
    validate(doc, "notes-add")
    validate(ok(run, "notes", "edit", "Deploy", "--rename", "deploy rules"), "notes-add")
    validate(ok(run, "notes", "list"), "notes-list")
    validate(ok(run, "notes", "show", "deploy rules"), "notes-show")
    doc = ok(run, "notes", "search", "pipeline", "--mode", "keyword")
    assert doc["results"][0]["rank"] == 1
    validate(doc, "notes-search")
    validate(ok(run, "notes", "export", str(tmp_path / "out")), "notes-export")
    validate(ok(run, "notes", "remove", "deploy rules", "--yes"), "notes-remove")


@pytest.mark.parametrize("args", [
    ("session", "show", "nope"),  # not found
    ("append", "../x", "--role", "user", "--content", "x"),  # bad input
    ("search",),  # usage
    ("rag", "search", "nope", "-q", "x"),
    ("errors", "show", "0000000000"),
    # every other command once: its error is the same document
    ("context", "nope"), ("compact", "nope"), ("backfill", "nope"), ("doctor", "nope"),
    ("summarize", "nope"), ("forget", "nope", "--match", "x", "--yes"),
    ("session", "reset", "nope", "--yes", "--no-summary"), ("session", "remove", "nope", "--yes"),
    ("session", "list", "--bogus"), ("errors", "record", "--tool", "x"),
    ("errors", "forget", "0000000000", "--yes"), ("errors", "list", "--limit", "0"),
    ("errors", "prune", "--bogus"), ("errors", "lookup", "--limit", "0", "x"),
    ("rag", "create", "../x"), ("rag", "add", "nope", "/nonexistent"), ("rag", "sync", "nope"),
    ("rag", "list", "--bogus"), ("rag", "files", "nope"), ("rag", "remove", "nope", "--yes"),
    ("notes", "add", "a/b", "--content", "x"), ("notes", "show", "nope"),
    ("notes", "search", "--mode", "bogus", "x"), ("notes", "edit", "nope", "--content", "x"),
    ("notes", "remove", "nope", "--yes"), ("notes", "list", "--bogus"),
    ("notes", "export", "/dev/null"),
])
def test_errors_validate(run, home, args):
    res = run(*args, "--json")
    assert res.exit_code != 0
    doc = json.loads(res.stdout)
    validate(doc, "error")
    assert doc["error"]["code"] == res.exit_code
    assert res.stderr.strip().endswith(doc["error"]["message"]), (res.stderr, doc)


# every command -> the schema(s) of its --json output (mcp speaks MCP, not --json)
SCHEMA_OF_COMMAND = {
    "append": ["append"], "backfill": ["backfill"], "compact": ["compact", "compact-all"],
    "context": ["context"], "doctor": ["doctor"], "forget": ["forget"], "search": ["search"],
    "summarize": ["summarize"], "errors record": ["errors-list"],
    "errors lookup": ["errors-lookup"], "errors show": ["errors-show"],
    "errors list": ["errors-list"], "errors forget": ["errors-forget"],
    "errors prune": ["errors-prune"], "rag create": ["rag-create"], "rag add": ["rag-sync"],
    "rag sync": ["rag-sync", "rag-sync-all"], "rag list": ["rag-list"],
    "rag files": ["rag-files"], "rag search": ["rag-search"], "rag remove": ["rag-remove"],
    "session list": ["session-list"], "session show": ["session-show"],
    "session tasks": ["session-tasks"],
    "session reset": ["session-clear"], "session remove": ["session-clear"],
    "import": ["import"], "export": ["export"],
    "notes add": ["notes-add"], "notes edit": ["notes-add"], "notes list": ["notes-list"],
    "notes show": ["notes-show"], "notes search": ["notes-search"],
    "notes remove": ["notes-remove"], "notes export": ["notes-export"],
    "server start": ["server-start"], "server stop": ["server-stop"],
    "server status": ["server-status"],
}


def test_server_commands_without_a_server(run, home):
    validate(ok(run, "server", "status", "--json"), "server-status")
    validate(ok(run, "server", "stop", "--json"), "server-stop")


def test_every_command_has_a_schema_and_a_json_option():
    import click

    from agenvoy_cli.cli import cli

    ctx = click.Context(cli)

    def leaves(group: click.Group, prefix: str = ""):
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            if isinstance(cmd, click.Group):
                yield from leaves(cmd, f"{prefix}{name} ")
            else:
                yield f"{prefix}{name}", cmd

    commands = dict(leaves(cli))
    commands.pop("mcp")
    commands.pop("web")  # a server of pages, as mcp is one of MCP: no document
    for hook in ("hook claude-code", "hook codex"):  # their stdout is the host's: no document
        commands.pop(hook)
    assert set(commands) == set(SCHEMA_OF_COMMAND), set(commands) ^ set(SCHEMA_OF_COMMAND)
    for name, cmd in commands.items():
        assert any("--json" in p.opts for p in cmd.params), name
        for schema in SCHEMA_OF_COMMAND[name]:
            assert (SCHEMAS / f"{schema}.json").exists(), (name, schema)
