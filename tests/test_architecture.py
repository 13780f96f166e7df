"""The shape of the package: imports only go down the layers, never in a circle, and every
module is a room of one job (no module over MAX_LINES)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "agenvoy_cli"

# The layer order, written once, lowest first. A module may import from its own layer (without
# a circle) and from any layer below it, never from one above. Names are package-relative
# module prefixes; the longest matching prefix decides a module's layer.
LAYERS: list[set[str]] = [
    {"__init__", "errors", "secrets", "exports"},
    {"output", "contract", "timespec"},
    {"home"},
    {"models"},
    {"conversation"},
    {"vectors"},
    {"search"},
    {"errormem", "rag"},
    {"doctor"},
    {"api", "api_rag"},
    {"server"},
    {"commands"},
    {"cli", "__main__"},
]
MAX_LINES = 400
# Modules still being split into rooms (issue #19); each owner removes its entry.
TEMPORARY_BIG: set[str] = set()


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> int:
    best, best_len = None, -1
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best_len:
                best, best_len = index, len(name)
    if best is None:
        raise AssertionError(f"module agenvoy_cli.{module} is in no layer: add it to LAYERS")
    return best


def _type_checking_block(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(path: Path, module: str) -> set[str]:
    """Every agenvoy_cli module this one imports at run time (also inside functions; imports
    made only for type checking are left out: they never run)."""
    tree = ast.parse(path.read_text("utf-8"))
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if _type_checking_block(node):
            for child in node.orelse:  # type: ignore[attr-defined]
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("agenvoy_cli."):
                    found.add(alias.name.removeprefix("agenvoy_cli."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *(node.module or "").split(".")]).strip(".")
            elif node.module and (node.module == "agenvoy_cli"
                                  or node.module.startswith("agenvoy_cli.")):
                target = node.module.removeprefix("agenvoy_cli").strip(".")
            else:
                target = None
            if target is not None:
                for alias in node.names:
                    sub = f"{target}.{alias.name}" if target else alias.name
                    found.add(sub if _is_module(sub) else target or "__init__")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(module)
    return {name for name in found if name}


def _is_module(name: str) -> bool:
    path = PACKAGE.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


# The one sanctioned upward import: `from agenvoy_cli import Memory` is a lazy module
# attribute (PEP 562 __getattr__), imported only when a Python agent asks for it, so that
# `import agenvoy_cli` stays light.
LAZY_EXPORTS = {("__init__", "api")}


def _graph() -> dict[str, set[str]]:
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        graph[module] = {t for t in _imports(path, module) if (module, t) not in LAZY_EXPORTS}
    return graph


def test_every_module_is_in_a_layer() -> None:
    for module in _graph():
        _layer(module)


def test_imports_only_go_down() -> None:
    upward = []
    for module, targets in _graph().items():
        for target in targets:
            if _layer(target) > _layer(module):
                upward.append(f"agenvoy_cli.{module} imports agenvoy_cli.{target}")
    assert not upward, "imports that go up a layer:\n" + "\n".join(sorted(upward))


def test_no_import_cycle() -> None:
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                cycles.append(" -> ".join([*stack[stack.index(target):], target]))
            elif target not in state:
                walk(target)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_rooms_of_one_job() -> None:
    big = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        lines = len(path.read_text("utf-8").splitlines())
        if lines > MAX_LINES and rel not in TEMPORARY_BIG:
            big[rel] = lines
    assert not big, f"modules over {MAX_LINES} lines: {big}"


@pytest.mark.parametrize("name", sorted(TEMPORARY_BIG))
def test_temporary_allowlist_is_still_needed(name: str) -> None:
    path = PACKAGE / name
    assert path.is_file() and len(path.read_text("utf-8").splitlines()) > MAX_LINES, (
        f"{name} is split (or gone): remove it from TEMPORARY_BIG")


def test_architecture_doc_matches_the_code() -> None:
    """docs/architecture.md names every layer folder, and every module it names exists."""
    import re

    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text("utf-8")
    folders = sorted(p.name for p in PACKAGE.iterdir()
                     if p.is_dir() and (p / "__init__.py").is_file())
    missing = [f for f in folders if f"`{f}/`" not in doc]
    assert not missing, f"layer folders not described in docs/architecture.md: {missing}"
    layer_names = {name.split(".")[0] for names in LAYERS for name in names}
    assert set(folders) <= layer_names
    named = {n for n in re.findall(r"`((?:[a-z_]+/)?[a-z_]+\.py)`", doc)
             if not n.startswith("tests/")}
    gone = []
    for name in named:
        candidates = [PACKAGE / name] + [PACKAGE / f / name for f in folders]
        if not any(c.is_file() for c in candidates):
            gone.append(name)
    assert not gone, f"docs/architecture.md names modules that do not exist: {sorted(gone)}"


def _exports(package: str) -> dict[str, str | None]:
    """The _EXPORTS literal of a layer package's __init__.py ({} when it has none)."""
    tree = ast.parse((PACKAGE / package / "__init__.py").read_text("utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "_EXPORTS":
            return ast.literal_eval(node.value)
    return {}


def _gen_exports():
    import importlib.util

    path = PACKAGE.parent / "tools" / "gen_exports.py"
    spec = importlib.util.spec_from_file_location("gen_exports", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_layers_export_what_the_layers_above_use_and_nothing_else() -> None:
    """Every name one package imports from another's room is exported by that package's
    __init__ (mapped to that room), no private name crosses a package, and a package exports
    nothing no other package uses."""
    used, wrong = _gen_exports().scan(PACKAGE)
    for package in sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()):
        exports = _exports(package)
        for name, room in used.get(package, {}).items():
            if name not in exports or exports[name] != room:
                wrong.append(f"agenvoy_cli.{package} does not export {name!r} (from {room})")
        for name in exports:
            if name not in used.get(package, {}):
                wrong.append(f"agenvoy_cli.{package} exports {name!r}, which no layer above uses")
            elif exports[name] is not None and (PACKAGE / package / f"{name}.py").exists():
                wrong.append(f"agenvoy_cli.{package}.{name} is both a room and a name in "
                             f"{exports[name]}: rename one")
    assert not wrong, "\n".join([*wrong, "(regenerate with: python tools/gen_exports.py)"])


def test_gen_exports_writes_what_the_check_wants() -> None:
    """The generator's output is what the test above accepts: a package whose exports were
    emptied gets them back, docstring kept."""
    gen = _gen_exports()
    init = PACKAGE / "home" / "__init__.py"
    text = init.read_text("utf-8")
    used, _ = gen.scan(PACKAGE)
    emptied = gen.render(text, {})
    assert '"atomic_write_json"' not in emptied
    assert gen.render(emptied, used["home"]) == text


def test_exports_resolve_lazily() -> None:
    import importlib
    import subprocess
    import sys

    for package in sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()):
        for name in _exports(package):
            module = importlib.import_module(f"agenvoy_cli.{package}")
            assert getattr(module, name) is not None, f"agenvoy_cli.{package}.{name}"
    code = ("import sys, agenvoy_cli.conversation, agenvoy_cli.home, agenvoy_cli.vectors\n"
            "print(sorted(m for m in sys.modules if m.startswith('agenvoy_cli.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=PACKAGE.parent).stdout
    assert "agenvoy_cli.conversation.store" not in out and "chromadb" not in out
