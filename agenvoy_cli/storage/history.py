"""history.json: the hot file read every turn. Parsed strictly, written atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import orjson

from agenvoy_cli.errors import CorruptStore
from agenvoy_cli.storage.jsonfs import atomic_write_bytes, parse_json, read_bytes


def recovery_hint(session_id: str) -> str:
    return (f"refusing to write over it; run `agenvoy doctor --repair {session_id}` to rebuild it "
            "from the archive (the damaged file is kept beside it)")


class History(NamedTuple):
    path: Path
    messages: list[dict[str, Any]]
    raw: bytes | None  # None when the file does not exist

    @property
    def size(self) -> int:
        return len(self.raw) if self.raw is not None else 0


def load_history(path: Path, session_id: str) -> History:
    raw = read_bytes(path)
    if raw is None:
        return History(path, [], None)
    hint = recovery_hint(session_id)
    if not raw.strip():
        raise CorruptStore(f"{path} is empty; {hint}")
    data = parse_json(raw, path, hint)
    if not isinstance(data, list):
        raise CorruptStore(f"{path} is not a JSON array; {hint}")
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("role"), str):
            raise CorruptStore(f"{path}: entry {i} is not a chat message; {hint}")
    return History(path, data, raw)


def dump_history(messages: list[dict[str, Any]]) -> bytes:
    return orjson.dumps(messages) + b"\n"


def appended_bytes(history: History, new: list[dict[str, Any]], *, empty: bool) -> bytes:
    """The file with `new` appended, splicing bytes so the cost does not grow with history
    (the existing text is reused as it is, not re-serialized)."""
    if history.raw is None or empty:
        return dump_history(new)
    body = history.raw.rstrip()
    if not body.endswith(b"]"):
        raise CorruptStore(f"{history.path}: does not end with ']'")
    extra = b",".join(orjson.dumps(m) for m in new)
    return body[:-1].rstrip() + b"," + extra + b"]\n"


def write_history(path: Path, data: bytes) -> None:
    atomic_write_bytes(path, data)


def message_sizes(messages: list[dict[str, Any]]) -> list[int]:
    return [len(orjson.dumps(m)) + 1 for m in messages]
