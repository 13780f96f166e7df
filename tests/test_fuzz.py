"""Property tests: whatever the input, a documented exit code, one clear line on stderr,
never a traceback, and nothing changed by a refused command."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenvoy_cli.cli import cli
from tests.helpers.home import snapshot

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

    def run(self, *args: str, input: bytes | str | None = None, env: dict | None = None):
        res = self.runner.invoke(cli, list(args), input=input, catch_exceptions=True,
                                 env={"AGENVOY_HOME": str(self.path), **(env or {})})
        assert res.exception is None or isinstance(res.exception, SystemExit), (
            f"{args!r} raised {res.exception!r}")
        assert res.exit_code in DOCUMENTED, (args, res.exit_code, res.stderr)
        assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
        if res.exit_code and not (args[:1] == ("doctor",) and res.exit_code == 1):
            # (doctor's exit 1 is its report of problems, on stdout)
            assert res.stderr.count("\n") == 1 and res.stderr.startswith("agenvoy: "), res.stderr
        return res

    def close(self) -> None:
        shutil.rmtree(self.path.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def fuzz_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One populated home per run, under pytest's temporary root (removed with it)."""
    template = tmp_path_factory.mktemp("fuzz-template") / "home"
    runner = CliRunner()
    batch = [{"role": "user" if i % 2 == 0 else "assistant",
              "content": f"第{i}條 跨 session 錯誤記憶 deploy \"quoted\" (x) item-{i}"}
             for i in range(40)]
    res = runner.invoke(cli, ["append", "s", "--messages", "-", "--time",
                              "2024-06-01 12:00:00"], input=orjson.dumps(batch),
                        env={"AGENVOY_HOME": str(template),
                             "AGENVOY_MAX_HISTORY_BYTES": "4096"})
    assert res.exit_code == 0, res.stderr
    return template


@FUZZ
@given(data=st.binary(max_size=300))
def test_append_arbitrary_bytes_on_stdin(fuzz_template, data):
    home = Home(fuzz_template)
    try:
        before = snapshot(home.path)
        res = home.run("append", "s", "--messages", "-", input=data)
        if res.exit_code != 0:
            assert snapshot(home.path) == before
    finally:
        home.close()


@FUZZ
@given(batch=st.one_of(st.lists(MESSAGE, max_size=4), JSON))
def test_append_arbitrary_json(fuzz_template, batch):
    home = Home(fuzz_template)
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
def test_keyword_search_never_breaks(fuzz_template, query, mode):
    home = Home(fuzz_template)
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
def test_names_never_escape_the_home(fuzz_template, name, command):
    home = Home(fuzz_template)
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
def test_errors_record_from_arbitrary_json(fuzz_template, fields):
    home = Home(fuzz_template)
    try:
        before = snapshot(home.path)
        res = home.run("errors", "record", "--from-json", "-", input=orjson.dumps(fields))
        if res.exit_code != 0:
            assert res.exit_code == 2
            assert snapshot(home.path) == before
    finally:
        home.close()


def test_huge_and_deep_inputs(fuzz_template):
    home = Home(fuzz_template)
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


def test_wrong_option_combinations(fuzz_template):
    home = Home(fuzz_template)
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


# -- issue #14: times, numbers from the environment, homes, LLM commands, planted files ------

TIMES = st.one_of(
    st.sampled_from(["0001-01-01 00:00:00", "9999-12-31 23:59:59", "2262-04-12 00:00:00",
                     "2261-12-31 23:59:59", "1677-09-21 00:12:43", "1678-01-01 00:00:00",
                     "2024-02-30 00:00:00", "2024-13-01 00:00:00", "2024-01-01 24:00:00",
                     " 2024-01-01 00:00:00 ", "2024-01-01T00:00:00", "", "now"]),
    st.from_regex(r"\A\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\Z"),
    st.text(max_size=25))
NUMBERS = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "1e9", "1e400", "-1", "0", "0.0", "", "abc",
                     "0x10", "1_000", " 5 ", "1e-400", "9" * 40]),
    st.floats().map(str), st.integers().map(str),
    st.text(max_size=8).filter(lambda t: "\x00" not in t))  # the OS refuses NUL in env values
