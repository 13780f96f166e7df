"""agenvoy doctor [SESSION] [--repair]: check the invariants; exit 1 while problems remain."""

from __future__ import annotations

import click

from agenvoy_cli.commands.common import complete_session, json_option, memory
from agenvoy_cli.errors import FAILED
from agenvoy_cli.output import emit, format_option


def _render(doc: dict) -> str:
    kept = [f"kept aside: {k['path']} ({k['bytes']} bytes), damaged when a repair moved it; "
            f"remove it with `{k['remove_with']}` once you no longer need it"
            for k in doc.get("kept_aside", [])]
    if not doc["remaining"] and not any(p["repaired"] for p in doc["problems"]):
        lines = [f"ok: {doc['session_count']} session(s) checked, no problems"]
    else:
        lines = []
    for p in doc["problems"]:
        where = p["session_id"] or "(home)"
        fixed = f"  -> repaired: {p['repaired']}" if p["repaired"] else ""
        note = "note: " if p.get("note") else ""
        lines.append(f"{note}{where}: {p['check']}: {p['detail']}{fixed}")
    layout = doc.get("layout")
    if layout:
        lines.append(f"layout: Agenvoy {layout['version']} (trim points in "
                     f"{layout['trim_table']})")
    paths = [p["path"] for p in doc.get("vector_paths", [])]
    if paths:  # how semantic search reaches the vectors (vectors/exact.py)
        kept.append(f"vector search: exact for {paths.count('exact')} collection(s), "
                    f"hnsw for {paths.count('hnsw')}")
    from agenvoy_cli.doctor.tasks import summary_line

    tasks = summary_line(doc.get("tasks"))
    return "\n".join(lines + kept + ([tasks] if tasks else []))


@click.command("doctor")
@click.argument("session_id", metavar="[SESSION]", required=False, shell_complete=complete_session)
@click.option("--repair", is_flag=True, help="Fix what can be fixed from what is on disk.")
@format_option
@json_option
@click.pass_context
def command(ctx: click.Context, session_id: str | None, repair: bool, as_json: bool,
            fmt: str | None = None) -> None:
    """Check that files parse and that the dual-write invariants hold (every history.json
    message in SQLite exactly once, no vector without its message or older than the trim
    point, meta consistent). Exit 0 when clean, 1 when problems remain."""
    doc = memory(ctx).doctor(session_id, repair=repair)
    emit(doc, as_json, _render, fmt=fmt, rows="problems")
    if doc["remaining"]:
        ctx.exit(FAILED)
