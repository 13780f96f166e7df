"""bench/harness.py, the one harness of the retrieval benches (#50 item 7): bench/ has no
import circle (the harness imports nothing from bench/, scripts import only downward), and the
harness's figures are right on a tiny set made by hand, asked through the real command
(keyword mode: no model)."""

from __future__ import annotations

import ast
import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _bench_imports(path: Path, names: set[str]) -> set[str]:
    """The bench modules a bench script imports (at the top or in a function, as `import x`,
    `from x import y` or `bench.x`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            mods = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            mods = [node.module or ""]
            if node.module == "bench":
                mods = [alias.name for alias in node.names]
        else:
            continue
        for mod in mods:
            parts = mod.split(".")
            name = parts[1] if parts[0] == "bench" and len(parts) > 1 else parts[0]
            if name in names:
                found.add(name)
    return found


def _graph() -> dict[str, set[str]]:
    names = {p.stem for p in BENCH.glob("*.py")}
    return {p.stem: _bench_imports(p, names) - {p.stem} for p in BENCH.glob("*.py")}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of the graph as [a, b, ..., a], or []."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := walk(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (found := walk(node)):
            return found
    return []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []


def test_the_import_walk_sees_function_imports(tmp_path: Path) -> None:
    script = tmp_path / "x.py"
    script.write_text("import os\nfrom probes import cli\n"
                      "def f():\n    import locomo_cli\n    from bench.splits import A\n",
                      "utf-8")
    assert _bench_imports(script, {"probes", "locomo_cli", "splits", "other"}) == {
        "probes", "locomo_cli", "splits"}


def test_bench_has_no_import_circle() -> None:
    graph = _graph()
    assert "harness" in graph
    cycle = _cycle(graph)
    assert not cycle, "import circle in bench/: " + " -> ".join(cycle)


def test_the_harness_imports_nothing_from_bench() -> None:
    assert _graph()["harness"] == set()


RETRIEVAL = ("locomo", "locomo_cli", "probes", "zh_memory", "zh_dialogue", "same_answers",
             "memorybank_zh")


def test_the_retrieval_scripts_use_the_harness() -> None:
    graph = _graph()
    for name in RETRIEVAL:
        assert "harness" in graph[name], name


@pytest.fixture()
def harness() -> Iterator[object]:
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module("harness")
    finally:
        sys.path.remove(str(BENCH))


def test_scores_by_hand(harness) -> None:  # noqa: ANN001
    s = harness.scores(["x", "a", "y", "b", "z", "q", "c"], ["a", "b", "c"],
                       recall=(1, 5, 10), hit=(1, 2))
    assert s == {"R@1": 0.0, "R@5": 2 / 3, "R@10": 1.0, "hit@1": 0.0, "hit@2": 1.0,
                 "MRR": 0.5}
    assert harness.scores([], ["a"]) == {"R@5": 0.0, "R@10": 0.0, "MRR": 0.0}
    rows = [("1", {"MRR": 1.0}), ("2", {"MRR": 0.0}), ("1", {"MRR": 0.5}), ("3", {"MRR": 0.25})]
    got = harness.by_group(rows, head=("1", "2"), head_name="1-2")
    assert got["1-2"] == {"MRR": 0.5}
    assert got["1"] == {"MRR": 0.75} and got["3"] == {"MRR": 0.25}
    assert got["n"] == {"1-2": 3, "1": 2, "2": 1, "3": 1}
    hit = {"results": [{"hit": True, "seq": 4, "score": 1.0}]}
    context_only = {"results": [{"hit": False, "seq": 2, "score": None}]}
    nothing: dict = {"results": []}
    assert harness.empty_rate([hit, context_only, nothing]) == (2, 3)
    assert harness.empty_rate([hit, context_only, nothing], hits_only=False) == (1, 3)
    ranked = {"results": [{"hit": True, "seq": 1, "score": 0.2, "rank": 2},
                          {"hit": False, "seq": 2, "score": None, "rank": 9},
                          {"hit": True, "seq": 3, "score": 0.1, "rank": 1}]}
    assert harness.ranked_hits(ranked) == [3, 1]


def test_a_hand_made_set_through_the_command(harness, tmp_path: Path) -> None:  # noqa: ANN001
    """Four messages, three questions, keyword mode through the real `agenvoy search`: the
    figures are what the hits say, per question and per group."""
    home = tmp_path / "home"
    msgs = [{"role": "user", "content": "my cat Pepper hates the vacuum cleaner"},
            {"role": "assistant", "content": "poor Pepper"},
            {"role": "user", "content": "the dentist appointment moved to Friday"},
            {"role": "assistant", "content": "noted, Friday"}]
    harness.home_cli(home, "append", "s", "--messages", "-", "--time", "2026-01-05 10:00:00",
                     input=json.dumps(msgs).encode())
    rset = harness.RetrievalSet("tiny", "report", [
        harness.Question("s", "vacuum cleaner", ("cat",), "pets"),
        harness.Question("s", "dentist appointment", ("dentist",), "health"),
        harness.Question("s", "quantum chromodynamics", ("dentist",), "health")],
        keys={"s": {0: "cat", 1: "cat-reply", 2: "dentist", 3: "dentist-reply"}}, top=10)
    res = harness.evaluate(rset, ["keyword"], harness.inprocess_search(home))
    rows = res.rows["keyword"]
    assert [s["MRR"] for _, s in rows] == [1.0, 1.0, 0.0]
    assert res.rankings["keyword"][0][0] == 0 and res.rankings["keyword"][2] == []
    summary = res.summary()["keyword"]
    assert summary["all"]["R@5"] == pytest.approx(2 / 3)
    assert summary["health"]["MRR"] == 0.5 and summary["pets"]["MRR"] == 1.0
    assert summary["n"] == {"health": 2, "pets": 1}
