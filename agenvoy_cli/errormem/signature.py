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
