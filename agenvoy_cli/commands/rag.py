"""agenvoy rag create|add|sync|list|files|search|remove: named document databases."""

from __future__ import annotations

from typing import Any

import click

from agenvoy_cli import rag
from agenvoy_cli.commands.common import confirm_destructive, get_store, json_option
from agenvoy_cli.errors import BadInput
from agenvoy_cli.output import ProgressBar, emit, table, warn

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
    skipped = doc["skipped"]
    for item in skipped[:NOTES_SHOWN]:
        warn(f"agenvoy: note: skipped {item['path']}: {item['reason']}")
    if len(skipped) > NOTES_SHOWN:
        warn(f"agenvoy: note: ... and {len(skipped) - NOTES_SHOWN} more skipped "
             f"(see `agenvoy rag files {doc['database']}`)")


def _render_sync(doc: dict[str, Any]) -> str:
    parts = [f"indexed {doc['indexed']} file(s) ({doc['chunks']} chunks)",
             f"{doc['unchanged']} unchanged"]
    if doc["removed"]:
        parts.append(f"{doc['removed']} removed")
    if doc["skipped"]:
        parts.append(f"{len(doc['skipped'])} skipped")
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
           **options: Any) -> dict[str, Any]:
    store = get_store(ctx)
    bar = ProgressBar("indexing", PROGRESS_MIN, not as_json, unit="files")
    try:
        report = rag.sync(store, name, paths, progress=bar, announce=_announcer(name),
                          **options)
    except KeyboardInterrupt:
        bar.close()
        warn(f"agenvoy: what was indexed is kept; run `agenvoy rag sync {name}` to finish")
        raise
    finally:
        bar.close()
    doc = report.as_dict()
    _report_notes(doc)
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
    store = get_store(ctx)
    db = rag.create(store, name, paths, max_file_bytes=max_file_size, hidden=hidden,
                    vectors=vectors)
    doc: dict[str, Any] = {"database": db.name, "action": "created",
                           "paths": [s.path for s in db.sources]}
    if paths and not no_index:
        doc["sync"] = _index(ctx, name, None, as_json)
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
@json_option
@click.pass_context
def sync_cmd(ctx: click.Context, name: str | None, all_: bool, rebuild: bool,
             max_file_size: int | None, hidden: bool | None, vectors: bool | None,
             as_json: bool) -> None:
    """Re-index what changed in NAME's paths (size, mtime, then content hash) and drop
    what was deleted. Resumes an interrupted run. Cron-ready: `rag sync --all`."""
    if all_ == (name is not None):
        raise BadInput("give a database NAME or --all")
    names = [d["name"] for d in rag.list_databases(get_store(ctx))] if all_ else [name]
    docs = [_index(ctx, n, None, as_json, max_file_bytes=max_file_size, hidden=hidden,
                   rebuild=rebuild, vectors=vectors) for n in names if n is not None]
    if all_:
        emit({"databases": docs}, as_json,
             lambda d: "\n".join(_render_sync(x) for x in d["databases"]) or "no databases")
    else:
        emit(docs[0], as_json, _render_sync)


@command.command("list", short_help="Databases: files, chunks, size, last sync (list_rag).")
@json_option
@click.pass_context
def list_cmd(ctx: click.Context, as_json: bool) -> None:
    """Every database: files, chunks, size, last sync (list_rag)."""
    dbs = rag.list_databases(get_store(ctx))
    emit({"databases": dbs}, as_json, lambda d: table(
        [(x["name"], x["files"], x["chunks"], rag.human_size(x["bytes"]),
          x["last_sync"] or "never", ", ".join(x["paths"]) or "-")
         + ((f"{x['pending']} pending",) if x["pending"] else ())
         for x in d["databases"]],
        ["database", "files", "chunks", "size", "last sync", "paths"],
    ) if d["databases"] else "no RAG databases (create one with `agenvoy rag create`)")


