"""import_ and export: what Memory.import_ / Memory.export run."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from agenvoy_cli.conversation.store import Store
from agenvoy_cli.errors import BadInput
from agenvoy_cli.home.locking import Locks
from agenvoy_cli.transfer import agenvoy, engine
from agenvoy_cli.transfer.records import Unit

FORMATS = ("claude-code", "codex", "chatgpt", "openai", "agenvoy")
EXPORT_FORMATS = ("jsonl", "markdown")


class Meter:
    """progress(bytes read, bytes in all) over every input: whole files as their units are
    done, a ChatGPT export as its stream is read (so one 1 GiB file shows progress too)."""

    def __init__(self, progress: Callable[[int, int], None] | None, paths: list[Path]):
        self.progress, self.base, self.current, self.last = progress, 0, 0, -1
        self.seen: set[str] = set()
        self.total = sum(_size(p) for p in paths)

    def read(self, offset: int) -> None:  # within the current file
        self.current = offset
        self._report()

    def unit_done(self, unit: Unit) -> None:
        path = str(unit.meta.get("path"))
        if unit.size is not None and path not in self.seen:
            self.seen.add(path)
            self.current += unit.size
        self._report()

    def path_done(self, path: Path) -> None:
        self.base += _size(path)
        self.current = 0
        self.seen.clear()
        self._report()

    def _report(self) -> None:
        done = min(self.base + self.current, self.total)
        if self.progress is not None and done != self.last:
            self.last = done
            self.progress(done, self.total)


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*")
               if p.suffix in (".json", ".jsonl") and p.is_file())


def _units(fmt: str, path: Path, session: str | None, sidechains: str,
           meter: Meter, locks: Locks) -> Iterator[Unit]:
    if fmt == "claude-code":
        from agenvoy_cli.transfer import claude_code

        return claude_code.units(path, session, sidechains)
    if fmt == "codex":
        from agenvoy_cli.transfer import codex

        return codex.units(path, session)
    if fmt == "chatgpt":
        from agenvoy_cli.transfer import chatgpt

        return chatgpt.units(path / "conversations.json" if path.is_dir() else path, session,
                             meter.read)
    if fmt == "openai":
        from agenvoy_cli.transfer import openai

        return openai.units(path, session)
    return agenvoy.units(path, session, locks)


def import_(store: Store, fmt: str, paths: list[str], *, session: str | None = None,
            dry_run: bool = False, strict: bool = False, sidechains: str = "apart",
            progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Import PATHs of FORMAT; progress(bytes read, bytes in all) as it goes."""
    if fmt not in FORMATS:
        raise BadInput(f"unknown import format {fmt!r} (one of {', '.join(FORMATS)})")
    if sidechains not in ("apart", "skip"):
        raise BadInput("--sidechains is 'apart' or 'skip'")
    resolved = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            raise BadInput(f"{raw}: no such file or folder")
        resolved.append(path)
    if not resolved:
        raise BadInput("give at least one PATH")
    results: list[dict[str, Any]] = []
    lock = store.locks.hold(store.layout.task_lock("import", "home"), store.settings.lock_timeout)
    with lock:
        meter = Meter(progress, resolved)
        for path in resolved:
            try:
                for unit in _units(fmt, path, session, sidechains, meter, store.locks):
                    results.append(engine.import_unit(
                        store, unit, session=session, dry_run=dry_run, strict=strict,
                        restore=agenvoy.restore if fmt == "agenvoy" else None))
                    meter.unit_done(unit)
                meter.path_done(path)
            except (OSError, ValueError) as exc:
                if isinstance(exc, BadInput):
                    raise
                raise BadInput(f"{path}: cannot be read as {fmt}: {exc}") from None
    changed = [r for r in results if r["status"] == "changed"]
    notes = _notes_of_homes(store, resolved, dry_run) if fmt == "agenvoy" else []
    return {"format": fmt, "dry_run": dry_run, "sources": results, "notes_added": len(notes),
            "added": sum(r["added"] for r in results),
            "malformed": sum(r["malformed"] for r in results),
            "changed": len(changed)}


def _notes_of_homes(store: Store, paths: list[Path], dry_run: bool) -> list[str]:
    """`import agenvoy HOME`: the knowledge notes of each other home (a folder with
    sessions/, .store/ or knowledge/), whose names are free here (notes/files.py)."""
    from agenvoy_cli.notes.files import take_from_home

    added: list[str] = []
    for path in paths:
        if path.is_dir() and path.resolve() != store.layout.home.resolve() and any(
                (path / part).exists() for part in ("sessions", ".store", "knowledge")):
            added += take_from_home(store, path, dry_run=dry_run)["added"]
    return added


def _outside_home(store: Store, output: Path) -> Path:
    home = store.layout.home.resolve()
    target = output.expanduser().resolve()
    if target == home or home in target.parents:
        raise BadInput(f"{output} is inside the home {home}; export writes elsewhere")
    return target


def export(store: Store, session_ids: list[str], *, all_sessions: bool = False,
           fmt: str = "jsonl", output: str | None = None) -> dict[str, Any]:
    if fmt not in EXPORT_FORMATS:
        raise BadInput(f"unknown export format {fmt!r} (jsonl or markdown)")
    if bool(session_ids) == all_sessions:
        raise BadInput("give SESSION... or --all (not both)")
    ids = store.session_ids() if all_sessions else list(session_ids)
    for sid in ids:
        store.require(sid)
    target = _outside_home(store, Path(output)) if output and output != "-" else None
    written: list[str] = []
    count = 0
    if fmt == "jsonl":
        handle = open(target, "wb") if target else sys.stdout.buffer  # noqa: SIM115
        try:
            for sid in ids:
                for line in agenvoy.export_lines(store, sid):
                    count += line["type"] == "message"
                    handle.write(orjson.dumps(line) + b"\n")
        finally:
            if target:
                handle.close()
            else:
                handle.flush()
        written = [str(target)] if target else ["-"]
    else:
        from agenvoy_cli.transfer.markdown import render

        if target is None and len(ids) != 1:
            raise BadInput("markdown of several sessions needs --output DIR")
        if target is not None:
            target.mkdir(parents=True, exist_ok=True)
        for sid in ids:
            lines = list(agenvoy.export_lines(store, sid))
            count += sum(1 for line in lines if line["type"] == "message")
            text = render(lines)
            if target is None:
                sys.stdout.write(text)
                written.append("-")
            else:
                path = target / f"{sid}.md"
                path.write_text(text, "utf-8")
                written.append(str(path))
    return {"format": fmt, "session_count": len(ids), "message_count": count,
            "files": written}
