"""Lazy package exports. A layer's `__init__` names what the layers above may use (and
nothing else); the room that holds a name is imported only when the name is first asked
for, so `import agenvoy_cli.conversation` stays as light as before (append imports no
chromadb, no model)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy(package: str, exports: dict[str, str | None]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`. `exports` maps a name to the room (submodule)
    that defines it, or to None when the name is a room itself."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        room = exports[name]
        if room is None:
            return importlib.import_module(f"{package}.{name}")
        return getattr(importlib.import_module(f"{package}.{room}"), name)

    return __getattr__
