"""What kind of file a path is, and its text.

A file is binary when its extension says so (images, archives, PDF, ...), when its first
8 KiB hold a NUL byte (and it has no UTF-16/32 byte order mark), or when no text encoding
reads it with few control characters. Text is UTF-8 (BOM allowed) or UTF-16/32 with a
BOM when it says so; anything else is identified by ``charset-normalizer`` (Big5,
Shift-JIS, EUC-KR, GB18030, Latin-1/cp1252, ...). Short texts are ambiguous between the
East-Asian double-byte encodings; among equally good guesses the order of PREFERRED
decides (GB18030 first: it was this tool's only fallback before).
"""

from __future__ import annotations

import codecs
from pathlib import Path

SNIFF_BYTES = 8192
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

# Ties between equally plausible readings go to the first of these.
PREFERRED = ("gb18030", "big5", "cp932", "shift_jis", "cp949", "euc_kr", "cp1252", "latin_1")
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_NO_BOM_WIDE = ["utf_16", "utf_16_be", "utf_16_le", "utf_32", "utf_32_be", "utf_32_le"]


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


def binary_reason(path: Path) -> str:
    return NOT_SUPPORTED.get(path.suffix.lower(), "binary file")


def _guess(data: bytes) -> str | None:
    """charset-normalizer's reading of bytes that are not UTF-8 (imported only then)."""
    from charset_normalizer import from_bytes

    matches = list(from_bytes(data, cp_exclusion=_NO_BOM_WIDE))
    if not matches:
        return None
    best = matches[0]
    ties = {m.encoding for m in matches
            if m.chaos == best.chaos and m.coherence == best.coherence}
    encoding = next((e for e in PREFERRED if e in ties), best.encoding)
    try:
        return data.decode(encoding)
    except (UnicodeDecodeError, LookupError):
        return str(best)


def decode(data: bytes) -> str | None:
    """The text of a file, or None when it is binary."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(codec)
            except UnicodeDecodeError:
                return None
    if b"\x00" in data[:SNIFF_BYTES]:
        return None
    try:
        text: str | None = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = _guess(data)
    if text is None:
        return None
    sample = text[:SNIFF_BYTES]
    control = sum(1 for c in sample if ord(c) < 32 and c not in "\t\n\r\f\v\x1b")
    if sample and control / len(sample) > 0.05:
        return None
    return text
