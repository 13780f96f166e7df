"""The Store: every read and write of a home goes through here, under the lock."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast

import orjson

from agenvoy_cli.conversation import alignment, archive, session_marks, sessions
from agenvoy_cli.conversation.history import (
    History,
    dump_history,
    load_history,
    read_tail,
    read_window,
    splice_point,
    write_appended,
    write_history,
)
from agenvoy_cli.conversation.history_format import (
    check_sender,
    in_format,
    new_session_format,
    send_at,
    time_ns,
    uses_send_at,
)
from agenvoy_cli.conversation.history_format import validate as validate_record
from agenvoy_cli.conversation.messages import (
    Message,
    assign_times,
    validate_message,
)
from agenvoy_cli.conversation.no_index import NO_INDEX
from agenvoy_cli.errors import (
    AgenvoyError,
    BadInput,
    CorruptStore,
    NotFound,
    disk_error,
    restated,
)
from agenvoy_cli.home import salvage, sqlite
from agenvoy_cli.home.config import load_settings
from agenvoy_cli.home.files import file_identity, link_aside, put_back
from agenvoy_cli.home.layout import Layout, validate_name
from agenvoy_cli.home.locking import Locks
from agenvoy_cli.settings import Settings

if TYPE_CHECKING:  # imported where used: an append pays for neither (#25 speed)
    from agenvoy_cli.conversation.compaction import Compaction


class SyncResult(NamedTuple):
    session_id: str
    start_seq: int
    inserted: int
    seqs: list[int] = []  # noqa: RUF012 - the place of every history.json message
    edited: int = 0
    left: int = 0


class AppendResult(NamedTuple):
    session_id: str
    appended: int
    messages: int
    bytes: int
    backfilled: int
    compaction: Any = None


class IndexHooks(Protocol):
    """What a derived index is told of the Store's changes (agenvoy_cli.vectors.hooks has the
    vector index's; conversation/no_index.py the do-nothing default)."""

    def active(self, store: Store) -> bool:
        """Whether a derived index exists (or is configured) for this home."""

    def preload(self) -> None:
        """Pay slow imports before the store lock is taken (never while holding it)."""

    def before_clear(self, store: Store) -> None:
        """Fail before anything changes when the index is configured but unreachable."""

    def after_trim(self, store: Store, session_id: str, start_seq: int) -> None:
        """history.json was trimmed: entries older than start_seq must go."""

    def after_clear(self, store: Store, session_id: str) -> None:
        """Every entry of the session must go (reset / remove)."""

    def after_change(self, store: Store, session_id: str, seqs: list[int],
                     from_seq: int | None = None) -> None:
        """The messages at these places left history.json, were edited or forgotten (and,
        with from_seq, every place from there on moved): their entries must go (a catch-up
        indexes what is in history.json again)."""


