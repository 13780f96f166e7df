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

import json
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from agenvoy_cli.conversation.messages import ORIGINAL, stored_form
from agenvoy_cli.transfer.inputs import MAX_RECORD_BYTES, QUIET_SECONDS, lines, open_input, too_long
from agenvoy_cli.transfer.records import (
    Item,
    Learnt,
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


class Legacy:
    """OpenAI's older forms in the ones stored, over one conversation in order: `developer`
    as system (messages.stored_form), and the legacy function calling of fine-tuning files
    (an assistant `function_call`, then a `role: function` result) as a tool call and its
    tool result, paired by an id made of the call's place (the same on every read). What
    they replaced is kept in ORIGINAL: the form read is given back whole."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []  # (id, name) of the calls not answered yet

    def form(self, message: dict[str, Any], where: str) -> dict[str, Any]:
        call = message.get("function_call")
        if message.get("role") == "assistant" and isinstance(call, dict) and \
                not message.get("tool_calls"):
            cid = f"call-{slug(where, 60) or 'function'}"
            self.calls.append((cid, call.get("name")))
            args = call.get("arguments")
            out = {k: v for k, v in message.items() if k != "function_call"}
            out.setdefault("content", None)
            out["tool_calls"] = [{"id": cid, "type": "function", "function": {
                "name": call.get("name"),
                "arguments": args if isinstance(args, str) else _text(args)}}]
            out[ORIGINAL] = {"function_call": call}
            return out
        if message.get("role") == "function":
            return self._result(message, where)
        return stored_form(message)

    def _result(self, message: dict[str, Any], where: str) -> dict[str, Any]:
        """A function's result: it answers the last call of that name not answered yet
        (without a name: the last call not answered yet)."""
        name = message.get("name")
        place = next((i for i in range(len(self.calls) - 1, -1, -1)
                      if self.calls[i][1] == name or "name" not in message), None)
        cid = self.calls.pop(place)[0] if place is not None else \
            f"call-{slug(where, 60) or 'function'}-unanswered"
        out = {k: v for k, v in message.items() if k != "name"}
        out.update(role="tool", tool_call_id=cid)
        out[ORIGINAL] = {"role": "function", **({"name": name} if "name" in message else {})}
        return out


def _text(value: Any) -> str:
    """A value as JSON text (one a stream read may hold that orjson refuses: a number
    beyond 64 bits, a lone surrogate)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, default=repr)


def _message_record(raw: bytes, item: Any, where: str, legacy: Legacy) -> Record:
    if not isinstance(item, dict) or not isinstance(item.get("role"), str):
        what = "a request (messages inside)" if request_messages(item) is not None else \
            "not a chat message"
        return Record(raw, [], f"{where}: {what}")
    return Record(raw, [(legacy.form(item, where), None)])


def _gathered(raw: bytes, item: Any, where: str, gather: bool) -> list[Item]:
    """A request's record; gathered with others into one session (`gather`), what it
    carries beside its messages first, for meta["requests"] (each once: requests gathered
    mostly share their model and tools)."""
    record = _request_record(raw, item, where)
    if not gather or request_messages(item) is None:
        return [record]
    carried = request_meta(item)
    return [Learnt(lists={"requests": (carried,) if carried else ()}), record]


def _request_record(raw: bytes, item: Any, where: str) -> Record:
    """A request's messages."""
    found = request_messages(item)
    if found is None:
        return Record(raw, [], f"{where}: not a request with messages")
    out: list[Timed] = []
    bad = []
    legacy = Legacy()
    for index, message in enumerate(found):
        if isinstance(message, dict) and isinstance(message.get("role"), str):
            out.append((legacy.form(message, f"{where} message {index}"), None))
        else:
            bad.append(index)
    return Record(raw, out, f"{where}: {len(bad)} item(s) of messages are not chat messages "
                  f"(message {', '.join(map(str, bad[:5]))})" if bad else None)


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


def read_jsonl(path: Path, requests: bool, settled: bool, limit: int, gather: bool = False
               ) -> Iterator[Item]:
    """The records of a JSON Lines file (`gather`: of requests into one session)."""
    legacy = Legacy()
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
            if requests:
                yield from _gathered(raw, item, where, gather)
            else:
                yield _message_record(raw, item, where, legacy)


def read_array(path: Path, requests: bool, limit: int, gather: bool = False
               ) -> Iterator[Item]:
    legacy = Legacy()
    with open_input(path) as handle:
        stream = JsonStream(handle, limit=limit)
        try:
            for index, item in enumerate(stream.array()):
                where = f"element {index}"
                raw = raw_bytes(item)
                if requests:
                    yield from _gathered(raw, item, where, gather)
                else:
                    yield _message_record(raw, item, where, legacy)
        except Malformed as exc:
            raise ReadFailure(str(exc)) from None


def read_request(path: Path, limit: int) -> Iterator[Item]:
    """The messages of a request object, streamed; the other members learnt as
    meta["request"] (as they come: what was read of it when a batch is stored)."""
    legacy = Legacy()
    with open_input(path) as handle:
        stream = JsonStream(handle, limit=limit)
        request: dict[str, Any] = {}
        told = False  # meta["request"] is there (after the first member)
        try:
            for key in stream.members():
                holder = key in ("messages", "body") and stream.peek() in ("[", "{")
                if key == "messages" and stream.peek() == "[":
                    for index, item in enumerate(stream.array()):
                        yield _message_record(raw_bytes(item), item, f"message {index}",
                                              legacy)
                elif key == "body" and holder:
                    for sub in stream.members():  # a batch line's body, pretty-printed
                        if sub == "messages" and stream.peek() == "[":
                            for index, item in enumerate(stream.array()):
                                yield _message_record(raw_bytes(item), item,
                                                      f"message {index}", legacy)
                        else:
                            body = {**request.get("body", {}), sub: stream.value()}
                            request = {**request, "body": body}
                            if told:
                                yield Learnt(meta={"request": request})
                else:
                    request = {**request, key: stream.value()}
                told = True
                yield Learnt(meta={"request": request})
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
            records = partial(read_request, file, limit)
        else:
            records = partial(read_jsonl, file, True, settled, limit, True) \
                if form == "requests-jsonl" else partial(read_array, file, True, limit, True)
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
