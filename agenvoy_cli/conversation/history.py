"""history.json: the hot file read every turn. Parsed strictly, written atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import orjson

from agenvoy_cli.errors import CorruptStore
from agenvoy_cli.home.files import atomic_write_bytes, parse_json, read_bytes


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


_SPACE = b" \t\r\n"


def splice_point(tail: bytes, offset: int, path: Path) -> int:
    """Where new messages go: the file offset right after the last element, found in the
    file's last bytes (`tail`, which starts at `offset`), before the closing ']'."""
    end = len(tail)
    while end and tail[end - 1] in _SPACE:
        end -= 1
    if not end or tail[end - 1] != ord("]"):
        raise CorruptStore(f"{path}: does not end with ']'; {recovery_hint(path.parent.name)}")
    end -= 1
    while end and tail[end - 1] in _SPACE:
        end -= 1
    if end == 0 and offset > 0:
        raise CorruptStore(f"{path}: cannot find the end of the array")
    return offset + end


def read_tail(path: Path, size: int, want: int = 4096) -> tuple[bytes, int]:
    """The last bytes of a file and their offset."""
    with open(path, "rb") as handle:
        offset = max(0, size - want)
        handle.seek(offset)
        return handle.read(), offset


def write_appended(path: Path, new: list[dict[str, Any]], splice: int | None) -> int:
    """Write history.json with `new` after the existing messages, which are copied as they
    are (in the kernel, never re-serialized): the cost does not grow with the history.
    splice=None: there are no existing messages. Returns the new size."""
    if splice is None:
        data = dump_history(new)
        atomic_write_bytes(path, data)
        return len(data)
    tail = b"," + b",".join(orjson.dumps(m) for m in new) + b"]\n"
    atomic_write_bytes(path, tail, prefix=(path, splice))
    return splice + len(tail)


def write_history(path: Path, data: bytes) -> None:
    atomic_write_bytes(path, data)


def message_sizes(messages: list[dict[str, Any]]) -> list[int]:
    return [len(orjson.dumps(m)) + 1 for m in messages]