REFUSED = {2, 3, 4}  # refused commands change nothing; a failed one (1) may leave a lock file
ENV_NUMBERS = ["AGENVOY_LOCK_TIMEOUT", "AGENVOY_MAX_INPUT_BYTES", "AGENVOY_ERROR_TTL_DAYS",
               "AGENVOY_MAX_HISTORY_MESSAGES", "AGENVOY_MAX_HISTORY_BYTES"]
ENV_COMMANDS = [
    ("append", "s", "--role", "user", "--content", "fuzz"),
    ("errors", "record", "--tool", "t", "--symptom", "boom", "--action", "a", "--outcome",
     "resolved", "--keyword", "k", "--no-semantic"),
    ("search", "s", "deploy", "--mode", "keyword"),
    ("context", "s"),
]


def tree(home: Path) -> dict[str, str]:
    """Like snapshot() but never following a link and never opening a FIFO: every entry's
    type, and a hash of every regular file."""
    import hashlib
    import stat as st_

    out = {}
    for root, dirs, files in os.walk(home, followlinks=False):
        for name in dirs + files:
            path = Path(root) / name
            if name.endswith(("-wal", "-shm")):
                continue
            mode = path.lstat().st_mode
            rel = str(path.relative_to(home))
            if st_.S_ISREG(mode):
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                out[rel] = oct(st_.S_IFMT(mode))
    return out


@FUZZ
@given(when=TIMES)
def test_time_option_never_breaks(fuzz_template, when):
    home = Home(fuzz_template)
    try:
        before = tree(home.path)
        res = home.run("append", "s", "--role", "user", "--content", "t", "--time", when)
        assert res.exit_code in (0, 2), res.stderr
        if res.exit_code in REFUSED:
            assert tree(home.path) == before
        else:
            assert b"\n1-01-01" not in (home.path / "sessions/s/history.json").read_bytes()
    finally:
        home.close()


@FUZZ
@given(var=st.sampled_from(ENV_NUMBERS), value=NUMBERS, command=st.sampled_from(ENV_COMMANDS))
def test_numbers_from_the_environment_never_break(fuzz_template, var, value, command):
    home = Home(fuzz_template)
    try:
        before = tree(home.path)
        res = home.run(*command, env={var: value})
        if res.exit_code in REFUSED:
            assert tree(home.path) == before, (var, value, command)
    finally:
        home.close()


HOMES = st.one_of(st.sampled_from(["", "/dev/null", "/dev/null/x", "/proc/self/status/x",
                                   "FILE", "FILE/below", " "]),
                  st.text(max_size=12).map(lambda t: "TMP/" + t))


@FUZZ
@given(value=HOMES, command=st.sampled_from([("session", "list"), ("context", "s"),
                                             ("search", "s", "q", "--mode", "keyword"),
                                             ("errors", "list")]))
def test_odd_homes_never_break(value, command):
    base = Path(tempfile.mkdtemp(prefix="agenvoy-fuzz-home-"))
    try:
        (base / "FILE").write_text("x")
        value = value.replace("FILE", str(base / "FILE")).replace("TMP", str(base))
        if "\x00" in value:
            return  # not a path the OS can even receive
        res = CliRunner().invoke(cli, ["--home", value, *command], catch_exceptions=True)
        assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
        assert res.exit_code in DOCUMENTED, (value, res.exit_code, res.stderr)
        assert "Traceback" not in res.stderr and "internal error" not in res.stderr
        assert sorted(p.name for p in base.iterdir()) == ["FILE"] or res.exit_code == 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


@FUZZ
@given(tail=st.text(max_size=20))
def test_llm_command_strings_never_break(fuzz_template, tail):
    home = Home(fuzz_template)
    try:
        before = tree(home.path)
        # `false` first: whatever the tail, nothing but false (or a parse error) runs
        res = home.run("summarize", "s", "--llm-command", "false " + tail)
        assert res.exit_code in (1, 2), res.stderr
        if res.exit_code in REFUSED:
            assert tree(home.path) == before
    finally:
        home.close()


PLANTED = ["config.json", ".store", ".store/history.db", ".store/agenvoy.lock",
           ".store/chroma", "sessions/s/history.json", "sessions/s/summary.json", "sessions/s"]
KINDS = ["symlink", "fifo", "directory", "file"]


