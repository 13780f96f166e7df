"""Agenvoy 1.0's finished tasks as a corpus of the retrieval pipeline (search/pipeline.py):
`session tasks WORDS --mode keyword|semantic|hybrid`.

A unit is one finished task (a row of `action_history`, conversation/tasks.py), keyed by
its row id. Its text, indexed and embedded, is the objective and the reply: what was asked
and what came of it. The tools' results are left out: they are long and noisy (listings,
JSON, logs), they would decide BM25's length normalisation and fill the embedders' window
(2,000 characters) before the reply; `session tasks WORDS` without --mode still finds a
word anywhere in them (conversation/tasks.py `find`).

action_history is Agenvoy's, never written here, so the index is our own:
- keyword: an in-memory FTS5 table built per search from the tasks' texts (fts.index_text,
  the notes' tokenizer; the objective weighted 2:1), which costs milliseconds at a task
  history's scale (docs/benchmarks.md: 5,000 tasks);
- vectors: our Chroma collection TASKS, kept as the notes' are: a semantic or hybrid search
  first embeds the tasks without a vector (or whose text changed: a content hash in the
  vector's metadata) for at most its budget, and drops the vectors of tasks gone; the rest
  are found by keyword meanwhile (`unindexed`). A failing model or index leaves keyword
  results (`degrades`).
Keyword mode's floor is stricter than the notes' (`keyword_floor` below): a task's
objective is always a short first line, so the notes' title rule kept any task whose
objective shared one word with a question about another subject.
A task's time is when it ended (the time window). Hybrid's weights follow the query
(fusion.weights) as the notes' do; no neighbour smoothing (ids of unrelated tasks).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

from agenvoy_cli.conversation import tasks as task_store
from agenvoy_cli.home import fts
from agenvoy_cli.home.schema import FTS_TOKENIZE
from agenvoy_cli.search.corpus import HomeModel

if TYPE_CHECKING:
    from collections.abc import Callable

    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.conversation.tasks import Task
    from agenvoy_cli.search.corpus import Found
    from agenvoy_cli.search.fusion import Weights
    from agenvoy_cli.search.query import Query
    from agenvoy_cli.search.relevance import Relevance

TASKS = "agenvoy_tasks"  # the Chroma collection of the tasks' vectors
# A holder (the MCP server, a Memory) keeps the state in which a catch-up found every task
# with its vector, and skips the check (every vector's metadata read, every text hashed:
# bench/task_floor.py --scale) while it holds; the bench turns it off for its A/B.
KEEP_CHECKED = True
EMBED_CHARS = 2_000  # the embedders see this much of a text at most
BATCH = 16  # tasks embedded per lock round-trip


def text(task: Task) -> str:
    """What a task is indexed and embedded by: its objective, then its reply."""
    return f"{task.objective}\n{task.reply}".strip()


def digest(task: Task) -> str:
    return hashlib.sha1(text(task)[:EMBED_CHARS].encode()).hexdigest()[:16]


def checked(store: Store) -> dict[str, tuple[Any, ...]]:
    """The Store's states a catch-up was found complete in (vectors/context.py caught_up,
    the sessions' catch-up's: tasks under their own key)."""
    from agenvoy_cli.vectors.context import of

    return of(store).caught_up


def terms(query: Query) -> list[str]:
    """The query's content words that hold a searchable token."""
    return [t for t in query.content.split() if fts.term_tokens(t)]


