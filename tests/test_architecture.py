"""The shape of the package: imports only go down the layers, never in a circle (counting
imports under TYPE_CHECKING and inside functions), and no module grows past a sanity cap."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "agenvoy_cli"

# The layer order, written once, lowest first. A module may import from its own layer (without
# a circle) and from any layer below it, never from one above. Names are package-relative
# module prefixes; the longest matching prefix decides a module's layer.
LAYERS: list[set[str]] = [
    {"environment", "errors", "secrets", "settings", "version"},
    {"output", "contract", "timespec"},
    {"home"},
    {"models"},
    {"conversation"},
    {"vectors"},
    {"search"},
    {"errormem", "rag"},
    {"notes"},
    {"doctor"},
    {"transfer"},
    {"api"},
    {"server", "web"},
    {"commands"},
    # the package root: its face for the outside (lazy Memory and __version__), which no
    # module of the package imports
    {"cli", "__main__", "__init__"},
]
# Module size follows cohesion, not a count: this is a sanity cap that only catches a file
# grown into a second program (split by job, never to get under it).
MAX_LINES = 1000


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


def _imports(path: Path, module: str) -> set[str]:
    """Every agenvoy_cli module this one imports: at the top, inside functions and under
    `if TYPE_CHECKING:` alike (an import made only for the type checker is still a dependency
    for the reader)."""
    tree = ast.parse(path.read_text("utf-8"))
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
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


def _graph() -> dict[str, set[str]]:
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        graph[module] = _imports(path, module)
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


def _cycles(graph: dict[str, set[str]]) -> list[str]:
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
    return cycles


def test_no_import_cycle_between_modules() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def _room(module: str) -> str:
    """A module's package (its first name), or the module itself at the top."""
    return module.split(".")[0]


def test_no_import_cycle_between_packages() -> None:
    """Packages (the rooms' folders) import each other in one direction only: conversation may
    use home, never the other way, also not through a third package."""
    rooms: dict[str, set[str]] = {}
    for module, targets in _graph().items():
        rooms.setdefault(_room(module), set()).update(
            _room(t) for t in targets if _room(t) != _room(module))
    cycles = _cycles(rooms)
    assert not cycles, "package cycles:\n" + "\n".join(cycles)


def test_the_walk_sees_type_checking_and_function_imports(tmp_path: Path) -> None:
    """The walk counts an import under TYPE_CHECKING and one inside a function (a cycle hidden
    from the interpreter is still a cycle)."""
    source = tmp_path / "mod.py"
    source.write_text("from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    from agenvoy_cli.home import layout\n"
                      "def f():\n    from agenvoy_cli.conversation import store\n", "utf-8")
    found = _imports(source, "x.mod")
    assert {"home.layout", "conversation.store"} <= found
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a -> b -> c -> a"]


TESTS = PACKAGE.parent / "tests"


