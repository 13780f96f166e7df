"""agenvoy import FORMAT PATH...: bring existing histories in, exactly once."""

from __future__ import annotations

from typing import Any

import click

from agenvoy_cli.commands.common import json_option, memory
from agenvoy_cli.errors import FAILED, BadInput
from agenvoy_cli.output import ProgressBar, emit, table, warn

FORMATS = ("auto", "claude-code", "codex", "chatgpt", "openai", "agenvoy")
SHOWN = 5  # sessions named in a partial import's message


def _render(doc: dict[str, Any]) -> str:
    rows = [(r["session_id"] or "-", r["format"], r["status"], r["added"], r["skipped"])
            for r in doc["sources"]]
    head = table(rows, ["session", "format", "status", "added", "skipped"]) if rows else \
        "no sources"
    verb = "would add" if doc["dry_run"] else "added"
    text = f"{head}\n{verb} {doc['added']} message(s) from {len(rows)} source(s)"
    if doc.get("notes_added"):
        text += f"; {verb} {doc['notes_added']} knowledge note(s)"
    return text + "".join(_held_back(r) for r in doc["sources"])


def _held_back(source: dict[str, Any]) -> str:
    """A line for a source whose last message is still being written (`open` records)."""
    if not source.get("open"):
        return ""
    return (f"\nheld back: {source['open']} record(s) of {source['session_id'] or '-'}'s last "
            "message, still being written; the next import takes them (--now: take it as "
            "it is)")


def outcome(doc: dict[str, Any]) -> tuple[int, str | None]:
    """The exit code and the line that says why it is not 0: 0 when every source was read
    whole; 1 when one was not but something was written; 2 when nothing was written."""
    if doc["complete"]:
        return 0, None
    bad = [r for r in doc["sources"] if r["status"] not in ("imported", "unchanged")]
    first = bad[0]
    reason = first["reasons"][0] if first["reasons"] else first["status"]
    if first["status"] == "changed":
        reason = "the part imported before has changed since; nothing imported from it"
    head = f"{len(bad)} source(s) not read whole (first: {first['source']}: {reason})"
    written, count = doc["sessions_written"], doc["written_count"]
    if not count:
        return 2, f"{head}; nothing was written"
    names = ", ".join(written[:SHOWN]) + (f" and {count - SHOWN} more" if count > SHOWN
                                           else "")
    return FAILED, (f"{head}; written: {count} session(s) ({names}); run the same "
                    "import again once the input is whole to finish: nothing is imported twice")


def _formats(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Tab completion of FORMAT (a plain argument: an unknown one gets our own message)."""
    return [f for f in FORMATS if f.startswith(incomplete)]


@click.command("import")
@click.argument("fmt", metavar="FORMAT", shell_complete=_formats)
@click.argument("paths", metavar="PATH...", nargs=-1, required=True,
                type=click.Path(exists=False))
@click.option("--session", help="Import into this session (default: an id per source).")
@click.option("--sidechains", type=click.Choice(["apart", "skip"]), default="apart",
              help="Claude Code sub-agent records: a session of their own, or skipped.")
@click.option("--now", is_flag=True,
              help="Take a message its writer may still be adding to as it is (the turn "
                   "has ended); default: wait until another follows or the file has been "
                   "quiet for 2 minutes.")
@click.option("--strict", is_flag=True, help="A malformed record aborts that file.")
@click.option("--dry-run", is_flag=True, help="Count what would be imported; write nothing.")
@json_option
@click.pass_context
def command(ctx: click.Context, fmt: str, paths: tuple[str, ...], session: str | None,
            sidechains: str, now: bool, strict: bool, dry_run: bool, as_json: bool) -> None:
    """Import FORMAT (auto, claude-code, codex, chatgpt, openai, agenvoy) from PATH...: one
    session per transcript or conversation, only what is new since the last import (cron
    ready), nothing embedded (`backfill --vectors` catches up). `auto` reads each file or
    folder as what it looks like. Exit 0 when every source was read whole, 1 when one was
    not (what was written is listed: run it again to finish), 2 when nothing was written
    (a file that does not fit FORMAT is refused, naming what it looks like)."""
    bar = ProgressBar("import", 2, not as_json, unit="MiB")  # a bar from 2 MiB of input
    shown = [(-1, -1)]

    def progress(done: int, total: int) -> None:  # bytes, shown in whole MiB, each once
        if (done >> 20, total >> 20) != shown[0]:
            shown[0] = (done >> 20, total >> 20)
            bar(*shown[0])

    try:
        doc = memory(ctx).import_(fmt, list(paths), session=session, dry_run=dry_run,
                                  strict=strict, sidechains=sidechains, progress=progress,
                                  now=now)
    finally:
        bar.close()
    code, why = outcome(doc)
    if code == 2:
        raise BadInput(why)
    for r in doc["sources"]:
        if r["status"] in ("imported", "unchanged"):
            for reason in r["reasons"]:
                warn(f"agenvoy: {r['source']}: {reason}")
    emit(doc, as_json, _render)
    if why:
        warn(f"agenvoy: {why}")
        ctx.exit(code)
