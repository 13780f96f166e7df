"""doctor: check the invariants of a home, and repair what the files on disk allow."""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from agenvoy_cli.conversation import archive
from agenvoy_cli.conversation.history_view import HistoryView, open_history
from agenvoy_cli.conversation.store import Store
from agenvoy_cli.doctor.report import Problem, Report
from agenvoy_cli.errors import CorruptStore
from agenvoy_cli.home import salvage, sqlite
from agenvoy_cli.home.files import kept_aside as kept_aside_in
from agenvoy_cli.home.files import move_aside, read_json, stale_temp_files


class Doctor(Report):
    # -- the whole home ---------------------------------------------------------------------
    def check_database(self) -> bool:
        lost = salvage.lost_archive(self.store.layout)
        if lost:
            self.report(None, "sqlite", lost, self._allow_rebuild)
            return self.repair
        if not self.store.layout.db.exists():
            return True
        try:
            conn = self.store.db()
            result = conn.execute("PRAGMA quick_check").fetchone()[0]
        except CorruptStore as exc:  # damage SQLite proved; a full or failing disk, a lock,
            # a read-only file system raise as they are: nothing here is salvaged for them
            self.report(None, "sqlite", str(exc), self._salvage)
            return self.repair
        if result != "ok":
            self.report(None, "sqlite", f"{self.store.layout.db} is damaged (quick_check: "
                        f"{result.splitlines()[0]})", self._salvage)
            return self.repair
        for table, error in archive.fts_problems(conn):
            self.report(None, "fts", f"{table}: {error}", partial(archive.rebuild_fts, conn, table))
        return True

    def check_leftovers(self) -> None:
        """Files an interrupted write or repair left in the home's own folders: a salvage
        copy, temp files (a session's are checked with the session). Removed by the repair;
        the store lock (held) keeps every writer that could own one out."""
        layout = self.store.layout
        copies = salvage.copies(layout.db)
        if copies:
            names = ", ".join(p.name for p in copies)

            def remove_copy() -> str:
                salvage.remove_copy(layout.db)
                return f"deleted {names}"

            self.report(None, "leftovers", f"{names} left by a salvage that did not finish",
                        remove_copy)
        for folder in (layout.home, layout.store):
            for tmp in stale_temp_files(folder):
                self.report(None, "temp-file", f"{tmp} left by an interrupted write",
                            _deleter(tmp))

    def check_session_folders(self) -> None:
        folder = self.store.layout.sessions
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(folder):
                if not entry.name.startswith(".") and not entry.is_dir(follow_symlinks=False):
                    what = "a symbolic link" if entry.is_symlink() else "not a folder"
                    self.report(None, "sessions", f"{entry.path} is {what}; move it out of "
                                "sessions/")

    # -- one session ------------------------------------------------------------------------
    def check_forget(self, sid: str) -> None:
        """A forget that died half-way: its messages may be gone from some layers only."""
        from agenvoy_cli.conversation import forget

        if sid in forget.pending(self.store):
            self.report(sid, "forget", "a `forget` was interrupted: the messages it was "
                        "removing may still be in some layers (history.json, the archive, "
                        "the vectors)", lambda: forget.finish(self.store, sid))

    def check_session(self, sid: str) -> None:
        store = self.store
        folder = store.layout.session_dir(sid)
        self.check_forget(sid)
        for tmp in stale_temp_files(folder):
            self.report(sid, "temp-file", f"{tmp.name} left by an interrupted write",
                        _deleter(tmp))
        for path in (store.layout.summary(sid), store.layout.summary_meta(sid)):
            try:
                read_json(path, default=None)
            except CorruptStore as exc:
                self.report(sid, path.name, str(exc),
                            lambda path=path: f"moved aside to {move_aside(path).name}")
        try:
            history = open_history(store.layout.history(sid), sid)  # a view when big
        except CorruptStore as exc:
            self.report(sid, "history.json", str(exc), lambda: self._rebuild_history(sid))
            return
        if not store.layout.db.exists():
            if history.messages:
                self.report(sid, "archive", f"{len(history.messages)} message(s) of history.json "
                            "are not in SQLite (no database)", lambda: self._realign(sid))
            return
        from agenvoy_cli.doctor.conversation import check_archive, check_archive_big

        before = len(self.problems)
        if isinstance(history.messages, HistoryView):  # too big to hold: bounded memory
            check_archive_big(self, sid, history)
        else:
            check_archive(self, sid, history)
        rows = archive.session_rows(store.db(), sid)
        if len(self.problems) == before:  # the archive repairs record the row themselves
            self.check_stats(sid, history, rows.start_seq or 0)
        from agenvoy_cli.doctor.tool_pairs import check_tool_pairs

        check_tool_pairs(self, sid)
        self.check_vectors(sid, rows.start_seq or 0, rows.next_seq)

    def check_stats(self, sid: str, history: Any, start: int) -> None:
        """The session's row in session_stats against the file it describes. A row that
        does not describe this file (another program wrote it) is only refreshed."""
        from agenvoy_cli.conversation import sessions

        conn = self.store.db()
        row = sessions.rows(conn, sid).get(sid)  # not the whole table per session
        count = len(history.messages)
        want = sessions.expected(conn, sid, history.path, count, start)

        def refresh() -> str:
            with self.store.transaction() as c:
                sessions.write_stats(c, sid, history.path, count, start, size=history.size)
            return "session row rewritten from history.json"

        if row is not None and (row.hist_ino, row.hist_mtime_ns) == (want[3], want[4]) and \
                row.bytes == want[1] and tuple(row[:3]) != want[:3]:
            self.report(sid, "session-stats", f"the session table says {row.messages} "
                        f"message(s), {row.bytes} bytes; history.json has {count}", refresh)
        elif self.repair and (row is None or tuple(row[:5]) != want):
            refresh()

    def check_vectors(self, sid: str, start_seq: int, next_seq: int) -> None:
        if self.vectors_usable:
            from agenvoy_cli.doctor import vectors

            vectors.check_session(self, sid, start_seq, next_seq)

    def check_error_memory(self) -> None:
        from agenvoy_cli.errormem.vector_sync import check_error_index, repair_error_index
        from agenvoy_cli.vectors.location import has_vectors

        if has_vectors(self.store) and not self.vectors_usable:
            return  # reported (and not repaired) by the vector check

        problems = check_error_index(self.store)
        if not problems:
            return
        done: list[str] = []

        def repair() -> str:
            done.extend(repair_error_index(self.store))
            return "; ".join(done) or "nothing to do"

        for i, detail in enumerate(problems):
            # one repair fixes them all: run it once, report it on the first line
            self.report(None, "error-memory", detail,
                        repair if i == 0 else (lambda: "repaired with the line above"))

    def check_embedder(self) -> None:
        """Say when the configured embedder has no calibration profile (models/profiles.py):
        searches work, without the relevance floor and the fitted ranking. Said for a home
        with vectors, where searches by meaning run. Loads no model."""
        from agenvoy_cli.models.embedders import DEFAULT_SPEC
        from agenvoy_cli.models.profiles import uncalibrated

        spec = self.store.settings.embedder or DEFAULT_SPEC
        why = uncalibrated(spec, self.store.settings.search_floor is not None)
        if why is not None:
            self.report(None, "embedder", why, note=True)

    def check_notes(self) -> None:
        from agenvoy_cli.notes.vector_sync import check_note_index, repair_note_index
        from agenvoy_cli.vectors.location import has_vectors

        if has_vectors(self.store) and not self.vectors_usable:
            return  # reported (and not repaired) by the vector check
        problems = check_note_index(self.store)
        done: list[str] = []

        def repair() -> str:
            done.extend(repair_note_index(self.store))
            return "; ".join(done) or "nothing to do"

        for i, detail in enumerate(problems):  # one repair fixes them all, as above
            self.report(None, "notes", detail,
                        repair if i == 0 else (lambda: "repaired with the line above"))

    # -- repairs ----------------------------------------------------------------------------
    def _allow_rebuild(self) -> str:
        self.store.db(new_archive=True)
        return "the archive is rebuilt from history.json (session checks below)"

    def _salvage(self) -> str:
        """Every readable row into a fresh history.db; the damaged file kept aside. A
        salvage that fails (a full disk) leaves the damaged file where it was and no copy."""
        store = self.store
        db = store.layout.db
        store.close()
        fresh = salvage.salvage_path(db)
        salvage.remove_copy(db)
        try:
            salvage.keep_upstream_schema(db, fresh)  # a 1.0 home stays one
            conn = sqlite.connect(fresh, store.settings.lock_timeout)
            try:
                counts = salvage.copy_rows(db, conn)
            finally:
                conn.close()
            kept = salvage.replace_damaged(db, fresh)
        except BaseException:
            salvage.remove_copy(db)
            raise
        store.db(new_archive=True)
        saved = ", ".join(f"{n} of {'?' if claimed is None else claimed} {table}"
                          for table, (n, claimed) in counts.items() if n or claimed)
        return f"salvaged the readable rows into a fresh history.db ({saved or 'no rows'}); " \
               f"the damaged file is {kept.name}"

    def _realign(self, sid: str) -> str:
        from agenvoy_cli.doctor.conversation import realign

        return realign(self, sid)

    def _rebuild_history(self, sid: str) -> str:
        from agenvoy_cli.doctor.conversation import rebuild_history

        return rebuild_history(self, sid)


