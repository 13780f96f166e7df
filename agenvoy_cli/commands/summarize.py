"""agenvoy summarize SESSION | --pending: update rolling summaries through an LLM."""

from __future__ import annotations

import shlex
from typing import Any

import click

from agenvoy_cli.commands.common import complete_session, json_option, memory
from agenvoy_cli.errors import FAILED, BadInput
from agenvoy_cli.output import emit, format_option, human_time, table, to_json, warn


def render(doc: dict[str, Any]) -> str:
    rows = []
    for s in doc["sessions"]:
        state = s["status"].replace("_", " ")
        if s["status"] == "skipped":
            state = "skipped (another run is summarizing it)"
        rows.append((s["session_id"], state, f"{s['summarized']}/{s['chunk_count']}",
                     human_time(s["cursor_at"]), s["error"] or ""))
    if not rows:
        return "no pending sessions"
    return table(rows, ["session", "status", "chunks", "cursor", "error"])


def render_dry_run(doc: dict[str, Any]) -> str:
    out = []
    for s in doc["sessions"]:
        requests = s.get("requests") or []
        if not requests:
            out.append(f"{s['session_id']}: nothing to summarize "
                       f"(cursor {human_time(s['cursor_at'])})")
        for req in requests:
            if req.get("chunk") is None:
                out.append(f"{s['session_id']}: {req['note']}")
                continue
            out.append(f"== {s['session_id']}: chunk {req['chunk']}/{s['chunk_count']}, "
                       f"{req['message_count']} messages ({human_time(req['from_at'])} .. "
                       f"{human_time(req['to_at'])}) ==")
            if req["command"]:
                out.append(f"| {' '.join(req['command'])}   (this JSON on its stdin)")
            elif req["url"] is None:
                from agenvoy_cli.models.llm import HOW_TO_CONFIGURE

                out.append(f"(no LLM configured, so no endpoint: {HOW_TO_CONFIGURE}; the "
                           "request body it would be sent:)")
            else:
                out.append(f"POST {req['url']}")
                out.extend(f"{k}: {v}" for k, v in req["headers"].items())
            out.append(to_json(req["body"]))
    return "\n".join(out) if out else "no pending sessions"


@click.command("summarize")
@click.argument("session_id", metavar="[SESSION]", required=False,
                shell_complete=complete_session)
@click.option("--pending", is_flag=True,
              help="Every session whose history.json is newer than its summary.json (cron).")
@click.option("--dry-run", is_flag=True,
              help="Print the chunks and the exact requests (key masked); call nothing.")
@click.option("--llm-command", metavar="CMD",
              help="Run CMD instead of calling an endpoint: the request JSON on its stdin, "
                   "the reply on its stdout (env AGENVOY_LLM_COMMAND).")
@click.option("--max-chunks", type=click.IntRange(min=1), metavar="N",
              help="At most N LLM calls per session in this run; the rest stays pending.")
@format_option
@json_option
@click.pass_context
def command(ctx: click.Context, session_id: str | None, pending: bool, dry_run: bool,
            llm_command: str | None, max_chunks: int | None, as_json: bool,
            fmt: str | None = None) -> None:
    """Fold the messages after SESSION's cursor into its summary.json: chunks of at most
    16 messages and 32,000 characters, one LLM call per chunk, saved after each. A failed
    call stops the session (exit 1); the next run resumes after the last saved chunk.

    The LLM is an OpenAI-compatible chat-completions endpoint: set AGENVOY_LLM_BASE_URL
    (e.g. http://localhost:11434/v1), AGENVOY_LLM_MODEL and, if needed,
    AGENVOY_LLM_API_KEY; or the agenvoy.llm section of config.json. See docs/summarize.md.
    """
    if bool(session_id) == pending:
        raise BadInput("give a SESSION or --pending (not both)")
    try:
        doc = memory(ctx).summarize(session_id, dry_run=dry_run, llm_command=llm_command,
                                    max_chunks=max_chunks, warn=warn)
    except KeyboardInterrupt:  # each chunk's summary was saved as it came
        again = "agenvoy summarize " + (shlex.quote(session_id) if session_id else "--pending")
        warn(f"agenvoy: the chunks summarized so far are saved; run `{again}` to go on")
        raise
    for s in doc["sessions"]:
        if s["error"]:
            warn(f"agenvoy: error: {s['session_id']}: {s['error']}")
        elif s["status"] == "skipped":
            warn(f"{s['session_id']}: skipped: another run is summarizing it")
    emit(doc, as_json, render_dry_run if dry_run and fmt in (None, "table") else render,
         fmt=fmt, rows="sessions")
    failed = [s for s in doc["sessions"] if s["status"] == "failed"]
    if failed:
        ctx.exit(failed[0]["exit_code"] if session_id else FAILED)
