"""What every command shares: the Store of the home, the --json flag, session arguments."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from agenvoy_cli.errors import BadInput
from agenvoy_cli.home.layout import Layout, resolve_home, validate_name

if TYPE_CHECKING:  # imported when used: the CLI's fast path (from_server) needs neither
    from agenvoy_cli.api import Memory
    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])


def settings_of(ctx: click.Context) -> Settings:
    """The settings the CLI's root built from the environment it started with (cli.py);
    without the home's config.json (get_store adds it)."""
    obj = ctx.find_root().obj
    if obj is None:
        obj = ctx.find_root().obj = {}
    if "settings" not in obj:
        from agenvoy_cli.environment import environment
        from agenvoy_cli.settings import Settings

        obj["settings"] = Settings(environment())
    return obj["settings"]  # type: ignore[no-any-return]


def given_budget(ctx: click.Context, budget: float) -> float:
    """--budget as given, else the settings' (AGENVOY_SEARCH_BUDGET), else its default."""
    from click.core import ParameterSource

    if ctx.get_parameter_source("budget") is ParameterSource.DEFAULT:
        return settings_of(ctx).search_budget
    return budget


def home_of(ctx: click.Context) -> Layout:
    """The layout of the home the command line names (--home, else AGENVOY_HOME)."""
    root = ctx.find_root()
    home = (root.obj or {}).get("home", (root.params or {}).get("home"))
    return Layout(resolve_home(home, settings_of(ctx).env))


def get_store(ctx: click.Context) -> Store:
    obj = ctx.find_root().obj or {}
    if "store" not in obj:
        from agenvoy_cli.home.config import load_settings
        from agenvoy_cli.vectors.hooks import open_store

        layout = home_of(ctx)
        # obj["embedders"]: a caller running several commands in one process (tests) shares
        # its models between their Stores
        obj["store"] = open_store(layout, load_settings(layout, settings_of(ctx)),
                                  embedders=obj.get("embedders"))
        ctx.call_on_close(obj["store"].close)
    return obj["store"]


def _root_json(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    """--json on the command, or `agenvoy --json COMMAND`."""
    return bool(value or (ctx.find_root().obj or {}).get("json"))


def memory(ctx: click.Context) -> Memory:
    """The Python API over this command's home: the commands call it as any agent would."""
    from agenvoy_cli.api import Memory

    return Memory(store=get_store(ctx))


# FTS5's BM25 weighs a word by how few units hold it: a word that half the units or more
# hold (with one unit, every word) scores ~0 (1e-6), which 0.000 or 1e-06 would show as no
# match. The JSON keeps the value (docs/json-vocabulary.md); the text says ~0 and why.
_BM25_NIL = 0.0005


def bm25_nil(kind: str, score: float) -> bool:
    """Whether a score is BM25's ~0, shown as `~0` in text output."""
    return kind == "bm25" and score < _BM25_NIL


def bm25_nil_why(units: str) -> str:
    """The line under a text output that shows a `~0` score (units: "notes", "chunks")."""
    return (f"~0: the matched words are in half the {units} or more, which BM25 gives no "
            "weight; the order is the index's")


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, callback=_root_json,
                        help="Print exactly one JSON document on stdout.")(func)


def window_options(what: str) -> Callable[[F], F]:
    """--range, --since and --until of a search (timespec.window parses them): only the
    units whose time (`what`: "notes last changed", ...) is in that window."""

    def wrap(func: F) -> F:
        func = click.option("--until", metavar="TIME",
                            help=f"Only {what} at or before TIME (a date alone means through "
                                 "that day).")(func)
        func = click.option("--since", metavar="TIME",
                            help=f"Only {what} at or after TIME: a date/time, 'yesterday', "
                                 "or a duration ago (90m, 7d ago, 1mo).")(func)
        return click.option("--range", "range_", metavar="DURATION", default="all",
                            show_default=True,
                            help=f"Only {what} in the last DURATION: 30m, 12h, 7d, 2w, 1mo, "
                                 "1y (m is minutes, mo months).")(func)

    return wrap


def session_argument(func: F) -> F:
    return click.argument("session_id", metavar="SESSION",
                          shell_complete=complete_session)(func)


