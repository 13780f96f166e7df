"""A search's query, parsed once: what every stage of a search (search/engine.py), the error
memory's lookup and RAG search read of it, instead of analysing the string again; and the
rules it is parsed by (stop-words, question or keywords, every term or any).

A short keyword query (at most SHORT_QUERY_TERMS terms after stop-words; a Chinese run counts
one term per three characters; not phrased as a question) asks for messages holding every
term; a longer or question-phrased one ranks messages holding any term (search/keyword.py).
Light on purpose (keyword search and the CLI's fast path import it): no numpy, no model.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agenvoy_cli.errors import BadInput
from agenvoy_cli.home import fts
from agenvoy_cli.search.language import cjk_share, language

SHORT_QUERY_TERMS = 3  # at most this many (after stop-words): every term or nothing
MATCHES = ("all", "any")

# Words that carry no topic; dropped from any-term (BM25 OR) queries only. The every-term
# ranking keeps them: a user who types "the" asks for "the".
_STOPWORDS = """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each else ever few for
from further had has have having he her here hers herself him himself his how i if in into
is it its itself just let like likely may me might more most must my myself no nor not now
of off on once only or other ought our ours ourselves out over own same shall she should so
some such than that the their theirs them themselves then there these they this those
through to too under until up upon us very was we were what when where which while who whom
whose why will with would you your yours yourself yourselves
"""
STOPWORDS = frozenset(_STOPWORDS.split())
# what a contraction leaves beside its stop-word once FTS splits it at the apostrophe
# ("what's" -> what + s, "don't" -> don + t): a word made only of these and stop-words
# carries no topic either
_CLITICS = """
s t m re ll ve d don doesn didn isn aren wasn weren won wouldn couldn shouldn haven hasn hadn
"""
CLITICS = frozenset(_CLITICS.split())
INTERROGATIVES = frozenset(["what", "when", "where", "which", "who", "whom", "whose", "why",
                            "how"])
# Chinese function bigrams (question words, pronouns, fillers): in nearly every dialogue
# turn, so they only add noise to an any-term ranking of a whole Chinese sentence.
_CJK_STOP = """
什麼 什么 怎麼 怎么 為什 为什 我們 我们 你們 你们 他們 他们 這個 这个 那個 那个 一個 一个 一下
之前 以前 還記 还记 記得 记得 跟你 你說 你说 我說 我说 說過 说过 的時 的时 時候 时候 是不 不是
可以 沒有 没有 就是 知道 覺得 觉得 因為 因为 所以 但是 如果 然後 然后 已經 已经 現在 现在 來著 来着
我的 你的 他的 她的 的是 了嗎 了吗 是什 有沒 有没 嗎？ 呢？
"""
CJK_STOP_BIGRAMS = frozenset(_CJK_STOP.split())


def fold(text: str) -> str:
    """Case and diacritics folded, as FTS5's unicode61 (remove_diacritics) does."""
    decomposed = unicodedata.normalize("NFKD", text)
    if decomposed.isascii():
        return decomposed.casefold()
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def content_query(query: str) -> str:
    """The query without stopwords (unless nothing would be left), for any-term ranking."""
    terms = query.split()
    kept = [t for t in terms if not _no_topic(fold(t).strip("?!.,;:'\"()"))]
    return " ".join(kept) if kept and fts.query_terms(" ".join(kept)) else query


def _no_topic(word: str) -> bool:
    """A word whose FTS tokens are all stop-words (or a contraction's clitics): "What's",
    "¿A", "«The»", "and/or" match what "a" or "the" would."""
    if word in STOPWORDS:
        return True
    if word.isalnum():
        return False
    tokens = fts.term_tokens(word)
    return bool(tokens) and all(t in STOPWORDS or t in CLITICS for t in tokens)


def term_count(query: str) -> int:
    """How many terms the query has after stop-words: a word is one, a run of Chinese (or
    other CJK) characters one per three characters (a word of Chinese is one to three: a
    short run is a keyword phrase, a sentence typed without spaces a question)."""
    return sum(math.ceil(len(p) / 3) if fts.has_cjk(p) else 1
               for term in content_query(query).split() for p in fts.pieces(term))


