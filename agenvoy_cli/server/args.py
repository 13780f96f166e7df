"""Checking a tool call's arguments: hosts do not all validate against the schema, and a bad
call must be one clear line (BadInput, as the CLI says it) that changes nothing."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from agenvoy_cli.errors import BadInput
from agenvoy_cli.home.layout import validate_name

_MISSING = object()


class Args:
    """The arguments of one call, read field by field; unknown fields are refused."""

    def __init__(self, tool: str, raw: Mapping[str, Any] | None, known: Sequence[str]) -> None:
        self.tool, self.raw = tool, dict(raw or {})
        unknown = sorted(set(self.raw) - set(known))
        if unknown:
            shown = (name if name.isprintable() else repr(name) for name in unknown)
            raise BadInput(f"{tool}: unknown argument(s): {', '.join(shown)} "
                           f"(expected {', '.join(known) or 'none'})")

    def _get(self, name: str, required: bool) -> Any:
        value = self.raw.get(name, _MISSING)
        if value is None:
            value = _MISSING
        if value is _MISSING and required:
            raise BadInput(f"{self.tool}: {name} is required")
        return value

    def string(self, name: str, *, required: bool = False, default: str | None = None
               ) -> str | None:
        value = self._get(name, required)
        if value is _MISSING:
            return default
        if not isinstance(value, str):
            raise BadInput(f"{self.tool}: {name} must be a string, got {_kind(value)}")
        return value

    def choice(self, name: str, choices: Sequence[Any], default: Any) -> Any:
        value = self._get(name, False)
        if value is _MISSING:
            return default
        if isinstance(value, bool) or value not in choices:
            listed = ", ".join(str(c) for c in choices)
            raise BadInput(f"{self.tool}: {name} must be one of {listed}, got {value!r}")
        return value

    def integer(self, name: str, *, lo: int, hi: int | None = None,
                default: int | None = None) -> int | None:
        value = self._get(name, False)
        if value is _MISSING:
            return default
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadInput(f"{self.tool}: {name} must be an integer, got {_kind(value)}")
        if value < lo or (hi is not None and value > hi):
            bound = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
            raise BadInput(f"{self.tool}: {name} must be {bound}, got {value}")
        return value

    def number(self, name: str, *, lo: float, hi: float, default: float) -> float:
        value = self._get(name, False)
        if value is _MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value):
            raise BadInput(f"{self.tool}: {name} must be a number, got {_kind(value)}")
        if not lo <= value <= hi:
            raise BadInput(f"{self.tool}: {name} must be between {lo:g} and {hi:g}, "
                           f"got {value:g}")
        return float(value)

    def array(self, name: str, *, required: bool = False) -> list[Any] | None:
        value = self._get(name, required)
        if value is _MISSING:
            return None
        if not isinstance(value, list):
            raise BadInput(f"{self.tool}: {name} must be an array, got {_kind(value)}")
        return value

    def session(self, bound: str | None) -> str:
        """session_id, or the session the server is bound to; checked as the CLI checks it."""
        value = self.string("session_id")
        if value is None:
            if bound is None:
                raise BadInput(f"{self.tool}: session_id is required (this server is not "
                               "bound to a session: start it with --session ID)")
            return bound
        return validate_name(value)


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number"}.get(type(value), type(value).__name__)
