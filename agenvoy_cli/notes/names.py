"""A note's name and content: upstream Agenvoy's rules (v0.32.7 internal/knowledge/store.go:
Name, firstLine, Key) to the character, and the limits on content this tool adds.

Upstream: a name is trimmed (Go's strings.TrimSpace), loses one trailing ".md", and is
refused when empty, when it holds a path separator (/ or \\), when it is "." or "..", when
it starts with a dot, when it holds a glob character (* ? [ ]), or when it is longer than 32
characters (runes). Without a name, the content's first line that is not empty once
/\\*?[] are removed and leading '#', '.', spaces and tabs are trimmed names the note, cut
to 32 characters. Upstream limits nothing else; this tool also refuses a control character
(other than tab) in a name, and content that is not UTF-8 text (a NUL byte, invalid UTF-8)
or larger than MAX_CONTENT_BYTES.
"""

from __future__ import annotations

from agenvoy_cli.errors import BadInput

MAX_NAME_RUNES = 32  # upstream knowledge.MaxNameRunes
MAX_CONTENT_BYTES = 256 * 1024  # ours: a note is the operator's text, not a document store
DEFAULT_LIMIT = 5  # upstream knowledge.DefaultLimit (find_knowledge mode=search)
MAX_LIMIT = 20  # upstream knowledge.MaxLimit
GLOB = "*?[]"
_FIRST_LINE_DROP = "/\\*?[]"
# Go's unicode.IsSpace (what strings.TrimSpace trims); Python's str.strip() also trims
# U+001C..U+001F, which Go keeps.
GO_SPACE = ("\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
            "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def go_trim_space(text: str) -> str:
    return text.strip(GO_SPACE)


def first_line(content: str) -> str:
    """upstream firstLine: the name a note without one gets ("" when there is none)."""
    for line in content.split("\n"):
        line = "".join(c for c in line if c not in _FIRST_LINE_DROP)
        line = go_trim_space(go_trim_space(line).lstrip("#. \t"))
        if not line:
            continue
        if len(line) > MAX_NAME_RUNES:
            line = go_trim_space(line[:MAX_NAME_RUNES])
        return line
    return ""


def check_name(name: str) -> str:
    """upstream Key: the stored name of what a caller typed (trimmed, ".md" dropped), or
    BadInput saying which rule it breaks (upstream's words)."""
    if not isinstance(name, str):
        raise BadInput("a note name must be a string")
    key = go_trim_space(name).removesuffix(".md")
    if key == "":
        raise BadInput("name is required")
    if "/" in key or "\\" in key:
        raise BadInput(f"note name {key!r}: name cannot contain a path separator")
    if key in (".", ".."):
        raise BadInput(f"note name {key!r}: name cannot be a path segment")
    if key.startswith("."):
        raise BadInput(f"note name {key!r}: name cannot start with a dot")
    if any(c in GLOB for c in key):
        raise BadInput(f"note name {key!r}: name cannot contain a glob character")
    if any("\ud800" <= c <= "\udfff" for c in key):  # a byte that is not UTF-8 (argv)
        raise BadInput(f"note name {key!r}: name is not valid UTF-8 text")
    if any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in key):
        raise BadInput(f"note name {key!r}: name cannot contain a control character")
    return key


def note_name(name: str | None, content: str) -> str:
    """upstream Name: the given name, else the content's first line; checked, at most 32
    characters."""
    if name is None or go_trim_space(name) == "":
        name = first_line(content)
        if name == "":
            raise BadInput("name is required (the content has no line to name the note "
                           "after)")
    key = check_name(name)
    if len(key) > MAX_NAME_RUNES:
        raise BadInput(f"note name {key!r}: name cannot exceed {MAX_NAME_RUNES} characters")
    return key


def check_content(content: str, where: str = "the content") -> str:
    """Text a note may hold: no NUL (a binary file), at most MAX_CONTENT_BYTES of UTF-8."""
    if not isinstance(content, str):
        raise BadInput(f"{where} must be text")
    if "\x00" in content:
        raise BadInput(f"{where} holds a NUL byte (a binary file?); a note is text")
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError:
        raise BadInput(f"{where} is not valid UTF-8 (a lone surrogate)") from None
    if size > MAX_CONTENT_BYTES:
        raise BadInput(f"{where} is {size} bytes; a note holds at most {MAX_CONTENT_BYTES}")
    return content


def decode_content(data: bytes, where: str) -> str:
    """Bytes read from a file or stdin as a note's content: UTF-8 text only (a BOM is
    dropped), checked."""
    if len(data) > MAX_CONTENT_BYTES + 3:
        raise BadInput(f"{where} is {len(data)} bytes; a note holds at most "
                       f"{MAX_CONTENT_BYTES}")
    if b"\x00" in data:
        raise BadInput(f"{where} holds NUL bytes (a binary file?); a note is text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{where} is not UTF-8 text (byte {exc.start}); a note is text") \
            from None
    return check_content(text.removeprefix("\ufeff"), where)
