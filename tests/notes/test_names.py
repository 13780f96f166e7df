"""A note's name: upstream Agenvoy's rules (v0.32.7 internal/knowledge/store.go Name,
firstLine, Key), case by case, and the limits on content this tool adds."""

from __future__ import annotations

import pytest

from agenvoy_cli.errors import BadInput
from agenvoy_cli.notes import names


@pytest.mark.parametrize("given, content, expected", [
    ("deploy", "", "deploy"),
    ("  deploy  ", "", "deploy"),  # TrimSpace
    ("deploy.md", "", "deploy"),  # one trailing .md dropped
    ("deploy.md.md", "", "deploy.md"),
    ("a" * 32, "", "a" * 32),  # 32 characters: the most
    ("數" * 32, "", "數" * 32),  # runes, not bytes
    ("with\ttab", "", "with\ttab"),
    ("#hash", "", "#hash"),  # a given name keeps its '#'
    (None, "# Deploy rules\n\nbody", "Deploy rules"),  # the first line, '#' trimmed
    ("", "\n\n  ## . Title .\nbody", "Title ."),  # leading '#', '.', spaces only
    ("  ", "### \n# /x*y?[z]/\nbody", "xyz"),  # /\*?[] dropped; an empty line skipped
    (None, "x" * 40, "x" * 32),  # cut to 32
    (None, "a" * 31 + " bcd", "a" * 31),  # cut, then trimmed
    (None, "..hidden", "hidden"),  # a first line never starts with a dot
    (None, "notes.md", "notes"),  # Key drops .md from a first line too
    (None, "\u3000全形空白\u3000", "全形空白"),  # Go's TrimSpace trims U+3000
])
def test_upstream_names(given, content, expected):
    assert names.note_name(given, content) == expected


@pytest.mark.parametrize("given, content, words", [
    ("", "", "name is required"),
    (None, "###\n  \n..", "name is required"),
    ("a/b", "", "path separator"),
    ("a\\b", "", "path separator"),
    (".", "", "path segment"),
    ("..", "", "path segment"),
    ("...", "", "start with a dot"),  # not "." or "..": a leading dot
    (".hidden", "", "start with a dot"),
    ("a*b", "", "glob character"),
    ("a?b", "", "glob character"),
    ("[x]", "", "glob character"),
    ("a" * 33, "", "exceed 32 characters"),
    ("a" * 33 + ".md", "", "exceed 32 characters"),
    ("a\x00b", "", "control character"),  # ours: upstream has no rule
    ("a\nb", "", "control character"),
])
def test_refused_names(given, content, words):
    with pytest.raises(BadInput, match=words.replace("?", r"\?")):
        names.note_name(given, content)


def test_first_line_is_upstreams():
    assert names.first_line("") == ""
    assert names.first_line("\n\n") == ""
    assert names.first_line("# \n#.\n  b  ") == "b"
    assert names.first_line("\x1f x") == "\x1f x"  # Go keeps U+001F (Python's strip would not)


def test_content_limits():
    assert names.check_content("") == ""
    assert names.check_content("x" * names.MAX_CONTENT_BYTES)
    with pytest.raises(BadInput, match="at most"):
        names.check_content("x" * (names.MAX_CONTENT_BYTES + 1))
    with pytest.raises(BadInput, match="NUL"):
        names.check_content("a\x00b")
    with pytest.raises(BadInput, match="UTF-8"):
        names.decode_content(b"\xff\xfeab", "f")
    with pytest.raises(BadInput, match="NUL"):
        names.decode_content(b"\x89PNG\r\n\x1a\n\x00\x00", "f")
    assert names.decode_content("\ufeffhello".encode(), "f") == "hello"  # a BOM is dropped
