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
