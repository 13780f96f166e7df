"""RAG commands through the CLI: a command that must succeed, and `rag search --json`."""

from __future__ import annotations


def ok(res):
    assert res.exit_code == 0, (res.exit_code, res.stdout, res.stderr)
    return res.json() if res.stdout.lstrip().startswith(("{", "[")) else res


def find(run, name, query, mode="keyword", limit="10"):
    args = ["rag", "search", *(["--all"] if name is None else [name]), query,
            "--mode", mode, "--limit", limit, "--json"]
    return ok(run(*args))
