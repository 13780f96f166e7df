"""check_shape's quick pass (shapes._passes) may only let through what the full walk
(shapes._json_value, which names the field at fault) lets through: on every value below the
two agree, so a message the walk refuses is still refused with the same message."""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import pytest

from agenvoy_cli.conversation.shapes import MAX_DEPTH, _json_value, _passes
from agenvoy_cli.errors import BadInput


class Text(str):
    pass


class Number(int):
    pass


def nested(levels: int) -> Any:
    value: Any = "x"
    for i in range(levels):
        value = [value] if i % 2 else {"k": value}
    return value


VALUES: list[Any] = [
    "text", "", True, False, None, 0, -(2**63), 2**64 - 1, -(2**63) - 1, 2**64, 1.5, -0.0,
    math.nan, math.inf, -math.inf, [], {}, ["a", 1, None], {"a": {"b": [1, 2.5, "c"]}},
    {1: "x"}, {"a": {2: "x"}}, {"a": [math.nan]}, {"a": [{"b": 2**70}]}, b"bytes", {1, 2},
    ("a",), object(), Text("x"), {"a": Text("x")}, [Text("x")], {Text("k"): "v"}, Number(3),
    OrderedDict(a=1), {"a": OrderedDict(b=1)},
    nested(MAX_DEPTH - 1), nested(MAX_DEPTH), nested(MAX_DEPTH + 1), nested(MAX_DEPTH + 5),
    {"content": [{"type": "text", "text": "hi"}], "tool_calls": [{"function": {"a": 1}}]},
]


def walk_passes(value: Any) -> bool:
    try:
        _json_value(value, "message 0", "", 1)
    except BadInput:
        return False
    return True


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_quick_pass_never_accepts_what_the_walk_refuses(value: Any) -> None:
    if _passes(value, 1):
        assert walk_passes(value)


def test_quick_pass_takes_the_plain_messages() -> None:
    """The common shapes go the quick way (else it would save nothing)."""
    for value in (["a", 1, None], {"a": {"b": [1, 2.5, "c"]}}, nested(MAX_DEPTH - 1),
                  {"content": [{"type": "text", "text": "hi"}], "tool_calls": [
                      {"id": "c1", "type": "function",
                       "function": {"name": "f", "arguments": "{}"}}]}):
        assert _passes(value, 1)
