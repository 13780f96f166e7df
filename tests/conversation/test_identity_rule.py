"""The identity rule as a pure function (conversation/identity.py), case by case."""

from __future__ import annotations

import pytest

from agenvoy_cli.conversation.identity import Candidate, places, plan


def cands(text: str, gone: str = "", roles: str = "") -> list[Candidate]:
    return [Candidate(i, i, h, roles[i] if roles else "u", h in gone, 0)
            for i, h in enumerate(text)]


@pytest.mark.parametrize("hist, rows, gone, edits, left, back, new", [
    ("abc", "abc", "", [], [], [], []),  # nothing changed
    ("abcd", "abc", "", [], [], [], [3]),  # appended
    ("ac", "abc", "", [], ["b"], [], []),  # deleted in the middle
    ("aXc", "abc", "", [1], [], [], []),  # edited in the middle: the row follows
    ("Xbc", "abc", "", [0], [], [], []),  # edited first message
    ("abX", "abc", "", [2], [], [], []),  # edited last message
    ("XY", "abc", "", [], ["a", "b", "c"], [], [0, 1]),  # no anchor: all new, nothing edited
    ("abc", "abc", "c", [], [], ["c"], []),  # deleted, then put back (undo): matched again
    ("abcd", "abcd", "c", [], [], ["c"], []),  # ... also when rows follow it
    ("Nabc", "abc", "", [], [], [], [0]),  # inserted at the front
    ("ab", "abc", "", [], ["c"], [], []),  # last message deleted
])
def test_plan(hist, rows, gone, edits, left, back, new):
    cs = cands(rows, gone)
    p = plan(list(hist), ["u"] * len(hist), cs)
    ids = {c.id: c.hash for c in cs}
    assert p.edits == edits
    assert sorted(ids[r] for r in p.gone) == left
    assert sorted(ids[r] for r in p.back) == back
    assert [i for i, r in enumerate(p.rows) if r is None] == new


def test_an_edit_keeps_its_role():
    cs = cands("ab", roles="ua")
    p = plan(["a", "X"], ["u", "u"], cs)  # the assistant row b is gone, X (user) is new
    assert p.edits == [] and p.rows == [0, None] and p.gone == [1]


def test_places_renumber_only_when_something_goes_before_a_placed_row():
    cs = cands("abc")
    p = plan(list("abcd"), ["u"] * 4, cs)
    assert [places(p.order, {c.id: c.seq for c in cs}, 3)[(r, i)]
            for i, r in enumerate(p.rows)] == [0, 1, 2, 3]
    p = plan(list("aNbc"), ["u"] * 4, cs)
    got = places(p.order, {c.id: c.seq for c in cs}, 3)
    assert [got[(r, i)] for i, r in enumerate(p.rows)] == [0, 1, 2, 3]


def test_foreign_rows_come_after_placed_ones_by_insertion_order():
    cs = [Candidate(5, 0, "a", "u", False, 50), Candidate(9, None, "c", "u", False, 10),
          Candidate(7, None, "b", "u", False, 99)]  # ids 9 then 7? the caller sorts by id
    cs = [cs[0], *sorted(cs[1:], key=lambda c: c.id)]
    p = plan(list("abc"), ["u"] * 3, cs)
    assert p.rows == [5, 7, 9]
    got = places(p.order, {c.id: c.seq for c in cs}, 1)
    assert [got[(r, i)] for i, r in enumerate(p.rows)] == [0, 1, 2]