class TasksCorpus(HomeModel):
    """The finished tasks of one session (None: of every session), for one search."""

    unit = "task"
    degrades = True
    unindexed_note = True
    neighbour = 0.0

    def __init__(self, store: Store, session_id: str | None,
                 warn: Callable[[str], None]) -> None:
        from agenvoy_cli.home.sqlite import change_stamp

        self.store = store
        self.session_id = session_id
        self.warn = warn
        with store.read_lock():
            self._stamp = change_stamp(store.layout.db)  # before the rows: a later write
            self.tasks = task_store.every(store.db_readonly(), session_id)  # changes it
        self.pending: set[Hashable] = set()
        self._fts: sqlite3.Connection | None = None

    # -- keyword: an in-memory FTS5 index of the tasks' texts

    def index(self) -> sqlite3.Connection:
        """The tasks' full-text index, built on first use."""
        if self._fts is None:
            conn = sqlite3.connect(":memory:")
            conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(objective, reply, "
                         f"tokenize='{FTS_TOKENIZE}')")
            conn.executemany("INSERT INTO t(rowid, objective, reply) VALUES (?, ?, ?)",
                             ((i, fts.index_text(t.objective), fts.index_text(t.reply))
                              for i, t in self.tasks.items()))
            self._fts = conn
        return self._fts

    def term_count(self, query: Query) -> int:
        return len(terms(query))

    def keyword(self, query: Query, n: int, every: bool) -> list[tuple[Hashable, float]]:
        words = " ".join(terms(query))
        match = (fts.match_all(words) if every else fts.match_any(words)) if words else None
        if match is None or not self.tasks:
            return []
        return [(i, -s) for i, s in self.index().execute(
            "SELECT rowid, bm25(t, 2.0, 1.0) AS s FROM t WHERE t MATCH ? ORDER BY s, rowid "
            "LIMIT ?", (match, n))]

    def matched(self, query: Query, keys: Sequence[int]) -> dict[int, list[str]]:
        """Per task, the query's terms its objective or reply holds (by the index)."""
        out: dict[int, list[str]] = {k: [] for k in keys}
        if not keys or not self.tasks:
            return out
        marks = ",".join("?" * len(keys))
        for term in terms(query):
            expr = fts.match_all(term)
            if expr is None:
                continue
            for (rowid,) in self.index().execute(
                    f"SELECT rowid FROM t WHERE t MATCH ? AND rowid IN ({marks})",
                    [expr, *keys]):
                out[rowid].append(term.strip("?!.,;:'\"()") or term)
        return out

    # -- the time window: when a task ended

    def within(self, lo: int | None, hi: int | None) -> tuple[set[Hashable], int]:
        keep: set[Hashable] = {i for i, t in self.tasks.items()
                               if (lo is None or t.end_at >= lo) and (hi is None or t.end_at < hi)}
        return keep, len(self.tasks)

    # -- vectors: our own collection, caught up within the budget

    def catch_up(self, budget: float | None, found: Found) -> int | None:
        from agenvoy_cli.vectors import api as vectors
        from agenvoy_cli.vectors.budget import embed_within

        with self.store.write_lock():  # Chroma needs the lock
            state = self._state()
            if KEEP_CHECKED and checked(self.store).get(self._key()) == state:
                self.pending = set()  # nothing changed since a check found every vector
                return 0
            have: dict[str, dict[str, Any]] = {}
            if vectors.index_exists(self.store, TASKS) and self._model_changed():
                vectors.drop_index(self.store, TASKS)  # derived from Agenvoy's rows: remade
            if vectors.index_exists(self.store, TASKS):
                index = vectors.open_index(self.store, TASKS, create=False)
                have = index.get()
                alive = task_store.ids(self.store.db_readonly())
                gone = sorted(v for v in have if int(v) not in alive)
                if gone:
                    index.delete(gone)
            else:
                gone = []
        todo = [i for i, t in sorted(self.tasks.items())
                if have.get(str(i), {}).get("hash") != digest(t)]
        self.pending = set(todo)
        if not todo and not gone:  # nothing written: the state read is the one checked
            checked(self.store)[self._key()] = state
        if not todo or budget == 0:
            return len(todo)

        def step(batch: list[int]) -> None:
            emb = vectors.embedder(self.store)
            vecs = emb.embed_documents([text(self.tasks[i])[:EMBED_CHARS] for i in batch])
            with self.store.write_lock():
                vectors.open_index(self.store, TASKS).add(
                    [str(i) for i in batch], [list(v) for v in vecs],
                    [{"task": i, "session": self.tasks[i].session_id,
                      "hash": digest(self.tasks[i])} for i in batch])
            self.pending -= set(batch)

        embed_within(self.store, todo, BATCH, budget, step, self.warn,
                     "could not embed the tasks without a vector; they are found by keyword")
        return len(self.pending)

    def _key(self) -> str:
        return f"{TASKS}\0{self.session_id or ''}"  # beside the sessions' (no NUL in an id)

    def _state(self) -> tuple[Any, ...]:
        """What a change the catch-up cares about changes (hold the lock): Chroma's
        generation token (every vector writer writes a new one first), the database as it
        was when the tasks were read (Agenvoy finishing or replacing a task), the model."""
        from agenvoy_cli.vectors import api as vectors

        return (vectors.read_generation(self.store), *self._stamp,
                vectors.embedder(self.store).model_id)

    def _model_changed(self) -> bool:
        """Whether the collection was built with another model than the embedder's (the
        embedder changed): its vectors are then made again. Hold the lock."""
        from agenvoy_cli.vectors import api as vectors

        index = vectors.open_index(self.store, TASKS, create=False)
        built = (index.collection.metadata or {}).get("model_id")
        return bool(built != vectors.embedder(self.store).model_id)

    def unembedded(self) -> set[Hashable]:
        return set(self.pending)

    def vectors(self, vector: Sequence[float], n: int, found: Found
                ) -> list[tuple[Hashable, float]]:
        from agenvoy_cli.vectors import api as vectors

        where = None if self.session_id is None else {"session": self.session_id}
        with self.store.write_lock():
            if not vectors.index_exists(self.store, TASKS):
                return []
            hits = vectors.open_index(self.store, TASKS, create=False).query(vector, n, where)
        ranked = [(int(h.id), 1.0 - float(h.distance)) for h in hits]
        return [(i, s) for i, s in ranked if i in self.tasks and i not in self.pending]

    def stored_vectors(self, keys: Sequence[Hashable]) -> dict[Hashable, Sequence[float]]:
        """The tasks' stored vectors: made of exactly their embedded text (a task whose
        text changed is pending, never ranked), so the floor need not embed them again."""
        from agenvoy_cli.vectors import api as vectors

        with self.store.write_lock():
            if not vectors.index_exists(self.store, TASKS):
                return {}
            got = vectors.open_index(self.store, TASKS, create=False).vectors(
                [str(k) for k in keys])
        return {int(k): v for k, v in got.items()}

    def embedded_texts(self, keys: Sequence[Hashable]) -> dict[Hashable, str]:
        return {k: text(self.tasks[k])[:EMBED_CHARS] for k in keys
                if k in self.tasks}

    def indexed_text(self, key: Hashable) -> str | None:
        task = self.tasks.get(key)  # type: ignore[call-overload]
        return None if task is None else text(task)

    def weights(self, query: Query, kw: Sequence[tuple[Hashable, float]],
                vec: Sequence[tuple[Hashable, float]]) -> Weights:
        from agenvoy_cli.search.fusion import coverage, weights

        memories = [text(self.tasks[k])[:500] for k, _ in vec[:5]
                    if k in self.tasks]
        words = terms(query)
        best = self.tasks.get(kw[0][0]) if kw else None  # type: ignore[call-overload]
        cov = coverage(fts.term_tokens(" ".join(words)), fts.term_tokens(text(best))) \
            if best is not None and words else None
        return weights(query, memories, cov)

    def relevance(self) -> Relevance:
        from agenvoy_cli.search.relevance import choose
        from agenvoy_cli.vectors.context import of

        return choose(self.store.settings, of(self.store).models)


