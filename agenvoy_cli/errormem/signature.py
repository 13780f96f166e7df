"""An error text's signature: the words that say how it failed, without the specifics that
change from one occurrence to the next (quoted names, paths, URLs, numbers, hashes) and
without the boilerplate every error output of a program carries (tracebacks' frame lines,
"npm error", "hint:", the code excerpts compilers print).

`ModuleNotFoundError: No module named 'requests'` and `... named 'yaml'` share their whole
signature; `TypeError: unsupported operand type(s) for +: 'int' and 'str'` shares none of it.
A word outside quotes is kept (`docker-compose: command not found` is about docker-compose).
"""

from __future__ import annotations

import re

# Lines that only locate an error (frames, code excerpts, carets, "Run ... for more").
_NOISE_LINE = re.compile(
    r"""^\s*(?:
        File\s+"[^"]*",\s+line\s+\d+.*            # a Python frame
      | at\s+\S.*                                 # a JavaScript / Java frame
      | \d*\s*\|.*                                # a compiler's code excerpt
      | [\^~\s-]+                                 # carets, rules
      | -->\s.*                                   # rustc's location
      | \[Previous\ line\ repeated.*
      | Traceback\ \(most\ recent\ call\ last\):
      | (?:npm\ error\ )?A\ complete\ log\ of\ this\ run.*
      | Node\.js\ v\d.*
      | For\ more\ information\ about\ this\ error.*
      | Require\ stack:
      | -\ /.*
      | make:\ (?:Entering|Leaving)\ directory.*
      | Looking\ in\ (?:indexes|links):.*
      | WARNING:.*
      | \.\.\.
    )\s*$""", re.VERBOSE)
_FRAME = re.compile(r'^\s*File\s+"[^"]*",\s+line\s+\d+')
_CARET = re.compile(r"^[\s|\d]*\^[\^~\s-]*$")
_QUOTED = re.compile(r"""'[^'\n]{0,200}'|"[^"\n]{0,200}"|`[^`\n]{0,200}`|‘[^’\n]{0,200}’""")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
_PATH = re.compile(r"(?:~|\.{1,2})?/[\w@.+-]+(?:/[\w@.+-]*)*|\b[\w-]+(?:\.[\w-]+)*\.(?:py|js|"
                   r"ts|rs|go|c|h|cc|cpp|java|rb|sh|json|yaml|yml|toml|txt|csv|md|html|lock|"
                   r"tgz|gz|zip|tar|db|sql|log|cfg|ini|env|pem|so|o)\b", re.I)
_HOST = re.compile(r"\b[\w.+-]+@[\w.-]+|\b(?:[a-z0-9-]+\.)+(?:invalid|internal|local|com|org|"
                   r"net|io|dev|cloud)\b|\b\d{1,3}(?:\.\d{1,3}){3}\b|\blocalhost\b", re.I)
