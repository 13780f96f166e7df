"""Scores a reader can compare (#50): every `score_kind` has one documented scale
(docs/json-vocabulary.md), and the text output shows the kind beside the score (search,
notes search, rag search, errors lookup)."""

from __future__ import annotations

import json
import re
from pathlib import Path

VOCABULARY = Path(__file__).resolve().parent.parent / "docs" / "json-vocabulary.md"
KINDS = ("bm25", "cosine", "rrf", "fitted", "relevance")


def test_every_kind_has_one_documented_scale():
    rows = re.findall(r"^\s*\| `([a-z0-9]+)` \| [^|]+ \| [^|]+ \| [^|]+ \|$",
                      VOCABULARY.read_text(encoding="utf-8"), re.M)
    assert sorted(k for k in rows if k in KINDS) == sorted(KINDS)


def test_text_output_shows_the_kind_beside_the_score(run, tmp_path):
    batch = [{"role": "user", "content": f"note {i}: the deploy script lives in ops/deploy"}
             for i in range(3)]
    assert run("append", "s", "--messages", "-", input=json.dumps(batch)).exit_code == 0
    out = run("search", "s", "deploy", "--mode", "keyword").stdout
    assert re.search(r"^#1  score [\d.]+ \(bm25\)  \[", out, re.M), out
    assert run("notes", "add", "ops", "--content", "the deploy script is ops/deploy").exit_code == 0
    out = run("notes", "search", "deploy", "--mode", "keyword").stdout
    assert "score (bm25)" in out, out
    res = run("errors", "record", "--tool", "bash", "-k", "permission", "--symptom",
              "bash: ./deploy.sh: Permission denied", "--action", "chmod +x", "--outcome",
              "resolved", "--no-semantic")
    assert res.exit_code == 0, res.stderr
    out = run("errors", "lookup", "--no-semantic", "--",
              "bash: ./deploy.sh: Permission denied").stdout
    assert "score (relevance)" in out, out
    doc = run("errors", "lookup", "--json", "--no-semantic", "--",
              "bash: ./deploy.sh: Permission denied").json()
    assert doc["records"][0]["score_kind"] == "relevance"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Deploy\n\nThe deploy script lives in ops/deploy.\n")
    assert run("rag", "create", "d", "--path", str(docs), "--no-vectors").exit_code == 0
    out = run("rag", "search", "d", "deploy", "--mode", "keyword").stdout
    assert "(bm25 " in out, out


def test_rag_keyword_score_over_one_file_is_not_shown_as_a_tiny_number(run, tmp_path):
    """As notes search: FTS5's BM25 gives ~0 to words that half the chunks or more hold
    (one chunk: every word). The JSON keeps the value; the text shows ~0 and says why,
    not `bm25 1e-06`."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Deploy\n\nThe deploy script lives in ops/deploy.\n")
    assert run("rag", "create", "d", "--path", str(docs), "--no-vectors").exit_code == 0
    doc = run("rag", "search", "d", "deploy", "--mode", "keyword", "--json").json()
    assert doc["results"][0]["score_kind"] == "bm25" and doc["results"][0]["score"] < 0.001
    out = run("rag", "search", "d", "deploy", "--mode", "keyword").stdout
    assert "(bm25 ~0)" in out and "e-06" not in out, out
    assert "half the chunks or more" in out, out
