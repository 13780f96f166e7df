#!/usr/bin/env python3
"""Regenerate the `_EXPORTS` of every layer package's `__init__.py` from the code.

    python tools/gen_exports.py            # rewrite the __init__ files that drifted
    python tools/gen_exports.py --check    # exit 1 (naming them) when any drifted

A package exports exactly the names the other packages import from its rooms
(`from agenvoy_cli.home.files import atomic_write_json` makes `home` export
`atomic_write_json` from `files`); tests/test_architecture.py checks the same with `scan`.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "agenvoy_cli"
HEADER = ("from agenvoy_cli.exports import lazy\n\n"
          "# What the layers above use, and the room that holds it (None: the room itself).\n")


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def scan(package: Path = PACKAGE) -> tuple[dict[str, dict[str, str | None]], list[str]]:
    """(package -> {name: room or None} the other packages import, the private names they
    import: each a line naming the importer)."""
    used: dict[str, dict[str, str | None]] = {}
    private = []
    for path in sorted(package.rglob("*.py")):
        module = module_name(path, package)
        top = module.split(".")[0]
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and not node.level and node.module
                    and node.module.startswith("agenvoy_cli.")):
                continue
            target = node.module.removeprefix("agenvoy_cli.")
            owner = target.split(".")[0]
            if owner == top or not (package / owner / "__init__.py").is_file():
                continue
            room = target.split(".", 1)[1] if "." in target else None
            for alias in node.names:
                if alias.name.startswith("_"):
                    private.append(f"{module} imports the private {target}.{alias.name}")
                used.setdefault(owner, {})[alias.name] = room
    return used, private


def render(init_text: str, names: dict[str, str | None]) -> str:
    """The package's __init__ with its docstring kept and the exports written anew."""
    tree = ast.parse(init_text)
    first = tree.body[0] if tree.body else None
    doc = (ast.get_source_segment(init_text, first) if isinstance(first, ast.Expr)
           and isinstance(getattr(first, "value", None), ast.Constant) else '"""A layer."""')
    lines = [f"{name!r}: {names[name]!r},".replace("'", '"')
             for name in sorted(names, key=lambda n: (names[n] or "", n))]
    body = "".join(f"    {line}\n" for line in lines)
    return (f"{doc}\n\n{HEADER}_EXPORTS: dict[str, str | None] = {{\n{body}}}\n"
            "__all__ = sorted(_EXPORTS)\n__getattr__ = lazy(__name__, _EXPORTS)\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    used, _ = scan()
    drifted = []
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        text = init.read_text("utf-8")
        if "_EXPORTS" not in text and init.parent.name not in used:
            continue
        new = render(text, used.get(init.parent.name, {}))
        if new != text:
            drifted.append(str(init.relative_to(ROOT)))
            if not args.check:
                init.write_text(new, "utf-8")
    verb = "drifted" if args.check else "rewrote"
    for name in drifted:
        print(f"{verb}: {name}")
    return 1 if args.check and drifted else 0


if __name__ == "__main__":
    sys.exit(main())