@command.command("files", short_help="The files of a database and their state.")
@name_argument
@click.option("--skipped", is_flag=True, help="Only the files that were skipped, and why.")
@json_option
@click.pass_context
def files_cmd(ctx: click.Context, name: str, skipped: bool, as_json: bool) -> None:
    """The files of NAME: format, state (done, pending, skipped and why), size, chunks."""
    info = rag.list_files(get_store(ctx), name)
    files = info.pop("files_list")
    if skipped:
        files = [f for f in files if f["state"] == "skipped"]
    doc = {"database": info["name"], "summary": info, "files": files}
    emit(doc, as_json, lambda d: table(
        [(f["path"], f["format"] or "-", f["state"] + (f" ({f['reason']})" if f["reason"]
                                                       else ""),
          f["bytes"], f["chunks"]) for f in d["files"]],
        ["path", "format", "state", "bytes", "chunks"]) if d["files"] else "no files")


def _render_search(doc: dict[str, Any]) -> str:
    if not doc["results"]:
        if doc.get("match") == "none":
            return f"nothing searchable in: {doc['query']}"
        return f"no matches for: {doc['query']}"
    many = len(doc["databases"]) > 1
    out: list[str] = []
    for hit in doc["results"]:
        where = f"{hit['path']}:{hit['line_start']}-{hit['line_end']}"
        head = f"  § {hit['heading']}" if hit["heading"] else ""
        prefix = f"[{hit['database']}] " if many else ""
        out.append(f"{prefix}{where}{head}  ({hit['score']:.4g})")
        lines = hit["text"].split("\n")
        out.extend("    " + ln for ln in lines[:PREVIEW_LINES])
        if len(lines) > PREVIEW_LINES:
            out.append(f"    … ({len(lines) - PREVIEW_LINES} more lines)")
        out.append("")
    if doc.get("match") == "any":
        out.append("(no chunk has every term; showing chunks with any of them)"
                   if doc["mode"] == "keyword" else "")
    return "\n".join(out).rstrip("\n")


@command.command("search", short_help="Search a database (or --all) (search_rag).")
@click.argument("words", nargs=-1, required=True, metavar="NAME QUERY...")
@click.option("--all", "all_", is_flag=True, help="Search every database (then no NAME).")
@click.option("--mode", type=click.Choice(rag.MODES), default=rag.DEFAULT_MODE,
              show_default=True,
              help="keyword: every term (Chinese by any 2+ character substring, \"quoted "
                   "phrases\" in order); semantic: by meaning; hybrid: both, fused.")
@click.option("--limit", type=click.IntRange(min=1, max=1000), default=rag.DEFAULT_LIMIT,
              show_default=True, help="At most this many chunks.")
@json_option
@click.pass_context
def search_cmd(ctx: click.Context, words: tuple[str, ...], all_: bool, mode: str, limit: int,
               as_json: bool) -> None:
    """Search the database NAME (or --all) for QUERY (several words are joined) (search_rag).

    Each result: path, line range, heading, score and the chunk's text. keyword never
    loads the vector index. No match is not an error (exit 0)."""
    names: list[str] | None
    if all_:
        names, query = None, " ".join(words)
    else:
        if len(words) < 2:
            raise BadInput("give NAME and QUERY (or --all QUERY)")
        names, query = [words[0]], " ".join(words[1:])
    result = rag.search(get_store(ctx), names, query, mode, limit=limit)
    for note in result.notes:
        warn(f"agenvoy: note: {note}")
    emit(result.as_dict(), as_json, _render_search)


@command.command("remove", short_help="Delete a database (not your files).")
@name_argument
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_context
def remove_cmd(ctx: click.Context, name: str, yes: bool, as_json: bool) -> None:
    """Delete the database NAME: its rows and vectors (your files are not touched)."""
    store = get_store(ctx)
    info = rag.list_files(store, name)  # NotFound before asking anything
    confirm_destructive(f"remove RAG database {name!r} ({info['files']} files, "
                        f"{info['chunks']} chunks)?", f"remove {name!r}", yes)
    doc = rag.remove(store, name)
    emit(doc, as_json, lambda d: f"removed {d['database']}: {d['files']} file(s), "
         f"{d['chunks']} chunk(s)")
