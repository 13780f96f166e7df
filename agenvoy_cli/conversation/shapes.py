"""The shape of a message's fields, checked before anything is written.

Two readers set the rules. Agenvoy reads history.json into Go structs (v0.28-v0.31:
`Message{role, content any, reasoning_content, tool_calls []ToolCall{id, type,
function{name, arguments}, thought_signature}, tool_call_id}`, every one a string but
content; v0.32: `Record{role, content, sendAt int64, sender}`); encoding/json matches keys
case-insensitively, and one entry of the wrong type fails the whole file, which Agenvoy then
replaces with its new messages alone. So every field it reads must be of the type it reads
(or null, which Go leaves at its zero value). And this program serialises each message with
orjson: JSON values only, integers within 64 bits, finite numbers, no lone surrogate, nested
at most MAX_DEPTH deep. Anything else is refused with the path of the field at fault.
"""

from __future__ import annotations

import math
import re
from typing import Any

from agenvoy_cli.errors import BadInput

MAX_DEPTH = 64  # levels of objects and arrays in one message (a message itself is one)
# Go's fields that hold a string (a null is fine: Go leaves the zero value), by the
# lowercased key as encoding/json matches it; tool_calls' items and their function below.
_STRINGS = frozenset(("reasoning_content", "tool_call_id"))
_CALL_STRINGS = frozenset(("id", "type", "thought_signature"))
_FUNCTION_STRINGS = frozenset(("name", "arguments"))
_INT_LO, _INT_HI = -(2**63), 2**64 - 1  # what orjson writes


def kind(value: Any) -> str:
    """A JSON value's type, as an error message names it."""
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number"}.get(type(value), f"a {type(value).__name__}")


def check_shape(message: dict[str, Any], where: str) -> None:
    """Raise BadInput naming `where` and the field when a field has a shape Agenvoy cannot
    read or that is no JSON value (see the module's docstring)."""
    for key, value in message.items():
        folded = key.lower() if isinstance(key, str) else key
        if folded in _STRINGS:
            _string_or_null(value, where, key)
        elif folded == "tool_calls":
            _tool_calls(value, where, key)
    if not _passes(message, 1):
        _json_value(message, where, "", 1)


def _passes(value: Any, depth: int) -> bool:
    """True when _json_value(value, ..., depth) would raise nothing: the same rules, without
    the paths its messages name (building them cost every import and append a few per cent).
    Anything unusual (a subclass of str, int, dict or list) is False: the walk decides."""
    kind_of = type(value)
    if kind_of is str or kind_of is bool or value is None:
        return True
    if kind_of is int:
        return bool(_INT_LO <= value <= _INT_HI)
    if kind_of is float:
        return math.isfinite(value)
    if depth > MAX_DEPTH:
        return False
    if kind_of is dict:
        for key, item in value.items():
            if type(key) is not str or (type(item) is not str and not _passes(item, depth + 1)):
                return False
        return True
    if kind_of is list:
        return all(type(item) is str or _passes(item, depth + 1) for item in value)
    return False


def _string_or_null(value: Any, where: str, path: str) -> None:
    if value is not None and not isinstance(value, str):
        raise BadInput(f"{where}: {path} must be a string or null, got {kind(value)}")


def _tool_calls(calls: Any, where: str, path: str) -> None:
    if calls is None:
        return
    if not isinstance(calls, list):
        raise BadInput(f"{where}: {path} must be an array of objects, got {kind(calls)}")
    for i, call in enumerate(calls):
        at = f"{path}[{i}]"
        if not isinstance(call, dict):
            raise BadInput(f"{where}: {at} must be an object, got {kind(call)}")
        for key, value in call.items():
            folded = key.lower() if isinstance(key, str) else key
            if folded in _CALL_STRINGS:
                _string_or_null(value, where, f"{at}.{key}")
            elif folded == "function" and value is not None:
                if not isinstance(value, dict):
                    raise BadInput(f"{where}: {at}.{key} must be an object with a string "
                                   f"'name' and 'arguments', got {kind(value)}")
                for name, part in value.items():
                    if isinstance(name, str) and name.lower() in _FUNCTION_STRINGS:
                        _string_or_null(part, where, f"{at}.{key}.{name}")


def _json_value(value: Any, where: str, path: str, depth: int) -> None:
    """Every value under `value` a JSON value orjson writes as it is (strings are left to
    orjson itself: surrogate_path names a bad one after it refused)."""
    if isinstance(value, (str, bool)) or value is None:
        return
    if isinstance(value, int):
        if not _INT_LO <= value <= _INT_HI:
            raise BadInput(f"{where}: {path or 'a value'} is an integer beyond 64 bits")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise BadInput(f"{where}: {path or 'a value'} is not a finite number")
        return
    if not isinstance(value, (dict, list)):
        raise BadInput(f"{where}: {path or 'the message'} is {kind(value)}, not a JSON value")
    if depth > MAX_DEPTH:
        top = re.split(r"[.\[]", path, maxsplit=1)[0]
        raise BadInput(f"{where}: {top} is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, list):
        for i, item in enumerate(value):
            if not isinstance(item, str):
                _json_value(item, where, f"{path}[{i}]", depth + 1)
        return
    for key, item in value.items():
        if not isinstance(key, str):
            raise BadInput(f"{where}: a key under {path or 'the message'} is {kind(key)}, "
                           "not a string")
        if not isinstance(item, str):
            _json_value(item, where, f"{path}.{key}" if path else key, depth + 1)


def surrogate_path(value: Any, path: str = "") -> str | None:
    """Where the first string (or key) that is not valid UTF-8 is, or None."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path or "the message"
        return None
    items: Any = ()
    if isinstance(value, dict):
        for key in value:
            if surrogate_path(key) is not None:
                return f"a key under {path or 'the message'}"
        items = ((f"{path}.{k}" if path else k, v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    for at, item in items:
        found = surrogate_path(item, at)
        if found is not None:
            return found
    return None
