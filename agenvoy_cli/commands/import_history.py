"""agenvoy import FORMAT PATH...: bring existing histories in, exactly once."""

from __future__ import annotations

from typing import Any

import click

from agenvoy_cli.commands.common import json_option, memory
from agenvoy_cli.output import ProgressBar, emit, table, warn

FORMATS = ("claude-code", "codex", "chatgpt", "openai", "agenvoy")


def _render(doc: dict[str, Any]) -> str:
    rows = [(r["session_id"], r["format"], r["status"], r["added"], r["malformed"])
            for r in doc["sources"]]
    head = table(rows, ["session", "format", "status", "added", "malformed"]) if rows else \
        "no sources"
    verb = "would add" if doc["dry_run"] else "added"
    text = f"{head}\n{verb} {doc['added']} message(s) from {len(rows)} source(s)"
    if doc.get("notes_added"):
        text += f"; {verb} {doc['notes_added']} knowledge note(s)"
    return text


@click.command("import")
@click.argument("fmt", metavar="FORMAT")
@click.argument("paths", metavar="PATH...", nargs=-1, required=True,
                type=click.Path(exists=False))
@click.option("--session", help="Import into this session (default: an id per source).")
@click.option("--sidechains", type=click.Choice(["apart", "skip"]), default="apart",
              help="Claude Code sub-agent records: a session of their own, or skipped.")
@click.option("--strict", is_flag=True, help="A malformed record aborts that file.")
@click.option("--dry-run", is_flag=True, help="Count what would be imported; write nothing.")
@json_option
@click.pass_context
def command(ctx: click.Context, fmt: str, paths: tuple[str, ...], session: str | None,
            sidechains: str, strict: bool, dry_run: bool, as_json: bool) -> None:
    """Import FORMAT (claude-code, codex, chatgpt, openai, agenvoy) from PATH...: one
    session per transcript or conversation, only what is new since the last import (cron
    ready), nothing embedded (`backfill --vectors` catches up). Unknown FORMAT: exit 2."""
    bar = ProgressBar("import", 2, not as_json, unit="MiB")  # a bar from 2 MiB of input
    shown = [(-1, -1)]

    def progress(done: int, total: int) -> None:  # bytes, shown in whole MiB, each once
        if (done >> 20, total >> 20) != shown[0]:
            shown[0] = (done >> 20, total >> 20)
            bar(*shown[0])

    try:
        doc = memory(ctx).import_(fmt, list(paths), session=session, dry_run=dry_run,
                                  strict=strict, sidechains=sidechains, progress=progress)
    finally:
        bar.close()
    for r in doc["sources"]:
        if r["status"] == "changed":
            warn(f"agenvoy: warning: {r['source']}: the part imported before has changed "
                 "since; nothing imported from it")
        for reason in r["reasons"]:
            warn(f"agenvoy: skipped a malformed record of {r['source']}: {reason}")
    emit(doc, as_json, _render)
