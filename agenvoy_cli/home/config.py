"""Settings: upstream's config.json knobs, overridable by environment variables."""

from __future__ import annotations

import math
import os
from typing import Any, NamedTuple

from agenvoy_cli.errors import BadInput
from agenvoy_cli.home.files import read_json
from agenvoy_cli.home.layout import Layout

DEFAULT_MAX_HISTORY_MESSAGES = 16
DEFAULT_MAX_HISTORY_BYTES = 5 * 1024 * 1024
DEFAULT_LOCK_TIMEOUT = 30.0


def number_setting(raw: Any, where: str, cast: type = float, *, minimum: float | None = None,
                   above: float | None = None, maximum: float | None = None,
                   unit: str = "") -> Any:
    """A number the user gave in an environment variable or config.json (`where` names it in
    the one-line error): every knob is read the same way and says the same things."""
    of = f" {unit}" if unit else ""
    if isinstance(raw, bool):
        raise BadInput(f"{where}={raw!r} is not a number{of}")
    try:
        value = cast(raw)
    except (TypeError, ValueError):
        raise BadInput(f"{where}={raw!r} is not a number{of}") from None
    if not math.isfinite(value):
        raise BadInput(f"{where}={raw!r} must be a finite number{of}")
    if minimum is not None and value < minimum:
        raise BadInput(f"{where}={raw!r} must be at least {minimum:g}{of}")
    if above is not None and not value > above:
        raise BadInput(f"{where}={raw!r} must be more than {above:g}{of}")
    if maximum is not None and value > maximum:
        raise BadInput(f"{where}={raw!r} must be at most {maximum:g}{of}")
    return value


def _env_number(name: str, cast: type, default: Any, minimum: float) -> Any:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return number_setting(raw, name, cast, minimum=minimum)


def _config_number(data: dict[str, Any], key: str, default: int) -> int:
    """A positive integer; as Agenvoy reads its limits, any value <= 0 means the default."""
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise BadInput(f"config.json: limits.{key} must be an integer, got {value!r}")
    return int(value) if value > 0 else default


class Settings(NamedTuple):
    max_history_messages: int = DEFAULT_MAX_HISTORY_MESSAGES
    max_history_bytes: int = DEFAULT_MAX_HISTORY_BYTES
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    raw: dict[str, Any] = {}  # noqa: RUF012 - never mutated

    def section(self, name: str) -> dict[str, Any]:
        value = self.raw.get(name)
        return value if isinstance(value, dict) else {}

    def number(self, env: str, key: str, default: Any, cast: type = float,
               **bounds: Any) -> Any:
        """A knob from the environment, else config.json's "agenvoy" section, else the
        default; `bounds` as number_setting's."""
        raw = os.environ.get(env)
        if raw not in (None, ""):
            return number_setting(raw, env, cast, **bounds)
        raw = self.section("agenvoy").get(key)
        if raw is None:
            return default
        return number_setting(raw, f"config.json agenvoy.{key}", cast, **bounds)


def load_settings(layout: Layout) -> Settings:
    data = read_json(layout.config, default={})
    if not isinstance(data, dict):
        raise BadInput(f"{layout.config}: expected a JSON object")
    limits = data.get("limits") or {}
    if not isinstance(limits, dict):
        raise BadInput(f"{layout.config}: 'limits' must be an object")
    messages = _config_number(limits, "max_history_messages", DEFAULT_MAX_HISTORY_MESSAGES)
    size = _config_number(limits, "max_history_bytes", DEFAULT_MAX_HISTORY_BYTES)
    return Settings(
        max_history_messages=_env_number("AGENVOY_MAX_HISTORY_MESSAGES", int, messages, 1),
        max_history_bytes=_env_number("AGENVOY_MAX_HISTORY_BYTES", int, size, 1024),
        lock_timeout=_env_number("AGENVOY_LOCK_TIMEOUT", float, DEFAULT_LOCK_TIMEOUT, 0),
        raw=data,
    )
