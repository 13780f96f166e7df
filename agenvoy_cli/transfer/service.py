"""import_ and export: what Memory.import_ / Memory.export run."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from agenvoy_cli.conversation.store import Store
from agenvoy_cli.errors import BadInput
from agenvoy_cli.transfer import agenvoy, engine
from agenvoy_cli.transfer.detect import Looks, folder_format, looks, refusal
from agenvoy_cli.transfer.inputs import MAX_RECORD_BYTES, QUIET_SECONDS, files
from agenvoy_cli.transfer.records import ReadFailure, Unit

FORMATS = ("claude-code", "codex", "chatgpt", "openai", "agenvoy")
IMPORT_FORMATS = (*FORMATS, "auto")
EXPORT_FORMATS = ("jsonl", "markdown")
WHOLE = ("imported", "unchanged")  # a source read to its end
SHOWN = 1000  # sources of one input listed one by one; the rest folded into one entry
_WORST = ("unchanged", "imported", "changed", "partial", "unreadable")


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
    try:
        if not path.is_dir():
            return path.stat().st_size if path.is_file() else 0
        return sum(p.stat().st_size for p in files(path, (".json", ".jsonl")) if p.is_file())
    except OSError:
        return 0


class Job(NamedTuple):
    """What one import run was asked for."""

    session: str | None
    sidechains: str
    now: bool
    quiet: float
    limit: int


def failed_source(key: str, fmt: str, status: str, reason: str) -> dict[str, Any]:
    """The result of a source that could not be read (no unit was made of it)."""
    return {"source": key, "format": fmt, "session_id": None, "status": status, "added": 0,
            "record_count": 0, "skipped": 0, "malformed": 0, "reasons": [reason]}


def _file_units(fmt: str, file: Path, job: Job, meter: Meter) -> Iterator[Unit]:
    """The units of one file of a format (folders are walked by the caller)."""
    if fmt == "claude-code":
        from agenvoy_cli.transfer import claude_code

        return claude_code.file_units(file, job.session, job.sidechains, quiet=job.quiet,
                                      now=job.now, limit=job.limit)
    if fmt == "codex":
        from agenvoy_cli.transfer import codex

        return iter([codex.file_unit(file, job.session, quiet=job.quiet, now=job.now,
                                     limit=job.limit)])
    if fmt == "chatgpt":
        from agenvoy_cli.transfer import chatgpt

        return chatgpt.units(file, job.session, meter.read, job.limit)
    from agenvoy_cli.transfer import openai

    return openai.file_units(file, job.session, quiet=job.quiet, now=job.now, limit=job.limit)


def _format_files(fmt: str, path: Path) -> list[Path]:
    """The files a format reads under a folder."""
    if fmt == "claude-code":
        from agenvoy_cli.transfer import claude_code

        return claude_code.transcripts(path)
    if fmt == "codex":
        from agenvoy_cli.transfer import codex

        return codex.rollouts(path)
    if fmt == "chatgpt":
        return [path / "conversations.json"]
    return list(files(path, (".json", ".jsonl")))


def plan(fmt: str, paths: list[Path], limit: int) -> list[tuple[str, Path, Looks | None]]:
    """(format, path, what it looks like) for each input: a folder of one format, or each
    file of it. A named file that does not fit the format asked for is refused (BadInput,
    before anything is written); in `auto`, a file is read by the format it looks like."""
    out: list[tuple[str, Path, Looks | None]] = []
    refused: list[str] = []
    for path in paths:
        if path.is_dir():
            whole = folder_format(path) if fmt == "auto" else None
            if fmt == "agenvoy" or whole == "agenvoy":
                out.append(("agenvoy", path, None))
                continue
            if fmt == "auto":  # (sub-agents' transcripts after their parents')
                targets = [path / "conversations.json"] if whole == "chatgpt" else sorted(
                    files(path, (".json", ".jsonl")), key=lambda p: (p.name.startswith(
                        "agent-"), p))
            else:
                targets = _format_files(fmt, path)
            for file in targets:
                out.append((fmt, file, _looks(file, limit)))
            continue
        found = _looks(path, limit)
        if fmt != "auto":
            why = refusal(fmt, path, found) if found is not None else None
            if found is None:
                why = f"{path}: {_why_not(path, limit)}"
            if why:
                refused.append(why)
                continue
        out.append((fmt, path, found))
    if refused:
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        raise BadInput(f"{refused[0]}{more}; nothing imported")
    return out


def _looks(path: Path, limit: int) -> Looks | None:
    try:
        return looks(path, limit)
    except ReadFailure:
        return None


def _why_not(path: Path, limit: int) -> str:
    try:
        looks(path, limit)
    except ReadFailure as exc:
        return str(exc)
    return "cannot be read"


def _source_key(fmt: str, path: Path) -> str:
    try:
        return f"{fmt}:{path.resolve()}"
    except OSError:
        return f"{fmt}:{path}"


def import_(store: Store, fmt: str, paths: list[str], *, session: str | None = None,
            dry_run: bool = False, strict: bool = False, sidechains: str = "apart",
            progress: Callable[[int, int], None] | None = None, now: bool = False
            ) -> dict[str, Any]:
    """Import PATHs of FORMAT (or `auto`: each by what it looks like); progress(bytes read,
    bytes in all) as it goes. now: a message its writer may still be adding to is taken as
    it is (the writer's turn has ended: a hook)."""
    if fmt not in IMPORT_FORMATS:
        raise BadInput(f"unknown import format {fmt!r} (one of {', '.join(IMPORT_FORMATS)})")
    if sidechains not in ("apart", "skip"):
        raise BadInput("--sidechains is 'apart' or 'skip'")
    resolved = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists() and not path.is_symlink():
            raise BadInput(f"{raw}: no such file or folder")
        resolved.append(path)
    if not resolved:
        raise BadInput("give at least one PATH")
    limit = store.settings.number("import_max_record_bytes", MAX_RECORD_BYTES, int,
                                  minimum=1024)
    quiet = store.settings.number("import_quiet_seconds", QUIET_SECONDS, float, minimum=0)
    job = Job(session, sidechains, now, quiet, limit)
    work = plan(fmt, resolved, limit)
    results: list[dict[str, Any]] = []
    lock = store.locks.hold(store.layout.task_lock("import", "home"), store.settings.lock_timeout)
    with lock:
        meter = Meter(progress, resolved)
        for kind, path, found in work:
            results.extend(_import_path(store, kind, path, found, job, meter, dry_run, strict))
            meter.path_done(path)
    doc = summary(fmt, dry_run, results)
    homes = [path for kind, path, _ in work if kind == "agenvoy"]
    doc["notes_added"] = len(_notes_of_homes(store, homes, dry_run)) if homes else 0
    return doc


def _readable_as(fmt: str, path: Path, found: Looks | None, limit: int
                 ) -> tuple[str, dict[str, Any] | None]:
    """(the format a file is read as, None) or (fmt, the result that says why it is not
    read)."""
    if found is None:
        return fmt, failed_source(_source_key(fmt, path), fmt, "unreadable",
                                  _why_not(path, limit))
    if fmt == "auto" and found.format is None:
        if found.empty:
            return fmt, failed_source(_source_key("auto", path), "auto", "unchanged",
                                      "an empty file: nothing to read yet")
        return fmt, failed_source(_source_key("auto", path), "auto", "unreadable",
                                  f"looks like {found.what}: no format reads it")
    fmt = found.format if fmt == "auto" and found.format else fmt
    why = refusal(fmt, path, found)
    return fmt, failed_source(_source_key(fmt, path), fmt, "unreadable", why) if why \
        else None


def _import_path(store: Store, fmt: str, path: Path, found: Looks | None, job: Job,
                 meter: Meter, dry_run: bool, strict: bool) -> list[dict[str, Any]]:
    """The results of one input (a file, or an agenvoy folder)."""
    results: list[dict[str, Any]] = []
    if fmt != "agenvoy":
        fmt, refused = _readable_as(fmt, path, found, job.limit)
        if refused is not None:
            return [refused]
    units = agenvoy.units(path, job.session, store.locks) if fmt == "agenvoy" else \
        _file_units(fmt, path, job, meter)
    try:
        for unit in engine.guarded(lambda: units):
            done = engine.import_unit(store, unit, session=job.session, dry_run=dry_run,
                                      strict=strict,
                                      restore=agenvoy.restore if fmt == "agenvoy" else None)
            if done is None:
                continue
            if len(results) < SHOWN:
                results.append(done)
            else:  # (a batch file of a million requests: the document stays bounded)
                fold(results, done, f"{_source_key(fmt, path)}#more")
            meter.unit_done(unit)
    except ReadFailure as exc:
        status = "partial" if results else "unreadable"
        results.append(failed_source(_source_key(fmt, path), fmt, status, str(exc)))
    return results


def fold(results: list[dict[str, Any]], done: dict[str, Any], key: str) -> None:
    """Count a source's result into the one entry that stands for the sources of an input
    beyond SHOWN (`folded`: how many; `written_count`: the sessions they wrote)."""
    last = results[-1]
    if not last.get("folded"):
        last = {"source": key, "format": done["format"], "session_id": None,
                "status": "unchanged", "added": 0, "record_count": 0, "skipped": 0,
                "malformed": 0, "reasons": [], "folded": 0, "written_count": 0}
        results.append(last)
    last["folded"] += 1
    last["written_count"] += bool(done["added"] or done.get("completed"))
    for name in ("added", "record_count", "skipped", "malformed"):
        last[name] += done[name]
    last["reasons"] = (last["reasons"] + done["reasons"])[:engine.REASONS]
    last["status"] = max(last["status"], done["status"], key=_WORST.index)


def summary(fmt: str, dry_run: bool, results: list[dict[str, Any]]) -> dict[str, Any]:
    """The result document: per source, the totals, whether every source was read whole,
    and the sessions written (those of folded sources counted in written_count)."""
    written = sorted({r["session_id"] for r in results
                      if r["session_id"] and (r["added"] or r.get("completed"))})
    return {"format": fmt, "dry_run": dry_run, "sources": results,
            "written_count": len(written) + sum(r.get("written_count", 0) for r in results),
            "added": sum(r["added"] for r in results),
            "skipped": sum(r["skipped"] for r in results),
            "malformed": sum(r["malformed"] for r in results),
            "changed": sum(1 for r in results if r["status"] == "changed"),
            "complete": all(r["status"] in WHOLE for r in results),
            "sessions_written": written}


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
    write = _export_jsonl if fmt == "jsonl" else _export_markdown
    count, written = write(store, ids, target)
    return {"format": fmt, "session_count": len(ids), "message_count": count,
            "files": written}


def _export_jsonl(store: Store, ids: list[str], target: Path | None
                  ) -> tuple[int, list[str]]:
    """Every session into one JSON Lines file (`target`, else stdout); (messages, files)."""
    count = 0
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
    return count, [str(target)] if target else ["-"]


def _export_markdown(store: Store, ids: list[str], target: Path | None
                     ) -> tuple[int, list[str]]:
    """A Markdown file a session in the folder `target` (one session: stdout without it)."""
    from agenvoy_cli.transfer.markdown import render

    if target is None and len(ids) != 1:
        raise BadInput("markdown of several sessions needs --output DIR")
    if target is not None:
        target.mkdir(parents=True, exist_ok=True)
    count, written = 0, []
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
    return count, written
