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
    cells = [[str(c) for c in row] for row in rows]
    if len(cells) > 50 and all(len(row) == len(headers) for row in cells) and \
            all(c.isascii() and "\n" not in c for row in cells for c in row):
        return _simple_table(cells, [str(h) for h in headers])  # tabulate: ~35 us a row
    from tabulate import tabulate

    return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)


def _simple_table(rows: list[list[str]], headers: list[str]) -> str:
    """tabulate's "simple" format (left-aligned text), for plain ASCII cells in as many
    columns as headers (checked to match tabulate's output)."""
    rows = [[c.strip() for c in r] for r in rows]
    headers = [h.strip() for h in headers]
    widths = [max(len(h) + 2, *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join
    out = [line(h.ljust(w) for h, w in zip(headers, widths)).rstrip(),
           line("-" * w for w in widths)]
    out += [line(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
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
