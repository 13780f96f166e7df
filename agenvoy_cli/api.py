"""The Python API: one home, opened once, for agents written in Python.

    from agenvoy_cli import Memory

    with Memory() as memory:                      # $AGENVOY_HOME or ~/.config/agenvoy
        memory.append("s1", [{"role": "user", "content": "deploy failed again"}])
        messages = memory.context("s1")["messages"]           # what to send to the model
        hits = memory.search("s1", "deploy", mode="keyword")["results"]
        hint = memory.lookup_errors("permission denied", tool="bash")["hint"]
        memory.record_error("bash", ["permission"], "permission denied", "use sudo",
                            "resolved")
        memory.rag_create("notes", ["~/notes"], vectors=False)   # keyword search only
        chunks = memory.rag_search("retry policy", ["notes"])["results"]
        memory.summarize("s1"); memory.forget("s1", match="sk-live-"); memory.sessions()
        memory.backfill(vectors=True)          # an existing Agenvoy home: archive + vectors

Every method returns the document the matching command prints with ``--json`` (the same
names, docs/json-vocabulary.md; without ``schema_version``), and raises the exceptions of
``agenvoy_cli.errors`` (``BadInput``, ``NotFound``, ``StoreBusy``, ...; ``exit_code`` and
``kind`` say which). The CLI's commands call these methods themselves, so the two never
disagree. One Memory may be used from several threads; many processes may share a home
(the same locks as the CLI). Heavy parts (chromadb, the embedding model) load on the first
call that needs them and stay loaded for the life of the Memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agenvoy_cli.contract import list_document, moment

if TYPE_CHECKING:
    from agenvoy_cli.conversation.action_log import Run
    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.models.embedders import Embedders
    from agenvoy_cli.search.relevance import Relevance
    from agenvoy_cli.settings import Settings

Warn = Callable[[str], None]
Progress = Callable[[int, int], None]


class Memory:
    """An Agenvoy home: conversation memory, error memory and document RAG."""

    def __init__(self, home: str | os.PathLike[str] | None = None, *,
                 store: Store | None = None, embedders: Embedders | None = None,
                 relevance: Relevance | None = None, settings: Settings | None = None
                 ) -> None:
        """Open `home` (default: $AGENVOY_HOME, else ~/.config/agenvoy); nothing is created
        until something is written. `store` wraps an already open Store (the CLI does).
        `settings` (agenvoy_cli.settings.Settings): every knob (docs/guide.md); default: the
        process environment as it is now, read once, and the home's config.json.
        `embedders` (agenvoy_cli.models.embedders.Embedders): pass one to several Memory
        objects of a program so that they load the local model once between them.
        `relevance` (agenvoy_cli.search.relevance.Relevance): what decides that nothing is
        related closely enough to a semantic or hybrid search (default: the home's floor,
        search/relevance.py choose)."""
        if store is None:
            from agenvoy_cli.environment import environment
            from agenvoy_cli.home.config import load_settings
            from agenvoy_cli.home.layout import Layout, resolve_home
            from agenvoy_cli.settings import Settings
            from agenvoy_cli.vectors.hooks import open_store

            settings = settings or Settings(environment())
            layout = Layout(resolve_home(None if home is None else str(home), settings.env))
            store = open_store(layout, load_settings(layout, settings), embedders=embedders)
            self._owned = True
        else:
            self._owned = False
        self.store = store
        self._relevance = relevance

    @property
    def relevance(self) -> Relevance:
        """The Relevance this Memory's searches use: made once, on the first semantic or
        hybrid search, so that what it keeps (reference vectors, the second model) lives as
        long as the Memory."""
        if self._relevance is None:
            from agenvoy_cli.search.relevance import choose
            from agenvoy_cli.vectors.context import of

            self._relevance = choose(self.store.settings, of(self.store).models)
        return self._relevance

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Release the home (only a Memory that opened it closes it)."""
        if self._owned:
            self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- conversation ---------------------------------------------------------------------

    def append(self, session_id: str, messages: Sequence[dict[str, Any]], *,
               time: datetime | None = None, compact: bool = True,
               sender: str = "", warn: Warn | None = None) -> dict[str, Any]:
        """Append OpenAI-style messages to a session (history.json, then SQLite), all or
        nothing. `time` is the local time for messages without a time header (now);
        `sender` names who sent them (written in the session's format). A compaction that
        fails after the append is reported through `warn`."""
        from agenvoy_cli.home.layout import validate_name

        validate_name(session_id)
        result = self.store.append(session_id, list(messages), time, compact=compact,
                                   sender=sender, warn=warn)
        return {"session_id": result.session_id, "appended": result.appended,
                "message_count": result.messages, "bytes": result.bytes,
                "compaction": result.compaction.as_dict() if result.compaction else None}

    def context(self, session_id: str, max_messages: int | None = None, *,
                warn: Warn | None = None) -> dict[str, Any]:
        """The messages to send to the model this turn: the rolling summary (as a system
        message) and the last `max_messages` (max_history_messages, 16); and how many
        knowledge notes the home keeps (when any, Agenvoy has its agent search them first;
        None when history.db cannot be read: the messages come from history.json)."""
        from agenvoy_cli.notes.files import context_note_count

        messages = self.store.context(session_id, max_messages, warn=warn)
        return {"session_id": session_id, **list_document("messages", messages),
                "knowledge_note_count": context_note_count(self.store, **_warn(warn))}

    def search(self, session_id: str, query: str, *, mode: str = "semantic",
               limit: int = 8, range: str = "all", since: str | None = None,
               until: str | None = None, progress: Callable[[int, int], None] | None = None,
               budget: float | None = None, notice: Callable[..., Any] | None = None,
               match: str | None = None, outside: tuple[str, str] | None = None
               ) -> dict[str, Any]:
        """Search a session: semantic (default), keyword or hybrid; `range`, `since`,
        `until` take what the CLI's options take (7d, 1mo, '2025-01-31', 'yesterday').
        `budget`: at most this many seconds embedding new messages first (None: all of
        them); what is left is searched by keyword. `match` ("all" | "any", keyword):
        every term or any term (default: all for 1-3 terms, else any). "notes" holds
        {"code", "message"} objects (docs/json-vocabulary.md). `outside`: (where this
        search looked, what finds the rest) for the note when only messages outside the
        window match (default: the options given, as the CLI words them)."""
        from agenvoy_cli.search.engine import search
        from agenvoy_cli.search.outside import note_outside
        from agenvoy_cli.search.timewindow import time_window

        window = time_window(range, since, until)
        relevance = None if mode == "keyword" else self.relevance
        result = search(self.store, session_id, query, mode, limit=limit, window=window,
                        progress=progress, budget=budget, notice=notice, match=match,
                        relevance=relevance)
        if outside is None:
            given = [f"--{k} {v}" for k, v in (("range", range), ("since", since),
                                              ("until", until)) if v and v != "all"]
            outside = (f"within {' '.join(given)}",
                       f"a search without {'/'.join(g.split()[0] for g in given)}")
        note_outside(result, lambda wide: search(self.store, session_id, query, mode,
                                                 limit=limit, window=wide, budget=0,
                                                 match=match, relevance=relevance),
                     *outside)
        return result.as_dict()

    def sessions(self) -> dict[str, Any]:
        """Every session: message_count, bytes, last_message_at, has_summary."""
        from agenvoy_cli.conversation.session_list import list_all
        from agenvoy_cli.conversation.sessions import as_dicts
        from agenvoy_cli.conversation.tasks import personas
        from agenvoy_cli.transfer.sources import origins, parents

        docs = as_dicts(list_all(self.store))
        with self.store.read_lock():
            came = origins(self.store.db_readonly())
            started = parents(self.store.db_readonly())
            persona = personas(self.store.db_readonly())
            layout = self._layout_doc()
        for doc in docs:
            doc["source"] = came.get(doc["session_id"])  # where `import` brought it from
            doc["parent"] = started.get(doc["session_id"])  # a sub-agent's session's
            doc["persona"] = persona.get(doc["session_id"])  # Agenvoy 1.0's, else null
        return {"layout": layout, **list_document("sessions", docs)}

    def _layout_doc(self) -> dict[str, Any] | None:
        """Which Agenvoy layout the home's history.db has (home/generation.py); null before
        there is a database, or while it cannot be read. Hold the read lock."""
        from agenvoy_cli.errors import CorruptStore
        from agenvoy_cli.home import generation

        try:
            conn = self.store.db_readonly()
            return None if conn is None else generation.of(conn).as_dict()
        except CorruptStore:  # a damaged or lost archive: doctor reports it as a problem
            return None

    def tasks(self, session_id: str | None, query: str = "", *, since: str | None = None,
              until: str | None = None, range_: str | None = None, limit: int = 20,
              full: bool = False, mode: str | None = None, match: str | None = None,
              budget: float | None = None, warn: Warn | None = None) -> dict[str, Any]:
        """Agenvoy 1.0's finished tasks (action_history) of one session (None: every one)
        in a time window: without `mode`, those holding every word of `query` (in the
        objective, the tools' results or the reply), newest first; with `mode` (keyword,
        semantic, hybrid) those related to `query` by the retrieval pipeline, best first,
        each with its rank, score and score_kind (`budget`: at most this many seconds
        embedding tasks without a vector first). A home older than 1.0 has none ("layout"
        says which it is)."""
        from agenvoy_cli.conversation.tasks import find
        from agenvoy_cli.timespec import window

        lo, hi = window(range_, since, until)
        with self.store.read_lock():
            if session_id is not None:
                self.store.require(session_id)
            conn = self.store.db_readonly()
            found = [] if mode is not None else find(
                conn, session_id, query.split(), since_ns=lo, until_ns=hi, limit=limit)
            layout = self._layout_doc()
        head = {"session_id": session_id, "query": query, "layout": layout}
        if mode is None:
            return {**head, **list_document("tasks", [t.as_dict(full) for t in found])}
        from agenvoy_cli.search.task_corpus import search_tasks

        doc = search_tasks(self.store, session_id, query, mode, limit=limit, window=(lo, hi),
                           match=match, budget=budget, full=full,
                           relevance=None if mode == "keyword" else self.relevance,
                           **_warn(warn))
        return {**head, **{k: v for k, v in doc.items() if k != "tasks"},
                **list_document("tasks", doc["tasks"])}

    def session(self, session_id: str) -> dict[str, Any]:
        """One session with its archive row_count, trim point, path, where `import` brought
        it from (source), the session that started it (parent: a sub-agent's) and what the
        requests it was imported from carried beside their messages (requests: model,
        tools, tool_choice...), NotFound."""
        from agenvoy_cli.conversation import session_list, sessions
        from agenvoy_cli.conversation.tasks import personas
        from agenvoy_cli.transfer.sources import origins, parents, requests

        store = self.store
        with store.read_lock():
            store.require(session_id)
            info = session_list.session_documents(store, only=session_id)[0]
            start_seq, start_at = store.trim_point(session_id)
            info["row_count"] = sessions.archive_rows(store.db_readonly(), session_id)
            info["trim_point"] = {"start_seq": start_seq, **moment("start", start_at or None)}
            info["path"] = str(store.layout.session_dir(session_id))
            info["source"] = origins(store.db_readonly()).get(session_id)
            info["parent"] = parents(store.db_readonly()).get(session_id)
            info["requests"] = requests(store.db_readonly(), session_id)
            info["persona"] = personas(store.db_readonly(), session_id).get(session_id)
            info["layout"] = self._layout_doc()
        return info

    def compact(self, session_id: str | None = None,
                max_bytes: int | None = None) -> dict[str, Any]:
        """Trim a session's history.json (None: every session, under "sessions") to 80% of
        `max_bytes` (max_history_bytes); the archive keeps every message."""
        if session_id is not None:
            self.store.require(session_id)
            return self.store.compact(session_id, max_bytes).as_dict()
        return list_document("sessions", [self.store.compact(sid, max_bytes).as_dict()
                                    for sid in self.store.session_ids()])

    def backfill(self, session_id: str | None = None, *, vectors: bool = False,
                 rebuild: bool = False, progress: Progress | None = None) -> dict[str, Any]:
        """Write every history.json message SQLite lacks into SQLite (None: every session,
        which may also start a new archive where one was lost); `vectors` also (re)builds
        the vector index of the recent part, `rebuild` drops that index first."""
        store = self.store
        if session_id is not None:
            store.require(session_id)
        ids = [session_id] if session_id is not None else store.session_ids()
        if rebuild:
            from agenvoy_cli.vectors import api as vector_index

            with store.write_lock():
                vector_index.drop_index(store, vector_index.MESSAGES)
        results: list[dict[str, Any]] = []
        if session_id is None and ids:
            from agenvoy_cli.home.salvage import lost_archive

            if lost_archive(store.layout):  # every session's backfill rebuilds a lost archive
                with store.write_lock():
                    store.db(new_archive=True)
        for done, sid in enumerate(ids, 1):
            with store.write_lock():
                synced = store.align(sid)
            results.append({"session_id": sid, "inserted": synced.inserted})
            if progress is not None and not vectors:
                progress(done, len(ids))
        if vectors:  # the work that takes time: its progress is in messages
            from agenvoy_cli.search.catchup import index_session, pending_vectors

            todo = {sid: pending_vectors(store, sid) if progress else 0 for sid in ids}
            total, base = sum(todo.values()), 0
            for row in results:
                sid = row["session_id"]

                def step(n: int, _: int, base: int = base) -> None:
                    if progress is not None:
                        progress(base + n, max(total, base + n))

                row["embedded"] = index_session(store, sid, step, full=True)  # repairs
                base += max(todo[sid], row["embedded"])
        doc = {**list_document("sessions", results),
               "inserted": sum(r["inserted"] for r in results)}
        if vectors:
            doc["embedded"] = sum(r["embedded"] for r in results)
        return doc

    def forget(self, session_id: str, seqs: Sequence[int] = (), match: str | None = None, *,
               dry_run: bool = False, warn: Warn | None = None) -> dict[str, Any]:
        """Remove messages (by seq, or every one containing `match`) from history.json,
        the archive and the vectors, from all of them or (an error says so) from none; the
        summary is not rewritten (see "notes")."""
        from agenvoy_cli.conversation.forget import forget_messages
        from agenvoy_cli.conversation.history_format import sender
        from agenvoy_cli.home.layout import validate_name

        validate_name(session_id)
        result = forget_messages(self.store, session_id, tuple(seqs), match, dry_run=dry_run,
                                 warn=warn)
        messages = [{"seq": m.seq, "role": m.role, **moment("sent", m.send_at),
                     "sender": sender(m.raw) or None, "content": m.body}
                    for m in result.messages]
        return {"session_id": session_id, "dry_run": result.dry_run,
                **list_document("messages", messages),
                "forgotten": 0 if result.dry_run else len(messages),
                "removed_from_history": result.from_history, "notes": [FORGET_NOTE]}

    def summarize(self, session_id: str | None = None, *, dry_run: bool = False,
                  llm_command: str | None = None, max_chunks: int | None = None,
                  warn: Warn | None = None) -> dict[str, Any]:
        """Fold the messages after a session's cursor into its summary.json through the
        configured LLM (None: every pending session; a failure there does not stop the
        others). Each session: status, chunk_count, summarized, cursor_at, error and the
        exit_code it alone would give; `dry_run`: the requests, nothing called."""
        from agenvoy_cli.conversation.summarizer import (
            SessionResult,
            pending_sessions,
            summarize_session,
        )
        from agenvoy_cli.conversation.summarizer import dry_run as plan
        from agenvoy_cli.errors import AgenvoyError
        from agenvoy_cli.home.layout import validate_name
        from agenvoy_cli.models.llm import LLMConfig, NotConfigured, load_config, make_client

        store, pending = self.store, session_id is None
        if session_id is not None:
            validate_name(session_id)
        try:
            config = load_config(store.settings, llm_command)  # before anything is touched
        except NotConfigured:
            if not dry_run:
                raise
            config = LLMConfig()  # a dry run only plans: no endpoint needed
        if session_id is not None:
            with store.read_lock():
                store.require(session_id)
        ids = pending_sessions(store) if session_id is None else [session_id]
        client = make_client(config)
        out = []
        for sid in ids:
            try:
                if dry_run:
                    result = plan(store, sid, config, max_chunks=max_chunks)
                else:
                    result = summarize_session(store, sid, config, client, wait=not pending,
                                               max_chunks=max_chunks, progress=warn)
            except AgenvoyError as exc:  # one damaged session must not stop the others
                if not pending:
                    raise
                result = SessionResult(sid, "failed", error=str(exc), exit_code=exc.exit_code)
            out.append(result.as_dict())
        return list_document("sessions", out)

    def reset_session(self, session_id: str, *, summarize: bool = True,
                      llm_command: str | None = None, warn: Warn | None = None
                      ) -> dict[str, Any]:
        """Delete history.json, Agenvoy's history/, pending/, action.log, the archive rows
        and vectors; keep summary.json. With `summarize` (upstream's order) the summary
        first folds in what it has not seen; if that fails nothing changes."""
        return self._clear(session_id, remove=False, summarize=summarize,
                           llm_command=llm_command, warn=warn)

    def reset_all(self, session_id: str) -> dict[str, Any]:
        """reset_session, and summary.json and summary.meta.json too (Agenvoy's ResetAll)."""
        return self._clear(session_id, remove=False, summarize=False, summary=True)

    def remove_session(self, session_id: str) -> dict[str, Any]:
        """Delete the whole session: its folder (summary too), archive rows, vectors."""
        return self._clear(session_id, remove=True, summarize=False)

    def _clear(self, session_id: str, *, remove: bool, summarize: bool,
               llm_command: str | None = None, warn: Warn | None = None,
               summary: bool = False) -> dict[str, Any]:
        from agenvoy_cli.conversation.reset import clear_session, reset_with_summary
        from agenvoy_cli.home.layout import validate_name

        validate_name(session_id)
        self.store.require(session_id)
        if not summarize:
            raw = {**clear_session(self.store, session_id, remove=remove, summary=summary),
                   "summary": None}
        else:
            from agenvoy_cli.models.llm import NotConfigured, load_config, make_client

            config: Any = None
            try:
                config = load_config(self.store.settings, llm_command)
            except NotConfigured:
                pass  # fine when the summary has seen everything; else refused
            client = None if config is None else make_client(config)
            raw = reset_with_summary(self.store, session_id, config, client, remove=remove,
                                     progress=warn)
        kept = raw.get("summary")
        return {"session_id": session_id, "action": raw["action"],
                "history_deleted": raw["history_deleted"], "deleted": raw["rows_deleted"],
                "deleted_files": list(raw["agent_files_deleted"]),
                "has_summary": bool(raw["summary_kept"]),
                "summary": kept}

    def action_log(self, session_id: str, *, limit: int | None = None,
                   task_id: str | None = None) -> list[Run] | None:
        """Agenvoy v0.32's action log of a session (conversation/action_log.py): its
        finished runs, newest first, each with its record read (or its `problem`: why it
        cannot be), the first `limit` of them, or the first of `task_id`; None when the
        session has no action log (v0.32 keeps one in sessions/<id>/history/)."""
        from agenvoy_cli.conversation import action_log

        found = action_log.runs(self.store.layout.action_log(session_id))
        if found is None:
            return None
        if task_id is not None:
            found = [r for r in found if r.task_id == task_id][:1]
        return [action_log.read(r) for r in found[:limit]]

    def doctor(self, session_id: str | None = None, *, repair: bool = False
               ) -> dict[str, Any]:
        """Check the home's invariants (one session, or all); `repair` fixes what can be
        fixed from what is on disk. "remaining": the problems left (0: healthy);
        "kept_aside": damaged files a repair kept (path, bytes, remove_with);
        "vector_paths": per vector collection checked, how it is searched ("exact" or
        "hnsw", vectors/exact.py); "tasks": the 1.0 finished tasks' vectors (null without
        them: doctor/tasks.py)."""
        from agenvoy_cli.doctor.checks import kept_aside, run_doctor

        if session_id is not None:
            self.store.require(session_id)
        ids = [session_id] if session_id else self.store.session_ids()
        paths: list[dict[str, Any]] = []
        summary: dict[str, Any] = {}
        problems = [p.as_dict() for p in run_doctor(self.store, ids, repair, paths, summary)]
        with self.store.read_lock():
            layout = self._layout_doc()
        return {"session_count": len(ids), "layout": layout,
                **list_document("problems", problems),
                "remaining": sum(1 for p in problems if not p["repaired"]
                                 and not p.get("note")),
                "kept_aside": kept_aside(self.store, ids), "vector_paths": paths,
                "tasks": summary.get("tasks")}

    def import_(self, format: str, paths: Sequence[str], *, session: str | None = None,
                dry_run: bool = False, strict: bool = False, sidechains: str = "apart",
                progress: Progress | None = None, now: bool = False) -> dict[str, Any]:
        """Import histories (auto, claude-code, codex, chatgpt, openai, agenvoy) into
        sessions, exactly once and incrementally; nothing is embedded (backfill --vectors
        catches up). Per source: session_id, status, added, skipped and the first reasons;
        "complete" when every source was read whole, "sessions_written". `now`: a message
        its writer may still be adding to is taken as it is (the turn has ended).
        progress(bytes read, bytes in all) as it goes."""
        from agenvoy_cli.transfer.service import import_

        return import_(self.store, format, list(paths), session=session, dry_run=dry_run,
                       strict=strict, sidechains=sidechains, progress=progress, now=now)

    def export(self, session_ids: Sequence[str] = (), *, all_sessions: bool = False,
               format: str = "jsonl", output: str | None = None) -> dict[str, Any]:
        """Export sessions as lossless JSON Lines (import format `agenvoy`) or Markdown
        (one file a session in the folder `output`); never inside the home."""
        from agenvoy_cli.transfer.service import export

        return export(self.store, list(session_ids), all_sessions=all_sessions, fmt=format,
                      output=output)

    # -- error memory ---------------------------------------------------------------------

    def lookup_errors(self, query: str = "", *, tool: str | None = None,
                      error_type: str | None = None, limit: int | None = None,
                      semantic: bool | None = None, warn: Warn | None = None,
                      budget: float | None = None) -> dict[str, Any]:
        """Error records related to an error text (best first), and the hint to inject into
        the agent's next turn: only records that describe the same failure clear the hint
        bar ("" and the note `not_related` when none does). Renews the returned records.
        `budget`: at most this many seconds embedding records that lack a vector first."""
        from agenvoy_cli.errormem.ranking import lookup

        options: dict[str, Any] = {"tool": tool, "error_type": error_type,
                                   "semantic": semantic, "budget": budget}
        if limit is not None:
            options["limit"] = limit
        if warn is not None:
            options["warn"] = warn
        result = lookup(self.store, query, **options)
        return {**list_document("records", [h.as_dict() for h in result.hits]),
                "hint": result.hint, "mode": result.mode, "match": result.match,
                "unindexed_count": result.unindexed_count,
                "notes": [n.as_dict() for n in result.notes]}

    def record_error(self, tool_name: str, keywords: Sequence[str], symptom: str,
                     action: str, outcome: str, cause: str | None = None, *,
                     semantic: bool | None = None, warn: Warn | None = None
                     ) -> dict[str, Any]:
        """Remember a tool failure and its outcome (resolved, failed or abandoned)."""
        from agenvoy_cli.errormem.records import make_draft

        draft = make_draft(tool_name, list(keywords), symptom, cause, action, outcome)
        return self.record_errors([draft], semantic=semantic, warn=warn)

    def record_errors(self, drafts: Sequence[Any], *, semantic: bool | None = None,
                      warn: Warn | None = None) -> dict[str, Any]:
        """Record several drafts (errormem.make_draft / drafts_from_json) at once."""
        from agenvoy_cli.errormem.store import record

        options: dict[str, Any] = {"semantic": semantic}
        if warn is not None:
            options["warn"] = warn
        records = record(self.store, list(drafts), **options)
        return list_document("records", [r.as_dict() for r in records])

    def errors(self, *, tool: str | None = None, outcome: str | None = None,
               error_type: str | None = None, limit: int | None = None) -> dict[str, Any]:
        """Live error records, newest first (listing does not renew them)."""
        from agenvoy_cli.errormem.store import list_records

        return list_document("records", [r.as_dict() for r in list_records(
            self.store, tool=tool, outcome=outcome, error_type=error_type, limit=limit)])

    def error(self, record_id: str) -> dict[str, Any]:
        """One record by id or a unique prefix of at least 6 digits (NotFound)."""
        from agenvoy_cli.errormem.store import get

        return get(self.store, record_id).as_dict()

    def forget_error(self, record_id: str, *, warn: Warn | None = None) -> dict[str, Any]:
        """Delete one error record and its vector."""
        from agenvoy_cli.errormem.store import forget

        gone = forget(self.store, record_id, **_warn(warn))
        return {"record_id": gone.id, "forgotten": 1}

    def prune_errors(self, *, dry_run: bool = False, warn: Warn | None = None
                     ) -> dict[str, Any]:
        """Remove expired records and their vectors (they are never returned anyway)."""
        from agenvoy_cli.errormem.store import prune

        gone = prune(self.store, dry_run=dry_run, **_warn(warn))
        return {**list_document("records", [r.as_dict() for r in gone]), "dry_run": dry_run,
                "pruned": 0 if dry_run else len(gone)}

    # -- knowledge notes ------------------------------------------------------------------
    # Every call first takes in the home's legacy knowledge/*.md once (notes/files.py), as
    # Agenvoy migrates them at start.

    def _legacy(self, warn: Warn | None) -> None:
        from agenvoy_cli.notes.files import take_legacy

        take_legacy(self.store, **_warn(warn))

    def notes(self, *, warn: Warn | None = None) -> dict[str, Any]:
        """Every knowledge note (name, bytes, created_at, updated_at, source), by name."""
        from agenvoy_cli.notes.store import list_notes

        self._legacy(warn)
        return list_document("knowledge_notes",
                             [n.as_dict(content=False) for n in list_notes(self.store)])

    def note(self, name: str, *, warn: Warn | None = None) -> dict[str, Any]:
        """One note with its content (NotFound)."""
        from agenvoy_cli.notes.store import get

        self._legacy(warn)
        return get(self.store, name).as_dict()

    def add_note(self, content: str, name: str | None = None, *, replace: bool = False,
                 source: str = "", warn: Warn | None = None) -> dict[str, Any]:
        """Save a note; without a name it is named after its content's first line (Agenvoy's
        rules: at most 32 characters, no path separator or glob character, no leading dot).
        An existing name is refused (BadInput) unless `replace`. "action": added | replaced
        | unchanged."""
        from agenvoy_cli.notes.names import check_content, note_name
        from agenvoy_cli.notes.store import save

        check_content(content)
        key = note_name(name, content)
        self._legacy(warn)
        note, action = save(self.store, key, content, replace=replace, source=source,
                            **_warn(warn))
        return {**note.as_dict(), "action": action}

    def note_from_message(self, session_id: str, seq: int, name: str | None = None, *,
                          replace: bool = False, warn: Warn | None = None) -> dict[str, Any]:
        """Save an archived message's text (its time header left out) as a note, named
        after its first line unless `name` is given (as Agenvoy's web UI saves a reply)."""
        from agenvoy_cli.conversation import archive
        from agenvoy_cli.conversation.messages import content_text, strip_header
        from agenvoy_cli.errors import BadInput, NotFound
        from agenvoy_cli.home.layout import validate_name

        validate_name(session_id)
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < 2**63:
            raise BadInput(f"SEQ must be a message's place (an integer from 0 to 2^63-1), "
                           f"got {seq!r}")
        conn = self.store.db_readonly()
        rows = []
        if conn is not None:
            with self.store.read_lock():
                conn = self.store.db_readonly()
                rows = archive.rows_from(conn, session_id, seq, seq + 1) if conn else []
        if not rows:
            raise NotFound(f"session {session_id!r} has no archived message {seq}")
        text = strip_header(content_text(rows[0].raw.get("content"))).strip("\n")
        if not text.strip():
            raise BadInput(f"message {seq} of {session_id!r} has no text to save")
        return self.add_note(text, name, replace=replace, source=f"{session_id}#{seq}",
                             warn=warn)

    def edit_note(self, name: str, content: str | None = None, *, rename: str | None = None,
                  replace: bool = False, expect: str | None = None,
                  warn: Warn | None = None) -> dict[str, Any]:
        """Change a note's content and/or name (NotFound; a new name that exists is refused
        unless `replace`). "action": replaced | renamed | unchanged. `expect`: the content
        the change was made from (an editor's); a note changed since is refused."""
        from agenvoy_cli.errors import BadInput
        from agenvoy_cli.notes.names import check_content, check_name, note_name
        from agenvoy_cli.notes.store import get, save

        key = check_name(name)
        if content is not None:
            check_content(content)
        if rename is not None and not rename.strip():
            raise BadInput("the new name is empty")
        self._legacy(warn)
        old = get(self.store, key)
        body = old.content if content is None else content
        target = key if rename is None else note_name(rename, body)
        note, action = save(self.store, target, body, replace=replace or target == key,
                            rename_from=key if target != key else None, expect=expect,
                            **_warn(warn))
        return {**note.as_dict(), "action": action, "renamed_from": key if target != key
                else None}

    def remove_note(self, name: str, *, warn: Warn | None = None) -> dict[str, Any]:
        """Delete a note everywhere it lives: its vectors, its row and its full-text entry."""
        from agenvoy_cli.notes.store import remove

        self._legacy(warn)
        gone = remove(self.store, name, **_warn(warn))
        return {"name": gone.name, "removed": 1}

    def search_notes(self, query: str, *, mode: str = "hybrid", limit: int = 5,
                     match: str | None = None, budget: float | None = None,
                     range: str = "all", since: str | None = None, until: str | None = None,
                     warn: Warn | None = None) -> dict[str, Any]:
        """Notes related to a query, best first, each with a snippet: keyword, semantic or
        hybrid (default). `budget`: at most this many seconds embedding notes that have no
        vector yet first (None: all). `range`, `since`, `until` (as search's): only the
        notes last changed (written, edited or replaced) in that window."""
        from agenvoy_cli.notes.search import search_notes
        from agenvoy_cli.timespec import window

        span = window(range, since, until)
        self._legacy(warn)
        return search_notes(self.store, query, mode, limit=limit, match=match, budget=budget,
                            relevance=None if mode == "keyword" else self.relevance,
                            window=span, **_warn(warn)).as_dict()

    def note_named(self, name: str, *, warn: Warn | None = None) -> dict[str, Any] | None:
        """The note of exactly that name, no name rules applied (Agenvoy's find_knowledge
        mode=read), with its content; None when there is none."""
        from agenvoy_cli.notes.store import lookup

        self._legacy(warn)
        note = lookup(self.store, name)
        return None if note is None else note.as_dict()

    def note_names(self, *, warn: Warn | None = None) -> list[str]:
        """Every note's name, bytewise sorted (Agenvoy's find_knowledge mode=list)."""
        return [n["name"] for n in self.notes(warn=warn)["knowledge_notes"]]

    def notes_holding(self, keywords: Sequence[str], limit: int = 0, *,
                      warn: Warn | None = None) -> dict[str, Any]:
        """Agenvoy's find_knowledge mode=search: notes whose name or content holds a keyword
        as a case-insensitive substring, with how many keywords each holds ("hits"), most
        first; `limit` outside 1..20 is 5."""
        from agenvoy_cli.notes.search import substring_search
        from agenvoy_cli.notes.store import list_notes

        self._legacy(warn)
        hits = substring_search(list_notes(self.store), list(keywords), limit)
        return list_document("results", [{"name": n.name, "hits": h} for n, h in hits])

    def export_notes(self, directory: str, *, warn: Warn | None = None) -> dict[str, Any]:
        """Every note as DIRECTORY/NAME.md (never inside the home)."""
        from agenvoy_cli.notes.files import export

        self._legacy(warn)
        files = export(self.store, directory)
        return {"directory": str(directory), **list_document("files", files)}

    def note_count(self) -> int:
        """How many notes the home has (its legacy knowledge/*.md not taken in yet too),
        without writing anything: whether to follow Agenvoy's rule and ask them first."""
        from agenvoy_cli.notes.files import note_count

        return note_count(self.store)

    # -- document RAG ---------------------------------------------------------------------

    def rag_databases(self) -> dict[str, Any]:
        """Every RAG database with its file and chunk counts, size and last sync."""
        from agenvoy_cli import rag

        return list_document("databases", rag.list_databases(self.store))

    def rag_search(self, query: str, databases: Sequence[str] | None = None, *,
                   mode: str = "hybrid", limit: int = 8, match: str | None = None,
                   range: str = "all", since: str | None = None,
                   until: str | None = None) -> dict[str, Any]:
        """Search the named RAG databases (None: all of them): hybrid, keyword, semantic;
        match ("all" | "any", keyword): every term or any term (default: by query length);
        `range`, `since`, `until` (as search's): only the chunks of documents last
        modified (the file's mtime at its sync) in that window."""
        from agenvoy_cli import rag
        from agenvoy_cli.timespec import window

        span = window(range, since, until)
        return rag.search(self.store, None if databases is None else list(databases),
                          query, mode, limit=limit, match=match,
                          relevance=None if mode == "keyword" else self.relevance,
                          window=span).as_dict()

    def rag_create(self, name: str, paths: Sequence[str] = (), *, index: bool = True,
                   max_file_bytes: int | None = None, hidden: bool | None = None,
                   vectors: bool | None = None, progress: Progress | None = None,
                   announce: Callable[[int, int, bool], None] | None = None
                   ) -> dict[str, Any]:
        """Create the database `name` bound to `paths`, and index them now (`index`).
        vectors=False: keyword search only (fast); embed later with rag_sync(vectors=True)."""
        from agenvoy_cli import rag

        db = rag.create(self.store, name, list(paths), max_file_bytes=max_file_bytes,
                        hidden=hidden, vectors=vectors)
        doc: dict[str, Any] = {"database": db.name, "action": "created",
                               "paths": [s.path for s in db.sources]}
        if paths and index:
            doc["sync"] = self.rag_sync(name, progress=progress, announce=announce)
        return doc

    def rag_sync(self, name: str, paths: Sequence[str] | None = None, *,
                 max_file_bytes: int | None = None, hidden: bool | None = None,
                 rebuild: bool = False, vectors: bool | None = None,
                 progress: Progress | None = None,
                 announce: Callable[[int, int, bool], None] | None = None) -> dict[str, Any]:
        """Re-index what changed and drop what was deleted (`paths`: add them first)."""
        from agenvoy_cli import rag

        return rag.sync(self.store, name, None if paths is None else list(paths),
                        max_file_bytes=max_file_bytes, hidden=hidden, rebuild=rebuild,
                        vectors=vectors, progress=progress, announce=announce).as_dict()

    def rag_files(self, name: str, *, skipped: bool = False) -> dict[str, Any]:
        """The files of a database: format, state (and why skipped), bytes, chunk_count."""
        from agenvoy_cli import rag

        info = rag.list_files(self.store, name)
        files = info.pop("files_list")
        if skipped:
            files = [f for f in files if f["state"] == "skipped"]
        return {"database": info["name"], "summary": info, **list_document("files", files)}

    def rag_remove(self, name: str) -> dict[str, Any]:
        """Delete a database: its rows and vectors (the files themselves are untouched)."""
        from agenvoy_cli import rag

        return rag.remove(self.store, name)


FORGET_NOTE = "summary.json is not rewritten: it may still mention what was forgotten"


def _warn(warn: Warn | None) -> dict[str, Any]:
    return {} if warn is None else {"warn": warn}
