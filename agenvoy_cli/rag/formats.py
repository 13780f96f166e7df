"""A decoded file as blocks for the packer (rag.chunking), by format.

Markdown (rag.markdown: CommonMark structure), source code (top-level definitions whole;
the heading is the enclosing ``class > def``), JSON (by top-level member; heading is the
key path), CSV/TSV (rows grouped, the header row repeated in every chunk), HTML (visible
text only, through html.parser; h1-h6 as headings, <pre> whole), and plain text
(paragraphs; underlined titles as headings). Which format a file is: rag.reading.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser

from agenvoy_cli.rag.chunking import Block, heading_path, push_heading
from agenvoy_cli.rag.markdown import markdown_blocks
from agenvoy_cli.rag.reading import SNIFF_BYTES

_UNDERLINE = re.compile(r"^ {0,3}(=+|-+|~+|\^+|\*+|#+)[ \t]*$")


def _paragraphs(lines: list[str], first: int = 1) -> Iterator[tuple[int, int, list[str]]]:
    """Runs of non-blank lines: (start, end, lines), 1-based line numbers."""
    start = None
    for i, line in enumerate(lines):
        if line.strip():
            if start is None:
                start = i
        elif start is not None:
            yield first + start, first + i - 1, lines[start:i]
            start = None
    if start is not None:
        yield first + start, first + len(lines) - 1, lines[start:]


def _title(text: str) -> str:
    text = " ".join(text.strip().strip("#").split())
    return text[:120]


def text_blocks(text: str) -> list[Block]:
    """Paragraphs; a paragraph of a title over an underline (=== --- ~~~) is a heading."""
    lines = text.split("\n")
    blocks: list[Block] = []
    stack: list[tuple[int, str]] = []
    levels: dict[str, int] = {}
    for start, end, para in _paragraphs(lines):
        under = _UNDERLINE.match(para[-1]) if len(para) in (2, 3) else None
        if under and len(para[-1].strip()) >= max(3, len(para[-2].strip()) // 2):
            mark = under.group(1)[0]
            levels.setdefault(mark, len(levels) + 1)
            push_heading(stack, levels[mark], _title(para[-2]))
            blocks.append(Block("\n".join(para), start, end, heading_path(stack), "heading"))
            continue
        blocks.append(Block("\n".join(para), start, end, heading_path(stack)))
    return blocks


_DEF = re.compile(
    r"^\s*(?:(?:export|public|private|protected|internal|static|final|abstract|async|pub"
    r"(?:\([^)]*\))?|unsafe|override|open|sealed|default|extern|inline|virtual|data|case)"
    r"\s+)*"
    r"(def|class|func|function|fn|struct|enum|trait|impl|interface|module|object|record|"
    r"namespace|type|macro_rules!|sub|proc|defun|defn|defmacro)\s+"
    r"(\([^)]*\)\s*)?([A-Za-z_$][\w$.]*(?:::[A-Za-z_$][\w$]*)*)")
_JSON_KEY = re.compile(r'^(\s*)"((?:[^"\\]|\\.){1,80})"\s*:')


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _scopes(lines: list[str], pattern: re.Pattern[str], kind: str) -> list[str | None]:
    """The heading each line sits under: the chain of enclosing definitions (by
    indentation), e.g. ``class Store > def append``; JSON: the key path."""
    out: list[str | None] = []
    stack: list[tuple[int, str]] = []
    for line in lines:
        if line.strip():
            depth = _indent(line)
            if kind != "json" or not line.strip().startswith(("}", "]")):
                while stack and stack[-1][0] >= depth:
                    stack.pop()
            match = pattern.match(line)
            if match:
                if kind == "json":
                    stack.append((depth, match.group(2)))
                else:
                    stack.append((depth, f"{match.group(1)} {match.group(3)}"))
        out.append(" > ".join(s for _, s in stack) or None)
    return out


_CLOSERS = (")", "]", "}", "end", "fi", "done", "esac")


def _block_starts(lines: list[str], kind: str) -> list[int]:
    """Where blocks start (0 first, len(lines) last): a JSON member at the members'
    indentation, else a line of the lowest indentation after a blank one that does not
    close a bracket or a shell block."""
    base = min((_indent(ln) for ln in lines if ln.strip()), default=0)
    member = min((_indent(ln) for ln in lines if _JSON_KEY.match(ln)), default=base)
    starts = [0]
    for i in range(1, len(lines)):
        line = lines[i]
        if not line.strip():
            continue
        if kind == "json":
            if _indent(line) == member and _JSON_KEY.match(line):
                starts.append(i)
        elif (_indent(line) <= base and not lines[i - 1].strip()
              and not line.lstrip().startswith(_CLOSERS)):
            starts.append(i)
    return [*starts, len(lines)]


def code_blocks(text: str, kind: str = "code") -> list[Block]:
    """Top-level units: a new block starts at a line of the lowest indentation that comes
    after a blank line (a closing bracket does not), so a function with blank lines inside
    stays one block. JSON files start a block at every top-level member instead."""
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return []
    heads = _scopes(lines, _JSON_KEY if kind == "json" else _DEF, kind)
    starts = _block_starts(lines, kind)
    blocks = []
    for a, b in zip(starts, starts[1:]):
        chunk = lines[a:b]
        while chunk and not chunk[-1].strip():
            chunk.pop()
            b -= 1
        lead = next((k for k, ln in enumerate(chunk) if ln.strip()), None)
        if lead is None:
            continue
        hs = heads[a + lead:b]
        head = next((h for h in hs if h), None)  # a comment or decorator before a def
        blocks.append(Block("\n".join(chunk[lead:]), a + lead + 1, b, head, "code",
                            line_headings=hs))
    return blocks


def csv_blocks(text: str, delimiter: str | None) -> tuple[list[Block], str | None]:
    """One block per record (its source lines, so quoted newlines stay with it); the
    header row is returned apart, to be repeated at the top of every chunk."""
    lines = text.split("\n")
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(text[:SNIFF_BYTES], ",;|\t").delimiter
        except csv.Error:
            delimiter = ","
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    blocks: list[Block] = []
    header = None
    prev = 0
    try:
        for row in reader:
            end = reader.line_num
            raw = "\n".join(lines[prev:end]).strip("\n")
            start = prev + 1
            prev = end
            if not any(cell.strip() for cell in row):
                continue
            if header is None:
                header = raw
                continue
            blocks.append(Block(raw, start, end, None, "rows"))
    except csv.Error:  # not really CSV: as text
        return text_blocks(text), None
    return blocks, header


class _HTMLText(HTMLParser):
    """Visible text of an HTML page as blocks; line numbers from the parser's position."""

    SKIP = frozenset({"script", "style", "noscript", "template", "svg", "canvas", "iframe",
                      "object", "head"})
    BLOCK = frozenset({"p", "div", "section", "article", "main", "header", "footer", "nav",
                       "aside", "li", "ul", "ol", "dl", "dt", "dd", "table", "tr", "thead",
                       "tbody", "blockquote", "form", "fieldset", "figure", "figcaption",
                       "hr", "details", "summary", "address", "body", "html"})
    HEADINGS = {f"h{i}": i for i in range(1, 7)}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self.stack: list[tuple[int, str]] = []
        self.skip = 0
        self.pre = 0
        self.buf: list[str] = []
        self.start = 1
        self.heading: int | None = None
        self.in_title = False
        self.title_parts: list[str] = []

    def _flush(self, kind: str = "text") -> None:
        raw = "".join(self.buf)
        text = raw.strip("\n") if kind == "code" else " ".join(raw.split())
        end = self.getpos()[0]
        if text.strip():
            if kind == "heading":
                assert self.heading is not None
                push_heading(self.stack, self.heading, _title(text))
            self.blocks.append(Block(text, self.start, max(end, self.start),
                                     heading_path(self.stack), kind, exact=False))
        self.buf = []
        self.start = end

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
            return
        if tag == "br":
            self.buf.append(" ")
            return
        if tag in self.SKIP:
            self.skip += 1
            return
        if self.skip:
            return
        if tag in self.HEADINGS:
            self._flush()
            self.heading = self.HEADINGS[tag]
        elif tag == "pre":
            self._flush()
            self.pre += 1
        elif tag in self.BLOCK and not self.pre:
            self._flush()
        elif tag in ("td", "th") and self.buf:
            self.buf.append(" | ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
            return
        if tag in self.SKIP:
            self.skip = max(0, self.skip - 1)
            return
        if self.skip:
            return
        if tag in self.HEADINGS and self.heading is not None:
            self._flush("heading")
            self.heading = None
        elif tag == "pre" and self.pre:
            self.pre -= 1
            self._flush("code")
        elif tag in self.BLOCK and not self.pre:
            self._flush()

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title_parts.append(data)
            return
        if self.skip:
            return
        if not self.buf and not data.strip() and not self.pre:
            self.start = self.getpos()[0]
            return
        if not self.buf:
            self.start = self.getpos()[0]
        self.buf.append(data)


def html_blocks(text: str) -> list[Block]:
    parser = _HTMLText()
    try:
        parser.feed(text)
        parser.close()
    except (AssertionError, ValueError):
        pass
    parser._flush()
    blocks = parser.blocks
    title = " ".join("".join(parser.title_parts).split())[:120] or None
    if title and not any(b.kind == "heading" for b in blocks[:1]):
        blocks.insert(0, Block(title, 1, 1, title, "heading", exact=False))
        for b in blocks[1:]:
            if b.heading is None:
                b.heading = title
    return blocks


@dataclass
class Document:
    format: str
    blocks: list[Block]
    header: str | None = None  # CSV header row
    section_breaks: bool = True
    lines: int = 0


def parse(text: str, fmt: str) -> Document:
    """A decoded file as blocks for the packer."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.count("\n") + 1
    if fmt == "markdown":
        return Document(fmt, markdown_blocks(text), lines=lines)
    if fmt == "html":
        return Document(fmt, html_blocks(text), lines=lines)
    if fmt in ("csv", "tsv"):
        blocks, header = csv_blocks(text, "\t" if fmt == "tsv" else None)
        return Document(fmt, blocks, header, section_breaks=False, lines=lines)
    if fmt in ("code", "json"):
        return Document(fmt, code_blocks(text, fmt), section_breaks=False, lines=lines)
    return Document(fmt, text_blocks(text), lines=lines)