@FUZZ
@given(where=st.sampled_from(PLANTED), kind=st.sampled_from(KINDS),
       command=st.sampled_from([("append", "s", "--role", "user", "--content", "x"),
                                ("context", "s"), ("search", "s", "q", "--mode", "keyword"),
                                ("doctor",), ("session", "list"), ("compact", "s"),
                                ("errors", "list")]))
def test_planted_files_are_refused_without_harm(fuzz_template, where, kind, command):
    home = Home(fuzz_template)
    outside = home.path.parent / "outside"
    outside.mkdir()
    try:
        path = home.path / where
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
        for suffix in ("-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        if kind == "symlink":
            path.symlink_to(outside / "target")
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "directory":
            path.mkdir()
        else:
            path.write_bytes(b"\x00garbage")
        before = tree(home.path)
        res = home.run(*command)  # a FIFO must never be waited on
        assert list(outside.iterdir()) == []
        if res.exit_code in REFUSED:
            assert tree(home.path) == before, (where, kind, command, res.stderr)
    finally:
        home.close()


# -- issue #37: every importer, whatever its input ----------------------------------------------

EDGE_TIMES = st.one_of(st.sampled_from(["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
                                        "2262-04-12T00:00:00Z", "1677-09-21T00:12:43Z",
                                        "2025-10-01T09:00:00.000Z", "2025-13-01T00:00:00Z",
                                        "", "now"]),
                       st.floats(allow_nan=True, allow_infinity=True), st.integers(),
                       st.text(max_size=12))
BIG = st.sampled_from([2**63, 2**64 + 5, -(2**63) - 1, 10**30])
ODD = st.one_of(JSON, BIG, st.just("a\ud800b"), st.just({"x": [[[[[]]]]]}), EDGE_TIMES)
PART = st.fixed_dictionaries({"type": st.one_of(st.sampled_from(
    ["text", "image", "thinking", "tool_use", "tool_result", "image_url", "input_text",
     "output_text", "input_image"]), ODD)}, optional={
    "text": ODD, "thinking": ODD, "id": ODD, "name": ODD, "input": ODD, "tool_use_id": ODD,
    "content": ODD, "source": ODD, "image_url": ODD})
CONTENT = st.one_of(st.text(max_size=20), ODD, st.lists(PART, max_size=3))


def _claude_line():
    return st.fixed_dictionaries({"type": st.one_of(st.sampled_from(
        ["user", "assistant", "summary", "system", "progress"]), ODD)}, optional={
        "message": st.one_of(ODD, st.fixed_dictionaries({"role": ODD, "content": CONTENT},
                                                        optional={"id": st.one_of(
                                                            st.sampled_from(["m1", "m2"]),
                                                            ODD)})),
        "timestamp": EDGE_TIMES, "isSidechain": ODD, "cwd": ODD, "sessionId": ODD,
        "agentId": ODD, "uuid": st.just("u")})


def _codex_line():
    payload = st.fixed_dictionaries({"type": st.one_of(st.sampled_from(
        ["message", "reasoning", "function_call", "function_call_output", "web_search_call",
         "local_shell_call", "custom_tool_call", "custom_tool_call_output"]), ODD)}, optional={
        "role": ODD, "content": CONTENT, "summary": ODD, "name": ODD, "arguments": ODD,
        "call_id": ODD, "output": ODD, "action": ODD, "input": ODD, "git": ODD, "cwd": ODD,
        "id": ODD, "status": ODD})
    return st.fixed_dictionaries({"type": st.one_of(st.sampled_from(
        ["session_meta", "response_item", "event_msg"]), ODD), "payload": st.one_of(payload,
                                                                                   ODD)},
        optional={"timestamp": EDGE_TIMES})


def _chatgpt():
    message = st.fixed_dictionaries({}, optional={
        "author": st.one_of(ODD, st.fixed_dictionaries({"role": ODD}, optional={"name": ODD})),
        "content": st.one_of(ODD, st.fixed_dictionaries({"content_type": st.one_of(
            st.sampled_from(["text", "multimodal_text", "code", "execution_output",
                             "thoughts"]), ODD)}, optional={
            "parts": st.lists(st.one_of(st.text(max_size=10), PART, ODD), max_size=3),
            "text": ODD, "thoughts": ODD})),
        "create_time": EDGE_TIMES, "recipient": ODD, "metadata": ODD})
    node = st.fixed_dictionaries({"message": st.one_of(message, ODD)}, optional={
        "parent": st.one_of(st.sampled_from(["a", "b", "c"]), ODD),
        "children": st.one_of(st.lists(st.sampled_from(["a", "b", "c"]), max_size=2), ODD)})
    conversation = st.fixed_dictionaries({}, optional={
        "mapping": st.one_of(st.dictionaries(st.sampled_from(["a", "b", "c"]), node,
                                             max_size=3), ODD),
        "current_node": st.one_of(st.sampled_from(["a", "b", "c"]), ODD),
        "conversation_id": ODD, "title": ODD, "create_time": EDGE_TIMES})
    return st.lists(st.one_of(conversation, ODD), max_size=3)


def _openai():
    message = st.fixed_dictionaries({"role": st.one_of(st.sampled_from(
        ["user", "assistant", "system", "tool"]), ODD), "content": CONTENT}, optional={
        "tool_calls": ODD, "tool_call_id": ODD, "sendAt": st.one_of(BIG, ODD), "extra": ODD})
    messages = st.lists(st.one_of(message, ODD), max_size=4)
    request = st.fixed_dictionaries({"messages": messages}, optional={"model": ODD,
                                                                      "custom_id": ODD})
    return st.one_of(messages, request, st.lists(request, max_size=3))


def _encode(value, jsonl: bool) -> bytes:
    import json

    def one(item) -> bytes:
        try:
            return orjson.dumps(item)
        except TypeError:  # lone surrogates, huge numbers: what a careless writer writes
            return json.dumps(item).encode()

    if jsonl and isinstance(value, list):
        return b"".join(one(item) + b"\n" for item in value)
    return one(value)


IMPORTS = {
    "claude-code": (st.lists(st.one_of(_claude_line(), ODD), max_size=6), True, ".jsonl"),
    "codex": (st.lists(st.one_of(_codex_line(), ODD), max_size=6), True, ".jsonl"),
    "chatgpt": (_chatgpt(), False, ".json"),
    "openai": (_openai(), False, ".json"),
    "openai-jsonl": (_openai(), True, ".jsonl"),
}


@FUZZ
@given(data=st.data(), which=st.sampled_from(sorted(IMPORTS)), garbage=st.binary(max_size=40),
       cut=st.integers(0, 64))
def test_every_importer_never_breaks(fuzz_template, data, which, garbage, cut):
    strategy, jsonl, suffix = IMPORTS[which]
    raw = _encode(data.draw(strategy), jsonl)
    if cut:  # cut short, or with bytes of anything after it
        raw = raw[:-cut] if cut < 32 else raw + garbage
    home = Home(fuzz_template)
    try:
        folder = home.path.parent / "input"
        folder.mkdir()
        path = folder / (f"rollout-x{suffix}" if which == "codex" else f"in{suffix}")
        path.write_bytes(raw)
        fmt = which.removesuffix("-jsonl")
        for args in (("import", fmt, str(path), "--now"), ("import", "auto", str(folder))):
            res = home.runner.invoke(cli, [*args, "--json"], catch_exceptions=True,
                                     env={"AGENVOY_HOME": str(home.path)})
            assert res.exception is None or isinstance(res.exception, SystemExit), (
                f"{args!r} raised {res.exception!r}")
            assert res.exit_code in (0, 1, 2), (res.exit_code, res.stderr)
            assert "internal error" not in res.stderr and "Traceback" not in res.stderr, \
                res.stderr
            assert all(line.startswith("agenvoy: ") for line in res.stderr.splitlines()), \
                res.stderr
            doc = orjson.loads(res.stdout)
            assert ("error" in doc) == (res.exit_code == 2), doc
        assert home.run("doctor").exit_code in (0, 1)
    finally:
        home.close()


# -- message field shapes: what Agenvoy's Go structs read, and JSON values only ------------

CALL = {"id": "call_1", "type": "function",
        "function": {"name": "Bash", "arguments": '{"command": "mix phx.server"}'}}
DEEP: list = []
for _ in range(70):
    DEEP = [DEEP]
BAD_SHAPES = [
    ({"role": "assistant", "content": None, "tool_calls": [{"function": 5}]},
     "tool_calls[0].function must be an object"),
    ({"role": "assistant", "content": None, "tool_calls": [{**CALL, "id": [1]}]},
     "tool_calls[0].id must be a string or null, got an array"),
    ({"role": "assistant", "content": None, "tool_calls": [{**CALL, "type": 3}]},
     "tool_calls[0].type must be a string or null"),
    ({"role": "assistant", "content": None,
      "tool_calls": [{**CALL, "function": {"name": "f", "arguments": {"a": 1}}}]},
     "tool_calls[0].function.arguments must be a string or null, got an object"),
    ({"role": "assistant", "content": None,
      "tool_calls": [{**CALL, "function": {"name": 7, "arguments": "{}"}}]},
     "tool_calls[0].function.name must be a string or null, got an integer"),
    ({"role": "assistant", "content": None, "tool_calls": 5},
     "tool_calls must be an array of objects, got an integer"),
    ({"role": "assistant", "content": None, "tool_calls": [5]},
     "tool_calls[0] must be an object, got an integer"),
    ({"role": "tool", "content": "ok", "tool_call_id": 5},
     "tool_call_id must be a string or null, got an integer"),
    ({"role": "tool", "content": "ok", "Tool_Call_ID": {"a": 1}},  # Go folds key case
     "Tool_Call_ID must be a string or null, got an object"),
    ({"role": "assistant", "content": "x", "reasoning_content": ["r"]},
     "reasoning_content must be a string or null, got an array"),
    ({"role": "user", "content": "x", "extra": DEEP},
     "extra is nested more than 64 levels deep"),
]


def test_message_field_shapes_are_refused_with_the_field_named(fuzz_template):
    """Each of these ended in "internal error" or was stored in a shape Agenvoy's Go structs
    cannot read (one such entry makes Agenvoy drop the whole history.json)."""
    home = Home(fuzz_template)
    try:
        before = snapshot(home.path)
        for message, said in BAD_SHAPES:
            for args, data in ((("--messages", "-"), orjson.dumps([message])),
                               (("--messages", "-"), orjson.dumps(message) + b"\n")):
                res = home.run("append", "s", *args, input=data)
                assert res.exit_code == 2, (message, res.stderr)
                assert f"message 0: {said}" in res.stderr, res.stderr
        assert snapshot(home.path) == before
        ok = {"role": "assistant", "content": None, "tool_calls": [
            CALL, {**CALL, "id": None, "function": {"name": "f", "arguments": None}}]}
        assert home.run("append", "s", "--messages", "-", input=orjson.dumps([ok])).exit_code == 0
    finally:
        home.close()


def test_python_values_that_are_no_json_are_refused(tmp_path):
    from agenvoy_cli import Memory
    from agenvoy_cli.errors import BadInput

    cases = [({"x": "\ud800"}, "x is not valid UTF-8 (a lone surrogate)"),
             ({"x": {"y": ["ok", "\udfff"]}}, "x.y[1] is not valid UTF-8"),
             ({"n": 2**70}, "n is an integer beyond 64 bits"),
             ({"n": float("nan")}, "n is not a finite number"),
             ({"n": {1, 2}}, "n is a set, not a JSON value"),
             ({5: "five"}, "a key under the message is an integer, not a string")]
    with Memory(home=tmp_path / "home") as memory:
        for extra, said in cases:
            try:
                memory.append("s", [{"role": "user", "content": "x", **extra}])
            except BadInput as exc:
                assert f"message 0: {said}" in str(exc), exc
            else:
                raise AssertionError(f"{extra!r} was accepted")
    assert not (tmp_path / "home" / "sessions").exists()


def _any_shape(valid):
    """A valid value, or any JSON value in its place."""
    return st.one_of(st.just(valid), JSON)


TOOL_CALL = st.fixed_dictionaries({}, optional={
    "id": _any_shape("call_1"), "type": _any_shape("function"),
    "function": st.one_of(JSON, st.fixed_dictionaries({}, optional={
        "name": _any_shape("Bash"), "arguments": _any_shape('{"command": "ls"}')}))})
OPENAI_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system"])},
    optional={"content": st.one_of(st.none(), st.text(max_size=20), JSON,
                                   st.lists(st.fixed_dictionaries({
                                       "type": st.sampled_from(["text", "image_url"]),
                                       "text": _any_shape("hello")}), max_size=2)),
              "tool_calls": st.one_of(st.lists(st.one_of(TOOL_CALL, JSON), max_size=3), JSON),
              "tool_call_id": _any_shape("call_1"),
              "reasoning_content": _any_shape("because"),
              "name": JSON, "sendAt": JSON, "sender": JSON})
