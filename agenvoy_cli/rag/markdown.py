"""Markdown as blocks, by CommonMark's structure (``markdown-it-py``).

The parser decides what a heading, a fence, a list or an HTML comment is; this module
only turns its top-level tokens into Blocks with their source lines: ATX and setext
headings (multi-line ones too) open a section, fenced and indented code blocks stay
whole, a list gives one block per top-level item, HTML blocks and tables are text. A
``#`` line inside a list item, a blockquote or an HTML comment is not a section heading.
YAML front matter (``---`` ... ``---`` on the first line) is one code block.
"""

from __future__ import annotations

import functools
from typing import Any

from agenvoy_cli.rag.chunking import Block, heading_path, push_heading

_TITLE_CHARS = 120


@functools.cache
def _markdown() -> Any:
    """The CommonMark parser, built once (it is configured, never changed, after)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table")


def _title(text: str) -> str:
    return " ".join(text.split())[:_TITLE_CHARS]


def _front_matter(lines: list[str]) -> int:
    """Lines taken by YAML front matter (0 when there is none)."""
    if not lines or lines[0].strip() != "---":
        return 0
    for j in range(1, min(len(lines), 200)):
        if lines[j].strip() in ("---", "..."):
            return j + 1
    return 0


def markdown_blocks(text: str) -> list[Block]:
    lines = text.split("\n")
    blocks: list[Block] = []
    stack: list[tuple[int, str]] = []
    skip = _front_matter(lines)
    if skip:
        blocks.append(Block("\n".join(lines[:skip]), 1, skip, None, "code"))
    tokens = _markdown().parse("\n".join(lines[skip:]))

    def add(begin: int, end: int, kind: str) -> None:
        """Source lines [begin, end) of the parsed text (0-based) as one block."""
        body = lines[skip + begin:skip + end]
        while body and not body[-1].strip():
            body.pop()
            end -= 1
        if any(line.strip() for line in body):
            text = "\n".join(body).strip("\n")
            blocks.append(Block(text.strip() if kind == "heading" else text,
                                skip + begin + 1, skip + end, heading_path(stack), kind))

    in_list = 0  # inside a top-level list: its items (level 1) are the blocks
    for i, token in enumerate(tokens):
        if token.type in ("bullet_list_open", "ordered_list_open") and token.level == 0:
            in_list += 1
            continue
        if token.type in ("bullet_list_close", "ordered_list_close") and token.level == 0:
            in_list -= 1
            continue
        if token.map is None or token.nesting == -1:
            continue
        begin, end = token.map
        if in_list:
            if token.level == 1 and token.type == "list_item_open":
                add(begin, end, "text")
        elif token.level != 0:
            continue
        elif token.type == "heading_open":
            push_heading(stack, int(token.tag[1]), _title(tokens[i + 1].content))
            add(begin, end, "heading")
        elif token.type in ("fence", "code_block"):
            add(begin, end, "code")
        else:
            add(begin, end, "text")
    return blocks
