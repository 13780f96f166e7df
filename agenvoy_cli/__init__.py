"""agenvoy-cli: the memory layer of an AI agent, on Agenvoy's on-disk layout.

For Python agents: ``from agenvoy_cli import Memory`` (see agenvoy_cli.api). The import is
lazy, so ``import agenvoy_cli`` (and the CLI's start-up) stays light."""

from __future__ import annotations

# Nothing is imported here: `python -m agenvoy_cli` runs this file before __main__ can catch
# Ctrl-C, so any import here would be a window for a start-up traceback.
__version__ = "0.3.0"
__all__ = ["Memory", "__version__"]


def __getattr__(name: str) -> object:
    if name == "Memory":
        from agenvoy_cli.api import Memory

        return Memory
    raise AttributeError(f"module 'agenvoy_cli' has no attribute {name!r}")