READERS = [("context", "s"), ("context", "s", "--json"), ("session", "show", "s"),
           ("search", "s", "ls hello", "--mode", "keyword"),
           ("export", "s", "--format", "markdown"), ("doctor", "s")]


@FUZZ
@given(batch=st.lists(OPENAI_MESSAGE, min_size=1, max_size=3))
def test_openai_messages_of_any_field_shape(fuzz_template, batch):
    """append takes a message or refuses it in one line; what it took, every command that
    reads messages reads without an internal error."""
    home = Home(fuzz_template)
    try:
        before = snapshot(home.path)
        res = home.run("append", "s", "--messages", "-", input=orjson.dumps(batch))
        if res.exit_code != 0:
            assert res.exit_code == 2 and snapshot(home.path) == before
            return
        for args in READERS:
            assert home.run(*args).exit_code == 0, args
    finally:
        home.close()


@FUZZ
@given(batch=st.lists(OPENAI_MESSAGE, min_size=1, max_size=3))
def test_history_json_another_program_wrote_with_any_field_shape(fuzz_template, batch):
    """Agenvoy or a person may write what append refuses: it is read, never a crash."""
    home = Home(fuzz_template)
    try:
        path = home.path / "sessions" / "s" / "history.json"
        kept = orjson.loads(path.read_bytes())
        path.write_bytes(orjson.dumps([*kept, *batch]))
        for args in [("backfill", "s"), *READERS, ("compact", "s"),
                     ("append", "s", "--role", "user", "--content", "after"),
                     ("doctor", "s", "--repair")]:
            home.run(*args)  # a documented exit code, one line, never an internal error
    finally:
        home.close()


