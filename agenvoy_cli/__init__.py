"""agenvoy-cli: the memory layer of an AI agent, on Agenvoy's on-disk layout.

For Python agents: ``from agenvoy_cli import Memory`` (see agenvoy_cli.api). The import is
lazy, so ``import agenvoy_cli`` (and the CLI's start-up) stays light."""

from __future__ import annotations

# Nothing is imported here: `python -m agenvoy_cli` runs this file before __main__ can catch
# Ctrl-C, so any import here would be a window for a start-up traceback. This file is the
# package's face for the outside; no module of the package imports it (they import
# agenvoy_cli.version and agenvoy_cli.api themselves: tests/test_architecture.py).
__all__ = ["Memory", "__version__"]


def __getattr__(name: str) -> object:
    if name == "Memory":
        from agenvoy_cli.api import Memory

        return Memory
    if name == "__version__":
        from agenvoy_cli.version import __version__

        return __version__
    raise AttributeError(f"module 'agenvoy_cli' has no attribute {name!r}")
