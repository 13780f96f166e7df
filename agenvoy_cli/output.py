"""One way to print: emit() for results, warn() for stderr. JSON output is one document."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import click
import orjson


def to_json(doc: Any) -> str:
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()


def emit(doc: Any, as_json: bool, render: Callable[[Any], str | None] | None = None) -> None:
    """Print a result: exactly one JSON document with --json, else the human rendering."""
    if as_json:
        click.echo(to_json(doc))
        return
    text = render(doc) if render else to_json(doc)
    if text:
        click.echo(text)


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    if len(rows) > 50:  # tabulate takes ~35 us a row: a long listing is formatted here
        cells = [tuple(str(c).strip() for c in row) for row in rows]
        if all(len(row) == len(headers) for row in cells) and \
                "\n".join("\t".join(row) for row in cells).isascii():
            return _simple_table(cells, [str(h).strip() for h in headers])
    from tabulate import tabulate

    return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)


def _simple_table(rows: list[tuple[str, ...]], headers: list[str]) -> str:
    """tabulate's "simple" format (left-aligned text, columns at least 2 wider than their
    header), for one-line ASCII cells in as many columns as headers (a test compares)."""
    if any("\n" in c or "\t" in c for row in rows for c in row):
        from tabulate import tabulate

        return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)
    widths = [max(len(h) + 2, *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    fmt = "  ".join(f"%-{w}s" for w in widths)
    out = [(fmt % tuple(headers)).rstrip(), "  ".join("-" * w for w in widths)]
    out += [(fmt % row).rstrip() for row in rows]
    return "\n".join(out)


def warn(message: str) -> None:
    click.echo(message, err=True)


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


PROGRESS_SECONDS = 5.0  # outside a terminal: a progress line at most this often


def _progress_seconds() -> float:
    import os

    try:
        return max(0.0, float(os.environ.get("AGENVOY_PROGRESS_SECONDS", PROGRESS_SECONDS)))
    except ValueError:
        return PROGRESS_SECONDS


class ProgressBar:
    """progress(done, total) for a long run, on stderr. On a terminal (and without --json):
    a bar, once `total` is worth one (at least `minimum`). Elsewhere (a pipe, a log file,
    an agent's subprocess): a line `agenvoy: <label> 12/40 files (3.1 files/s, 4 s)` every
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
            elapsed = now - self.started
            rate = done / elapsed if elapsed > 0 else 0.0
            warn(f"agenvoy: {self.label} {done}/{total} {self.unit} "
                 f"({rate:.1f} {self.unit}/s, {elapsed:.0f} s)")
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