# -- every MCP tool's arguments ----------------------------------------------------------

TOOL_VALUES = {  # per argument: values a host would send, and any JSON in their place
    "session_id": ["s", "t", "../x", "", ".hidden", "s\x00"],
    "keyword": ["deploy", "記憶", "", " ", '"', "NEAR(", "-x"],
    "mode": ["keyword", "semantic", "hybrid", "list", "read", "search", "write", "fuzzy", ""],
    "match": ["semantic", "keyword", "any"], "time_range": ["1d", "7d", "1m", "1y", "all", "2w"],
    "limit": [1, 8, 16, 32, 0, -1, 2**31, 2**63, 1.5, 8.0], "budget": [0, 0.5, 3, 60, 61, -1],
    "max_messages": [0, 1, 16, -1, 2**40], "q": ["deploy", "", "*"], "db": ["docs", "nope"],
    "hash": ["", "deadbeef", "0" * 64, "../x"], "task_id": ["t1", "broken", "nope", ""],
    "tool_name": ["bash", ""], "keywords": [["deploy"], [], ["a", 5]],
    "symptom": ["boom"], "cause": ["c"], "action": ["retried"],
    "outcome": ["resolved", "failed", "abandoned", "won"],
}
TOOL_NAMES = ["search_chat_history", "remember_error", "search_error_history", "read_error",
              "list_rag", "search_rag", "append_messages", "get_context", "chat_history",
              "error_history"]


