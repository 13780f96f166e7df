"""OpenAI-style chat messages, in the shapes people have them (which one was read is said
in the result's `shape`):

- `messages-jsonl`: JSON Lines, one message a line (what `append --messages` takes);
- `messages-array`: a JSON array of messages (pretty-printed or not);
- `request`: an object with `messages` (a chat request body or a logged conversation);
  `model`, `tools` and the rest are kept as the session's metadata;
- `requests-array`: a JSON array of such objects;
- `requests-jsonl`: JSON Lines of such objects, or of batch / fine-tuning lines
  (`{"messages": [...]}`, `{"custom_id", "body": {"messages": [...]}}`).

One session per file for the first three; one per request for the last two, unless
--session gathers them. Arrays and objects are read as a stream (transfer/stream.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from agenvoy_cli.transfer.inputs import MAX_RECORD_BYTES, QUIET_SECONDS, lines, open_input, too_long
from agenvoy_cli.transfer.records import (
    ReadFailure,
    Record,
    Timed,
    Unit,
    decode_error,
    raw_bytes,
    slug,
)
from agenvoy_cli.transfer.stream import JsonStream, Malformed

SHAPES = ("messages-jsonl", "messages-array", "request", "requests-array", "requests-jsonl")


def request_messages(item: Any) -> list[Any] | None:
    """The messages of a request object (a body, a batch line with `body`), else None."""
    if not isinstance(item, dict):
        return None
    for holder in (item, item.get("body")):
        if isinstance(holder, dict) and isinstance(holder.get("messages"), list):
            found: list[Any] = holder["messages"]
            return found
    return None


def request_meta(item: dict[str, Any]) -> dict[str, Any]:
    """What a request carries beside its messages (model, tools, custom_id...)."""
    out = {k: v for k, v in item.items() if k not in ("messages", "body")}
    body = item.get("body")
    if isinstance(body, dict):
        out["body"] = {k: v for k, v in body.items() if k != "messages"}
    return out


def _message_record(raw: bytes, item: Any, where: str) -> Record:
    if not isinstance(item, dict) or not isinstance(item.get("role"), str):
        what = "a request (messages inside)" if request_messages(item) is not None else \
            "not a chat message"
        return Record(raw, [], f"{where}: {what}")
    return Record(raw, [(item, None)])


def _request_record(raw: bytes, item: Any, where: str) -> Record:
    found = request_messages(item)
    if found is None:
        return Record(raw, [], f"{where}: not a request with messages")
    out: list[Timed] = []
    bad = 0
    for message in found:
        if isinstance(message, dict) and isinstance(message.get("role"), str):
            out.append((message, None))
        else:
            bad += 1
    return Record(raw, out, f"{where}: {bad} item(s) of messages are not chat messages"
                  if bad else None)


def shape(path: Path, limit: int = MAX_RECORD_BYTES) -> str:
    """Which shape a file is (ReadFailure when it is none of them)."""
    with open_input(path) as handle:
        head = handle.read(4096).lstrip()
    if head.startswith(b"["):
        with open_input(path) as handle:
            stream = JsonStream(handle, limit=limit)
            try:
                first = next(stream.array(), None)
            except Malformed as exc:
                raise ReadFailure(str(exc)) from None
        return "requests-array" if request_messages(first) is not None else "messages-array"
    if head.startswith(b"{"):
        if head[1:].lstrip(b" \t\r").startswith(b"\n"):
            return "request"  # "{" alone on its line: an object over several lines
        with open_input(path) as handle:
            for _, line in zip(range(20), lines(handle, limit)):
                try:
                    item = orjson.loads(line.data or b"")
                except orjson.JSONDecodeError:
                    continue  # a malformed line: the next ones tell
                if request_messages(item) is not None:
                    return "request" if _single(path, limit) else "requests-jsonl"
                return "messages-jsonl"
        return "messages-jsonl"
    if not head:
        return "messages-jsonl"  # empty: nothing to read yet
    raise ReadFailure("neither JSON Lines nor a JSON array or object")


def _single(path: Path, limit: int) -> bool:
    """Whether a JSON Lines file has only one line (then it is one request object)."""
    with open_input(path) as handle:
        for count, _ in enumerate(lines(handle, limit), 1):
            if count > 1:
                return False
    return True


def read_jsonl(path: Path, requests: bool, settled: bool, limit: int) -> Iterator[Record]:
    """The records of a JSON Lines file."""
    with open_input(path) as handle:
        for line in lines(handle, limit):
            if line.data is None:
                yield Record(line.raw, [], too_long(line, limit))
                continue
            raw = line.data if line.complete else line.data + b"\n"
            try:
                item = orjson.loads(line.data)
            except orjson.JSONDecodeError as exc:
                if not line.complete and not settled:
                    return  # still being written: the next import reads it whole
                yield Record(raw, [], f"line {line.number}: {decode_error(exc)}")
                continue
            where = f"line {line.number}"
            yield _request_record(raw, item, where) if requests else \
                _message_record(raw, item, where)


def read_array(path: Path, requests: bool, limit: int) -> Iterator[Record]:
    with open_input(path) as handle:
        stream = JsonStream(handle, limit=limit)
        try:
            for index, item in enumerate(stream.array()):
                where = f"element {index}"
                raw = raw_bytes(item)
                yield _request_record(raw, item, where) if requests else \
                    _message_record(raw, item, where)
        except Malformed as exc:
            raise ReadFailure(str(exc)) from None


def read_request(path: Path, meta: dict[str, Any], limit: int) -> Iterator[Record]:
    """The messages of a request object, streamed; the other members into meta."""
    with open_input(path) as handle:
        stream = JsonStream(handle, limit=limit)
        request: dict[str, Any] = {}
        try:
            for key in stream.members():
                holder = key in ("messages", "body") and stream.peek() in ("[", "{")
                if key == "messages" and stream.peek() == "[":
                    for index, item in enumerate(stream.array()):
                        yield _message_record(raw_bytes(item), item, f"message {index}")
                elif key == "body" and holder:
                    for sub in stream.members():  # a batch line's body, pretty-printed
                        if sub == "messages" and stream.peek() == "[":
                            for index, item in enumerate(stream.array()):
                                yield _message_record(raw_bytes(item), item,
                                                      f"message {index}")
                        else:
                            request.setdefault("body", {})[sub] = stream.value()
                else:
                    request[key] = stream.value()
                meta["request"] = request
        except Malformed as exc:
            raise ReadFailure(str(exc)) from None


def file_units(file: Path, session: str | None, *, quiet: float = QUIET_SECONDS,
               now: bool = False, limit: int = MAX_RECORD_BYTES) -> Iterator[Unit]:
    stat = file.stat()
    form = shape(file, limit)
    settled = now or time.time() - stat.st_mtime >= quiet
    where = str(file.resolve())
    stem = slug(file.stem) or "messages"
    base = stem if stem == "openai" or stem.startswith("openai-") else f"openai-{stem}"
    report = {"shape": form}
    meta: dict[str, Any] = {"path": where, "shape": form}
    if form in ("messages-jsonl", "messages-array", "request") or (
            session and form in ("requests-jsonl", "requests-array")):
        if form == "messages-jsonl":
            records = partial(read_jsonl, file, False, settled, limit)
        elif form == "messages-array":
            records = partial(read_array, file, False, limit)
        elif form == "request":
            records = partial(read_request, file, meta, limit)
        else:
            records = partial(read_jsonl, file, True, settled, limit) \
                if form == "requests-jsonl" else partial(read_array, file, True, limit)
        yield Unit(f"openai:{where}", "openai", session or base, records, meta, stat.st_size,
                   stat.st_mtime_ns, report=report)
        return
    yield from _request_units(file, form, base, where, settled, limit)


def _request_units(file: Path, form: str, base: str, where: str, settled: bool,
                   limit: int) -> Iterator[Unit]:
    """One unit per request of a requests file (a line, or an element), its one record
    read as the file is (each unit holds only its own request)."""
    with open_input(file) as handle:
        items: Iterator[tuple[int, bytes, Any]]
        if form == "requests-jsonl":
            items = ((line.number, line.raw if line.complete else line.raw + b"\n",
                      _loads(line.data)) for line in lines(handle, limit)
                     if line.complete or settled)
        else:
            stream = JsonStream(handle, limit=limit)
            items = ((i + 1, raw_bytes(item), item) for i, item in enumerate(stream.array()))
        try:
            for number, raw, item in items:
                custom = item.get("custom_id") if isinstance(item, dict) else None
                tag = slug(custom, 48) if isinstance(custom, str) and slug(custom, 48) else \
                    str(number)
                meta: dict[str, Any] = {"path": where, "shape": form}
                if isinstance(item, dict):
                    meta["request"] = request_meta(item)
                where_in = f"line {number}" if form == "requests-jsonl" else \
                    f"element {number - 1}"
                record = _request_record(raw, item, where_in)
                yield Unit(f"openai:{where}#{tag}", "openai", f"{base}-{tag}",
                           partial(list, [record]), meta, report={"shape": form})
        except Malformed as exc:
            raise ReadFailure(str(exc)) from None


def _loads(data: bytes | None) -> Any:
    try:
        return orjson.loads(data or b"")
    except orjson.JSONDecodeError:
        return None
