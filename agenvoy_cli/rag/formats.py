"""Which files a RAG database indexes, and what text is in them.

Walking (``walk``): a folder is walked without following symlinked directories (so a
symlink loop cannot hang it and no link leads out of the folder); a symlinked file is
indexed only when its target is inside the folder, under the target's path. Version
control folders (.git, .hg, .svn) are never entered; hidden files and folders are left
out unless asked for (dotfiles such as .env often hold secrets). ``.gitignore`` files are
honoured by our own matcher (the common gitignore syntax: ``#`` comments, ``!`` negation,
trailing ``/`` for folders, leading or inner ``/`` anchoring, ``*``, ``?``, ``[...]`` and
``**``), from the folder itself, every folder below it, and -- when the folder is inside a
git work tree -- every folder from the top of that tree down, plus ``.git/info/exclude``.
Git's global excludesFile is not read. An ignored folder is not entered, so a file in it
cannot be re-included (git's rule too). It needs no git binary and costs no subprocess.

Reading (``read_document``): a file is binary when its first 8 KiB hold a NUL byte or it
decodes as neither UTF-8 (BOM allowed), UTF-16 with a BOM, nor GB18030 with few control
characters; some extensions (images, archives, PDF, ...) are binary without a look.

Formats (``blocks``): Markdown (ATX and setext headings, fenced code blocks whole, front
matter), source code (top-level definitions whole; the heading is the enclosing
``class > def``), JSON (by top-level member; heading is the key path), CSV/TSV (rows
grouped, the header row repeated in every chunk), HTML (visible text only, through
html.parser; h1-h6 as headings, <pre> whole), and plain text (paragraphs; underlined
titles as headings).
"""

from __future__ import annotations

import codecs
import csv
import io
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from agenvoy_cli.rag.chunking import Block, heading_path, scoped

SNIFF_BYTES = 8192
VCS_DIRS = frozenset({".git", ".hg", ".svn", ".bzr", "_darcs", ".jj"})

MARKDOWN = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mkdn", ".mdx"})
HTML = frozenset({".html", ".htm", ".xhtml"})
CSV_EXT = frozenset({".csv"})
TSV_EXT = frozenset({".tsv", ".tab"})
JSON_EXT = frozenset({".json", ".geojson", ".ipynb", ".jsonc", ".json5"})
_CODE = """
.py .pyi .pyx .js .mjs .cjs .jsx .ts .tsx .mts .go .rs .java .kt .kts .scala .groovy .gradle
.c .h .cc .cpp .cxx .hpp .hh .hxx .cs .fs .swift .m .mm .rb .php .pl .pm .lua .r .jl .dart
.sh .bash .zsh .fish .ps1 .bat .cmd .sql .vue .svelte .css .scss .sass .less .yaml .yml
.toml .ini .cfg .conf .xml .xsd .plist .proto .graphql .gql .tf .hcl .hs .ml .mli .ex .exs
.erl .hrl .clj .cljs .edn .zig .nim .vim .el .lisp .scm .rkt .cmake .mk .nix .jsonl .ndjson
.elm .purs .sol .v .sv .vhd .asm .s .awk .sed .tcl .properties
"""
CODE = frozenset(_CODE.split())
CODE_NAMES = frozenset({"makefile", "dockerfile", "containerfile", "justfile", "rakefile",
                        "gemfile", "vagrantfile", "cmakelists.txt", "procfile", "jenkinsfile"})
