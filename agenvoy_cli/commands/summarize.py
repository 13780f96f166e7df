"""agenvoy summarize SESSION | --pending: update rolling summaries through an LLM."""

from __future__ import annotations

from typing import Any

import click

from agenvoy_cli.commands.common import complete_session, get_store, json_option
from agenvoy_cli.errors import FAILED, AgenvoyError, BadInput
from agenvoy_cli.home.layout import validate_name
from agenvoy_cli.output import emit, table, to_json, warn


def render(doc: dict[str, Any]) -> str:
    rows = []
    for s in doc["sessions"]:
        state = s["status"].replace("_", " ")
        if s["status"] == "skipped":
            state = "skipped (another run is summarizing it)"
        rows.append((s["session_id"], state, f"{s['chunks_done']}/{s['chunks_total']}",
                     s["cursor"] or "-", s["error"] or ""))
    if not rows:
        return "no pending sessions"
    return table(rows, ["session", "status", "chunks", "cursor", "error"])


def render_dry_run(doc: dict[str, Any]) -> str:
    out = []
    for s in doc["sessions"]:
        requests = s.get("requests") or []
        if not requests:
            out.append(f"{s['session_id']}: nothing to summarize (cursor {s['cursor'] or '-'})")
        for req in requests:
            if req.get("chunk") is None:
                out.append(f"{s['session_id']}: {req['note']}")
                continue
            out.append(f"== {s['session_id']}: chunk {req['chunk']}/{s['chunks_total']}, "
                       f"{req['messages']} messages ({req['from']} .. {req['to']}) ==")
            if req["command"]:
                out.append(f"| {' '.join(req['command'])}   (this JSON on its stdin)")
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
@json_option
@click.pass_context
def command(ctx: click.Context, session_id: str | None, pending: bool, dry_run: bool,
            llm_command: str | None, max_chunks: int | None, as_json: bool) -> None:
    """Fold the messages after SESSION's cursor into its summary.json: chunks of 16, one
    LLM call per chunk, saved after each. A failed call stops the session (exit 1); the
    next run resumes after the last saved chunk.

    The LLM is an OpenAI-compatible chat-completions endpoint: set AGENVOY_LLM_BASE_URL
    (e.g. http://localhost:11434/v1), AGENVOY_LLM_MODEL and, if needed,
    AGENVOY_LLM_API_KEY; or the agenvoy.llm section of config.json. See docs/summarize.md.
    """
    from agenvoy_cli.conversation.summarizer import (
        SessionResult,
        pending_sessions,
        summarize_session,
    )
    from agenvoy_cli.conversation.summarizer import dry_run as plan
    from agenvoy_cli.models.llm import load_config, make_client

    if bool(session_id) == pending:
        raise BadInput("give a SESSION or --pending (not both)")
    if session_id:
        validate_name(session_id)
    store = get_store(ctx)
    config = load_config(store.settings, llm_command)  # before anything is touched
    if session_id:
        with store.read_lock():
            store.require(session_id)
        ids = [session_id]
    else:
        ids = pending_sessions(store)
    client = make_client(config)
    results: list[SessionResult] = []
    for sid in ids:
        try:
            if dry_run:
                result = plan(store, sid, config, max_chunks=max_chunks)
            else:
                result = summarize_session(store, sid, config, client, wait=not pending,
                                           max_chunks=max_chunks, progress=warn)
        except AgenvoyError as exc:  # one damaged session must not stop --pending
            if not pending:
                raise
            result = SessionResult(sid, "failed", error=str(exc), exit_code=exc.exit_code)
        if result.error:
            warn(f"agenvoy: error: {sid}: {result.error}")
        elif result.status == "skipped":
            warn(f"{sid}: skipped: another run is summarizing it")
        results.append(result)
    doc = {"sessions": [r.as_dict() for r in results]}
    emit(doc, as_json, render_dry_run if dry_run and not as_json else render)
    failed = [r for r in results if r.status == "failed"]
    if failed:
        ctx.exit(failed[0].exit_code if session_id else FAILED)