def complete_session(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Session ids: the home's session folders (directory entries only) and the session
    table (sessions whose folder is gone but whose archive remains); no history.json."""
    from click.shell_completion import CompletionItem

    from agenvoy_cli.conversation import sessions
    from agenvoy_cli.errors import AgenvoyError

    try:  # a bad home or a planted link: no completions, never a traceback
        layout = home_of(ctx)
        db_exists = layout.db.exists()
    except (OSError, AgenvoyError):
        return []
    try:
        names = set(sessions.folder_names(layout.sessions))
    except Exception:  # completion must never fail loudly (a symlinked sessions/ ...)
        names = set()
    if db_exists:
        from agenvoy_cli.home import sqlite

        try:  # read-only, creating no file (as every read)
            conn = sqlite.connect(layout.db, 1.0, readonly=True)
        except Exception:
            conn = None
        if conn is not None:
            try:
                names.update(sessions.rows(conn))
            except Exception:  # a damaged archive: the folders still complete
                pass
            finally:
                conn.close()
    return [CompletionItem(n) for n in sorted(names) if n.startswith(incomplete)]


def confirm_destructive(question: str, refusal: str, yes: bool) -> None:
    """Ask on a terminal; without one, a destructive command needs --yes (exit 2)."""
    import sys

    from agenvoy_cli.errors import BadInput

    if yes:
        return
    if not sys.stdin.isatty():
        raise BadInput(f"refusing to {refusal} without --yes (stdin is not a terminal)")
    if not click.confirm(question, err=True):
        raise click.Abort()


def checked_session(session_id: str) -> str:
    return validate_name(session_id)


def one_query(words: tuple[str, ...] | list[str], option: str | None) -> str:
    """The query: the words (joined) or -q/--query, exactly one of them."""
    if words and option is not None:
        raise BadInput("give the query once: as words or with -q/--query, not both")
    text = option if option is not None else " ".join(words)
    if not text.strip():
        raise click.UsageError("give a QUERY (or -q/--query TEXT)")
    return text


_CHUNK = 1 << 20


def read_limited(handle: Any, where: str, limit: int | None = None) -> bytes:
    """All of a binary stream, read in chunks and refused (exit 2) as soon as it passes
    `limit` (None: the settings' max_input_bytes, AGENVOY_MAX_INPUT_BYTES): /dev/zero or an
    endless pipe never grows memory past it."""
    from agenvoy_cli.errors import BadInput

    if limit is None:
        from agenvoy_cli.settings import Settings

        limit = Settings.from_environment().max_input_bytes

    data = bytearray()
    while True:
        chunk = handle.read(min(_CHUNK, limit + 1 - len(data)))
        if not chunk:
            return bytes(data)
        data += chunk
        if len(data) > limit:
            raise BadInput(f"{where} is larger than {limit} bytes (set "
                           "AGENVOY_MAX_INPUT_BYTES to allow more)")


def no_server_option(func: F) -> F:
    return click.option("--no-server", is_flag=True,
                        help="Answer here, not through the home's running `agenvoy mcp "
                             "--http` server (also AGENVOY_NO_SERVER=1).")(func)


def from_server(ctx: click.Context, no_server: bool, method: str, args: list[Any],
                kwargs: dict[str, Any], wait: float = 0.0, *,
                models: bool | Callable[[], bool] = False) -> dict[str, Any] | None:
    """The document Memory.METHOD would return, from the home's running HTTP server (no
    chromadb, no model loaded here), or None: answer locally (server/fastpath.py).
    `models`: the local answer would load the models (or a function that says so, asked
    only when no server runs); with the `server` setting `auto` the home's background
    server is started first (server/lifecycle.py)."""
    if no_server:
        return None
    from agenvoy_cli.output import warn
    from agenvoy_cli.server.fastpath import ask

    layout, settings = home_of(ctx), settings_of(ctx)
    answer = ask(layout, method, args, kwargs, wait, settings)
    if answer is None and models and not settings.no_server:
        from agenvoy_cli.home.config import load_settings

        full = load_settings(layout, settings)  # `server` may be in config.json
        if full.server_auto and (models() if callable(models) else models):
            answer = _ask_started(layout, full, method, args, kwargs, wait)
    if answer is None:
        return None
    for line in answer.get("warnings") or []:
        warn(line)
    return answer["doc"]  # type: ignore[no-any-return]


def _ask_started(layout: Layout, settings: Settings, method: str, args: list[Any],
                 kwargs: dict[str, Any], wait: float) -> dict[str, Any] | None:
    """Start the background server (`server = auto`), then ask it; None (said on stderr)
    when it cannot start: the search is answered here."""
    from agenvoy_cli.errors import AgenvoyError
    from agenvoy_cli.output import warn
    from agenvoy_cli.server.fastpath import ask
    from agenvoy_cli.server.lifecycle import start

    try:
        start(layout, settings, settings.server_idle)
    except AgenvoyError as exc:
        warn(f"agenvoy: note: the background server did not start ({exc}); searching locally")
        return None
    return ask(layout, method, args, kwargs, wait, settings)