_BINARY = """
.png .jpg .jpeg .gif .bmp .ico .icns .webp .tif .tiff .psd .heic .avif .svgz .pdf .doc .docx
.xls .xlsx .ppt .pptx .odt .ods .odp .epub .mobi .zip .gz .tgz .bz2 .xz .zst .7z .rar .tar
.jar .war .ear .whl .egg .class .so .dylib .dll .exe .o .a .lib .obj .pyc .pyo .pyd .wasm
.mp3 .mp4 .m4a .wav .flac .ogg .opus .mov .avi .mkv .webm .woff .woff2 .ttf .otf .eot
.sqlite .sqlite3 .db .parquet .feather .arrow .npy .npz .pkl .pickle .pt .pth .onnx .h5
.safetensors .gguf .bin .iso .dmg .img .deb .rpm .apk .ipa
"""
BINARY_EXT = frozenset(_BINARY.split())
NOT_SUPPORTED = {".pdf": "PDF is not supported (convert it to text first)",
                 ".docx": "Word documents are not supported (convert them to text first)"}


def file_format(path: Path) -> str | None:
    """markdown | html | csv | tsv | json | code | text, or None when binary by name."""
    name = path.name.lower()
    ext = path.suffix.lower()
    if ext in BINARY_EXT:
        return None
    if ext in MARKDOWN:
        return "markdown"
    if ext in HTML:
        return "html"
    if ext in CSV_EXT:
        return "csv"
    if ext in TSV_EXT:
        return "tsv"
    if ext in JSON_EXT:
        return "json"
    if ext in CODE or name in CODE_NAMES:
        return "code"
    return "text"


# ----------------------------------------------------------------------------- reading


def binary_reason(path: Path) -> str:
    return NOT_SUPPORTED.get(path.suffix.lower(), "binary file")


def decode(data: bytes) -> str | None:
    """The text of a file, or None when it is binary."""
    head = data[:SNIFF_BYTES]
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    if b"\x00" in head:
        return None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        try:
            text = data.decode("gb18030")
        except UnicodeDecodeError:
            return None
    sample = text[:SNIFF_BYTES]
    control = sum(1 for c in sample if ord(c) < 32 and c not in "\t\n\r\f\v\x1b")
    if sample and control / len(sample) > 0.05:
        return None
    return text


# ----------------------------------------------------------------------------- gitignore


@dataclass(frozen=True)
class Rule:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool


def _translate(pattern: str) -> str:
    """A gitignore glob (without !, trailing / and leading /) as a regex over a path
    relative to the .gitignore's folder."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                before = i == 0 or pattern[i - 1] == "/"
                after = i + 2 == n or pattern[i + 2] == "/"
                if before and after:
                    if i + 2 == n:  # trailing /**: everything inside
                        out.append(".*")
                    else:  # **/ : zero or more folders
                        out.append("(?:.*/)?")
                        i += 1  # skip the slash as well
                    i += 2
                    continue
                out.append("[^/]*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1:i + 2] in ("!", "^") else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def parse_gitignore(text: str) -> list[Rule]:
    rules: list[Rule] = []
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        # Trailing spaces are ignored unless escaped with a backslash.
        while line.endswith(" ") and not line.endswith("\\ "):
            line = line[:-1]
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate or line.startswith(("\\!", "\\#")):  # "\!" and "\#" are escapes
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        body = _translate(line)
        regex = f"^{body}$" if anchored else f"^(?:.*/)?{body}$"
        try:
            rules.append(Rule(re.compile(regex, re.DOTALL), negate, dir_only))
        except re.error:
            continue  # a pattern git would not match either
    return rules


class Ignores:
    """The .gitignore rules in effect: a list of (folder, rules), outermost first."""

    def __init__(self, layers: list[tuple[str, list[Rule]]] | None = None) -> None:
        self.layers = layers or []

    def below(self, folder: str) -> Ignores:
        """The rules for inside `folder` (its own .gitignore added, when it has one)."""
        rules = _read_rules(os.path.join(folder, ".gitignore"))
        return Ignores([*self.layers, (folder, rules)]) if rules else self

    def ignored(self, path: str, is_dir: bool) -> bool:
        verdict = False
        for folder, rules in self.layers:
            rel = os.path.relpath(path, folder)
            if rel.startswith(".."):
                continue
            rel = rel.replace(os.sep, "/")
            for rule in rules:
                if rule.dir_only and not is_dir:
                    continue
                if rule.regex.match(rel):
                    verdict = not rule.negate
        return verdict


def _read_rules(path: str) -> list[Rule]:
    try:
        with open(path, "rb") as handle:
            data = handle.read(1 << 20)
    except OSError:
        return []
    return parse_gitignore(data.decode("utf-8", "replace"))


def repository_ignores(root: Path) -> Ignores:
    """Rules that apply to root from above it: the git work tree containing it (if any),
    its .git/info/exclude and the .gitignore of every folder from the top down to root's
    parent. Root's own .gitignore is added by the walk."""
    top = None
    for folder in (root, *root.parents):
        if (folder / ".git").exists():
            top = folder
            break
    if top is None:
        return Ignores()
    layers: list[tuple[str, list[Rule]]] = []
    exclude = _read_rules(str(top / ".git" / "info" / "exclude"))
    if exclude:
        layers.append((str(top), exclude))
    parts = root.relative_to(top).parts
    for k in range(len(parts)):  # top, ..., root's parent
        folder = top.joinpath(*parts[:k])
        rules = _read_rules(str(folder / ".gitignore"))
        if rules:
            layers.append((str(folder), rules))
    return Ignores(layers)


