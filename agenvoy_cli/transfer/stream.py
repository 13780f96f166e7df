"""A JSON document read a value at a time (a 1 GiB conversations.json, or a request body
with a million messages, in the memory of its largest element): the C scanner of the json
module decodes a value where it starts and says where it ends; a buffer that ends inside a
value is read further. The elements of a top-level array (`elements`), or the members of a
top-level object with one array among them streamed (`JsonStream.members`)."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import Any, BinaryIO

CHUNK = 1 << 20
LIMIT = 64 << 20  # one value in memory at most: a longer one ends the read
_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"


class Malformed(ValueError):
    pass


class JsonStream:
    """A cursor over a JSON text read from `handle` as needed."""

    def __init__(self, handle: BinaryIO, chunk: int = CHUNK, limit: int = LIMIT) -> None:
        self.handle, self.chunk, self.limit = handle, chunk, limit
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.buf, self.pos, self.eof, self.read = "", 0, False, 0
        self.size = chunk  # doubled while one value spans reads: it is re-parsed log(n) times

    def _more(self) -> bool:
        if self.eof:
            return False
        data = self.handle.read(self.size)
        self.read += len(data)
        self.eof = not data
        try:
            text = self.decoder.decode(data, final=self.eof)
        except UnicodeDecodeError as exc:
            raise Malformed(f"not UTF-8 text near byte {self.read - len(data) + exc.start}"
                            ) from None
        self.buf = self.buf[self.pos:] + text
        self.pos = 0
        return True

    def offset(self) -> int:
        """Bytes consumed: read less what is still buffered (exact for ASCII, at most a
        buffer off for wider text; never decreasing)."""
        return self.read - (len(self.buf) - self.pos)

    def peek(self) -> str:
        """The next character that is not white space ("" at the end)."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _SPACE:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def take(self, char: str, what: str) -> None:
        if self.peek() != char:
            raise Malformed(f"{what} near byte {self.offset()}")
        self.pos += 1

    def value(self) -> Any:
        """Decode the value that starts here."""
        if not self.peek():
            raise Malformed("the document ends early")
        self.size = self.chunk
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # the buffer ends inside the value (a string still open, or an error at its
                # very end): read on; an error well before the end is the file's own
                cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(self.buf) - 6
                if cut and self._grow():
                    continue
                raise Malformed(f"bad JSON near byte {self.read - len(self.buf) + exc.pos}: "
                                f"{exc.msg}") from None
            except RecursionError:
                raise Malformed(f"nested too deep to read (over 1,000 levels) near byte "
                                f"{self.offset()}") from None
            if end >= len(self.buf) and not self.eof and self._grow():
                continue  # a number may go on in the next chunk
            self.pos = end
            return value

    def _grow(self) -> bool:
        if len(self.buf) - self.pos > self.limit:
            raise Malformed(f"a value longer than {self.limit:,} bytes near byte "
                            f"{self.offset()}")
        self.size *= 2
        return self._more()

    def array(self) -> Iterator[Any]:
        """The elements of the array that starts here."""
        self.take("[", "expected a JSON array")
        first = True
        while True:
            char = self.peek()
            if not char:
                raise Malformed("the array does not end")
            if char == "]":
                self.pos += 1
                return
            if not first:
                self.take(",", "expected ','")
            first = False
            yield self.value()

    def members(self) -> Iterator[str]:
        """The keys of the object that starts here; after each, the caller reads its value
        (value(), or array() to stream it)."""
        self.take("{", "expected a JSON object")
        first = True
        while True:
            char = self.peek()
            if not char:
                raise Malformed("the object does not end")
            if char == "}":
                self.pos += 1
                return
            if not first:
                self.take(",", "expected ','")
            first = False
            if self.peek() != '"':
                raise Malformed(f"expected a key near byte {self.offset()}")
            key = self.value()
            self.take(":", "expected ':'")
            start = self.pos
            yield key
            if self.pos == start:  # the caller did not read it
                self.value()


def elements(handle: BinaryIO, chunk: int = CHUNK, limit: int = LIMIT
             ) -> Iterator[tuple[Any, int]]:
    """(element, bytes consumed so far) for each element of the top-level array in `handle`
    (the file's size after the last element)."""
    stream = JsonStream(handle, chunk, limit)
    if stream.peek() != "[":
        raise Malformed("not a JSON array")
    for value in stream.array():
        yield value, stream.offset()
