"""One retrieval pipeline over a `Corpus` (#50 item 1): notes and RAG searches run the same
stages (search/pipeline.py) and answer in the same shape, each hit with its `score_kind`."""

from __future__ import annotations

import pytest

from tests.helpers.rag import find, ok

TEXT = "The deploy script lives in ops/deploy and runs make ship on the release branch."
SHAPE = {"query", "mode", "match", "unindexed_count", "results", "count", "notes"}


@pytest.fixture
def docs(run, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "deploy.md").write_text(f"# Deploy\n\n{TEXT}\n")
    ok(run("rag", "create", "plain", "--path", str(folder), "--no-vectors"))


def test_semantic_search_of_a_database_without_vectors_gives_the_keyword_results_it_notes(
        run, docs):
    """The note says "keyword results only": semantic mode then ranks by keyword, as notes
    do without vectors (it returned nothing before the pipeline)."""
    doc = find(run, "plain", "deploy script", mode="semantic")
    assert "no_vectors" in [n["code"] for n in doc["notes"]], doc
    assert [h["relpath"] for h in doc["results"]] == ["deploy.md"], doc
    assert doc["results"][0]["score_kind"] == "bm25"


@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_notes_and_rag_answer_in_one_shape(run, docs, mode):
    ok(run("notes", "add", "deploy", "--content", TEXT))
    notes = ok(run("notes", "search", "deploy script", "--mode", mode, "--json"))
    rag = find(run, "plain", "deploy script", mode=mode)
    for doc in (notes, rag):
        assert set(doc) >= SHAPE, (mode, doc)
        assert doc["count"] == len(doc["results"]) >= 1, (mode, doc)
        kinds = {h["score_kind"] for h in doc["results"]}
        assert kinds <= {"bm25", "cosine", "rrf"} and len(kinds) == 1, (mode, doc)