# ----------------------------------------------------------------------------- walking


@dataclass
class Found:
    path: Path  # resolved, inside the root
    size: int
    mtime_ns: int


@dataclass
class Skipped:
    path: Path
    reason: str
    size: int = 0
    mtime_ns: int = 0
    remember: bool = False  # record it in the database (binary, too large)


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def walk(root: Path, *, hidden: bool = False) -> Iterator[Found | Skipped]:
    """Every indexable file under root (a resolved folder), in a stable order."""
    ignores = repository_ignores(root)
    yield from _walk_dir(root, root, ignores, hidden, set())


def _walk_dir(root: Path, folder: Path, ignores: Ignores, hidden: bool,
              visited: set[tuple[int, int]]) -> Iterator[Found | Skipped]:
    try:
        stat = folder.stat()
    except OSError as exc:
        yield Skipped(folder, f"cannot read folder: {exc.strerror or exc}")
        return
    key = (stat.st_dev, stat.st_ino)
    if key in visited:  # bind mounts and the like: never twice
        return
    visited.add(key)
    ignores = ignores.below(str(folder))
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        yield Skipped(folder, f"cannot read folder: {exc.strerror or exc}")
        return
    subdirs: list[Path] = []
    for entry in entries:
        name = entry.name
        path = Path(entry.path)
        if name in VCS_DIRS:
            continue
        if name.startswith(".") and not hidden:
            continue
        try:
            is_link = entry.is_symlink()
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if ignores.ignored(entry.path, is_dir or (is_link and path.is_dir())):
            continue
        if is_dir:
            subdirs.append(path)
            continue
        if is_link:
            yield from _link(root, path)
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            yield Skipped(path, f"cannot stat: {exc.strerror or exc}")
            continue
        if entry.is_file(follow_symlinks=False):
            yield Found(path, st.st_size, st.st_mtime_ns)
    for sub in subdirs:
        yield from _walk_dir(root, sub, ignores, hidden, visited)


def _link(root: Path, path: Path) -> Iterator[Found | Skipped]:
    """A symlink met in a walk: its target when it is a file inside root."""
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):
        yield Skipped(path, "broken symlink or symlink loop")
        return
    if target.is_dir():
        return  # symlinked folders are never followed
    if not _within(target, root):
        yield Skipped(path, "symlink to a file outside the folder")
        return
    try:
        st = target.stat()
    except OSError as exc:
        yield Skipped(path, f"cannot stat: {exc.strerror or exc}")
        return
    if target.is_file():
        yield Found(target, st.st_size, st.st_mtime_ns)


# ----------------------------------------------------------------------------- formats


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
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


