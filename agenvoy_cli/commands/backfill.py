"""agenvoy backfill [SESSION | --all] [--vectors]: write into the stores what they lack."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import click

from agenvoy_cli.commands.common import complete_session, get_store, json_option
from agenvoy_cli.errors import BadInput
from agenvoy_cli.output import emit, table


@contextlib.contextmanager
def progress(length: int, label: str, enabled: bool) -> Iterator[Any]:
    """A progress bar on stderr for people; nothing for scripts or --json."""
    if not enabled or not sys.stderr.isatty() or length < 2:
        yield None
        return
    with click.progressbar(length=length, label=label, file=sys.stderr) as bar:
        yield bar


@click.command("backfill")
@click.argument("session_id", metavar="[SESSION]", required=False, shell_complete=complete_session)
@click.option("--all", "all_sessions", is_flag=True, help="Every session of the home.")
@click.option("--vectors", is_flag=True, help="Also (re)build the vector index of the recent part.")
@click.option("--rebuild", is_flag=True,
              help="With --vectors: drop the vector index first (after an embedder change).")
@json_option
@click.pass_context
def command(ctx: click.Context, session_id: str | None, all_sessions: bool, vectors: bool,
            rebuild: bool, as_json: bool) -> None:
    """Write every history.json message SQLite lacks into SQLite (never a duplicate; a second
    run changes nothing). First import of an existing Agenvoy home, or repair after a crash."""
    if bool(session_id) == all_sessions:
        raise BadInput("give a SESSION or --all (not both)")
    if rebuild and not vectors:
        raise BadInput("--rebuild goes with --vectors")
    store = get_store(ctx)
    if session_id:
        store.require(session_id)
    ids = [session_id] if session_id else store.session_ids()
    if rebuild:
        from agenvoy_cli.storage import vectors as vector_index

        with store.write_lock():
            vector_index.drop_index(store, vector_index.MESSAGES)
    results = []
    with progress(len(ids), "backfill", not as_json) as bar:
        for sid in ids:
            with store.write_lock():
                synced = store.sync(sid)
            row: dict[str, Any] = {"session_id": sid, "inserted": synced.inserted}
            if vectors:
                from agenvoy_cli.storage.search import index_session

                row["embedded"] = index_session(store, sid, full=True)  # also repairs
            results.append(row)
            if bar is not None:
                bar.update(1)
    doc = {"sessions": results, "inserted": sum(r["inserted"] for r in results)}
    if vectors:
        doc["embedded"] = sum(r["embedded"] for r in results)
    emit(doc, as_json, lambda d: table(
        [tuple(r.values()) for r in d["sessions"]], list(d["sessions"][0].keys())
    ) if d["sessions"] else "no sessions")
