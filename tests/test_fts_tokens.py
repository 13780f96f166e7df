"""The query tokens of home/fts.py: CJK runs (as bigrams) and words, in order. They are
found without compiling a character class of the CJK ranges (~9 ms per process, paid by
every keyword search); the result must be exactly what that class found."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from agenvoy_cli.home import fts

# the definition the pieces must agree with: a maximal CJK run, or a maximal run of word
# characters (not "_") that holds no CJK character
REFERENCE = re.compile(f"[{fts._CJK}]+|[^\\W_{fts._CJK}]+")
ALPHABET = st.sampled_from(list("ab_Z9 -.,'é") + list("記憶錯誤部署ひらがなカタカナ・ー゛한국") +
                           ["\u3000", "\U00020000", "\u30a0", "\u309b", "\U0002ffff", "\ufa00"])


@settings(max_examples=400, deadline=None)
@given(st.text(ALPHABET, max_size=30) | st.text(max_size=30))
def test_pieces_are_the_reference_class_matches(text):
    assert fts.pieces(text) == REFERENCE.findall(text)


def test_query_terms_split_cjk_runs_and_words():
    assert fts.query_terms("deploy記憶體 錯誤_x") == [["deploy", "記憶", "憶體"],
                                                   ["錯誤", "x"]]
    # U+30FB (katakana middle dot) is inside the CJK ranges: part of the run
    assert fts.term_tokens("Ünïcode・カタカナ") == ["ünïcode", "・カ", "カタ", "タカ", "カナ"]