def markdown_blocks(text: str) -> list[Block]:
    lines = text.split("\n")
    blocks: list[Block] = []
    stack: list[tuple[int, str]] = []
    para: list[str] = []
    para_start = 0

    def flush(end: int) -> None:
        nonlocal para
        if para and any(p.strip() for p in para):
            blocks.append(Block("\n".join(para).strip("\n"), para_start, end,
                                heading_path(stack)))
        para = []

    i = 0
    if lines and lines[0].strip() == "---":  # YAML front matter
        for j in range(1, min(len(lines), 200)):
            if lines[j].strip() in ("---", "..."):
                blocks.append(Block("\n".join(lines[:j + 1]), 1, j + 1, None, "code"))
                i = j + 1
                break
    while i < len(lines):
        line = lines[i]
        number = i + 1
        fence = _FENCE.match(line)
        if fence:
            flush(number - 1)
            mark = fence.group(1)
            j = i + 1
            while j < len(lines) and not (lines[j].lstrip().startswith(mark[0] * len(mark))
                                          and not lines[j].strip().strip(mark[0])):
                j += 1
            end = min(j, len(lines) - 1)
            blocks.append(Block("\n".join(lines[i:end + 1]), number, end + 1,
                                heading_path(stack), "code"))
            i = end + 1
            continue
        atx = _ATX.match(line)
        if atx and (atx.group(2) or "").strip():
            flush(number - 1)
            scoped(stack, len(atx.group(1)), _title(atx.group(2)))
            blocks.append(Block(line.strip(), number, number, heading_path(stack), "heading"))
            i += 1
            continue
        under = _UNDERLINE.match(line)
        if under and len(para) == 1 and under.group(1)[0] in "=-" and para[0].strip():
            title = para[0]
            para = []
            scoped(stack, 1 if under.group(1)[0] == "=" else 2, _title(title))
            blocks.append(Block(f"{title}\n{line}", number - 1, number, heading_path(stack),
                                "heading"))
            i += 1
            continue
        if not line.strip():
            flush(number - 1)
        else:
            if not para:
                para_start = number
            para.append(line)
        i += 1
    flush(len(lines))
    return blocks


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
            scoped(stack, levels[mark], _title(para[-2]))
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


def code_blocks(text: str, kind: str = "code") -> list[Block]:
    """Top-level units: a new block starts at a line of the lowest indentation that comes
    after a blank line (a closing bracket does not), so a function with blank lines inside
    stays one block. JSON files start a block at every top-level member instead."""
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return []
    pattern = _JSON_KEY if kind == "json" else _DEF
    heads = _scopes(lines, pattern, kind)
    base = min((_indent(ln) for ln in lines if ln.strip()), default=0)
    if kind == "json":
        member = min((_indent(ln) for ln in lines if _JSON_KEY.match(ln)), default=base)
    starts = [0]
    for i in range(1, len(lines)):
        line = lines[i]
        if not line.strip():
            continue
        if kind == "json":
            if _indent(line) == member and _JSON_KEY.match(line):
                starts.append(i)
            continue
        if (_indent(line) <= base and not lines[i - 1].strip()
                and not line.lstrip().startswith((")", "]", "}", "end", "fi", "done", "esac"))):
            starts.append(i)
    starts.append(len(lines))
    blocks = []
    for a, b in zip(starts, starts[1:]):
        chunk = lines[a:b]
        while chunk and not chunk[-1].strip():
            chunk.pop()
            b -= 1
        lead = next((k for k, ln in enumerate(chunk) if ln.strip()), None)
        if lead is None:
            continue
        body = chunk[lead:]
        hs = heads[a + lead:b]
        head = next((h for h in hs if h), None)  # a comment or decorator before a def
        blocks.append(Block("\n".join(body), a + lead + 1, b, head, "code",
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
                scoped(self.stack, self.heading, _title(text))
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
