"""Property tests: whatever the input, a documented exit code, one clear line on stderr,
never a traceback, and nothing changed by a refused command."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import orjson
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenvoy_cli.cli import cli
from tests.test_append import snapshot

DOCUMENTED = {0, 1, 2, 3, 4, 75}
FUZZ = settings(max_examples=int(os.environ.get("AGENVOY_FUZZ_EXAMPLES", "40")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
FTS_NOISE = st.sampled_from(['"', "'", "AND", "OR", "NOT", "NEAR", "NEAR(", "*", "(", ")", "-",
                             "+", ":", "^", "{", "}", "記憶", "部署", "x", "col:", "\\", "%", "_"])
QUERY = st.lists(st.one_of(FTS_NOISE, st.text(max_size=12)), min_size=1, max_size=8).map(
    " ".join)
NAMES = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["../x", "a/b", ".hidden", "..", "", "x" * 300, "a\\b", "con", "~", "-rf"]),
)
JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                      st.floats(allow_nan=False),
                      st.text(max_size=20))
JSON = st.recursive(JSON_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20)
MESSAGE = st.fixed_dictionaries({
    "role": st.one_of(st.sampled_from(["user", "assistant", "system", "tool", "robot", ""]),
                      JSON),
    "content": st.one_of(st.text(max_size=40), JSON,
                         st.lists(st.fixed_dictionaries({"type": st.sampled_from(
                             ["text", "image_url", 3]), "text": JSON}), max_size=3)),
})


class Home:
    """A populated home shared by the examples of one test (copied fresh per test)."""

    def __init__(self, template: Path) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="agenvoy-fuzz-")) / "home"
        shutil.copytree(template, self.path)
        self.runner = CliRunner()

    def run(self, *args: str, input: bytes | str | None = None):
        res = self.runner.invoke(cli, list(args), input=input, catch_exceptions=True,
                                 env={"AGENVOY_HOME": str(self.path)})
        assert res.exception is None or isinstance(res.exception, SystemExit), (
            f"{args!r} raised {res.exception!r}")
        assert res.exit_code in DOCUMENTED, (args, res.exit_code, res.stderr)
        assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
        if res.exit_code:
            assert res.stderr.count("\n") == 1 and res.stderr.startswith("agenvoy: "), res.stderr
        return res

    def close(self) -> None:
        shutil.rmtree(self.path.parent, ignore_errors=True)


_template: Path | None = None


def populated() -> Home:
    global _template
    if _template is None:
        _template = Path(tempfile.mkdtemp(prefix="agenvoy-fuzz-template-")) / "home"
        runner = CliRunner()
        batch = [{"role": "user" if i % 2 == 0 else "assistant",
                  "content": f"第{i}條 跨 session 錯誤記憶 deploy \"quoted\" (x) item-{i}"}
                 for i in range(40)]
        res = runner.invoke(cli, ["append", "s", "--messages", "-", "--time",
                                  "2024-06-01 12:00:00"], input=orjson.dumps(batch),
                            env={"AGENVOY_HOME": str(_template),
                                 "AGENVOY_MAX_HISTORY_BYTES": "4096"})
        assert res.exit_code == 0, res.stderr
    return Home(_template)


@FUZZ
@given(data=st.binary(max_size=300))
def test_append_arbitrary_bytes_on_stdin(data):
    home = populated()
    try:
        before = snapshot(home.path)
        res = home.run("append", "s", "--messages", "-", input=data)
        if res.exit_code != 0:
            assert snapshot(home.path) == before
    finally:
        home.close()


@FUZZ
@given(batch=st.one_of(st.lists(MESSAGE, max_size=4), JSON))
def test_append_arbitrary_json(batch):
    home = populated()
    try:
        before = snapshot(home.path)
        res = home.run("append", "s", "--messages", "-", input=orjson.dumps(batch))
        if res.exit_code != 0:
            assert snapshot(home.path) == before
        else:
            assert home.run("doctor").exit_code == 0
    finally:
        home.close()


@FUZZ
@given(query=QUERY, mode=st.sampled_from(["keyword"]))
def test_keyword_search_never_breaks(query, mode):
    home = populated()
    try:
        before = snapshot(home.path)
        res = home.run("search", "s", query, "--mode", mode, "--json")
        assert res.exit_code in (0, 2)
        if res.exit_code == 0:
            assert isinstance(orjson.loads(res.stdout)["results"], list)
        assert snapshot(home.path) == before
    finally:
        home.close()


@FUZZ
@given(name=NAMES, command=st.sampled_from([
    ("append", "{n}", "--role", "user", "--content", "x"), ("context", "{n}"),
    ("session", "show", "{n}"), ("search", "{n}", "q", "--mode", "keyword"),
    ("compact", "{n}"), ("backfill", "{n}"), ("doctor", "{n}"),
    ("session", "reset", "{n}", "--yes"), ("rag", "create", "{n}"),
    ("rag", "search", "{n}", "q", "--mode", "keyword"), ("errors", "show", "{n}"),
]))
def test_names_never_escape_the_home(name, command):
    home = populated()
    try:
        outside = {p for p in home.path.parent.iterdir()}
        args = [a.replace("{n}", name) for a in command]
        if "\x00" in name:
            args = [a for a in args]  # CliRunner passes NUL through; the store must refuse it
        res = home.run(*args)
        assert {p for p in home.path.parent.iterdir()} == outside
        if res.exit_code == 0 and command[0] in ("append", "rag"):
            made = [p for p in home.path.rglob("*") if p.name == name]
            assert all(home.path in p.parents for p in made)
    finally:
        home.close()


@FUZZ
@given(fields=st.fixed_dictionaries({}, optional={
    "tool_name": JSON, "keywords": st.one_of(st.lists(st.text(max_size=10), max_size=4), JSON),
    "symptom": JSON, "cause": JSON, "action": JSON,
    "outcome": st.one_of(st.sampled_from(["resolved", "failed", "abandoned", "won"]), JSON)}))
def test_errors_record_from_arbitrary_json(fields):
    home = populated()
    try:
        before = snapshot(home.path)
        res = home.run("errors", "record", "--from-json", "-", input=orjson.dumps(fields))
        if res.exit_code != 0:
            assert res.exit_code == 2
            assert snapshot(home.path) == before
    finally:
        home.close()


def test_huge_and_deep_inputs():
    home = populated()
    try:
        before = snapshot(home.path)
        huge = "x" * (10 * 1024 * 1024)
        res = home.run("append", "s", "--role", "user", "--content", "-", input=huge)
        assert res.exit_code == 2 and "over max_history_bytes" in res.stderr
        deep = "[" * 100_000 + "]" * 100_000
        assert home.run("append", "s", "--messages", "-", input=deep).exit_code == 2
        wide = orjson.dumps([{"role": "user", "content": "y" * 10}] * 50_000)
        res = home.run("append", "s", "--messages", "-", "--no-compact", input=wide)
        assert res.exit_code == 0  # a big but valid batch is fine
        assert snapshot(home.path) != before
        assert home.run("doctor").exit_code == 0
    finally:
        home.close()


def test_wrong_option_combinations():
    home = populated()
    try:
        before = snapshot(home.path)
        for args in (["compact"], ["compact", "s", "--all"], ["backfill"],
                     ["backfill", "s", "--rebuild"], ["search", "s", ""],
                     ["search", "s", "q", "--mode", "magic"],
                     ["search", "s", "q", "--range", "2 fortnights"],
                     ["search", "s", "q", "--since", "not a date"], ["summarize"],
                     ["append", "s", "--content", "x"], ["errors", "lookup"],
                     ["errors", "record", "--tool", "t"], ["rag", "search"]):
            res = home.run(*args)
            assert res.exit_code == 2, (args, res.exit_code, res.stderr)
        assert snapshot(home.path) == before
    finally:
        home.close()
