"""`agenvoy import`: read sources, write what is new of each session through the Store.

Each source session is read whole (a file streams its sessions one by one, so a big export
stays bounded by its biggest conversation), its messages checked as `append` checks them,
and compared with what import_sources says was taken from it before: the same first N
messages (by hash) -> only the rest is appended; a different prefix -> reported as changed,
nothing added (never a duplicate). An append is all or nothing and is announced in
import_sources first (pending), so a kill at any point leaves a state the next run resolves.
Nothing is embedded here: the vectors catch up later, as after `backfill`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from agenvoy_cli.conversation import archive
from agenvoy_cli.conversation.messages import validate_message, with_header
from agenvoy_cli.conversation.store import Store
from agenvoy_cli.errors import AgenvoyError, BadInput
from agenvoy_cli.home.layout import validate_name
from agenvoy_cli.transfer import state
from agenvoy_cli.transfer.model import Parsed

FORMATS = {"openai": "openai", "agenvoy": "agenvoy", "claude-code": "claude_code",
           "chatgpt": "chatgpt", "codex": "codex"}
BATCH = 1000
REASONS = 5


def reader(fmt: str) -> Any:
    if fmt not in FORMATS:
        raise BadInput(f"unknown import format {fmt!r} (one of {', '.join(FORMATS)})")
    return importlib.import_module(f"agenvoy_cli.transfer.{FORMATS[fmt]}")


def run_import(store: Store, fmt: str, paths: list[str], *, session: str | None = None,
               dry_run: bool = False, strict: bool = False, sidechains: bool = False,
               progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    module = reader(fmt)
    if not paths:
        raise BadInput("give at least one PATH to import")
    if session is not None:
        validate_name(session)
    files = module.files([Path(p).expanduser() for p in paths])
    options = {"session": session, "sidechains": sidechains}
    rows: list[dict[str, Any]] = []
    for done, path in enumerate(files, 1):
        rows.extend(_import_file(store, fmt, module, path, options, dry_run, strict))
        if progress is not None:
            progress(done, len(files))
    reasons = [f"{r['file']}: {why}" for r in rows for why in r.pop("reasons")][:REASONS]
    return {"format": fmt, "dry_run": dry_run, "file_count": len(files),
            "sessions": rows, "count": len(rows),
            "imported": sum(r["added"] for r in rows),
            "skipped": sum(r["skipped"] for r in rows), "reasons": reasons,
            "changed": [r["session_id"] for r in rows if r["status"] == "changed"]}


def _checked(parsed: Parsed, limit: int) -> tuple[list[tuple[dict[str, Any], int | None]],
                                                  list[str]]:
    good, reasons = [], list(parsed.skipped)
    for i, (message, ns) in enumerate(parsed.messages):
        try:
            good.append((validate_message(message, i, limit), ns))
        except BadInput as exc:
            reasons.append(str(exc))
    return good, reasons


def _import_file(store: Store, fmt: str, module: Any, path: Path, options: dict[str, Any],
                 dry_run: bool, strict: bool) -> list[dict[str, Any]]:
    file = str(path.resolve())
    stat = path.stat()
    with store.read_lock():
        known = state.seen(store.db_readonly(), file)
    if known and all(s.size == stat.st_size and s.mtime_ns == stat.st_mtime_ns
                     and s.pending is None for s in known.values()):
        return [_row(s.session_id, file, key, "unchanged", s.count, 0, []) for key, s
                in known.items()]  # read before and not touched since: not even parsed
    limit = store.settings.max_history_bytes
    if strict:
        for parsed in module.read(path, options):
            _, reasons = _checked(parsed, limit)
            if reasons:
                raise BadInput(f"{path}: {len(reasons)} malformed record(s), nothing imported "
                               f"from it (--strict); first: {reasons[0]}")
    out = []
    for parsed in module.read(path, options):
        good, reasons = _checked(parsed, limit)
        out.append(_import_session(store, fmt, file, stat, parsed, good, reasons,
                                   known.get(parsed.key), dry_run, options))
    if not dry_run and out and all(r["status"] == "unchanged" for r in out):
        with store.write_lock(), store.transaction() as conn:
            state.touch(conn, file, stat)
    return out


def _row(sid: str, file: str, key: str, status: str, records: int, added: int,
         reasons: list[str]) -> dict[str, Any]:
    return {"session_id": sid, "file": file, "key": key, "status": status,
            "records": records, "added": added, "skipped": len(reasons),
            "reasons": reasons[:REASONS]}


def _taken(store: Store, sid: str, prev: state.Seen | None, plain: list[dict[str, Any]]
           ) -> int | None:
    """How many of the source's messages are already in the session (None: the part read
    before has changed)."""
    if prev is None:
        return 0
    if prev.count > len(plain) or state.digest(plain[:prev.count]) != prev.digest:
        return None
    if prev.pending is None:
        return prev.count
    with store.read_lock():  # an append announced and maybe killed: did it land?
        conn = store.db_readonly()
        next_seq = archive.session_rows(conn, sid).next_seq if conn is not None else 0
    landed = prev.base is not None and next_seq >= prev.base + (prev.pending - prev.count)
    return prev.pending if landed and prev.pending <= len(plain) else prev.count


def stamped(messages: list[tuple[dict[str, Any], int | None]]) -> list[dict[str, Any]]:
    """Each message with its time header (a message without a time takes the last one)."""
    out, last = [], None
    for message, ns in messages:
        last = ns if ns is not None else last
        out.append(message if last is None else
                   with_header(message, datetime.fromtimestamp(last // 1_000_000_000)))
    return out


def _import_session(store: Store, fmt: str, file: str, stat: Any, parsed: Parsed,
                    good: list[tuple[dict[str, Any], int | None]], reasons: list[str],
                    prev: state.Seen | None, dry_run: bool,
                    options: dict[str, Any]) -> dict[str, Any]:
    sid = validate_name(prev.session_id if prev else options.get("session") or
                        parsed.session_id)
    plain = [m for m, _ in good]
    taken = _taken(store, sid, prev, plain)
    if taken is None:
        return _row(sid, file, parsed.key, "changed", len(plain), 0, reasons)
    new = good[taken:]
    if not new:
        return _row(sid, file, parsed.key, "unchanged", len(plain), 0, reasons)
    if dry_run:
        return _row(sid, file, parsed.key, "would add", len(plain), len(new), reasons)
    fresh = taken == 0 and not store.exists(sid)
    count = taken
    batches = [new[i:i + BATCH] for i in range(0, len(new), BATCH)]
    for number, batch in enumerate(batches, 1):
        with store.write_lock(), store.transaction() as conn:
            base = archive.session_rows(conn, sid).next_seq
            state.write(conn, file, parsed.key, sid, fmt, count, state.digest(plain[:count]),
                        None, parsed.meta, pending=count + len(batch), base=base)
        store.append(sid, stamped(batch), compact=number == len(batches)
                     and not (fresh and parsed.exact))
        count += len(batch)
        with store.write_lock(), store.transaction() as conn:
            state.write(conn, file, parsed.key, sid, fmt, count, state.digest(plain[:count]),
                        stat if number == len(batches) else None, parsed.meta)
    if fresh and parsed.exact:
        from agenvoy_cli.transfer.agenvoy import restore

        try:
            restore(store, sid, parsed.exact)
        except AgenvoyError as exc:
            reasons.append(f"{sid}: messages imported, trim point or summary not: {exc}")
    return _row(sid, file, parsed.key, "imported", len(plain), len(new), reasons)
