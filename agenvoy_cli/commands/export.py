"""agenvoy export SESSION... | --all: lossless JSON Lines, or Markdown for people."""

from __future__ import annotations

import click

from agenvoy_cli.commands.common import complete_session, json_option, memory
from agenvoy_cli.errors import BadInput
from agenvoy_cli.output import emit


@click.command("export")
@click.argument("session_ids", metavar="SESSION...", nargs=-1, shell_complete=complete_session)
@click.option("--all", "all_sessions", is_flag=True, help="Every session of the home.")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "markdown"]), default="jsonl",
              help="jsonl (lossless; `agenvoy import agenvoy` reads it) or markdown.")
@click.option("--output", metavar="PATH",
              help="File (jsonl) or folder (markdown); default stdout. Never in the home.")
@json_option
@click.pass_context
def command(ctx: click.Context, session_ids: tuple[str, ...], all_sessions: bool, fmt: str,
            output: str | None, as_json: bool) -> None:
    """Export sessions: every archived message with its time, place and full JSON, plus
    the summary and its cursor (jsonl), or one Markdown file a session."""
    if as_json and not output:
        raise BadInput("--json needs --output (stdout carries the result document)")
    doc = memory(ctx).export(session_ids, all_sessions=all_sessions, format=fmt,
                             output=output)
    if output:
        emit(doc, as_json, lambda d: f"exported {d['message_count']} message(s) of "
             f"{d['session_count']} session(s) to {', '.join(d['files'])}")