def _deleter(path: Path) -> Callable[[], str]:
    def delete() -> str:
        path.unlink(missing_ok=True)
        return f"deleted {path.name}"
    return delete


def kept_aside(store: Store, session_ids: list[str]) -> list[dict[str, Any]]:
    """Damaged files and directories a repair moved aside (`<name>.damaged-<time>`): kept
    for you to look at, never deleted by this program; each with its size and the command
    that removes it."""
    layout = store.layout
    folders = [layout.home, layout.store]
    for sid in session_ids:
        with contextlib.suppress(CorruptStore):
            folders.append(layout.session_dir(sid))
    out = []
    for folder in folders:
        for path in kept_aside_in(folder):
            size = _size(path)
            how = f"rm -r {shlex.quote(str(path))}" if path.is_dir() else \
                f"rm {shlex.quote(str(path))}"
            out.append({"path": str(path), "bytes": size, "remove_with": how})
    return out


def _size(path: Any) -> int:
    if not path.is_dir():
        return int(path.lstat().st_size)
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def run_doctor(store: Store, session_ids: list[str], repair: bool,
               paths: list[dict[str, Any]] | None = None,
               summary: dict[str, Any] | None = None) -> list[Problem]:
    """The problems found (repaired when `repair`); `paths` receives how each vector
    collection checked is searched (Report.vector_paths); `summary` the finished tasks'
    vectors under "tasks" (doctor/tasks.py; None without 1.0 tasks)."""
    doctor = Doctor(store, repair)
    doctor.vector_paths = paths if paths is not None else []
    if not session_ids and not store.layout.db.exists():
        return []  # an empty home: nothing to check, and checking must not create it
    with store.write_lock():
        doctor.check_leftovers()
        doctor.check_session_folders()
        if doctor.check_database():
            from agenvoy_cli.doctor import vectors
            from agenvoy_cli.vectors.location import has_vectors

            doctor.vectors_usable = vectors.check_home(doctor, session_ids)
            for sid in session_ids:
                doctor.check_session(sid)
            from agenvoy_cli.conversation.forget import pending

            for sid in pending(store):  # of a session that is gone since
                if sid not in session_ids and not store.exists(sid):
                    doctor.check_forget(sid)
            doctor.check_error_memory()
            doctor.check_notes()
            if not has_vectors(store) or doctor.vectors_usable:
                from agenvoy_cli.doctor.tasks import check

                (summary if summary is not None else {})["tasks"] = check(doctor)
            if doctor.vectors_usable:
                doctor.check_embedder()
    return doctor.problems
