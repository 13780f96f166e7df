"""One way to print: emit() for results, warn() for stderr. JSON output is one document."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import click
import orjson

from agenvoy_cli.contract import document, error_document
from agenvoy_cli.secrets import mask


def to_json(doc: Any) -> str:
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()


FORMATS = ("table", "json", "jsonl", "csv")


def format_option(func: Any) -> Any:
    """--format for a command that prints a list (its `rows` key in emit())."""
    return click.option(
        "--format", "fmt", type=click.Choice(FORMATS), default=None,
        help="table (for people; the default), json (one document, as --json), jsonl "
             "(one JSON object per line, one per item), csv (a header row, one row per "
             "item).")(func)


def emit(doc: Any, as_json: bool, render: Callable[[Any], str | None] | None = None, *,
         fmt: str | None = None, rows: str | None = None) -> None:
    """Print a result: exactly one JSON document with --json (schema_version first), the
    list under `rows` as JSON Lines or CSV with --format jsonl|csv (a result that is no
    list: itself, one line or row), else the human rendering (--format table)."""
    if fmt in ("jsonl", "csv") and isinstance(doc, dict):
        items = (doc.get(rows) or []) if rows is not None else [doc]  # one object: one line
        click.echo(_jsonl(items) if fmt == "jsonl" else _csv(items), nl=False)
        return
    if fmt == "json":
        as_json = True
    elif fmt == "table":
        as_json = False
    if as_json:
        click.echo(mask(to_json(document(doc) if isinstance(doc, dict) else doc), patterns=False))
        return
    text = render(doc) if render else to_json(doc)
    if text:
        click.echo(mask(text, patterns=False))


def _jsonl(items: Sequence[Any]) -> str:
    return "".join(orjson.dumps(item, option=orjson.OPT_NON_STR_KEYS).decode() + "\n"
                   for item in items)


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "; ".join(value)
    if isinstance(value, (list, dict)):
        return orjson.dumps(value).decode()
    return str(value)


def _csv(items: Sequence[Any]) -> str:
    """One row per item; the columns are every key met, in order of appearance."""
    import csv
    import io

    columns: dict[str, None] = {}
    for item in items:
        if isinstance(item, dict):
            columns.update(dict.fromkeys(item))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(list(columns))
    for item in items:
        if isinstance(item, dict):
            writer.writerow([_csv_cell(item.get(c)) for c in columns])
    return out.getvalue()


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """A table for people: booleans as yes/no, None as -, East-Asian wide characters
    aligned (tabulate measures them with wcwidth)."""
    # Plain ASCII rows are formatted here: tabulate's import alone (~60 ms with wcwidth) costs
    # more than 10,000 rows, and bench/scale.py's `session list` target (<= 2x an append)
    # holds only without it; tabulate takes ~35 us a row besides.
    cells = [tuple(_plain(v) for v in row) for row in rows]
    if all(len(row) == len(headers) for row in cells):
        text = plain_table(cells, headers)
        if text is not None:
            return text
    rows = [[cell(v) for v in row] for row in rows]
    from tabulate import tabulate

    return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)


def yes_no(value: Any) -> str:
    return "yes" if value else "no"


def cell(value: Any) -> Any:
    if isinstance(value, bool):
        return yes_no(value)
    return "-" if value is None else value


def human_time(value: str | int | None, missing: str = "-") -> str:
    """An RFC 3339 string or UTC unix ns as local 'YYYY-MM-DD HH:MM:SS' for a table."""
    from datetime import datetime

    if value is None or value == "":
        return missing
    if isinstance(value, int):
        moment = datetime.fromtimestamp(value // 10**9)  # whole seconds: no float rounding up
    else:
        try:
            moment = datetime.fromisoformat(value).astimezone()
        except ValueError:
            return value
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _plain(value: Any) -> str:
    """A cell as output.cell shows it, as the text tabulate prints (stripped)."""
    if value is None:
        return "-"
    if value is True or value is False:
        return yes_no(value)
    return str(value).strip()


def plain_table(rows: list[tuple[str, ...]], headers: Sequence[str]) -> str | None:
    """tabulate's "simple" format (left-aligned text, columns at least 2 wider than their
    header) of cells already text (stripped, as many as headers); None unless every cell is
    one line of ASCII (then `table` asks tabulate). A test compares the two."""
    joined = "\0".join(map("\0".join, rows))
    if not joined.isascii() or "\n" in joined or "\t" in joined:
        return None
    headers = [str(h).strip() for h in headers]
    columns = list(zip(*rows)) or [() for _ in headers]
    widths = [max(len(h) + 2, max(map(len, col), default=0)) for h, col in zip(headers, columns)]
    fmt = "  ".join(f"%-{w}s" for w in widths)
    out = [(fmt % tuple(headers)).rstrip(), "  ".join("-" * w for w in widths)]
    out += [line.rstrip() for line in map(fmt.__mod__, rows)]
    return "\n".join(out)


READER_GONE = 141  # 128 + SIGPIPE: what the shell reports for a Unix tool whose reader left


def reader_gone() -> int:
    """stdout's reader went away (`agenvoy export | head`): nothing more can reach it, so
    stdout becomes /dev/null (the exit's flush of what is buffered cannot fail again) and
    the program exits quietly with READER_GONE, as a Unix tool killed by SIGPIPE does.
    SIGPIPE itself stays ignored: the MCP HTTP server must outlive a client that hung up."""
    import os

    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):  # no stdout file descriptor (embedded): nothing to swap
        pass
    return READER_GONE


def warn(message: str) -> None:
    click.echo(mask(message), err=True)


def fail(message: str, code: int, kind: str, as_json: bool, prefix: str = "error") -> None:
    """An error: one line on stderr; with --json also the error document on stdout."""
    warn(f"agenvoy: {prefix}: {message}" if prefix else f"agenvoy: {message}")
    if as_json:
        click.echo(to_json(error_document(code, kind, mask(message))))


def wants_json(args: Sequence[str]) -> bool:
    """Whether a command line asks for JSON (--json, --format json|jsonl), looking only
    before `--`: errors found while parsing it are reported the way it asked."""
    for i, arg in enumerate(args):
        if arg == "--":
            return False
        if arg == "--json" or arg in ("--format=json", "--format=jsonl"):
            return True
        if arg == "--format" and i + 1 < len(args) and args[i + 1] in ("json", "jsonl"):
            return True
    return False


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


PROGRESS_SECONDS = 5.0  # outside a terminal: a progress line at most this often


def _progress_seconds() -> float:
    """AGENVOY_PROGRESS_SECONDS (settings.py)."""
    from agenvoy_cli.settings import Settings

    return Settings.from_environment().progress_seconds


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def progress_line(done: int, total: int, elapsed: float, unit: str) -> str:
    """`120/400 messages (12.3 messages/s, 10 s, about 23 s left)`: the rate with three
    significant digits (never a rate rounded to 0 while things move) and the time left at
    that rate."""
    rate = done / elapsed if elapsed > 0 else 0.0
    line = f"{done}/{total} {unit} ({rate:.3g} {unit}/s, {_duration(elapsed)}"
    if rate > 0 and done < total:
        line += f", about {_duration((total - done) / rate)} left"
    return line + ")"


class ProgressBar:
    """progress(done, total) for a long run, on stderr. On a terminal (and without --json):
    a bar, once `total` is worth one (at least `minimum`). Elsewhere (a pipe, a log file,
    an agent's subprocess): a line `agenvoy: <label> 12/40 files (3.1 files/s, 4 s, about
    9 s left)` (progress_line) every
    AGENVOY_PROGRESS_SECONDS (default 5), and a last one at the end if any was printed, so
    long work is never silent and short work stays quiet."""

    def __init__(self, label: str, minimum: int, enabled: bool = True,
                 unit: str = "items") -> None:
        import time

        self.label, self.minimum, self.unit = label, minimum, unit
        self.bar_mode = enabled and sys.stderr.isatty()
        self.bar: Any = None
        self.every = _progress_seconds()
        self.started = self.last = time.monotonic()
        self.printed = False

    def __call__(self, done: int, total: int) -> None:
        if self.bar_mode:
            self._bar(done, total)
            return
        import time

        now = time.monotonic()
        if done == 0:
            return
        if now - self.last >= self.every or (done >= total and self.printed):
            line = progress_line(done, total, now - self.started, self.unit)
            warn(f"agenvoy: {self.label} {line}")
            self.last, self.printed = now, True

    def _bar(self, done: int, total: int) -> None:
        if self.bar is None:
            if total < self.minimum:
                return
            self.bar = click.progressbar(length=total, label=self.label, file=sys.stderr,
                                         show_pos=True)
            self.bar.__enter__()
        self.bar.update(done - self.bar.pos)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None
