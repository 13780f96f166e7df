"""history.json: the hot file read every turn. Parsed strictly, written atomically."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import orjson

from agenvoy_cli.errors import CorruptStore
from agenvoy_cli.home.files import atomic_write_bytes, parse_json, read_bytes


def recovery_hint(session_id: str) -> str:
    return (f"refusing to write over it; run `agenvoy doctor --repair {session_id}` to rebuild it "
            "from the archive (the damaged file is kept beside it)")


class History(NamedTuple):
    path: Path
    messages: list[dict[str, Any]]  # or a HistoryView (history_view.open_history)
    raw: bytes | None  # None when the file does not exist (or was not read whole)
    nbytes: int | None = None  # the size, when raw was not kept

    @property
    def size(self) -> int:
        if self.nbytes is not None:
            return self.nbytes
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


# -- reading only what is needed ------------------------------------------------------------
# history.json is one JSON array written by this project or by Agenvoy. Two readers that never
# hold the whole file: the last N elements found from the end (context), and the elements in
# order, a chunk at a time (backfill, compaction, doctor). Whenever they cannot be sure, they
# leave the verdict to the strict full parse (load_history), so errors read the same.

_QUOTE, _BACKSLASH, _COMMA = ord('"'), ord("\\"), ord(",")
_OPEN, _CLOSE = frozenset(b"[{"), frozenset(b"]}")
_TOKENS = rb'["\[\]{},]'
TAIL_WINDOW = 64 << 10
CHUNK = 4 << 20


def _checked(items: list[Any], path: Path, first: int) -> list[dict[str, Any]]:
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("role"), str):
            raise CorruptStore(f"{path}: entry {first + i} is not a chat message; "
                               f"{recovery_hint(path.parent.name)}")
    return items


def _last_starts(data: bytes, end: int, want: int, whole: bool) -> int | None:
    """Offset in data where the last `want` elements begin (just after a ',' or the '['),
    scanning back from the closing ']' at data[end]. A quote is a string delimiter exactly
    when an even number of backslashes precedes it, so the string state is known at every
    byte from the end. None: the window starts too late to be sure."""
    depth, inside, found = 0, False, 0
    positions = [m.start() for m in re.compile(_TOKENS).finditer(data, 0, end)]
    for p in reversed(positions):
        c = data[p]
        if c == _QUOTE:
            q = p - 1
            while q >= 0 and data[q] == _BACKSLASH:
                q -= 1
            if q < 0 and not whole:
                return None
            if (p - 1 - q) % 2 == 0:
                inside = not inside
        elif inside:
            continue
        elif c in _CLOSE:
            depth += 1
        elif c in _OPEN:
            depth -= 1
            if depth < 0:
                return p + 1 if whole and not data[:p].strip() else None
        elif c == _COMMA and depth == 0:
            found += 1
            if found == want:
                return p + 1
    return None


def read_last(path: Path, session_id: str, count: int) -> list[dict[str, Any]]:
    """The last `count` messages of history.json ([] when it does not exist), reading only
    the end of the file. The cost follows the size of those messages, not of the file."""
    try:
        with open(path, "rb") as handle:
            found = _tail(handle, path, count)
    except FileNotFoundError:
        return []
    if found is not None:
        return found
    return load_history(path, session_id).messages[-count:] if count else []


def read_window(path: Path, session_id: str, limit: int) -> list[dict[str, Any]]:
    """messages.provider_window of history.json from its tail: read further back only while
    the window would start inside a run of tool results (it widens to their call)."""
    from agenvoy_cli.conversation.messages import provider_window

    want = max(limit, 0)
    while True:
        tail = read_last(path, session_id, want)
        if limit <= 0 or len(tail) < want:  # the whole file
            return provider_window(tail, limit)
        start = len(tail) - limit
        while start > 0 and tail[start].get("role") == "tool":
            start -= 1
        if start > 0 or tail[0].get("role") != "tool":
            return provider_window(tail, limit)
        want *= 2


def _tail(handle: BinaryIO, path: Path, count: int) -> list[dict[str, Any]] | None:
    size = os.fstat(handle.fileno()).st_size
    window = TAIL_WINDOW
    while True:
        base = max(0, size - window)
        handle.seek(base)
        data = handle.read(size - base)
        end = len(data.rstrip(b" \t\r\n")) - 1
        if end < 0 or data[end] != ord("]"):
            return None  # not an array's end: the full parse names the problem
        start = _last_starts(data, end, max(count, 1), base == 0)
        if start is not None:
            try:
                items = orjson.loads(b"[" + data[start:end] + b"]")
            except orjson.JSONDecodeError:
                return None
            return _checked(items, path, 0)[-count:] if count else []
        if base == 0:
            return None
        window *= 4


def _cut_candidates(buf: bytes, lo: int, hi: int) -> Iterator[tuple[int, int]]:
    """(end of an element, offset of the next one), from the back of buf[lo:hi]: a '}'
    followed by a ','. Some are inside strings or nested objects: the parse decides."""
    at = hi
    while True:
        at = buf.rfind(b"}", lo, at)
        if at < 0:
            return
        nxt = at + 1
        while nxt < len(buf) and buf[nxt] in b" \t\r\n":
            nxt += 1
        if nxt < len(buf) and buf[nxt] == _COMMA:
            yield at + 1, nxt + 1


def iter_chunks(path: Path, session_id: str, chunk: int = CHUNK) -> Iterator[list[dict[str, Any]]]:
    """The messages of history.json in order, a list of about `chunk` bytes at a time: memory
    follows the chunk (and the largest message), not the file. Raises CorruptStore as
    load_history does; a missing file yields nothing."""
    for _start, _end, items in scan_chunks(path, session_id, chunk):
        yield items


def scan_chunks(path: Path, session_id: str, chunk: int = CHUNK
                ) -> Iterator[tuple[int, int | None, list[dict[str, Any]]]]:
    """iter_chunks with each chunk's place in the file: (start, end, messages), where
    b"[" + file[start:end] + b"]" parses to the messages (end None: the last chunk, whose
    bytes run to the end of the file and close the array)."""
    if not path.exists():
        return
    hint = recovery_hint(session_id)
    with open(path, "rb") as handle:
        buf = handle.read(chunk)
        pos = len(buf) - len(buf.lstrip(b" \t\r\n"))
        if not buf.strip():
            raise CorruptStore(f"{path} is empty; {hint}")
        if buf[pos] != ord("["):
            load_history(path, session_id)  # raises the precise error
            raise CorruptStore(f"{path} is not a JSON array; {hint}")
        pos += 1
        base, index, want, eof = 0, 0, chunk, False  # base: file offset of buf[0]
        while True:
            if not eof and len(buf) - pos < want:
                more = handle.read(want)
                eof = len(more) < want
                base += pos
                buf = buf[pos:] + more
                pos = 0
            if eof:
                rest = buf[pos:]
                if index and rest.lstrip(b" \t\r\n").startswith(b"]"):
                    raise CorruptStore(f"{path} is not valid JSON (trailing comma); {hint}")
                yield base + pos, None, _checked(parse_json(b"[" + rest, path, hint), path, index)
                return
            items = None
            cut = (0, 0)
            for tries, cut in enumerate(_cut_candidates(buf, pos, len(buf))):
                doc = b"[" + buf[pos:cut[0]] + b"]"
                try:
                    items = orjson.loads(doc)
                except orjson.JSONDecodeError as exc:
                    if exc.pos < len(exc.doc) - 2:  # broken before the cut: the file is damaged
                        parse_json(doc, path, hint)
                    if tries < 16:
                        continue
                break
            if items is None:
                want *= 2  # one message larger than the chunk: read on
                continue
            yield base + pos, base + cut[0], _checked(items, path, index)
            index += len(items)
            pos, want = cut[1], chunk
