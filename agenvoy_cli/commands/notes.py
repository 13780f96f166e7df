"""agenvoy notes add|list|show|search|edit|remove|export: the operator's knowledge notes."""

from __future__ import annotations

import sys
from typing import Any

import click

from agenvoy_cli.commands.common import (
    bm25_nil,
    bm25_nil_why,
    confirm_destructive,
    from_server,
    json_option,
    memory,
    no_server_option,
    one_query,
    read_limited,
    window_options,
)
from agenvoy_cli.errors import AgenvoyError, BadInput
from agenvoy_cli.output import emit, format_option, human_time, table, warn


def _complete_name(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """The home's note names (SQLite read-only: nothing heavy, nothing created)."""
    import sqlite3

    from click.shell_completion import CompletionItem

    from agenvoy_cli.home import sqlite
    from agenvoy_cli.home.layout import Layout, resolve_home

    try:  # a bad home or a planted link: no completions, never a traceback
        db = Layout(resolve_home((ctx.find_root().params or {}).get("home"))).db
        if not db.exists():
            return []
        conn = sqlite.connect(db, 1.0, readonly=True)
    except (AgenvoyError, OSError, sqlite3.Error):
        return []
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM notes ORDER BY name")]
    except sqlite3.Error:  # a home from before notes
        return []
    finally:
        conn.close()
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def _name_argument(func: Any) -> Any:
    return click.argument("name", metavar="NAME", shell_complete=_complete_name)(func)


def _read_file(path: str) -> str:
    """A note's content from a file (`-`: stdin): UTF-8 text, bounded; a folder, a FIFO or
    a binary file is refused (exit 2)."""
    import os
    import stat

    from agenvoy_cli.notes.names import MAX_CONTENT_BYTES, decode_content

    if path == "-":
        return decode_content(read_limited(sys.stdin.buffer, "stdin"), "stdin")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise BadInput(f"{path}: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise BadInput(f"{path} is not a regular file")
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_CONTENT_BYTES + 4)
    return decode_content(data, path)


def _content(content: str | None, file: str | None) -> str | None:
    if content is not None and file is not None:
        raise BadInput("give the content once: --content TEXT or --file F, not both")
    return _read_file(file) if file is not None else content


def _render_note(doc: dict[str, Any]) -> str:
    verb = {"added": "added", "replaced": "replaced", "renamed": "renamed",
            "unchanged": "unchanged:"}.get(doc.get("action", ""), "")
    text = f"{verb} note {doc['name']!r} ({doc['bytes']} bytes)"
    if doc.get("renamed_from"):
        text += f" (was {doc['renamed_from']!r})"
    return text


@click.group("notes")
def command() -> None:
    """The operator's knowledge notes: named notes an agent reads before anything else.

    Agenvoy (v0.32.6 and later) offers them to its agent as find_knowledge; `agenvoy mcp`
    serves the same tool. Names follow Agenvoy's rules: at most 32 characters, no path
    separator, no glob character (* ? [ ]), no leading dot; without a NAME a note is named
    after the first line of its content. A home's legacy knowledge/*.md (Agenvoy through
    v0.32.5) is taken in once, by the first notes command.
    """


@command.command("add")
@click.argument("name", metavar="[NAME]", required=False)
@click.option("--content", metavar="TEXT", help="The note's text.")
@click.option("--file", "file", metavar="F", help="Read the note from a text file (`-`: stdin).")
@click.option("--from", "from_message", nargs=2, type=(str, click.IntRange(min=0)),
              metavar="SESSION SEQ",
              help="Save an archived message (SEQ as search shows it), e.g. an answer.")
@click.option("--replace", is_flag=True, help="Overwrite a note of the same name.")
@json_option
@click.pass_context
def add_cmd(ctx: click.Context, name: str | None, content: str | None, file: str | None,
            from_message: tuple[str, int] | None, replace: bool, as_json: bool) -> None:
    """Save a note (an existing NAME is refused unless --replace: exit 2)."""
    if sum(x is not None for x in (content, file, from_message)) != 1:
        raise BadInput("give the note's text with exactly one of --content TEXT, --file F "
                       "or --from SESSION SEQ")
    api = memory(ctx)
    if from_message is not None:
        doc = api.note_from_message(from_message[0], from_message[1], name, replace=replace,
                                    warn=warn)
    else:
        text = _content(content, file)
        assert text is not None
        source = "" if file is None else ("stdin" if file == "-" else f"file:{file}")
        doc = api.add_note(text, name, replace=replace, source=source, warn=warn)
    emit(doc, as_json, _render_note)


@command.command("list")
@format_option
@json_option
@click.pass_context
def list_cmd(ctx: click.Context, as_json: bool, fmt: str | None = None) -> None:
    """Every note, by name."""
    doc = memory(ctx).notes(warn=warn)
    emit(doc, as_json, lambda d: table(
        [(n["name"], human_time(n["updated_at"]), n["bytes"], n["source"] or "-")
         for n in d["knowledge_notes"]], ["name", "updated", "bytes", "source"])
         if d["knowledge_notes"] else "no notes (add one with `agenvoy notes add`)",
         fmt=fmt, rows="knowledge_notes")


@command.command("show")
@_name_argument
@json_option
@click.pass_context
def show_cmd(ctx: click.Context, name: str, as_json: bool) -> None:
    """One note: its content as it was saved (--json: with its name and times)."""
    doc = memory(ctx).note(name, warn=warn)
    emit(doc, as_json, lambda d: d["content"].rstrip("\n"))


@command.command("search")
@click.argument("words", nargs=-1, metavar="QUERY...")
@click.option("-q", "--query", "query_text", metavar="TEXT",
              help="The query as one option value.")
@click.option("--mode", type=click.Choice(["hybrid", "keyword", "semantic"]),
              default="hybrid", show_default=True,
              help="keyword (names and text, no model), semantic (meaning, across "
                   "languages) or both fused.")
@click.option("-n", "--limit", type=click.IntRange(1, 20), default=5, show_default=True,
              help="At most N notes.")
@click.option("--match", type=click.Choice(["all", "any"]), default=None,
              help="keyword: every term or any term (default: every term for 1-3 terms).")
@click.option("--budget", type=float, default=3.0, show_default=True, metavar="SECONDS",
              envvar="AGENVOY_SEARCH_BUDGET",
              help="At most this long embedding notes that have no vector yet; the rest "
                   "are found by keyword.")
@window_options("notes last changed (written, edited or replaced)")
@format_option
@json_option
@no_server_option
@click.pass_context
def search_cmd(ctx: click.Context, words: tuple[str, ...], query_text: str | None, mode: str,
               limit: int, match: str | None, budget: float, range_: str, since: str | None,
               until: str | None, as_json: bool, fmt: str | None = None,
               no_server: bool = False) -> None:
    """Notes related to QUERY, best first, each with a snippet; --range/--since/--until:
    only the notes last changed in that window."""
    from agenvoy_cli.search.defaults import check_budget

    query = one_query(words, query_text)
    check_budget(budget)
    when: dict[str, Any] = {"range": range_, "since": since, "until": until}
    doc = from_server(ctx, no_server, "search_notes", [query], {
        "mode": mode, "limit": limit, "match": match, "budget": budget, **when},
        wait=budget, models=mode != "keyword")
    doc = {**doc, "served_by": "server"} if doc is not None else {
        **memory(ctx).search_notes(query, mode=mode, limit=limit, match=match, budget=budget,
                                   warn=warn, **when), "served_by": "local"}
    if not as_json and fmt in (None, "table"):
        for note in doc["notes"]:
            warn(f"agenvoy: note: {note['message']}")
    emit(doc, as_json, _results_text, fmt=fmt, rows="results")


def _results_text(d: dict[str, Any]) -> str:
    if not d["results"]:
        return "no matching note"
    kind = d["results"][0]["score_kind"]
    nil = [bm25_nil(kind, h["score"]) for h in d["results"]]
    text = table([(h["rank"], h["name"], "~0" if z else f"{h['score']:.3f}", h["snippet"])
                  for h, z in zip(d["results"], nil)],
                 ["rank", "name", f"score ({kind})", "snippet"])
    return text + ("\n" + bm25_nil_why("notes") if any(nil) else "")


@command.command("edit")
@_name_argument
@click.option("--content", metavar="TEXT", help="The new text.")
@click.option("--file", "file", metavar="F", help="The new text from a file (`-`: stdin).")
@click.option("--rename", metavar="NEW", help="A new name (Agenvoy's rules).")
@click.option("--replace", is_flag=True, help="With --rename: overwrite a note named NEW.")
@json_option
@click.pass_context
def edit_cmd(ctx: click.Context, name: str, content: str | None, file: str | None,
             rename: str | None, replace: bool, as_json: bool) -> None:
    """Change a note: --content/--file/--rename, or in $EDITOR (on a terminal only)."""
    text = _content(content, file)
    api = memory(ctx)
    if text is None and rename is None:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise BadInput("stdin is not a terminal: give --content TEXT, --file F or "
                           "--rename NEW (the editor is only opened on a terminal)")
        shown = api.note(name, warn=warn)
        edited = click.edit(shown["content"], extension=".md", require_save=True)
        # (click.edit ends the text it hands the editor with a newline)
        if edited is None or edited in (shown["content"], shown["content"] + "\n"):
            # no write: another process may have changed the note meanwhile
            warn("agenvoy: note: not changed in the editor; nothing saved")
            emit({**shown, "action": "unchanged", "renamed_from": None}, as_json,
                 _render_note)
            return
        # saved only over the text the editor opened: a concurrent edit is never reverted
        emit(api.edit_note(name, edited, expect=shown["content"], warn=warn), as_json,
             _render_note)
        return
    emit(api.edit_note(name, text, rename=rename, replace=replace, warn=warn), as_json,
         _render_note)


@command.command("remove")
@_name_argument
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_context
def remove_cmd(ctx: click.Context, name: str, yes: bool, as_json: bool) -> None:
    """Delete a note (its text, its full-text entry and its vectors)."""
    api = memory(ctx)
    note = api.note(name, warn=warn)  # unknown: exit 3 before any question
    confirm_destructive(f"remove note {note['name']!r}?", f"remove note {note['name']!r}", yes)
    emit(api.remove_note(note["name"], warn=warn), as_json,
         lambda d: f"removed note {d['name']!r}")


@command.command("export")
@click.argument("directory", metavar="DIR")
@json_option
@click.pass_context
def export_cmd(ctx: click.Context, directory: str, as_json: bool) -> None:
    """Write every note to DIR as NAME.md (the form Agenvoy v0.32.5 kept them in)."""
    emit(memory(ctx).export_notes(directory, warn=warn), as_json,
         lambda d: f"wrote {d['count']} note(s) to {d['directory']}")
