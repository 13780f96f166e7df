"""OpenAI message forms beyond the four roles (issue #49, 7 and 8): the `developer` role
OpenAI's current docs give instructions in, and the legacy function-calling fine-tuning
format (an assistant `function_call`, a `role: function` result). Every door takes them,
nothing is dropped, and what the archive keeps gives back the form read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from agenvoy_cli.conversation.messages import strip_header
from tests.helpers.transfer import calls_and_results, openai_shape


def context(run, sid: str) -> list[dict]:
    res = run("context", sid, "--max-messages", "1000", "--json")
    assert res.exit_code == 0, res.stderr
    return res.json()["messages"]

DEV = [{"role": "developer", "content": "Answer in haiku. heron-marker"},
       {"role": "user", "content": "Describe autumn."},
       {"role": "assistant", "content": "Leaves fall, red and gold"}]
LEGACY = [{"role": "system", "content": "You call functions."},
          {"role": "user", "content": "Weather in Oslo?"},
          {"role": "assistant", "content": None, "function_call": {
              "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
          {"role": "function", "name": "get_weather", "content": "{\"temp\": -3} puffin-marker"},
          {"role": "assistant", "content": "It is -3 °C in Oslo."}]


def archived(home: Path) -> list[dict]:
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        rows = conn.execute("SELECT message FROM messages ORDER BY session_id, seq").fetchall()
    return [orjson.loads(r[0]) for r in rows]


def _write(tmp_path: Path, shape: str, messages: list[dict]) -> Path:
    if shape == "messages-jsonl":
        path = tmp_path / "chat.jsonl"
        path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in messages))
    elif shape == "messages-array":
        path = tmp_path / "chat.json"
        path.write_bytes(orjson.dumps(messages, option=orjson.OPT_INDENT_2))
    elif shape == "request":
        path = tmp_path / "chat.json"
        path.write_bytes(orjson.dumps({"model": "gpt-4.1", "messages": messages},
                                      option=orjson.OPT_INDENT_2))
    else:  # a fine-tuning file: one {"messages": [...]} a line
        path = tmp_path / "train.jsonl"
        path.write_bytes(orjson.dumps({"messages": messages}) + b"\n" +
                         orjson.dumps({"messages": messages[:2]}) + b"\n")
    return path


SHAPES = ["messages-jsonl", "messages-array", "request", "requests-jsonl"]


@pytest.mark.parametrize("fmt", ["openai", "auto"])
@pytest.mark.parametrize("shape", SHAPES)
def test_the_developer_role_is_imported(run, home, tmp_path, fmt, shape):
    path = _write(tmp_path, shape, DEV)
    res = run("import", fmt, str(path), "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert doc["skipped"] == 0 if "skipped" in doc else all(
        s["skipped"] == 0 for s in doc["sources"])
    rows = archived(home)
    dev = [m for m in rows if "heron-marker" in str(m.get("content"))]
    assert dev and all(m["role"] == "system" for m in dev)
    assert all(m["original_fields"] == {"role": "developer"} for m in dev)
    sid = doc["sources"][0]["session_id"]
    fed = context(run, sid)
    assert any("heron-marker" in str(m.get("content")) for m in fed)
    assert all("original_fields" not in m for m in fed)
    openai_shape(fed)


def test_append_takes_the_developer_role(run, home, tmp_path):
    path = tmp_path / "dev.json"
    path.write_bytes(orjson.dumps(DEV))
    res = run("append", "s", "--messages", str(path))
    assert res.exit_code == 0, res.stderr
    res = run("append", "s", "--role", "developer", "--content", "Be brief. kestrel-marker")
    assert res.exit_code == 0, res.stderr
    roles = [(m["role"], m.get("original_fields")) for m in archived(home)]
    assert roles[0] == ("system", {"role": "developer"})
    assert roles[-1] == ("system", {"role": "developer"})
    openai_shape(context(run, "s"))


@pytest.mark.parametrize("shape", SHAPES)
def test_the_legacy_function_call_format_is_imported_losslessly(run, home, tmp_path, shape):
    path = _write(tmp_path, shape, LEGACY)
    res = run("import", "openai", str(path), "--json")
    assert res.exit_code == 0, res.stderr
    sid = res.json()["sources"][0]["session_id"]
    fed = context(run, sid)
    openai_shape(fed)
    calls, results = calls_and_results(fed)
    assert len(calls) == 1 and calls == results
    call = next(m for m in fed if m.get("tool_calls"))["tool_calls"][0]
    assert call["function"] == LEGACY[2]["function_call"]
    assert any("puffin-marker" in str(m.get("content")) for m in fed if m["role"] == "tool")
    # the archive gives back the form read
    rows = [m for m in archived(home) if m.get("original_fields")]
    back = []
    for m in rows:
        original = {k: v for k, v in m.items() if k not in ("original_fields", "sendAt")}
        if "function_call" in m["original_fields"]:
            original.pop("tool_calls")
        if m["original_fields"].get("role") == "function":
            original.pop("tool_call_id")
        original.update(m["original_fields"])
        if isinstance(original.get("content"), str):  # the time header the archive adds
            original["content"] = strip_header(original["content"]) or None
        back.append(original)
    assert back[:2] == [LEGACY[2], LEGACY[3]]