def is_question(query: str) -> bool:
    """Phrased as a question (a question mark last, or an English interrogative first): a
    natural-language question whatever its length, not a list of keywords. "What did Caroline
    research?" keeps two terms after stop-words, and the message that answers it need not
    hold both."""
    words = query.split()
    return bool(words) and (query.rstrip()[-1] in "?？" or fold(words[0]) in INTERROGATIVES)


# A question about the user's own life asks in the first person and never addresses the
# assistant: "What instrument am I studying?", "我的存款利率是多少？" (not "What did you
# suggest for my back?"). "I" and "US" are told apart by case.
_FIRST_PERSON = re.compile(r"(?<![\w'])(?:I|i|me|my|mine|myself|we|us|our|ours|ourselves)"
                           r"(?!\w)|我")
_SECOND_PERSON = re.compile(r"(?i)(?<![\w'])(?:you|your|yours|yourself|yourselves)(?![\w'])"
                            r"|你|您")


def about_the_user(query: str) -> bool:
    """Whether the query asks about the user in the first person, not about the assistant."""
    return bool(_FIRST_PERSON.search(query)) and not _SECOND_PERSON.search(query)


def default_match(query: str, terms: int | None = None) -> str:
    """"all" for a short keyword query (every term or nothing), "any" for a longer one or a
    question; `terms` when the caller counts them its own way (RAG's phrases, error words).
    The one rule of conversation, RAG and error keyword search."""
    count = term_count(query) if terms is None else terms
    return "any" if count > SHORT_QUERY_TERMS or is_question(query) else "all"



@dataclass(frozen=True)
class Query:
    """The text and what the stages read of it (search/keyword.py's rules, parsed once).

    text           the query as asked (stripped)
    terms          each word's FTS tokens (home/fts.py; CJK runs as bigrams)
    content        the text without stop-words (keyword.content_query): the any-term words
    content_terms  each content word's FTS tokens
    language       its coarse language (search/language.py): the relevance floor's pairs
    cjk_share      the share of its letters that are CJK: hybrid fusion's script mismatch
    question       phrased as a question (keyword.is_question)
    default_match  "all" for a short keyword query, "any" for a longer one or a question
    """

    text: str
    terms: tuple[tuple[str, ...], ...]
    content: str
    content_terms: tuple[tuple[str, ...], ...]
    language: str
    cjk_share: float
    question: bool
    default_match: str
    # the query's vector per model id, embedded once (a search asks two models at most)
    _vectors: dict[str, Sequence[float]] = field(default_factory=dict, compare=False,
                                                 repr=False)

    @classmethod
    def parse(cls, text: str) -> Query:
        """The query of a search; BadInput when it is empty or holds a NUL."""
        if not isinstance(text, str) or not text.strip():
            raise BadInput("the search query is empty")
        if "\x00" in text:
            raise BadInput("the search query contains a NUL character")
        return cls.of(text.strip())

    @classmethod
    def of(cls, text: str) -> Query:
        """The query of any text, unchecked (an error text, a RAG query)."""
        content = content_query(text)
        return cls(text, _terms(text), content, _terms(content), language(text),
                   cjk_share(text), is_question(text), default_match(text))

    @property
    def tokens(self) -> frozenset[str]:
        """Every token of its content words."""
        return frozenset(t for term in self.content_terms for t in term)

    def match_for(self, terms: int) -> str:
        """default_match for a caller that counts the terms its own way (RAG's phrases, an
        error lookup's words)."""
        return "any" if terms > SHORT_QUERY_TERMS or self.question else "all"

    @property
    def searchable(self) -> bool:
        """Whether the text has a word a keyword search can look for."""
        return bool(self.terms)

    def vector(self, embedder: Any) -> Sequence[float]:
        """The query embedded by this embedder's model (once per model)."""
        key = str(embedder.model_id)
        found = self._vectors.get(key)
        if found is None:
            found = self._vectors[key] = embedder.embed_query(self.text)
        return found


def _terms(text: str) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(term) for term in fts.query_terms(text))