class Store:
    def __init__(self, layout: Layout, settings: Settings | None = None,
                 hooks: IndexHooks | None = None, locks: Locks | None = None) -> None:
        """`locks`: the holder's Locks when this Store may be used under another Store's
        lock on the same home (home/locking.py); by default its own."""
        self.layout = layout
        self.locks = locks or Locks()  # the store locks this Store (and its holder) holds
        self.settings = settings or load_settings(layout)
        self.hooks: IndexHooks = hooks or NO_INDEX
        self._conn: sqlite3.Connection | None = None
        self._ro: sqlite3.Connection | None = None
        self._stale: list[sqlite3.Connection] = []

    # -- locks and connections -------------------------------------------------------------
    @contextlib.contextmanager
    def write_lock(self) -> Iterator[None]:
        """The store lock, exclusive. Every write of the home happens inside it, so here a
        full or failing disk becomes the documented error naming the home, whichever layer
        wrote (an import must never read it as a bad input file)."""
        self._drop_reader()
        try:
            with self.locks.hold(self.layout.lock, self.settings.lock_timeout):
                yield
        except OSError as exc:
            mapped = disk_error(exc, self.layout.home)
            if mapped is None:
                raise
            raise mapped from exc

    def _drop_reader(self) -> None:
        """A reading connection may be immutable (it then never sees later writes): it is
        only good within the lock it was opened under, so a new lock gets a new one."""
        if self._ro is not None and not self.locks.is_held(self.layout.lock):
            self._stale.append(self._ro)  # a caller may still hold it: closed with the Store
            self._ro = None

    def read_lock(self) -> contextlib.AbstractContextManager[None]:
        # Upgrade an old schema first: that needs the write lock, which cannot be taken
        # while this process holds the lock shared. The reading connection itself is opened
        # inside the lock (an immutable one must not outlive a writer's turn).
        self._drop_reader()
        if self._conn is None and self._ro is None:
            with contextlib.suppress(CorruptStore):  # reported where the database is used
                self.db_readonly()
            self._drop_reader()
        return self.locks.hold(self.layout.lock, self.settings.lock_timeout, shared=True)

    def db(self, *, new_archive: bool = False) -> sqlite3.Connection:
        """The writer connection (creates and migrates the database). Hold write_lock. A
        history.db that was lost is not silently replaced by a new, empty one (salvage.py)
        unless `new_archive` (backfill of every session, doctor --repair: the archive is
        rebuilt from history.json)."""
        if self._conn is None:
            self._conn = salvage.open_archive(self.layout, self.settings.lock_timeout,
                                              new_archive=new_archive)
        return self._conn

    def db_readonly(self) -> sqlite3.Connection | None:
        """A read-only connection, or None when there is no database. Never creates files
        (an old schema is upgraded once under the write lock)."""
        if self._conn is not None:
            return self._conn
        if self.locks.is_held(self.layout.lock, exclusive=True) \
                and not sqlite.is_empty(self.layout.db):
            return self.db()  # a writer reads through its own connection
        if self._ro is None:
            if sqlite.is_empty(self.layout.db):
                salvage.refuse_lost(self.layout)  # CorruptStore if lost
                return None
            conn = sqlite.connect(self.layout.db, self.settings.lock_timeout, readonly=True)
            if sqlite.user_version(conn) < sqlite.SCHEMA_VERSION:
                conn.close()
                with self.write_lock():
                    self.db()
                return self._conn
            self._ro = conn
        return self._ro

    def close(self) -> None:
        for conn in (self._conn, self._ro, *self._stale):
            if conn is not None:
                conn.close()
        self._conn = self._ro = None
        self._stale = []

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self.db()
        try:
            with sqlite.transaction(conn):
                yield conn
        except sqlite3.DatabaseError as exc:
            raise sqlite._wrap(exc, self.layout.db) from None

    # -- sessions ----------------------------------------------------------------------------
    def session_ids(self) -> list[str]:
        ids: set[str] = set()
        if self.layout.sessions.is_dir():
            for entry in self.layout.sessions.iterdir():
                with contextlib.suppress(Exception):
                    if entry.is_dir() and not entry.is_symlink():
                        ids.add(validate_name(entry.name))
        try:
            conn = self.db_readonly()
            if conn is not None:
                ids.update(r[0] for r in conn.execute("SELECT DISTINCT session_id FROM messages"))
        except CorruptStore:  # sessions of a damaged archive are still listed from folders
            pass
        return sorted(ids)

    def exists(self, session_id: str) -> bool:
        if self.layout.session_dir(session_id).is_dir():
            return True
        conn = self.db_readonly()
        return conn is not None and conn.execute(
            "SELECT 1 FROM messages WHERE session_id = ? LIMIT 1", (session_id,)
        ).fetchone() is not None

    def require(self, session_id: str) -> None:
        if not self.exists(session_id):
            raise NotFound(f"no session {session_id!r} in {self.layout.home}")

    def history(self, session_id: str) -> History:
        return load_history(self.layout.history(session_id), session_id)

    # -- the dual write ----------------------------------------------------------------------
    def _fallback_ns(self, history: History) -> int:
        return fallback_ns(history)

    def align(self, session_id: str, history: History | None = None, *,
             thorough: bool = False) -> SyncResult:
        """Bring the archive in line with history.json by the identity rule (first backfill,
        Agenvoy's writes, edits by hand, a crash); never a duplicate. thorough: rows before
        the trim point are candidates too. Hold write_lock."""
        from agenvoy_cli.conversation import big_sync
        from agenvoy_cli.conversation.history_view import HistoryView, open_history

        history = history or open_history(self.layout.history(session_id), session_id)
        if isinstance(history.messages, HistoryView) or not thorough:
            # the archived prefix skipped, plain new messages inserted in bulk: the identity
            # rule runs on the rest only (bounded memory for a big file, and ~4x the speed)
            with self.transaction() as conn:
                big = big_sync.sync_big(conn, session_id, history, fallback_ns(history))
            if big.changed or big.renumbered_from is not None:
                self.hooks.after_change(self, session_id, big.changed, big.renumbered_from)
            return SyncResult(session_id, big.start, big.inserted, big.seqs,  # type: ignore[arg-type]
                              big.edited, big.left)
        with self.transaction() as conn:
            alignment.rederive(conn, session_id)
            rows = archive.session_rows(conn, session_id)
            lo = 0 if thorough else (rows.start_seq or 0)
            cands = alignment.candidates(conn, session_id, lo)
            done = alignment.apply(conn, session_id, history.messages, cands, rows.next_seq,
                                   self._fallback_ns(history))
            start = done.seqs[0] if done.seqs else archive.session_rows(conn, session_id).next_seq
            if start != (rows.start_seq or 0) and (done.seqs or rows.has_rows):
                archive.set_start(conn, session_id, start)
            sessions.write_stats(conn, session_id, history.path, len(history.messages), start,
                                 size=history.size)
        if done.left or done.edited or done.renumbered_from is not None:
            self.hooks.after_change(self, session_id, done.left + done.edited,
                                    done.renumbered_from)
        return SyncResult(session_id, start, done.inserted, done.seqs, len(done.edited),
                          len(done.left))

    def holds_lock(self) -> bool:
        return self.locks.is_held(self.layout.lock)

    def _preload_if_compacting(self, session_id: str, new: list[dict[str, Any]]) -> None:
        """When this append will likely compact and a vector index exists, import chromadb
        now, before the lock (compaction deletes old vectors under it)."""
        try:
            size = self.layout.history(session_id).stat().st_size
        except (FileNotFoundError, CorruptStore):
            return
        grows = size + sum(len(str(m.get("content"))) for m in new)
        if grows > self.settings.max_history_bytes and self.hooks.active(self):
            self.hooks.preload()

    def _history_for_append(self, conn: sqlite3.Connection, session_id: str,
                            rows: archive.SessionRows) -> tuple[History, int]:
        """history.json and its message count. When the file is exactly the one we last
        wrote or aligned (same inode, size and mtime as its session_stats row), it is neither
        read nor parsed (messages=[]): the cost of an append must not grow with the history."""
        path = self.layout.history(session_id)
        known = sessions.fingerprint(conn, session_id)
        if known is not None and file_identity(path) == known[0] \
                and not archive.has_foreign_rows(conn, session_id):
            return History(path, [], None), known[1]
        history = load_history(path, session_id)
        return history, len(history.messages)

    def _archive_append(self, session_id: str, rows: archive.SessionRows, start: int,
                        messages: list[dict[str, Any]], history: History, count: int,
                        new_folder: session_marks.NewFolder | None,
                        size: int) -> None:
        """The SQLite half of an append (the caller puts history.json back if it fails)."""
        with self.transaction() as conn:
            archive.insert(conn, session_id, rows.next_seq, messages,
                           self._fallback_ns(history))
            if start != (rows.start_seq or 0):
                archive.set_start(conn, session_id, start)
            sessions.write_stats(conn, session_id, history.path, count, start, new_folder,
                                 size=size)

    @staticmethod
    def _batch_archived(conn: sqlite3.Connection, session_id: str, first: int,
                        count: int) -> bool:
        """Whether an append's archive half committed (its rows are at first.., which no
        one else can fill under the lock). A failure to tell is a no: the old file back."""
        try:
            if conn.in_transaction:
                return False
            got = conn.execute("SELECT count(*) FROM messages WHERE session_id = ? AND "
                               "seq >= ?", (session_id, first)).fetchone()[0]
        except (sqlite3.Error, AgenvoyError, OSError):
            return False
        return bool(got >= count)

    def append(self, session_id: str, messages: list[Any], moment: datetime | None = None,
               *, compact: bool = True, sender: str = "",
               history_format: str | None = None,
               warn: Callable[[str], None] | None = None) -> AppendResult:
        """All of the batch or none of it: validate everything before writing anything.
        Each message is written in the format the session's history.json uses (a header, or
        Agenvoy v0.32's sendAt/sender); a new session follows agenvoy.history_format (or
        history_format: an import restoring a session's own format)."""
        checked = self._checked_batch(session_id, messages, sender)
        limit = self.settings.max_history_bytes
        new_format = history_format or new_session_format(self.settings)
        moment = moment or datetime.now().replace(microsecond=0)
        if compact:
            self._preload_if_compacting(session_id, checked)
        with self.write_lock():
            conn = self.db()
            rows = archive.session_rows(conn, session_id)
            history, count = self._history_for_append(conn, session_id, rows)
            rows, start, backfilled = self._aligned_for_append(conn, session_id, rows,
                                                               history, count)
            exists = history.raw is not None or count > 0
            splice, fmt = self._splice(history) if count else (None, new_format)
            stamped = [in_format(m, moment, fmt, sender) for m in checked]
            new_size = self._write_both(conn, session_id, rows, start, stamped, history,
                                        count, exists, splice)
            total = count + len(stamped)
            trimmed = None
            data_size = new_size
            if compact and new_size > limit:
                trimmed = self._compact_after_append(session_id, limit, warn)
                data_size = trimmed.bytes_after if trimmed else new_size
        return AppendResult(session_id, len(stamped), trimmed.kept if trimmed else total,
                            data_size, backfilled, trimmed)

    def _checked_batch(self, session_id: str, messages: list[Any], sender: str
                       ) -> list[dict[str, Any]]:
        """An append's batch validated whole, before anything is written."""
        validate_name(session_id)
        limit = self.settings.max_history_bytes
        checked = [validate_message(m, i, limit) for i, m in enumerate(messages)]
        if not checked:
            raise BadInput("no messages to append (empty batch)")
        for i, m in enumerate(checked):
            validate_record(m, f"message {i}")
        if sender:
            check_sender(sender, "--sender")
        return checked

    def _aligned_for_append(self, conn: sqlite3.Connection, session_id: str,
                            rows: archive.SessionRows, history: History, count: int
                            ) -> tuple[archive.SessionRows, int, int]:
        """(the session's rows, its start place, messages backfilled): a history.json read
        whole (someone else may have written it) aligns the archive with it first."""
        backfilled = 0
        start = rows.start_seq or 0
        if history.raw is not None or count == 0:
            if history.messages or rows.has_rows:
                synced = self.align(session_id, history)
                backfilled = synced.inserted
                rows = archive.session_rows(conn, session_id)
            start = rows.next_seq if count == 0 else (rows.start_seq or 0)
        return rows, start, backfilled

    @staticmethod
    def _splice(history: History) -> tuple[int, str]:
        """Where the batch goes into a history.json that has messages, and their format:
        the whole file's when read, else that of the tail our last append wrote (sendAt
        last)."""
        size = history.size if history.raw is not None else history.path.stat().st_size
        tail, offset = (history.raw, 0) if history.raw is not None else \
            read_tail(history.path, size)
        splice = splice_point(tail, offset, history.path)
        return splice, "sendat" if uses_send_at(tail) else "header"

    def _write_both(self, conn: sqlite3.Connection, session_id: str,
                    rows: archive.SessionRows, start: int, stamped: list[dict[str, Any]],
                    history: History, count: int, exists: bool, splice: int | None
                    ) -> int:
        """history.json, then the archive: both or neither (the new file's size)."""
        made = not exists and not history.path.parent.is_dir()
        new_folder = session_marks.make_folder(conn, history.path.parent)  # sessions/ marked
        # A hard link to the old file lets a failed append put it back without needing
        # disk space (a full disk is a common reason for the SQLite write to fail).
        previous = link_aside(history.path) if exists else None
        try:
            # Either half failing puts history.json back as it was, also when the new
            # file is in place but its folder's fsync failed (exit 1 must mean: not
            # appended, or a retry would append twice). Had we died instead, the next
            # write or doctor would archive the extra messages.
            new_size = write_appended(history.path, stamped, splice)
            self._archive_append(session_id, rows, start, stamped, history,
                                 count + len(stamped), new_folder, new_size)
        except BaseException:
            # an interruption (Ctrl-C, a hook's time limit) can land right after the
            # archive's COMMIT: the batch is in, and putting the old file back would
            # leave archived messages out of history.json
            if not self._batch_archived(conn, session_id, rows.next_seq, len(stamped)):
                put_back(previous, history.path)
                if made:  # a first append that failed leaves no session behind
                    with contextlib.suppress(OSError):
                        history.path.parent.rmdir()
            raise
        finally:
            if previous is not None:
                previous.unlink(missing_ok=True)
        return new_size

    def _compact_after_append(self, session_id: str, limit: int,
                              warn: Callable[[str], None] | None) -> Compaction | None:
        """The compaction an append over the limit runs. The messages are appended by then
        (acknowledged): a compaction that fails is a warning, never the append's failure (a
        caller told "failed" would append them again); the next append or `agenvoy compact`
        compacts. Every compaction step leaves a state the next one completes."""
        try:
            return self.compact(session_id, limit)
        except (AgenvoyError, OSError, sqlite3.Error) as exc:
            if warn is not None:
                said = restated(exc, self.layout.home, "the next append or `agenvoy compact` "
                                "compacts it")
                warn(f"agenvoy: warning: appended, but history.json was not compacted "
                     f"({said})")
            return None
    def complete_message(self, session_id: str, seq: int, message: dict[str, Any],
                         part_of: Callable[[dict[str, Any], dict[str, Any]], bool]) -> bool:
        """Replace the message at place `seq` by `message`, when the archived one is an
        incomplete form of it (part_of(archived, message)): an import of an older version
        archived a message its writer was still adding to. The row keeps its id and place;
        history.json's entry, while the message is there, is rewritten in the file's format.
        False, nothing changed, when the row at seq is not such a form. Hold write_lock."""
        history = self.history(session_id)
        synced = self.align(session_id, history)
        row = self.db().execute("SELECT id, send_at, role, content, message, gone FROM "
                                "messages WHERE session_id = ? AND seq = ?",
                                (session_id, seq)).fetchone()
        if row is None:
            return False
        rid, at, role, content, raw, gone = row
        if not part_of(orjson.loads(raw) if raw else {"role": role, "content": content},
                       message):
            return False
        checked = validate_message(message, 0, self.settings.max_history_bytes)
        validate_record(checked, "message 0")
        where = synced.seqs.index(seq) if seq in synced.seqs else None
        fmt = "sendat" if where is not None and \
            send_at(history.messages[where]) is not None else "header"
        new = in_format(checked, datetime.fromtimestamp(at // 1_000_000_000), fmt)
        if where is not None:  # history.json first: the next align repairs a crash between
            kept = list(history.messages)
            kept[where] = new
            write_history(history.path, dump_history(kept))
        with self.transaction() as conn:
            archive.replace_edited(conn, rid, session_id, seq,
                                   time_ns(new) or at, new, gone)
        self.hooks.after_change(self, session_id, [seq])
        if where is not None:
            self.align(session_id)  # the rewritten file's identity in session_stats
        return True

    def restore_holes(self, session_id: str) -> int:
        """Put back into history.json the archived messages an interrupted write left out
        of it (conversation/holes.py), at their places; how many. history.json first: the
        align after it (or the next one, after a crash) marks them live again."""
        from agenvoy_cli.conversation import holes

        with self.write_lock():
            history = self.history(session_id)
            conn = self.db()
            found, seqs = holes.find(conn, session_id, history.messages)
            if not found:
                return 0
            write_history(history.path, dump_history(
                holes.merged(conn, session_id, history.messages, seqs, found)))
            self.align(session_id, thorough=True)
        return len(found)

    def compact(self, session_id: str, max_bytes: int | None = None, *,
                force: bool = False) -> Compaction:
        """Trim history.json when over the limit (compaction.compact_session), then drop the
        vectors older than the trim point."""
        from agenvoy_cli.conversation import compaction

        if self.hooks.active(self) and not self.holds_lock():
            self.hooks.preload()
        with self.write_lock():
            done = compaction.compact_session(
                self, session_id, max_bytes or self.settings.max_history_bytes, force=force)
            if done.start_seq is not None:
                self.hooks.after_trim(self, session_id, done.start_seq)
        return done

    # -- reads -------------------------------------------------------------------------------
    def recent(self, session_id: str, history: History | None = None) -> list[Message]:
        """history.json as Messages with their places (by the identity rule, writing nothing)
        and times (archived ones when known: that spares parsing every header)."""
        from agenvoy_cli.conversation.messages import content_text

        history = history or self.history(session_id)
        conn = self.db_readonly()
        msgs = history.messages
        known: list[int | None] = [None] * len(msgs)
        seqs, prev = list(range(len(msgs))), None
        same = alignment.unchanged_places(conn, session_id, history.path, len(msgs)) \
            if conn is not None and msgs else None
        if same is not None:
            seqs, known = [r[0] for r in same], [r[1] for r in same]
        elif conn is not None and msgs:
            rows = archive.session_rows(conn, session_id)
            cands = alignment.candidates(conn, session_id, rows.start_seq or 0)
            seqs, ids = alignment.mapping(msgs, cands, rows.next_seq, conn)
            send_at = {c.id: c.send_at for c in cands}
            known = [send_at.get(i) if i is not None else None for i in ids]
            prev = archive.last_send_at(conn, session_id, min(seqs))
        if any(t is None for t in known):
            guessed = assign_times(msgs, prev, self._fallback_ns(history))
            known = [k if k is not None else g for k, g in zip(known, guessed)]
        times = cast("list[int]", known)  # every message has its time now
        return [Message(seq, t, str(m.get("role")), content_text(m.get("content")), m)
                for seq, t, m in zip(seqs, times, msgs)]

    def context(self, session_id: str, max_messages: int | None = None,
                warn: Any = None) -> list[dict[str, Any]]:
        """What the LLM is fed this turn: the summary as a system message, then the window
        (the last N messages, less the refusals upstream keeps out). A damaged summary.json is
        reported through `warn` and left out: the agent can still talk (the window is intact),
        and `doctor --repair` / `summarize` bring it back."""
        from agenvoy_cli.conversation.provider_messages import for_provider, window_cutoff
        from agenvoy_cli.conversation.summary import context_message, is_refusal, read_summary

        limit = self.settings.max_history_messages if max_messages is None else max_messages
        with self.read_lock():
            self.require(session_id)
            # only the file's tail: the cost follows the window, not the history
            window = read_window(self.layout.history(session_id), session_id, limit)
            try:
                summary = read_summary(self.layout.summary(session_id))
            except CorruptStore as exc:
                if warn is None:
                    raise
                warn(f"agenvoy: warning: {exc}; context sent without the summary")
                summary = None
            # no sendAt/sender keys, broken tool pairs restored from the archive or left out
            kept = for_provider(lambda: corrupt_as_none(self.db_readonly), session_id,
                                [m for m in window if not is_refusal(m)])
        if not summary:
            return kept
        return [context_message(summary, window_cutoff(window)), *kept]

    def archive_rows(self, session_id: str) -> int:
        conn = self.db_readonly()
        if conn is None:
            return 0
        return archive.count_rows(conn, session_id)

    def trim_point(self, session_id: str) -> tuple[int, int]:
        """(start_seq, start_at) of the session; (0, 0) when never trimmed."""
        conn = self.db_readonly()
        if conn is None:
            return 0, 0
        rows = archive.session_rows(conn, session_id)
        return rows.start_seq or 0, rows.start_at


def fallback_ns(history: History) -> int:
    """The time of a message with no time of its own and none before it: the file's mtime."""
    try:
        return history.path.stat().st_mtime_ns
    except OSError:
        return time.time_ns()


def corrupt_as_none(func: Any) -> Any:
    try:
        return func()
    except CorruptStore:
        return None
