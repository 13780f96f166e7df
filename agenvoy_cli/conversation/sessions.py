"""The sessions of a home at a glance, without reading their history.json.

Every writer of history.json records here (table session_stats) what `session list` shows:
message count, size, last message time, with the file's identity (inode, size, mtime) and
the session folder's mtime, which the writer first sets itself to the nanosecond (now). The
row is the one record of the history.json we last wrote or aligned: an append whose file
still has that identity skips reading it (fingerprint; #29). Any
later create, rename or removal in the folder (Agenvoy writes history.json and summary.json
as a temp file renamed into place, as we do) sets the kernel's own, coarser time instead:
while the folder's mtime is still ours the row is trusted with one stat. Otherwise each
history.json and summary.json is stat'ed and the row trusted while their identity matches;
a file another program changed is read, so the answer is right and the cost follows what
changed, not the size of the home. A file rewritten in place (an editor, `>>`) leaves the
folder alone: doctor compares the rows with the files and --repair rewrites them.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from agenvoy_cli.conversation import archive, session_marks
from agenvoy_cli.conversation.session_marks import mark_folder
from agenvoy_cli.errors import BadInput, CorruptStore
from agenvoy_cli.home.files import FileIdentity


class Stats(NamedTuple):
    messages: int
    bytes: int
    last_send_at: int | None
    hist_ino: int | None
    hist_mtime_ns: int | None
    summary: int | None
    sum_size: int | None
    sum_mtime_ns: int | None
    dir_mtime_ns: int | None


_COLUMNS = ", ".join(Stats._fields)
_PLAIN_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.@+=-]{0,199}\Z"  # validate_name accepts it


def _stat(path: Path | str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _summary_state(path: Path, known: tuple[Any, ...] | None
                   ) -> tuple[int | None, int | None, int | None]:
    """(has content 0/1, size, mtime) of summary.json: (0, None, None) when missing, None
    state when damaged. Read only when it is not the file `known` describes (an append must
    stay cheap)."""
    st = _stat(path)
    if st is None:
        return 0, None, None
    if known is not None and known[0] is not None and known[1:] == (st.st_size, st.st_mtime_ns):
        return known[0], known[1], known[2]
    from agenvoy_cli.conversation.summary import read_summary

    try:
        return int(read_summary(path) is not None), st.st_size, st.st_mtime_ns
    except CorruptStore:
        return None, None, None


def expected(conn: sqlite3.Connection, session_id: str, path: Path, count: int,
             start_seq: int) -> tuple[int, int, int | None, int | None, int | None]:
    """(messages, bytes, last_send_at, inode, mtime) of a history.json holding `count`
    messages from place `start_seq` on, all of them archived."""
    st = _stat(path)
    last = archive.send_at_of(conn, session_id, start_seq + count - 1) if count else None
    if st is None:
        return 0, 0, None, None, None
    return count, st.st_size, last, st.st_ino, st.st_mtime_ns


def write_stats(conn: sqlite3.Connection, session_id: str, path: Path, count: int,
           start_seq: int, new_folder: session_marks.NewFolder | None = None, *,
           size: int | None = None) -> None:
    """After a write of history.json (or a sync that read it whole): its row, current. The
    folder is marked first: a change after it shows, whatever the stat below saw. new_folder:
    the mark session_marks.make_folder set when this write created the folder. size: the
    bytes the caller wrote or read; a file of another size now was replaced by someone else
    in between (Agenvoy takes no lock of ours), and the row gets no identity and no folder
    mark, so neither the next append nor `session list` trusts the count it holds."""
    known = conn.execute("SELECT summary, sum_size, sum_mtime_ns, dir_mtime_ns "
                         "FROM session_stats WHERE session_id = ?", (session_id,)).fetchone()
    folder_ns: int | None = mark_folder(path.parent, known[3] if known else None)
    summary = _summary_state(path.with_name("summary.json"), known[:3] if known else None)
    row = expected(conn, session_id, path, count, start_seq)
    if size is not None and row[3] is not None and row[1] != size:
        row, folder_ns = (*row[:3], None, None), None
    conn.execute(f"INSERT OR REPLACE INTO session_stats (session_id, {_COLUMNS}) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 (session_id, *row, *summary, folder_ns))
    if new_folder is not None:  # a folder our append created: sessions/ marked
        session_marks.record_new_folder(conn, new_folder)


def fingerprint(conn: sqlite3.Connection, session_id: str) -> tuple[FileIdentity, int] | None:
    """(identity, messages) of the history.json we last wrote or aligned, all of its
    messages archived then: a file with this identity (home.files.file_identity) needs no
    reading. None: no row, or one that vouches for no file."""
    row = conn.execute("SELECT bytes, hist_ino, hist_mtime_ns, messages FROM session_stats "
                       "WHERE session_id = ?", (session_id,)).fetchone()
    if not row or row[1] is None or row[2] is None:
        return None
    return FileIdentity(row[0], row[1], row[2]), row[3]


def drop(conn: sqlite3.Connection, session_id: str) -> None:
    conn.execute("DELETE FROM session_stats WHERE session_id = ?", (session_id,))
    session_marks.cleared(conn)  # the rows may no longer name every folder


def rows(conn: sqlite3.Connection | None, only: str | None = None) -> dict[str, Stats]:
    """Every session's row (or only `only`'s: one index lookup)."""
    return {sid: Stats._make(row) for sid, row in raw_rows(conn, only).items()}


def raw_rows(conn: sqlite3.Connection | None, only: str | None = None
              ) -> dict[str, tuple[Any, ...]]:
    """rows() as plain tuples (a listing of 10,000 sessions builds no named tuple)."""
    if conn is None:
        return {}
    sql = f"SELECT session_id, {_COLUMNS} FROM session_stats"
    args: tuple[str, ...] = ()
    if only is not None:
        sql, args = sql + " WHERE session_id = ?", (only,)
    try:
        found = conn.execute(sql, args).fetchall()
    except sqlite3.OperationalError:  # a database of another program, not migrated yet
        return {}
    return {r[0]: r[1:] for r in found}


def folder_names(sessions: Path) -> list[str]:
    """Session folders, from the directory entries alone (no stat per entry)."""
    from agenvoy_cli.home.layout import validate_name

    names = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError), \
            os.scandir(sessions) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                name = entry.name
                if re.compile(_PLAIN_NAME).match(name):  # the common case, checked in one step
                    names.append(name)
                    continue
                with contextlib.suppress(BadInput):
                    names.append(validate_name(entry.name))
    return names


# A session as `session list` shows it: (session_id, messages, bytes, last message time in
# UTC ns or None, has a summary, problem or None). as_dicts gives the documents.
Entry = tuple[str, int, int, int | None, bool, str | None]


def from_row(session_id: str, row: tuple[Any, ...] | None, folder: str) -> Entry | None:
    """The entry from the row when the files are those it describes (a stat of history.json
    and summary.json; summary.json read when it changed), else None."""
    if row is None:
        return None
    messages, size, last, ino, mtime, summary, sum_size, sum_mtime, _folder_ns = row
    try:
        st = os.stat(f"{folder}/history.json")
    except (FileNotFoundError, NotADirectoryError):
        if ino is not None:
            return None
    else:
        if st.st_ino != ino or st.st_size != size or st.st_mtime_ns != mtime:
            return None
    try:
        sst = os.stat(f"{folder}/summary.json")
    except (FileNotFoundError, NotADirectoryError):
        return session_id, messages, size, last, False, None
    if summary is not None and sst.st_size == sum_size and sst.st_mtime_ns == sum_mtime:
        return session_id, messages, size, last, bool(summary), None
    from agenvoy_cli.conversation.summary import read_summary

    try:
        has = read_summary(Path(folder) / "summary.json") is not None
    except CorruptStore as exc:
        return session_id, messages, size, last, False, str(exc)
    return session_id, messages, size, last, has, None


def local_rfc3339(zone: bool = True) -> Callable[[int], str]:
    """contract.rfc3339 for many values, the same strings (zone=False: the local date and
    time of day as a table shows them, 'YYYY-MM-DD HH:MM:SS'). The zone's offset is looked
    up once per UTC day (kept when it is the same at both ends of the day), the date once
    per local day, the time of day from two small tables (~4x faster than datetime).
    Kept for bench/scale.py's `session list --json` target over 10,000 sessions (<= 2x an
    append; measured 1.55-1.83x with it, docs/benchmarks.md); tests/test_scale.py compares
    every string with contract.rfc3339 across zones and DST changes."""
    from agenvoy_cli.contract import rfc3339

    days: dict[int, tuple[int, str] | None] = {}
    dates: dict[int, str] = {}
    hh_mm = [f"{h:02d}:{m:02d}:" for h in range(24) for m in range(60)]
    ss = [f"{s:02d}" for s in range(60)]
    date_format = "%Y-%m-%dT" if zone else "%Y-%m-%d "

    def offset(day: int) -> tuple[int, str] | None:
        gmtoff = time.localtime(day * 86400).tm_gmtoff
        if gmtoff % 60 or time.localtime(day * 86400 + 86399).tm_gmtoff != gmtoff:
            return None  # a change of offset that day, or one with seconds: the slow way
        hours, minutes = divmod(abs(gmtoff) // 60, 60)
        return gmtoff, f"{'-' if gmtoff < 0 else '+'}{hours:02d}:{minutes:02d}" if zone else ""

    def local(ns: int) -> str:
        sec = ns // 1_000_000_000
        day = sec // 86400
        if day not in days:
            days[day] = offset(day)
        known = days[day]
        if known is None:
            text: str = rfc3339(ns)  # type: ignore[assignment]
            return text if zone else f"{text[:10]} {text[11:19]}"
        wall_day, rest = divmod(sec + known[0], 86400)
        date = dates.get(wall_day)
        if date is None:
            date = dates[wall_day] = time.strftime(date_format, time.gmtime(wall_day * 86400))
        minute, second = divmod(rest, 60)
        return f"{date}{hh_mm[minute]}{ss[second]}{known[1]}"

    return local


def as_dicts(entries: list[Entry]) -> list[dict[str, Any]]:
    """The listing's documents (times as RFC 3339 in this machine's zone, and in ns)."""
    local = local_rfc3339()
    return [{"session_id": sid, "message_count": messages, "bytes": size,
             "last_message_at": None if last is None else local(last),
             "last_message_at_ns": last, "has_summary": summary, "problem": problem}
            for sid, messages, size, last, summary, problem in entries]


def archive_rows(conn: sqlite3.Connection | None, session_id: str) -> int:
    """Rows of the session in the archive, by index lookups (placed rows run 0..max(seq);
    doctor reports gaps), plus rows another program wrote that have no place yet."""
    if conn is None:
        return 0
    placed = archive.session_rows(conn, session_id).next_seq
    unplaced: int = conn.execute("SELECT count(*) FROM messages WHERE session_id = ? AND "
                                 "seq IS NULL", (session_id,)).fetchone()[0]
    return placed + unplaced
