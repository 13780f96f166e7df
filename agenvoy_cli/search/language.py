"""What language a text is in, coarsely: enough to tell the relevance floor's language pairs
(search/relevance.py) and hybrid fusion's script mismatch (search/fusion.py) apart.

Languages are told apart by script (Han, kana, hangul, Latin) and, among Latin-script texts,
by their commonest function words and telling letters (English, Spanish, German, French,
Portuguese, Italian). Light: nothing but the standard library.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from agenvoy_cli.home import fts

CJK_LANGS = {"zh", "ja", "ko"}
_WORDS = re.compile(r"[^\W\d_]+", re.UNICODE)
_STOP_WORDS = {
    "en": "the an is are was were of to in on and my you what which where who how do does "
          "did for with at it this that be have has",
    "es": "el la los las de del que en y es un una mi por para con se qué dónde cómo cuál "
          "cuándo está son lo al le su nuestra nuestro",
    "de": "der die das und ist ein eine mein meine mit zu von den dem im wie was wo wer wann "
          "nicht ich auf für welche welches welcher",
    "fr": "le la les de des et est un une mon ma mes que qui dans pour avec où quel quelle "
          "comment je ne pas",
    "pt": "o a os as de do da que em e é um uma meu minha para com onde qual como não",
    "it": "il lo la gli le di che e è un una mio mia per con dove quale come non sono",
}
_STOP = {lang: frozenset(words.split()) for lang, words in _STOP_WORDS.items()}
_MARKS = {"es": "¿¡ñ", "de": "äöüß", "fr": "çèêàœ", "pt": "ãõ"}  # letters that give it away


def _scripts(text: str) -> tuple[int, int, int, int]:
    """How many Han, kana, hangul and other letters the text holds."""
    han = kana = hangul = latin = 0
    for c in text:
        o = ord(c)
        if 0x3040 <= o <= 0x30FF:
            kana += 1
        elif 0xAC00 <= o <= 0xD7AF or 0x1100 <= o <= 0x11FF:
            hangul += 1
        elif 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0xF900 <= o <= 0xFAFF:
            han += 1
        elif c.isalpha():
            latin += 1
    return han, kana, hangul, latin


def _latin_language(text: str) -> str:
    """Among Latin-script languages: the one whose function words and telling letters the
    text holds most (en when none is found; a tie goes to en)."""
    words = [w.lower() for w in _WORDS.findall(text)]
    votes = Counter({lang: sum(w in stop for w in words) for lang, stop in _STOP.items()})
    low = text.lower()
    votes.update({lang: sum(c in marks for c in low) for lang, marks in _MARKS.items()})
    lang, n = max(votes.items(), key=lambda kv: (kv[1], kv[0] == "en"))
    return lang if n else "en"


def language(text: str) -> str:
    """A coarse language of a text: zh, ja, ko by script; en, es, de, fr, pt, it by their
    function words and telling letters (¿, ñ, ß ...) among Latin-script ones (en when
    none is found; a tie goes to en)."""
    han, kana, hangul, latin = _scripts(text)
    total = han + kana + hangul + latin
    if total and (han + kana + hangul) / total > 0.3:
        if kana:
            return "ja"
        return "ko" if hangul > han else "zh"
    return _latin_language(text)


def memories_language(texts: Sequence[str]) -> str | None:
    """The language most of the texts are in (None: no text)."""
    langs = Counter(language(t) for t in texts if t.strip())
    return langs.most_common(1)[0][0] if langs else None


def cjk_share(text: str) -> float:
    """Share of the letters and CJK characters of a text that are CJK."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return 0.0
    return sum(1 for c in letters if fts.is_cjk(c)) / len(letters)
