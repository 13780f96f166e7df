"""What a format reader yields: one session read from a source, in the archive's terms."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from agenvoy_cli.errors import BadInput


class Parsed(NamedTuple):
    """One session read from a source file. `key` tells sessions of one file apart (a
    ChatGPT conversation id; "" when the file is one session); `messages` are OpenAI-style
    messages with their time (unix ns, or None when the source has none); `skipped` the
    reasons of the malformed records left out; `meta` what the source says about the session
    (cwd, branch, title) beyond the messages; `exact` what an agenvoy export restores."""

    key: str
    session_id: str
    messages: list[tuple[dict[str, Any], int | None]]
    skipped: list[str]
    meta: dict[str, Any]
    exact: dict[str, Any] | None = None


def iso_ns(text: Any) -> int | None:
    """An ISO 8601 time ('2025-06-01T08:30:00.123Z') as unix ns; None when not one."""
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return int(moment.timestamp() * 1e9)
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


def seconds_ns(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value * 1_000_000_000)


def jsonl_records(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """(line number, record, error) of each non-blank line of a JSON Lines file, streamed."""
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield number, orjson.loads(line), None
            except orjson.JSONDecodeError as exc:
                yield number, None, f"line {number}: malformed JSON ({exc})"


def slug(text: str, limit: int = 40) -> str:
    """A readable piece of a session id: letters, digits, '-', '_' and '.' kept."""
    out = "".join(c if c.isalnum() or c in "-_." else "-" for c in text).strip("-.")
    while "--" in out:
        out = out.replace("--", "-")
    return out[:limit].strip("-.") or "session"


def files_under(paths: list[Path], pattern: str) -> list[Path]:
    """Each path that is a file, and the files matching `pattern` below each folder."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out.extend(sorted(p for p in path.rglob(pattern) if p.is_file()))
        elif path.is_file():
            out.append(path)
        else:
            raise BadInput(f"no such file or folder: {path}")
    return out
