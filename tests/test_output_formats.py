"""Issue #18: one output switch wherever a list is printed (--format table|json|jsonl|csv on
doctor, compact --all, backfill, summarize, errors record/prune/lookup, forget), and the
vocabulary's times in tables (forget shows when a message was sent, not a raw ns number)."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from tests.helpers.summaries import build

READABLE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


def lines(res) -> list[dict]:
    assert res.exit_code == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines()]


def rows(res) -> list[dict]:
    assert res.exit_code == 0, res.stderr
    return list(csv.DictReader(io.StringIO(res.stdout)))


@pytest.fixture
def two(run, home):
    for sid in ("a", "b"):
        build(run, sid, 4)
    return ("a", "b")


@pytest.mark.parametrize("args,key", [
    (("doctor",), "problems"),
    (("compact", "--all"), "sessions"),
    (("backfill", "--all"), "sessions"),
])
def test_lists_in_every_format(run, two, args, key):
    doc = run(*args, "--format", "json").json()
    assert doc["schema_version"] == 1 and isinstance(doc[key], list)
    assert lines(run(*args, "--format", "jsonl")) == doc[key]
    got = rows(run(*args, "--format", "csv"))
    assert len(got) == len(doc[key])
    if doc[key]:
        assert [r["session_id"] for r in got] == [x["session_id"] for x in doc[key]]
    table = run(*args, "--format", "table")
    assert table.exit_code == 0 and not table.stdout.lstrip().startswith("{")


def test_summarize_formats(run, two, llm):
    planned = lines(run("summarize", "--pending", "--dry-run", "--format", "jsonl"))
    assert [s["session_id"] for s in planned] == ["a", "b"]
    assert all(s["status"] == "dry_run" and s["requests"] for s in planned)
    got = rows(run("summarize", "--pending", "--format", "csv"))
    assert [(r["session_id"], r["status"], r["summarized"]) for r in got] == [
        ("a", "summarized", "1"), ("b", "summarized", "1")]
    assert READABLE.search(got[0]["cursor_at"]) is None  # csv keeps RFC 3339
    table = run("summarize", "a", "--format", "table")
    assert table.exit_code == 0 and "up to date" in table.stdout


def test_forget_table_shows_times_not_nanoseconds(run, home):
    build(run, "s", 4)
    res = run("forget", "s", "--match", "message 1", "--dry-run")
    assert res.exit_code == 0, res.stderr
    assert "sent at" in res.stdout and "sent_at_ns" not in res.stdout
    assert READABLE.search(res.stdout) and not re.search(r"\d{16,}", res.stdout)
    [row] = lines(run("forget", "s", "--match", "message 1", "--dry-run", "--format", "jsonl"))
    assert row["seq"] == 1 and row["sent_at"] and row["sent_at_ns"] > 10**18


def test_errors_prune_and_lookup_formats(run, home):
    rid = run("errors", "record", "--tool", "bash", "-k", "perm", "--symptom",
              "permission denied", "--action", "use sudo", "--outcome", "resolved",
              "--no-semantic", "--json").json()["records"][0]["id"]
    assert lines(run("errors", "prune", "--format", "jsonl")) == []
    assert rows(run("errors", "prune", "--dry-run", "--format", "csv")) == []
    found = lines(run("errors", "lookup", "--tool", "bash", "-q", "permission denied",
                      "--no-semantic", "--format", "jsonl"))
    assert [r["id"] for r in found] == [rid]
    got = rows(run("errors", "lookup", "--tool", "bash", "-q", "permission denied",
                   "--no-semantic", "--format", "csv"))
    assert [r["id"] for r in got] == [rid]
    doc = run("errors", "lookup", "--tool", "bash", "-q", "permission denied",
              "--no-semantic", "--format", "json").json()
    assert doc["schema_version"] == 1 and doc["count"] == 1
    hint = run("errors", "lookup", "--tool", "bash", "-q", "permission denied",
               "--no-semantic", "--format", "hint")
    assert hint.exit_code == 0 and "use sudo" in hint.stdout


def test_a_single_result_is_one_jsonl_line_or_csv_row(run, home):
    build(run, "s", 4)
    [doc] = lines(run("compact", "s", "--format", "jsonl"))
    assert doc["session_id"] == "s" and doc["removed"] == 0
    [row] = rows(run("compact", "s", "--format", "csv"))
    assert row["session_id"] == "s" and row["removed"] == "0"


def test_errors_record_formats(run, home, tmp_path):
    batch = tmp_path / "two.json"
    batch.write_text(json.dumps([
        {"tool_name": "bash", "keywords": ["perm"], "symptom": "permission denied",
         "action": "use sudo", "outcome": "resolved"},
        {"tool_name": "web_fetch", "keywords": ["timeout"], "symptom": "read timed out",
         "action": "retry later", "outcome": "failed"}]))
    recorded = lines(run("errors", "record", "--from-json", str(batch), "--no-semantic",
                         "--format", "jsonl"))
    assert [(r["tool_name"], r["outcome"]) for r in recorded] == [
        ("bash", "resolved"), ("web_fetch", "failed")]
    [row] = rows(run("errors", "record", "--tool", "git", "-k", "lock", "--symptom",
                     "index.lock exists", "--action", "remove the lock", "--outcome",
                     "resolved", "--no-semantic", "--format", "csv"))
    assert row["tool_name"] == "git" and row["id"]
    doc = run("errors", "record", "--tool", "git", "-k", "lock", "--symptom", "x",
              "--action", "y", "--outcome", "failed", "--no-semantic", "--format", "json").json()
    assert doc["schema_version"] == 1 and len(doc["records"]) == 1
    listed = run("errors", "list", "--format", "json").json()["records"]
    assert {r["id"] for r in recorded} | {row["id"], doc["records"][0]["id"]} == \
        {r["id"] for r in listed}
