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
    from tabulate import tabulate

    return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)


def warn(message: str) -> None:
    click.echo(message, err=True)


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


class ProgressBar:
    """progress(done, total) for a long run: a bar on stderr, only on a terminal, never with
    --json, and only once `total` is worth one (at least `minimum`)."""

    def __init__(self, label: str, minimum: int, enabled: bool = True) -> None:
        self.label, self.minimum = label, minimum
        self.enabled = enabled and sys.stderr.isatty()
        self.bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
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
