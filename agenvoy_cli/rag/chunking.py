"""Blocks to chunks for document RAG: paragraphs and code blocks kept whole, bounded size.

A format parser (rag_formats) turns a file into Blocks: a paragraph, a fenced code block,
a heading line, a group of CSV rows, each with its line range and the heading it sits
under. ``pack`` joins consecutive blocks into Chunks of at most MAX_UNITS, never cutting
a block unless the block alone is larger than that (then at the best line break: a blank
line, else a line that goes back to a lower indentation, else a sentence end). A new
section (a heading in Markdown/HTML) starts a new chunk. A chunk closed only because it
was full hands its last paragraph (or its last lines, up to OVERLAP_UNITS) to the next
one, so a passage cut at a chunk border is still found whole.

Size is counted in units: one per character, two per CJK character (multilingual-e5 uses
about one token per CJK character and one per four Latin ones; MAX_UNITS keeps a chunk
inside the model's 512-token window).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

MAX_UNITS = 1200
OVERLAP_UNITS = 200

_CJK_CHAR = re.compile(
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\U00020000-\U0002ffff]")
_SENTENCE_END = re.compile(r"(?<=[.!?;。！？；])\s+|(?<=[。！？；])")


def units(text: str) -> int:
    return len(text) + len(_CJK_CHAR.findall(text))


@dataclass
class Block:
    text: str  # the block's lines joined by "\n"
    line_start: int  # 1-based, inclusive
    line_end: int
    heading: str | None = None
    kind: str = "text"  # text | code | heading | rows
    # The heading under which each line sits (code: class > def), when it varies inside
    # the block; used when an oversize block is cut.
    line_headings: list[str | None] | None = None
    exact: bool = True  # text lines are source lines line_start.. (HTML: no)
    clean_end: bool = True  # ends where the source has a natural break (not a cut inside)


@dataclass
class Chunk:
    text: str
    line_start: int
    line_end: int
    heading: str | None

    def as_dict(self) -> dict[str, object]:
        return {"text": self.text, "line_start": self.line_start, "line_end": self.line_end,
                "heading": self.heading}


@dataclass
class _Open:
    blocks: list[Block] = field(default_factory=list)
    size: int = 0

    def add(self, block: Block) -> None:
        self.blocks.append(block)
        self.size += units(block.text) + 1


# ----------------------------------------------------------------------------- cutting


def _break_score(lines: Sequence[str], i: int, floor: int) -> int:
    """How good a cut before line i is: after a blank line (3), at a line back at the
    block's outer indentation (2: a new method, a new list), after a sentence end (1)."""
    prev, cur = lines[i - 1], lines[i]
    score = 0
    if not prev.strip():
        score += 3
    if cur.strip() and len(cur) - len(cur.lstrip()) <= floor:
        score += 2
    if prev.rstrip().endswith((".", "。", "!", "?", "！", "？", ":", "：", "}", ";")):
        score += 1
    return score


def _floor(lines: Sequence[str]) -> int:
    """The outer indentation of a block's body (below its first line)."""
    depths = [len(ln) - len(ln.lstrip()) for ln in lines[1:] if ln.strip()]
    return min(depths, default=0)