# --------------------------------------------------------------------------- keyword floor

# Task keyword mode's floor (#50): an any-term ranking whose best task holds less than
# this share of the query's content tokens (as the index matches them: corpus.held) is
# nothing. The notes' rule (pipeline.keyword_floor: LOW_COVERAGE 0.34, or one token in the
# title line) runs first; its title rule keeps every task (an objective is a short first
# line) whose objective shares one everyday word with a near miss ("renew" a passport
# appointment -> the TLS renewal). Chosen on the tune split of bench/task_floor_data
# (README, "Keyword floor"): 0.45-0.5 gave the same; half the query's words, said plainly.
TASK_COVERAGE = 0.5


def keyword_floor(corpus: TasksCorpus, query: Query, found: Found) -> None:
    """Keyword mode's any-term ranking emptied (with the `not_related` note) when its best
    task holds less than TASK_COVERAGE of the query; not for CJK queries (as the notes'),
    nor when the caller asked for any term (`--match any`: a list of subjects, one per
    task, is then what it says), which the notes' floor still weighs."""
    from agenvoy_cli.search.corpus import held
    from agenvoy_cli.search.fusion import CJK_QUERY

    tokens = query.tokens
    if found.match != "any" or not found.ranked or found.floored or not tokens \
            or query.cjk_share >= CJK_QUERY:
        return
    best = corpus.indexed_text(found.ranked[0][0])
    if best is None or len(held(best, tokens)) / len(tokens) >= TASK_COVERAGE:
        return
    found.ranked = []
    found.floored = True
    found.note("not_related", f"no {corpus.unit} is related closely enough to: {query.text}")


