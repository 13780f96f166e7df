"""Text for the FTS5 index and safe MATCH expressions.

The unicode61 tokenizer sees a run of Chinese characters as one token, so `記憶`
would never match inside `錯誤記憶`. We index CJK runs as overlapping bigrams
(any substring of 2+ characters is then a phrase of consecutive bigrams) and let
unicode61 + porter handle everything else. The same function builds the query,
and every token is quoted, so user text can never become FTS syntax.
"""

from __future__ import annotations

import re

_CJK = (
    "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
    "\U00020000-\U0002ffff"
)
# Compiling a class of these ranges costs milliseconds (~2 ms this one, ~5 ms one that
# also negates them): this is the only one; words between CJK runs use a cheap class.
# Compiled on first use (re.compile keeps them in re's cache): not on import, where the
# append path paid for them (#51).
_CJK_RUN = f"[{_CJK}]+"
_WORD = r"[^\W_]+"


def pieces(text: str) -> list[str]:
    """The CJK runs and the words (word characters but "_", no CJK) of a text, in order:
    what a query term is made of."""
    found: list[str] = []
    pos = 0
    for run in re.compile(_CJK_RUN).finditer(text):
        found += re.compile(_WORD).findall(text, pos, run.start())
        found.append(run.group(0))
        pos = run.end()
    found += re.compile(_WORD).findall(text, pos)
    return found


def _is_cjk(token: str) -> bool:
    return re.compile(_CJK_RUN).match(token) is not None


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def index_text(text: str) -> str:
    """The string stored in messages.tokens and indexed by FTS5."""

    if text.isascii():  # no CJK to expand (isascii is a flag check; the scan is not)
        return text

    def expand(match: re.Match[str]) -> str:
        return " " + " ".join(_bigrams(match.group(0))) + " "

    return re.compile(_CJK_RUN).sub(expand, text)


def term_tokens(term: str) -> list[str]:
    """Tokens of one query term, in order (CJK runs as bigrams, words lower-cased)."""
    tokens: list[str] = []
    for piece in pieces(term):
        if _is_cjk(piece):
            tokens.extend(_bigrams(piece))
        else:
            tokens.append(piece.lower())
    return tokens


def query_terms(query: str) -> list[list[str]]:
    """Whitespace-separated terms, each as its token list; empty terms dropped."""
    return [toks for toks in (term_tokens(t) for t in query.split()) if toks]


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def _phrase(tokens: list[str]) -> str:
    if len(tokens) == 1 and len(tokens[0]) == 1 and _is_cjk(tokens[0]):
        return _quote(tokens[0]) + "*"  # one CJK character: prefix of its bigrams
    return " + ".join(_quote(t) for t in tokens)


def match_all(query: str) -> str | None:
    """MATCH expression requiring every term (any order); None when nothing searchable."""
    terms = query_terms(query)
    if not terms:
        return None
    return " AND ".join(_phrase(t) for t in terms)


def match_any(query: str) -> str | None:
    """MATCH expression for any token of the query (BM25 ranks the best first)."""
    tokens = sorted({tok for term in query_terms(query) for tok in term})
    if not tokens:
        return None
    return " OR ".join(_quote(t) for t in tokens)


def quote(token: str) -> str:
    """One token as an FTS5 string: user text never becomes query syntax."""
    return _quote(token)


def session_filter(session_id: str) -> str:
    """MATCH term for messages_fts's session column (home/schema.py: hex of the UTF-8 id,
    as SQLite's hex() of the stored text; one token, case folded by the tokenizer)."""
    return "session : " + _quote(session_id.encode().hex())


def is_cjk(token: str) -> bool:
    return _is_cjk(token)


def has_cjk(text: str) -> bool:
    return re.compile(_CJK_RUN).search(text) is not None