def _tool_properties() -> dict[str, list[str]]:
    from agenvoy_cli.server.agenvoy_tools import vocabulary

    return {t["name"]: list(t["inputSchema"]["properties"])
            for t in vocabulary(None, "both")}


def tool_arguments(name: str):
    fields = {key: st.one_of(st.sampled_from(TOOL_VALUES.get(key, [None])), JSON)
              for key in _tool_properties()[name]}
    if name == "append_messages":
        fields["messages"] = st.one_of(st.lists(OPENAI_MESSAGE, min_size=1, max_size=3), JSON)
    return st.one_of(st.fixed_dictionaries({}, optional=fields),
                     st.fixed_dictionaries({}, optional={**fields, "unknown": JSON}), JSON)


TOOL_CALLS = st.sampled_from(TOOL_NAMES).flatmap(
    lambda name: st.tuples(st.just(name), tool_arguments(name)))


def tool_home(path: Path) -> None:
    """A home for the tools: session s, an error record, Agenvoy's action log of s (one
    finished run readable, one not)."""
    res = CliRunner().invoke(cli, ["append", "s", "--messages", "-"], env={
        "AGENVOY_HOME": str(path)}, input=orjson.dumps(
        [{"role": "user" if i % 2 == 0 else "assistant", "content": f"deploy step {i} 記憶"}
         for i in range(24)]))
    assert res.exit_code == 0, res.stderr
    log = path / "sessions" / "s" / "history"
    log.mkdir()
    (log / "2025-01-02-03-04-t1.json").write_text('{"objective": "deploy", "tool_results": '
                                                  '[{"name": "bash", "result": "ok"}]}')
    (log / "2025-01-02-03-05-broken.json").write_text("[not json")