def _test_modules_imported(source: str, package: str) -> list[str]:
    """Every test module (a `test_*` module under tests/) that `source`, a module of `package`,
    imports: at the top or inside a function, absolutely or relatively."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")
                module = ".".join([*base[: len(base) - (node.level - 1)], module]).strip(".")
            names = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found += [name for name in names if name.split(".")[0] == "tests"
                  and any(part.startswith("test_") for part in name.split(".")[1:])]
    return sorted(set(found))


def test_no_test_module_imports_another_test_module() -> None:
    """Issue #29: what several test modules share lives in tests/conftest.py (fixtures) or a
    helper module (tests/helpers/, tests/mcp_client.py, ...), never in a test module another
    one imports; so no fixture is imported and then shadowed by a parameter (ruff's F811,
    silenced by a noqa)."""
    imports, shadowed = {}, []
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS.parent)
        text = path.read_text("utf-8")
        found = _test_modules_imported(text, ".".join(rel.parent.parts))
        if found:
            imports[rel.as_posix()] = found
        if "noqa: " + "F811" in text:
            shadowed.append(rel.as_posix())
    assert not imports, f"test modules imported by other modules: {imports}"
    assert not shadowed, f"imports shadowed by fixture parameters: {shadowed}"


def test_the_test_import_walk_sees_every_form() -> None:
    source = ("from tests.test_search import add\n"
              "def f():\n    import tests.rag.test_rag\n"
              "from tests import test_mcp\n"
              "from .test_append import snapshot\n"
              "from .. import test_cli\n"
              "from tests.helpers.search import find\n"
              "from tests.conftest import ROOT\n")
    assert _test_modules_imported(source, "tests.conversation") == [
        "tests.conversation.test_append", "tests.conversation.test_append.snapshot",
        "tests.rag.test_rag", "tests.test_cli", "tests.test_mcp", "tests.test_search",
        "tests.test_search.add"]


def test_rooms_of_one_job() -> None:
    big = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        lines = len(path.read_text("utf-8").splitlines())
        if lines > MAX_LINES:
            big[rel] = lines
    assert not big, f"modules over {MAX_LINES} lines: {big}"


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


CONTAINERS = {"dict", "list", "set", "defaultdict", "OrderedDict", "WeakKeyDictionary",
              "WeakValueDictionary", "WeakSet"}
MUTATORS = {"append", "extend", "insert", "pop", "popitem", "remove", "clear", "update",
            "setdefault", "add", "discard", "sort", "reverse", "__setitem__", "__delitem__"}
# Module state that is process-wide by nature, each with the reason it cannot be on an object a
# caller holds (the rest is: store.locks, the store's VectorContext and its Embedders, the
# index objects).
# The test fails when one is gone (remove it here) or when a new one appears.
KNOWN_STATE = {
    # the secrets to mask in whatever this process writes: stderr, stdout and logs are the
    # process's, written from every layer (output.warn has no caller's object), and a secret
    # learnt from config.json (an LLM base URL's password, a Basic token made from it) must
    # stay masked in every later message; secrets.py says so
    "secrets.py": {"_registered"},
    # one per process like chromadb's own System per directory (SharedSystemClient's
    # class-level registry), which it mirrors (the client, the generation token it reflects,
    # the epoch): a second registry on a directory would believe a stale System fresh;
    # vectors/context.py says why
    "vectors/context.py": {"_directories"},
    # the fault injector's armed plan, as SQLite's test VFS is the process's: the calls it
    # fails (every write, fsync, rename, commit and vector write of the home) come from every
    # layer, most with no object of a caller's to carry it; armed once at the process's
    # entry (cli.main reads AGENVOY_FAULTS) or by a test (faults.armed), empty otherwise
    "home/faults.py": {"_plans"},
}


def _module_state(tree: ast.Module) -> set[str]:
    """`global` (as the word "global") and every module-level dict, list or set that some code
    of the module changes in place."""
    found: set[str] = set()
    containers: set[str] = set()
    for node in tree.body:
        targets: list[ast.expr] = []
        value = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        func = value.func if isinstance(value, ast.Call) else None
        name = func.id if isinstance(func, ast.Name) else (
            func.attr if isinstance(func, ast.Attribute) else None)
        mutable = isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp,
                                     ast.SetComp)) or name in CONTAINERS
        if mutable:
            containers.update(t.id for t in targets if isinstance(t, ast.Name))
    in_functions = [n for top in tree.body for n in ast.walk(top)
                    if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    for node in in_functions:  # a table filled at import, then only read, is a constant
        if isinstance(node, ast.Global):
            found.add("global")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            for target in getattr(node, "targets", None) or [node.target]:  # type: ignore[attr-defined]
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                        and target.value.id in containers:
                    found.add(target.value.id)
                elif isinstance(node, ast.AugAssign) and isinstance(target, ast.Name) \
                        and target.id in containers:
                    found.add(target.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in containers \
                and node.func.attr in MUTATORS:
            found.add(node.func.value.id)
    return found


def test_no_global_and_no_module_level_mutable_state() -> None:
    """State lives on an object a caller holds (a Store, a vector context), never in a module:
    no `global`, no module-level dict/list/set changed after import."""
    state = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found = _module_state(ast.parse(path.read_text("utf-8")))
        if found:
            state[path.relative_to(PACKAGE).as_posix()] = found
    assert state == KNOWN_STATE


def test_the_state_check_sees_globals_and_mutated_containers() -> None:
    tree = ast.parse("import weakref\n_cache: dict = {}\nFIXED = {'a': 1}\nitems = []\nn = 0\n"
                     "_by: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()\n"
                     "def f(k):\n    global n\n    n += 1\n    _cache['k'] = 1\n"
                     "    items.append(FIXED['a'])\n    _by[k] = 1\n")
    assert _module_state(tree) == {"global", "_cache", "items", "_by"}


# Every function stays short enough to read in one go (#50): cyclomatic complexity as radon
# counts it (1 + branches: if, loops, except, boolean operators, comprehension clauses,
# assert); a nested function is measured on its own. Search and the importers' readers, the
# parts that change most (new ranking signals, relevance rules, new source formats), keep
# to a lower limit.
MAX_COMPLEXITY = 20
SHORT_PACKAGES = ("search", "transfer")
# the corpus adapters of the one retrieval pipeline (search/pipeline.py) count as search
CORPUS_ADAPTERS = ("notes/corpus.py", "rag/corpus.py", "errormem/corpus.py")
MAX_SHORT_COMPLEXITY = 15


def _complexity(func: ast.AST) -> int:
    count = 1
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, (ast.If, ast.IfExp, ast.Assert)):
            count += 1
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            count += 1 + bool(node.orelse)
        elif isinstance(node, ast.Try):
            count += len(node.handlers) + bool(node.orelse)
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            count += 1 + len(node.ifs)
        elif isinstance(node, ast.Match):
            wildcard = bool(node.cases) and isinstance(node.cases[-1].pattern, ast.MatchAs) \
                and node.cases[-1].pattern.pattern is None
            count += len(node.cases) - wildcard
        stack.extend(ast.iter_child_nodes(node))
    return count


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _limit(rel: str) -> int:
    short = rel.split("/")[0] in SHORT_PACKAGES or rel in CORPUS_ADAPTERS
    return MAX_SHORT_COMPLEXITY if short else MAX_COMPLEXITY


def test_no_function_is_too_branchy() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for func in _functions(ast.parse(path.read_text("utf-8"))):
            n = _complexity(func)
            if n > _limit(rel):
                found[f"{rel}:{func.lineno} {func.name}"] = n
    assert not found, ("functions above cyclomatic complexity "
                       f"{MAX_COMPLEXITY} ({MAX_SHORT_COMPLEXITY} in "
                       f"{', '.join(SHORT_PACKAGES)}/): {found}")


def test_the_complexity_count_sees_every_branch() -> None:
    tree = ast.parse("def f(x, ys):\n"
                     "    if x and ys or not x:\n        return [y for y in ys if y if x]\n"
                     "    for y in ys:\n        pass\n    else:\n        pass\n"
                     "    try:\n        pass\n    except ValueError:\n        pass\n"
                     "    except OSError:\n        pass\n"
                     "    assert x\n    return 1 if x else 2\n"
                     "    def inner():\n        if x:\n            pass\n")
    outer, inner = _functions(tree)
    # 1 + if + (and, or) + comprehension with two ifs + for/else + two handlers + assert + ifexp
    assert _complexity(outer) == 1 + 1 + 2 + 3 + 2 + 2 + 1 + 1
    assert _complexity(inner) == 2


def test_no_getattr_on_a_store() -> None:
    """A Store's state is its own attributes, typed; other layers' state is passed or reached
    through a typed object (vectors/context.py of), never probed with getattr/hasattr."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in ("getattr", "hasattr", "setattr") and node.args:
                target = ast.unparse(node.args[0])
                if target == "store" or target.endswith(".store"):
                    found.append(f"{path.relative_to(PACKAGE).as_posix()}:{node.lineno} "
                                 f"{ast.unparse(node)}")
    assert not found, found
