"""agenvoy rag create|add|sync|list|files|search|remove: named document databases."""

from __future__ import annotations

from typing import Any

import click

from agenvoy_cli import rag
from agenvoy_cli.commands.common import (
    bm25_nil,
    bm25_nil_why,
    confirm_destructive,
    from_server,
    get_store,
    json_option,
    memory,
    no_server_option,
    one_query,
    window_options,
)
from agenvoy_cli.contract import list_document
from agenvoy_cli.errors import BadInput
from agenvoy_cli.output import ProgressBar, emit, format_option, human_time, table, warn, yes_no

PROGRESS_MIN = 10  # files to read before a progress bar is worth showing
NOTES_SHOWN = 20  # skip notes printed on stderr per run (all of them are in --json)
PREVIEW_LINES = 6  # lines of a chunk shown by a human-readable search
COST_NOTE_FILES = 20  # files to embed (or bytes, below) from which the cost is announced
COST_NOTE_BYTES = 2 << 20


def _size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    return None if value is None else rag.parse_size(value)


def name_argument(func: Any) -> Any:
    return click.argument("name", metavar="NAME", shell_complete=complete_database)(func)


def complete_database(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    from click.shell_completion import CompletionItem

    from agenvoy_cli.errors import AgenvoyError

    if param.name == "words" and (ctx.params.get("words") or ctx.params.get("all_")):
        return []  # `rag search NAME QUERY`: only NAME is a database
    try:
        names = [d["name"] for d in rag.list_databases(get_store(ctx))]
    except (AgenvoyError, OSError):
        return []
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def index_options(func: Any) -> Any:
    func = click.option("--vectors/--no-vectors", default=None,
                        help="Embed the chunks for semantic search (the default), or index "
                             "for keyword search only (fast; embed later with `rag sync NAME "
                             "--vectors`); remembered by the database.")(func)
    func = click.option("--hidden/--no-hidden", default=None,
                        help="Index hidden files and folders (dotfiles) too; remembered "
                             "by the database (default: no).")(func)
    return click.option("--max-file-size", "max_file_size", metavar="SIZE", callback=_size,
                        help="Skip files larger than SIZE (e.g. 500k, 4M); remembered by the "
                             f"database (default {rag.human_size(rag.DEFAULT_MAX_FILE_BYTES)})."
                        )(func)


def _report_notes(doc: dict[str, Any]) -> None:
    for note in doc["notes"]:
        warn(f"agenvoy: note: {note}")
    skipped = doc["skipped_files"]
    for item in skipped[:NOTES_SHOWN]:
        warn(f"agenvoy: note: skipped {item['path']}: {item['reason']}")
    if len(skipped) > NOTES_SHOWN:
        warn(f"agenvoy: note: ... and {len(skipped) - NOTES_SHOWN} more skipped "
             f"(see `agenvoy rag files {doc['database']}`)")


def _render_sync(doc: dict[str, Any]) -> str:
    parts = [f"indexed {doc['indexed']} file(s) ({doc['chunk_count']} chunks)",
             f"{doc['unchanged']} unchanged"]
    if doc["removed"]:
        parts.append(f"{doc['removed']} removed")
    if doc["skipped"]:
        parts.append(f"{doc['skipped']} skipped")
    return f"{doc['database']}: " + ", ".join(parts) + f" in {doc['seconds']:.1f} s"


def _announcer(name: str) -> Any:
    """The cost, said before the work: how much will be read and embedded."""

    def announce(files: int, size: int, embedding: bool) -> None:
        if embedding and (files >= COST_NOTE_FILES or size >= COST_NOTE_BYTES):
            warn(f"agenvoy: note: {files} files ({rag.human_size(size)}) to read and embed "
                 f"into {name!r}; embedding runs on this machine's CPU and can take long "
                 f"(--no-vectors indexes for keyword search now; `agenvoy rag sync {name} "
                 "--vectors` embeds later)")

    return announce


def _index(ctx: click.Context, name: str, paths: list[str] | None, as_json: bool,
           create: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
    """Index (or create, then index) through the API, with progress and the cost note."""
    bar = ProgressBar("indexing", PROGRESS_MIN, not as_json, unit="files")
    try:
        if create is not None:
            doc = memory(ctx).rag_create(name, progress=bar, announce=_announcer(name),
                                         **create)
        else:
            doc = memory(ctx).rag_sync(name, paths, progress=bar, announce=_announcer(name),
                                       **options)
    except KeyboardInterrupt:
        bar.close()
        warn(f"agenvoy: what was indexed is kept; run `agenvoy rag sync {name}` to finish")
        raise
    finally:
        bar.close()
    if create is None or "sync" in doc:
        _report_notes(doc.get("sync", doc))
    return doc


@click.group("rag")
def command() -> None:
    """Named document databases (notes, an inbox folder, a code repository): index files
    and folders, keep them in sync, search them by keyword, meaning or both.

    An agent's two tools are `agenvoy rag list --json` and
    `agenvoy rag search NAME QUERY --json`."""


@command.command("create", short_help="Create a database, optionally bound to folders.")
@name_argument
@click.option("--path", "paths", multiple=True, metavar="PATH",
              help="A folder (or file) the database watches; repeatable. Indexed now.")
@click.option("--no-index", is_flag=True, help="Record the paths; index them at the next sync.")
@index_options
@json_option
@click.pass_context
def create_cmd(ctx: click.Context, name: str, paths: tuple[str, ...], no_index: bool,
               max_file_size: int | None, hidden: bool | None, vectors: bool | None,
               as_json: bool) -> None:
    """Create the database NAME (a name like a session id), optionally bound to folders."""
    doc = _index(ctx, name, None, as_json, create={
        "paths": list(paths), "index": not no_index, "max_file_bytes": max_file_size,
        "hidden": hidden, "vectors": vectors})
    emit(doc, as_json, lambda d: f"created {d['database']}" + (
        f"; {_render_sync(d['sync'])}" if "sync" in d else ""))


@command.command("add", short_help="Index files or folders into a database.")
@name_argument
@click.argument("paths", nargs=-1, required=True, type=click.Path(), metavar="PATH...")
@index_options
@json_option
@click.pass_context
def add_cmd(ctx: click.Context, name: str, paths: tuple[str, ...], max_file_size: int | None,
            hidden: bool | None, vectors: bool | None, as_json: bool) -> None:
    """Index files or folders (recursively) into NAME; they are watched from now on.

    Folders honour .gitignore; binaries and files over --max-file-size are skipped with a
    note on stderr. A file that did not change since it was indexed is not read again."""
    doc = _index(ctx, name, list(paths), as_json, max_file_bytes=max_file_size,
                 hidden=hidden, vectors=vectors)
    emit(doc, as_json, _render_sync)


@command.command("sync", short_help="Re-index what changed; drop what was deleted.")
@click.argument("name", metavar="NAME", required=False, shell_complete=complete_database)
@click.option("--all", "all_", is_flag=True, help="Sync every database.")
@click.option("--rebuild", is_flag=True,
              help="Re-read and re-embed every file (after changing the embedder).")
@index_options
@format_option
@json_option
@click.pass_context
def sync_cmd(ctx: click.Context, name: str | None, all_: bool, rebuild: bool,
             max_file_size: int | None, hidden: bool | None, vectors: bool | None,
             as_json: bool, fmt: str | None = None) -> None:
    """Re-index what changed in NAME's paths (size, mtime, then content hash) and drop
    what was deleted. Resumes an interrupted run. Cron-ready: `rag sync --all`."""
    if all_ == (name is not None):
        raise BadInput("give a database NAME or --all")
    names = [d["name"] for d in memory(ctx).rag_databases()["databases"]] if all_ else [name]
    docs = [_index(ctx, n, None, as_json, max_file_bytes=max_file_size, hidden=hidden,
                   rebuild=rebuild, vectors=vectors) for n in names if n is not None]
    if all_:
        emit(list_document("databases", docs), as_json,
             lambda d: "\n".join(_render_sync(x) for x in d["databases"]) or "no databases",
             fmt=fmt, rows="databases")
    else:
        emit(docs[0], as_json, _render_sync, fmt=fmt)


@command.command("list", short_help="Databases: files, chunks, size, last sync (list_rag).")
@format_option
@json_option
@click.pass_context
def list_cmd(ctx: click.Context, as_json: bool,
        fmt: str | None = None) -> None:
    """Every database: files, chunks, size, last sync (list_rag)."""
    emit(memory(ctx).rag_databases(), as_json, lambda d: table(
        [(x["name"], x["file_count"], x["chunk_count"], rag.human_size(x["bytes"]),
          yes_no(x["has_vectors"]), human_time(x["synced_at"], "never"),
          ", ".join(x["paths"]) or "-")
         + ((f"{x['pending_count']} pending",) if x["pending_count"] else ())
         for x in d["databases"]],
        ["database", "files", "chunks", "size", "vectors", "last sync", "paths"],
    ) if d["databases"] else "no RAG databases (create one with `agenvoy rag create`)",
         fmt=fmt, rows="databases")


@command.command("files", short_help="The files of a database and their state.")
@name_argument
@click.option("--skipped", is_flag=True, help="Only the files that were skipped, and why.")
@format_option
@json_option
@click.pass_context
def files_cmd(ctx: click.Context, name: str, skipped: bool, as_json: bool,
        fmt: str | None = None) -> None:
    """The files of NAME: format, state (done, pending, skipped and why), size, chunks."""
    emit(memory(ctx).rag_files(name, skipped=skipped), as_json, lambda d: table(
        [(f["path"], f["format"] or "-", f["state"] + (f" ({f['reason']})" if f["reason"]
                                                       else ""),
          f["bytes"], f["chunk_count"]) for f in d["files"]],
        ["path", "format", "state", "bytes", "chunks"]) if d["files"] else "no files",
             fmt=fmt, rows="files")


# notes the text output shows on stdout (in place of results, or below them), not on stderr
ON_STDOUT = ("nothing_searchable", "any_term")


def _render_search(doc: dict[str, Any]) -> str:
    codes = {n["code"] for n in doc.get("notes", ())}
    if not doc["results"]:
        if "nothing_searchable" in codes or doc.get("match") == "none":
            return f"nothing searchable in: {doc['query']}"
        return f"no matches for: {doc['query']}"
    many = len(doc["databases"]) > 1
    out: list[str] = []
    nil = False
    for hit in doc["results"]:
        where = f"{hit['path']}:{hit['line_start']}-{hit['line_end']}"
        head = f"  § {hit['heading']}" if hit["heading"] else ""
        prefix = f"[{hit['database']}] " if many else ""
        zero = bm25_nil(hit["score_kind"], hit["score"])
        nil = nil or zero
        score = "~0" if zero else f"{hit['score']:.4g}"
        out.append(f"{hit['rank']}. {prefix}{where}{head}  ({hit['score_kind']} {score})")
        lines = hit["text"].split("\n")
        out.extend("    " + ln for ln in lines[:PREVIEW_LINES])
        if len(lines) > PREVIEW_LINES:
            out.append(f"    … ({len(lines) - PREVIEW_LINES} more lines)")
        out.append("")
    if nil:
        out.append(bm25_nil_why("chunks"))
    if "any_term" in codes:
        out.append("(no chunk has every term; showing chunks with any of them)")
    return "\n".join(out).rstrip("\n")


@command.command("search", short_help="Search a database (or --all) (search_rag).")
@click.argument("words", nargs=-1, metavar="NAME [QUERY...]", shell_complete=complete_database)
@click.option("-q", "--query", "query_text", metavar="TEXT",
              help="The query as one option value (safe for text starting with '-').")
@click.option("--all", "all_", is_flag=True, help="Search every database (then no NAME).")
@click.option("--mode", type=click.Choice(rag.MODES), default=rag.DEFAULT_MODE,
              show_default=True,
              help="keyword: every term (Chinese by any 2+ character substring, \"quoted "
                   "phrases\" in order); semantic: by meaning; hybrid: both, fused.")
@click.option("--limit", type=click.IntRange(min=1, max=1000), default=rag.DEFAULT_LIMIT,
              show_default=True, help="At most this many chunks.")
@click.option("--match", type=click.Choice(["all", "any"]), default=None,
              help="keyword: every term (default for 1-3 terms; any term when no chunk "
                   "has every term) or any term (default for longer queries and for "
                   "questions: a '?' last or what/when/where/who/why/how/which first).")
@window_options("documents last modified (the file's time at its sync)")
@format_option
@json_option
@no_server_option
@click.pass_context
def search_cmd(ctx: click.Context, words: tuple[str, ...], query_text: str | None, all_: bool,
               mode: str, limit: int, match: str | None, range_: str, since: str | None,
               until: str | None, as_json: bool, fmt: str | None = None,
               no_server: bool = False) -> None:
    """Search the database NAME (or --all) for QUERY (several words are joined) (search_rag).

    Each result: path, line range, heading, score and the chunk's text. keyword never
    loads the vector index. No match is not an error (exit 0). --range/--since/--until:
    only the chunks of documents last modified in that window."""
    names: list[str] | None
    if all_:
        names, query = None, one_query(words, query_text)
    else:
        if not words or (len(words) < 2 and query_text is None):
            raise BadInput("give NAME and QUERY (or --all QUERY; -q/--query TEXT for either)")
        names, query = [words[0]], one_query(words[1:], query_text)
    when = {"range": range_, "since": since, "until": until}
    doc = from_server(ctx, no_server, "rag_search", [query, names],
                      {"mode": mode, "limit": limit, "match": match, **when},
                      models=mode != "keyword")
    doc = {**doc, "served_by": "server"} if doc is not None else {
        **memory(ctx).rag_search(query, names, mode=mode, limit=limit, match=match,
                                 range=range_, since=since, until=until),
        "served_by": "local"}
    for note in doc["notes"]:
        if note["code"] not in ON_STDOUT:  # those are in the text output
            warn(f"agenvoy: note: {note['message']}")
    emit(doc, as_json, _render_search, fmt=fmt, rows="results")


@command.command("remove", short_help="Delete a database (not your files).")
@name_argument
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_context
def remove_cmd(ctx: click.Context, name: str, yes: bool, as_json: bool) -> None:
    """Delete the database NAME: its rows and vectors (your files are not touched)."""
    api = memory(ctx)
    info = api.rag_files(name)["summary"]  # NotFound before asking anything
    confirm_destructive(f"remove RAG database {name!r} ({info['file_count']} files, "
                        f"{info['chunk_count']} chunks)?", f"remove {name!r}", yes)
    doc = api.rag_remove(name)
    emit(doc, as_json, lambda d: f"removed {d['database']}: {d['file_count']} file(s), "
         f"{d['chunk_count']} chunk(s)")
