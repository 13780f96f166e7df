"""`rag search --json` has the same keys as the other corpora's searches: `match` is there
(null) when a semantic search sets none (docs/json-vocabulary.md rule 8: keys are present
even when null), as `notes search` has it."""

from __future__ import annotations

from tests.helpers.rag import find, ok


def test_semantic_rag_search_keeps_match_as_null(run, home, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "backup.md").write_text("# Backups\n\nThe nightly backup runs at 02:00 and "
                                    "keeps fourteen days of snapshots.\n")
    ok(run("rag", "create", "docs", "--path", str(docs)))
    doc = find(run, "docs", "when does the nightly backup run", mode="semantic")
    assert "match" in doc and doc["match"] is None
    ok(run("rag", "create", "empty"))
    empty = find(run, "empty", "anything at all", mode="semantic")
    assert "match" in empty and empty["match"] is None
    notes = ok(run("notes", "search", "when does the nightly backup run", "--mode",
                   "semantic", "--json"))
    assert set(notes) - {"schema_version"} <= set(doc) | {"unindexed_count"}
    from tests.helpers.schemas import validate

    validate(doc, "rag-search")
    validate(empty, "rag-search")