@FUZZ
@given(call=TOOL_CALLS)
def test_every_mcp_tool_with_any_arguments_in_process(call, tmp_path_factory, monkeypatch):
    """Every tool of `agenvoy mcp --tools both`, called as the server's store thread calls
    it: an answer or one of our errors (a tool error for the host), never anything else;
    a refused call changes nothing."""
    from agenvoy_cli.errors import AgenvoyError
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.server import agenvoy_tools, handlers
    from agenvoy_cli.server.recent_cache import WarmStore
    from agenvoy_cli.vectors.hooks import VectorHooks
    from tests import words_embedder

    words_embedder.use(monkeypatch, words_embedder.WordsEmbedder())
    home = tmp_path_factory.mktemp("tools") / "home"
    tool_home(home)
    name, raw = call
    store = WarmStore(Layout(home), hooks=VectorHooks())
    try:
        before = snapshot(home)
        try:
            text, doc = agenvoy_tools.call(handlers.Context(store, None), name, raw, "both")
        except AgenvoyError as exc:
            assert str(exc) and "\n" not in str(exc), exc
            if exc.exit_code == 2:
                assert snapshot(home) == before, (name, raw, exc)
        else:
            assert isinstance(text, str) and doc["schema_version"] == 1
            orjson.dumps(doc)  # the host gets it as JSON
    finally:
        store.close()


# the calls that ended in "internal error" before: sent whatever hypothesis draws beside them
KNOWN_CALLS = [
    ("append_messages", {"session_id": "s", "messages": [
        {"role": "assistant", "content": None, "tool_calls": [{"function": 5}]}]}),
    ("append_messages", {"session_id": "s", "messages": [
        {"role": "assistant", "content": None, "tool_calls": [{**CALL, "id": [1]}]}]}),
    ("search_chat_history", {"session_id": "s", "keyword": "x", "\nnew line": 1}),
]


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("AGENVOY_FUZZ_SERVERS", "2")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(calls=st.lists(TOOL_CALLS, min_size=12, max_size=12))
def test_every_mcp_tool_with_any_arguments_through_the_sdk_client(calls, tmp_path_factory):
    """The same through a real server and the official SDK's client (what a host sends,
    JSON-RPC and all): every reply a result or a one-line tool error, never an internal
    error, and the server still answers afterwards."""
    from tests.mcp_client import connect, run_async, text_of

    home = tmp_path_factory.mktemp("sdk") / "home"
    tool_home(home)
    env = {"AGENVOY_HOME": str(home), "AGENVOY_EMBEDDER": "python:tests.words_embedder:current"}

    async def body() -> list[tuple[bool, str]]:
        out = []
        async with connect("--tools", "both", env=env) as session:
            for name, raw in [*KNOWN_CALLS, *calls]:
                if not isinstance(raw, dict):
                    continue  # the SDK's client sends an object, whatever it is given
                res = await session.call_tool(name, raw)
                out.append((res.is_error, text_of(res)))
            res = await session.call_tool("get_context", {"session_id": "s"})
            out.append((res.is_error, "alive"))
        return out

    replies = run_async(body)
    assert replies[-1] == (False, "alive")
    for is_error, text in replies:
        assert "internal error" not in text and "Traceback" not in text, text
        if is_error:
            assert text and "\n" not in text, text
