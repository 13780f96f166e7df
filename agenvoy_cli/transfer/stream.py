"""The elements of a top-level JSON array, one at a time (a 1 GiB conversations.json in the
memory of its largest element): the C scanner of the json module decodes an element where
it starts and says where it ends; a buffer that ends inside an element is read further."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import Any, BinaryIO

CHUNK = 1 << 20
_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"


class Malformed(ValueError):
    pass


def elements(handle: BinaryIO, chunk: int = CHUNK) -> Iterator[tuple[Any, int]]:
    """(element, bytes consumed so far) for each element of the array in `handle`: the
    bytes read less the characters still buffered (exact for ASCII, at most a buffer off
    for wider text; never decreasing, the file's size after the last element)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    buf, pos, eof, read = "", 0, False, 0
    size = chunk  # doubled while one element spans reads: it is re-parsed log(n) times

    def more() -> bool:
        nonlocal buf, pos, eof, read
        if eof:
            return False
        data = handle.read(size)
        read += len(data)
        eof = not data
        buf = buf[pos:] + decoder.decode(data, final=eof)
        pos = 0
        return True

    def skip_space() -> bool:
        nonlocal pos
        while True:
            while pos < len(buf) and buf[pos] in _SPACE:
                pos += 1
            if pos < len(buf):
                return True
            if not more():
                return False

    if not skip_space() or buf[pos] != "[":
        raise Malformed("not a JSON array")
    pos += 1
    first = True
    while True:
        if not skip_space():
            raise Malformed("the array does not end")
        if buf[pos] == "]":
            return
        if not first:
            if buf[pos] != ",":
                raise Malformed(f"expected ',' near byte {read - len(buf) + pos}")
            pos += 1
            if not skip_space():
                raise Malformed("the array does not end")
        first = False
        size = chunk
        while True:
            try:
                value, end = _DECODER.raw_decode(buf, pos)
            except json.JSONDecodeError as exc:
                # the buffer ends inside the element (a string still open, or an error at
                # its very end): read on; an error well before the end is the file's own
                cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(buf) - 6
                size *= 2
                if cut and more():
                    continue
                raise Malformed(f"bad JSON near byte {read - len(buf) + exc.pos}: "
                                f"{exc.msg}") from None
            if end >= len(buf) and not eof and more():  # a number may go on in the next chunk
                continue
            pos = end
            yield value, read - (len(buf) - pos)
            break