# --------------------------------------------------------------------------- the search

MODES = ("hybrid", "keyword", "semantic")

# What a task search's notes say (docs/json-vocabulary.md lists the codes).
NOTE_CODES = ("any_term", "nothing_searchable", "unindexed", "no_vectors", "not_related",
              "uncalibrated")


def search_tasks(store: Store, session_id: str | None, query: str, mode: str, *,
                 limit: int, window: tuple[int | None, int | None] = (None, None),
                 match: str | None = None, budget: float | None = None,
                 relevance: Relevance | None = None, full: bool = False,
                 warn: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """The finished tasks related to a query, best first (the pipeline over TasksCorpus):
    each task's document (conversation/tasks.py Task.as_dict) with its rank, score and
    score_kind; the search's mode, match, unindexed_count and notes beside them."""
    from agenvoy_cli.errors import BadInput
    from agenvoy_cli.search import pipeline
    from agenvoy_cli.search.query import Query

    if mode not in MODES:
        raise BadInput(f"unknown search mode {mode!r} (expected {', '.join(MODES)})")
    text_ = " ".join(query.split())
    if not text_:
        raise BadInput("--mode needs WORDS to search for")
    corpus = TasksCorpus(store, session_id, warn)
    parsed = Query.of(text_)
    doc: dict[str, Any] = {"mode": mode, "match": None, "unindexed_count": None,
                           "notes": []}
    if not corpus.tasks:
        doc["match"] = None if mode != "keyword" else ("all" if terms(parsed) else "none")
        return {**doc, "tasks": []}
    found = pipeline.search(corpus, parsed, mode, limit=limit, match=match, budget=budget,
                            relevance=relevance, window=window)
    if mode == "keyword" and match is None:
        keyword_floor(corpus, parsed, found)
    keys = [int(k) for k, _ in found.ranked]  # type: ignore[call-overload]
    held = corpus.matched(parsed, keys)
    extra: dict[int, str] = {}
    if full:
        with store.read_lock():
            conn = store.db_readonly()
            extra = task_store.tool_results(conn, keys) if conn is not None else {}
    out = []
    for rank, (key, score) in enumerate(found.ranked, 1):
        task = corpus.tasks[key]  # type: ignore[index]
        task.matched_terms = held.get(key, [])  # type: ignore[call-overload]
        task.tool_results = extra.get(key, "")  # type: ignore[call-overload]
        out.append({"rank": rank, "score": round(score, 6), "score_kind": found.score_kind,
                    **task.as_dict(full)})
    doc.update(match=found.match, unindexed_count=found.unindexed_count,
               notes=[{"code": c, "message": m} for c, m in found.notes])
    return {**doc, "tasks": out}