_NUMBER = re.compile(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{7,}\b|\b\d+(?:[.:]\d+)*\b", re.I)
# An HTTP status is what a failed request says: 401 and 429 are different failures.
_STATUS = re.compile(r"(?<![\w.:/-])([45]\d\d)(?![\w.:/-])")
_STATUS_LINE = re.compile(r"error|http|status|client|server|unauthorized|forbidden|too many|"
                          r"not found|returned", re.I)
_WORD = re.compile(r"[a-z][a-z0-9_]*(?:[-.][a-z0-9_]+)*", re.I)
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
# Words of the framing every program's errors share: they tell nothing about the failure.
_BOILERPLATE = """
    a an the of to in on at for from with by as is are was were be been and or but
    it its this that these those you your we our please run try see use using more details
    error errors err fatal warning warn note hint help info line lines column position char
    stdin string traceback recent call last exception bash sh npm python python3 node
    during handling above another occurred do did does if then when will may can
    after before while again since because already also just only get post put patch head
"""
BOILERPLATE = frozenset(_BOILERPLATE.split())


# Words of error messages of every kind (an overlap in them alone is weak evidence).
_COMMON = """
    no not such file directory found cannot command connection refused permission denied
    failed unable invalid unknown could couldn missing exist does exists access server host
    port connect value type name object attribute key index out range read write open
    returned status exit code process request response url client
"""
COMMON = frozenset(_COMMON.split())


def error_lines(text: str) -> list[str]:
    """The lines of an error output that say what failed (frames, the code lines under
    them and under a caret, and framing left out); all of them when nothing is left."""
    lines = [line for line in text.splitlines() if line.strip()]
    python = any(_FRAME.match(line) for line in lines)
    kept = []
    for n, line in enumerate(lines):
        if _NOISE_LINE.match(line):
            continue
        if python and line[:1].isspace():  # the source line under a Python frame
            continue
        if n + 1 < len(lines) and _CARET.match(lines[n + 1]):  # an excerpt under a caret
            continue
        kept.append(line)
    return kept or lines


def _weight(words: set[str], common: float = 0.5) -> float:
    return sum(common if w in COMMON else 1.0 for w in words)


def weighted_overlap(a: list[str], b: list[str]) -> float:
    """Jaccard of two signatures, a word of COMMON weighing half, any other 1."""
    union = _weight(set(a) | set(b))
    return _weight(set(a) & set(b)) / union if union else 0.0


def weighted_share(part: list[str], whole: list[str]) -> float:
    """How much of `part` (weighed as above) is in `whole`."""
    mine = _weight(set(part))
    return _weight(set(part) & set(whole)) / mine if mine else 0.0


def masked(text: str) -> str:
    """The error lines with their specifics replaced by placeholders (what is embedded to
    compare two errors' wording, whatever they name)."""
    out = []
    for line in error_lines(text):
        line = _URL.sub("URL", line)
        line = _QUOTED.sub("NAME", line)
        line = _HOST.sub("HOST", line)
        line = _PATH.sub("PATH", line)
        line = _NUMBER.sub("N", line)
        out.append(" ".join(line.split()))
    return "\n".join(out)


def signature(text: str) -> list[str]:
    """The signature's words, in order, lower-cased, each once."""
    words: list[str] = []
    for line in error_lines(text):
        line = _URL.sub(" ", line)
        line = _QUOTED.sub(" ", line)
        line = _HOST.sub(" ", line)
        line = _PATH.sub(" ", line)
        if _STATUS_LINE.search(line):
            line = _STATUS.sub(r" http\1 ", line)
        line = _NUMBER.sub(" ", line)
        for word in _WORD.findall(line):
            low = word.lower().strip(".-")
            if len(low) > 1 and low not in BOILERPLATE and low not in words:
                words.append(low)
        for char in "".join(_CJK.findall(line)):  # Chinese, Japanese: a character each
            if char not in words:
                words.append(char)
    return words


# --------------------------------------------------------------------------- subjects

# What a failure is about, by kind: the module not found, the header, the package with no
# such version, the command not found, the file not found or not executable, the host that
# does not resolve. Two errors naming different subjects of one kind are different errors
# (#50): a record's action names its subject (`pip install requests`) and is wrong for
# another (`No module named 'yaml'`). A name that only locates a failure (the file a
# conflict is in, a make target, a table, a URL's path) is no subject.
_SUBJECTS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.I | re.M)) for kind, pattern in (
        ("module", r"No module named '?([\w.]+)'?"),
        ("module", r"Cannot find (?:module|package) '([^'\n]+)'"),
        ("module", r"unresolved import `(\w+)"),
        ("module", r"undeclared crate or module `(\w+)`"),
        ("module", r"can't find crate for `(\w+)`"),
        ("header", r"fatal error: ([\w./+-]+): No such file"),
        ("package", r"(?:satisfies the requirement|distribution found for) ([A-Za-z0-9][\w.-]*)"),
        ("package", r"404 Not Found - GET \S+/(@?[\w.-]+(?:%2f[\w.-]+)?)\s*$"),
        ("package", r"'(@?[\w./-]+?)@[^'\n]*' is not in (?:this|the npm) registry"),
        ("command", r"(?:^|[\s:])([\w.+-]+): (?:command )?not found\s*$"),
        ("command", r"command not found: ([\w.+-]+)"),
        ("command", r'exec: "([^"\n]+)": executable file not found'),
        ("file", r"(?:No such file or directory|Permission denied|Is a directory): '([^'\n]+)'"),
        ("file", r"(?:can't open file|cannot access|cannot stat|cannot open) '([^'\n]+)'"),
        ("file", r"(?:^|\s)([~.]{0,2}/?[\w@+-][\w./@+-]*[./][\w@+-]+): (?:Permission denied|"
                 r"No such file or directory)"),
        ("host", r"Could not resolve host(?:name)?:? ([\w.-]+)"),
        ("host", r"(?:Failed to resolve|failed to lookup address information for) '?([\w.-]+)"),
        ("host", r"getaddrinfo (?:ENOTFOUND|EAI_AGAIN) ([\w.-]+)"),
        ("host", r"dial tcp: lookup ([\w.-]+)"),
    ))


def _subject_name(kind: str, name: str) -> str:
    name = name.lower().strip("'\"`")
    if kind == "module" and not name.startswith((".", "/")):
        return name.split(".")[0].split("/")[0] if not name.startswith("@") else name
    if kind == "file":
        return name.rstrip("/").rsplit("/", 1)[-1]
    return name


def subjects(text: str) -> dict[str, frozenset[str]]:
    """The subjects an error text names, by kind (module, header, package, command, file,
    host), read from its error lines."""
    lines = "\n".join(error_lines(text))
    found: dict[str, set[str]] = {}
    for kind, pattern in _SUBJECTS:
        for name in pattern.findall(lines):
            found.setdefault(kind, set()).add(_subject_name(kind, name))
    return {k: frozenset(v) for k, v in found.items()}


def other_subject(error: dict[str, frozenset[str]], record: dict[str, frozenset[str]]
                  ) -> tuple[str, str] | None:
    """(kind, the error's name) when both texts name subjects of one kind and share none of
    them: the two are different errors. None: no kind tells them apart."""
    for kind, mine in error.items():
        theirs = record.get(kind)
        if theirs and mine and not mine & theirs:
            return kind, sorted(mine)[0]
    return None
