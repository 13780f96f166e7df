"""OpenAI-style messages (what `append --messages` takes): a JSON array or JSON Lines."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from agenvoy_cli.transfer.records import Record, Unit, local_time, slug
from agenvoy_cli.transfer.stream import Malformed, elements


def _record(raw: bytes, item: Any, where: str) -> Record:
    if not isinstance(item, dict) or not isinstance(item.get("role"), str):
        return Record(raw, [], f"{where}: not a chat message")
    return Record(raw, [(item, None)])


def read(path: Path) -> list[Record]:
    with open(path, "rb") as handle:
        head = handle.read(64).lstrip()
    if head.startswith(b"["):
        with open(path, "rb") as handle:
            try:
                return [_record(orjson.dumps(item, option=orjson.OPT_SORT_KEYS), item,
                                f"element {i}")
                        for i, (item, _) in enumerate(elements(handle))]
            except Malformed as exc:
                return [Record(b"", [], f"{path.name}: {exc}")]
    records = []
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                item = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                records.append(Record(line, [], f"line {number}: {exc}"))
                continue
            records.append(_record(line, item, f"line {number}"))
    return records


def units(path: Path, session: str | None) -> Iterator[Unit]:
    files = [path] if path.is_file() else sorted(
        p for p in path.rglob("*") if p.suffix in (".json", ".jsonl"))
    for file in files:
        stat = file.stat()
        meta: dict[str, Any] = {"path": str(file.resolve())}
        yield Unit(f"openai:{file.resolve()}", "openai",
                   session or f"openai-{slug(file.stem) or 'messages'}",
                   partial(read, file), meta, stat.st_size, stat.st_mtime_ns)


__all__ = ["local_time", "units"]