def _split_line(text: str, limit: int) -> list[str]:
    """One line longer than the limit: at sentence ends, else at spaces, else hard."""
    pieces: list[str] = []
    rest = text
    while units(rest) > limit:
        window = _prefix_within(rest, limit)
        cut = 0
        for match in _SENTENCE_END.finditer(window):
            if match.end() >= len(window) // 3:
                cut = match.end()
        if not cut:
            cut = window.rfind(" ") + 1 if " " in window[len(window) // 3:] else len(window)
        pieces.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        pieces.append(rest)
    return [p for p in pieces if p]


def _prefix_within(text: str, limit: int) -> str:
    """The longest prefix of text within the unit limit."""
    size = 0
    for i, ch in enumerate(text):
        size += 2 if _CJK_CHAR.match(ch) else 1
        if size > limit:
            return text[:max(i, 1)]
    return text


def cut_block(block: Block, limit: int = MAX_UNITS) -> list[Block]:
    """A block too large for one chunk, as pieces of at most `limit` units."""
    if units(block.text) <= limit:
        return [block]
    lines = block.text.split("\n")
    if len(lines) == 1 or not block.exact:
        # One long line (a soft-wrapped paragraph, minified JSON) or lines that are not
        # source lines: sentences, all on the block's line range.
        return [Block(p, block.line_start, block.line_end, block.heading, block.kind,
                      exact=False, clean_end=False)
                for line in lines for p in _split_line(line, limit) if p]
    pieces: list[Block] = []
    floor = _floor(lines)
    start = 0
    while start < len(lines):
        size, end = 0, start
        while end < len(lines) and size + units(lines[end]) + 1 <= limit:
            size += units(lines[end]) + 1
            end += 1
        if end == start:  # one line over the limit
            number = block.line_start + start
            head = block.line_headings[start] if block.line_headings else block.heading
            pieces.extend(Block(p, number, number, head, block.kind, exact=False,
                                clean_end=False) for p in _split_line(lines[start], limit))
            start += 1
            continue
        clean = True
        if end < len(lines):
            # The best break in the second half of the window (the latest of equals).
            best, best_score = end, -1
            for i in range(end, start + max(1, (end - start) // 2), -1):
                score = _break_score(lines, i, floor)
                if score > best_score:
                    best, best_score = i, score
            end = best
            clean = best_score >= 5
        text = "\n".join(lines[start:end]).strip("\n")
        if text.strip():
            first = start + next(i for i, ln in enumerate(lines[start:end]) if ln.strip())
            head = block.line_headings[first] if block.line_headings else block.heading
            pieces.append(Block(text, block.line_start + start, block.line_start + end - 1,
                                head, block.kind, clean_end=clean))
        start = end
    return pieces


# ----------------------------------------------------------------------------- packing


def _overlap(blocks: Sequence[Block], limit: int) -> list[Block]:
    """The tail of a full chunk that the next chunk repeats: its last paragraph when small,
    else its last lines within the limit. Never a heading, CSV rows, or code that ended at
    a clean break (the end of a function: nothing of it continues in the next chunk)."""
    last = blocks[-1]
    if last.kind in ("rows", "heading") or (last.kind == "code" and last.clean_end):
        return []
    if len(blocks) < 2 and units(last.text) <= limit:
        return []
    if units(last.text) <= limit:
        return [last]
    lines = last.text.split("\n")
    taken: list[str] = []
    if last.exact and len(lines) > 1:
        size = 0
        for line in reversed(lines[1:]):
            size += units(line) + 1
            if size > limit:
                break
            taken.insert(0, line)
    if taken and "".join(taken).strip():
        first = last.line_end - len(taken) + 1
        head = (last.line_headings[len(lines) - len(taken)] if last.line_headings
                else last.heading)
        return [Block("\n".join(taken), first, last.line_end, head, last.kind)]
    if last.kind != "text":
        return []
    # Prose in long lines: its last sentences.
    sentences = [p for p in _SENTENCE_END.split(lines[-1]) if p.strip()]
    tail: list[str] = []
    size = 0
    for sentence in reversed(sentences[1:]):
        size += units(sentence) + 1
        if size > limit:
            break
        tail.insert(0, sentence.strip())
    if not tail:
        return []
    return [Block(" ".join(tail), last.line_end, last.line_end, last.heading, last.kind,
                  exact=False)]


def _emit(open_: _Open, header: str | None) -> Chunk:
    blocks = open_.blocks
    heading = next((b.heading for b in blocks if b.kind != "heading" and b.heading),
                   blocks[0].heading)
    parts = [blocks[0].text]
    for prev, block in zip(blocks, blocks[1:]):
        gap = block.line_start - prev.line_end
        if block.kind == "rows":
            sep = "\n"
        elif prev.exact and block.exact and 1 <= gap <= 3:
            sep = "\n" * gap  # the source's own line breaks: the text is the file's lines
        else:
            sep = "\n\n"
        parts.append(sep + block.text)
    text = "".join(parts)
    if header is not None and blocks[0].kind == "rows" and blocks[0].text != header:
        text = header + "\n" + text
    return Chunk(text, min(b.line_start for b in blocks), max(b.line_end for b in blocks),
                 heading)


def pack(blocks: Sequence[Block], *, section_breaks: bool = True, header: str | None = None,
         limit: int = MAX_UNITS, overlap: int = OVERLAP_UNITS) -> list[Chunk]:
    """Consecutive blocks joined into chunks of at most `limit` units (see module doc).
    section_breaks: a change of heading starts a new chunk (documents; not code). header:
    a line repeated at the top of every chunk (the CSV header row)."""
    room = limit - (units(header) + 1 if header else 0)
    pieces = [p for b in blocks if b.text.strip() for p in cut_block(b, room)]
    chunks: list[Chunk] = []
    current = _Open()
    for block in pieces:
        size = units(block.text) + 1
        new_section = (section_breaks and current.blocks and block.kind == "heading"
                       and any(b.kind != "heading" for b in current.blocks))
        if current.blocks and (new_section or current.size + size > room):
            chunks.append(_emit(current, header))
            carry = [] if new_section else _overlap(current.blocks, overlap)
            current = _Open()
            for b in carry:
                if units(b.text) + 1 + size <= room:
                    current.add(b)
        current.add(block)
    if current.blocks:
        chunks.append(_emit(current, header))
    return chunks


def heading_path(stack: Sequence[tuple[int, str]]) -> str | None:
    return " > ".join(title for _, title in stack) or None


def push_heading(stack: list[tuple[int, str]], level: int, title: str) -> None:
    """Push a heading of `level` onto the stack, dropping the ones it closes."""
    while stack and stack[-1][0] >= level:
        stack.pop()
    stack.append((level, title))


Scope = Callable[[str], str | None]
