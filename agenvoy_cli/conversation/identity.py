"""The identity rule: which archive row each message of history.json is.

history.json is an edited subsequence of the archive: others (Agenvoy's /compact, a
person with an editor) remove messages anywhere, change their text, append. The rule:
- a message is matched to a row by its identity (role + text, see messages.identity),
  keeping the order of both sides and as many matches as possible (a diff);
- between two matches (and before the first, after the last), an unmatched message and an
  unmatched row still in history.json with the same role, side by side, are one message
  whose text was *edited*: the row follows it;
- any other unmatched message is new (inserted once); any other row left history.json
  and stays archived (marked gone), also if it comes back later (then it matches again);
- rows another program inserted (no place yet) come after the placed ones, by insertion id.
Pure functions: the store reads the candidates and applies the plan in one transaction.
"""

from __future__ import annotations

from typing import NamedTuple

_Item = tuple[int | None, int | None]  # (row id, history index), as in Plan.order


class Candidate(NamedTuple):
    """An archive row that may be in history.json: placed at or after the trim point, or
    inserted by another program (seq None)."""

    id: int
    seq: int | None
    hash: str
    role: str
    gone: bool
    send_at: int = 0


class Plan(NamedTuple):
    rows: list[int | None]  # per history message: the id of its row; None = new
    edits: list[int]  # history indexes whose row takes the message's new text
    gone: list[int]  # ids of rows that left history.json now
    back: list[int]  # ids of rows marked gone before, matched again
    order: list[tuple[int | None, int | None]]  # final order: (row id, history index)

    @property
    def changed(self) -> bool:
        return bool(self.edits or self.gone or self.back or None in self.rows)


def _pairs(hist: list[str], cands: list[Candidate]) -> list[tuple[int, int]]:
    """Matched (history index, candidate index) pairs, in order, as many as possible."""
    live = [j for j, c in enumerate(cands) if not c.gone]
    n = min(len(hist), len(live))
    # the common cases, no diff needed: history.json is its live rows, or they are its start
    # and no row that left it comes after them (that one could match a message again)
    if all(hist[i] == cands[live[i]].hash for i in range(n)) and (
            n == len(hist) or not any(c.gone for c in cands[(live[n - 1] if n else -1) + 1:])):
        return list(zip(range(n), live[:n]))
    from difflib import SequenceMatcher  # only where the two sides differ: not on append's path

    blocks = SequenceMatcher(None, hist, [c.hash for c in cands],
                             autojunk=False).get_matching_blocks()
    return [(a + k, b + k) for a, b, size in blocks for k in range(size)]


def plan(hashes: list[str], roles: list[str], cands: list[Candidate]) -> Plan:
    """How history.json (identities and roles of its messages) maps onto the candidates."""
    pairs = _pairs(hashes, cands)
    rows: list[int | None] = [None] * len(hashes)
    edits: list[int] = []
    order: list[tuple[int | None, int | None]] = []
    leaving: list[int] = []
    bounds = [(-1, -1), *pairs, (len(hashes), len(cands))]
    last = len(bounds) - 2
    for k in range(len(bounds) - 1):
        (h0, c0), (h1, c1) = bounds[k], bounds[k + 1]
        if h1 == h0 + 1 and c1 == c0 + 1:  # no gap (nearly always): just the next match
            if k < last:
                rows[h1] = cands[c1].id
                order.append((cands[c1].id, h1))
            continue
        new = list(range(h0 + 1, h1))
        old = list(range(c0 + 1, c1))
        # an edit is only recognised next to an unchanged message
        paired = _edited(new, old, roles, cands, k == 0) if pairs else []
        for i, j in paired:
            rows[i] = cands[j].id
            edits.append(i)
        items, gone = _gap(new, old, paired, cands, k == 0)
        order += items
        leaving += gone
        if k < last:
            rows[h1] = cands[c1].id
            order.append((cands[c1].id, h1))
    back = [cands[j].id for _, j in pairs if cands[j].gone]
    return Plan(rows, sorted(edits), leaving, back, order)


def _edited(new: list[int], old: list[int], roles: list[str], cands: list[Candidate],
            leading: bool) -> list[tuple[int, int]]:
    """In a gap between matches: (history index, candidate index) of the messages that are
    edits of live rows, paired from the match next to the gap while their roles agree."""
    live = [j for j in old if not cands[j].gone]
    a, b = (new[::-1], live[::-1]) if leading else (new, live)
    paired: list[tuple[int, int]] = []
    for i, j in zip(a, b):
        if roles[i] != cands[j].role:
            break
        paired.append((i, j))
    return sorted(paired)


def _gap(new: list[int], old: list[int], paired: list[tuple[int, int]],
         cands: list[Candidate], leading: bool) -> tuple[list[_Item], list[int]]:
    """A gap's items in their final order (before the first match: rows, new messages,
    edits; else edits, rows, new messages), and the live rows that left."""
    done_h = {i for i, _ in paired}
    done_c = {j for _, j in paired}
    rest_c: list[_Item] = [(cands[j].id, None) for j in old if j not in done_c]
    leaving = [cands[j].id for j in old if j not in done_c and not cands[j].gone]
    rest_h: list[_Item] = [(None, i) for i in new if i not in done_h]
    pair_items: list[_Item] = [(cands[j].id, i) for i, j in paired]
    if leading:
        return rest_c + rest_h + pair_items, leaving
    return pair_items + rest_c + rest_h, leaving


def _renumbered(order: list[_Item], seq_of: dict[int, int | None], next_seq: int,
                first_free: int) -> dict[_Item, int]:
    """A new item before a placed row: the items before the first new one keep their
    places, everything from it on is renumbered after them."""
    out: dict[_Item, int] = {}
    last = max((s for it in order[:first_free]
                if it[0] is not None and (s := seq_of.get(it[0])) is not None), default=None)
    base = next_seq if last is None else last + 1
    if last is None:
        base = min((s for it in order if it[0] is not None
                    and (s := seq_of.get(it[0])) is not None), default=next_seq)
    for k, it in enumerate(order):
        if k >= first_free:
            out[it] = base + (k - first_free)
        elif it[0] is not None and (placed := seq_of.get(it[0])) is not None:
            out[it] = placed
    return out


def places(order: list[tuple[int | None, int | None]], seq_of: dict[int, int | None],
           next_seq: int) -> dict[tuple[int | None, int | None], int]:
    """The place (seq) of every item of the final order: placed rows keep theirs while they
    are in order; new messages and foreign rows get the next free ones; from the first one
    that must go before a placed row on, everything is renumbered."""
    out: dict[tuple[int | None, int | None], int] = {}
    first_free = None
    for pos, item in enumerate(order):
        seq = seq_of.get(item[0]) if item[0] is not None else None
        if seq is None and first_free is None:
            first_free = pos
        elif seq is not None and first_free is not None:
            return _renumbered(order, seq_of, next_seq, first_free)
        if seq is not None:
            out[item] = seq
    k = 0
    for item in order:
        if item not in out:
            out[item] = next_seq + k
            k += 1
    return out
