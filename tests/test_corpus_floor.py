"""Every corpus answers nothing when nothing is related (#50): notes and RAG searches go
through the same relevance floor as message search (search/corpus.py, the holder's
Relevance), with the built-in model."""

from __future__ import annotations

import pytest

from tests.helpers.embedded import documents_embedded

NOTES = {
    "deploy": "Production deploys run from the release branch through make ship; never "
              "deploy on Fridays after 15:00.",
    "coffee": "The user drinks a flat white with oat milk, no sugar, never after 4 pm.",
    "dog": "The user's dog Mochi is a shiba inu who needs a walk at 7 am and 7 pm.",
}
UNRELATED = ["What is the capital of France?", "who won the chess world championship in 1972"]
RELATED = [("How does the user take their coffee?", "coffee"),
           ("Can I ship to prod on a Friday afternoon?", "deploy")]


@pytest.fixture
def notes(run):
    for name, text in NOTES.items():
        assert run("notes", "add", name, "--content", text).exit_code == 0


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_notes_answer_nothing_when_nothing_is_related(run, notes, mode):
    for query in UNRELATED:
        doc = run("notes", "search", query, "--mode", mode, "--json").json()
        assert doc["results"] == [], (query, doc["results"])
        assert "not_related" in [n["code"] for n in doc["notes"]]
    for query, name in RELATED:
        doc = run("notes", "search", query, "--mode", mode, "--json").json()
        assert doc["results"] and doc["results"][0]["name"] == name, (query, doc)


@pytest.fixture
def rag_db(run, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in NOTES.items():
        (docs / f"{name}.md").write_text(f"# {name.title()}\n\n{text}\n")
    res = run("rag", "create", "docs", "--path", str(docs))
    assert res.exit_code == 0, res.stderr


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_rag_answers_nothing_when_nothing_is_related(run, rag_db, mode):
    for query in UNRELATED:
        doc = run("rag", "search", "docs", query, "--mode", mode, "--json").json()
        assert doc["results"] == [], (query, doc["results"])
        assert "not_related" in [n["code"] for n in doc["notes"]]
    for query, name in RELATED:
        doc = run("rag", "search", "docs", query, "--mode", mode, "--json").json()
        assert doc["results"] and doc["results"][0]["relpath"] == f"{name}.md", (query, doc)


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_one_shared_word_does_not_make_a_question_related(run, notes, mode):
    """A general-knowledge question sharing one word with a note ("walk": the dog's) is not
    about it: a rare shared word decides alone only when the note holds a good share of
    the question's words (search/corpus.py INCIDENTAL_WORDS_DECIDE)."""
    query = "Which astronaut was the first to walk on the moon?"
    doc = run("notes", "search", query, "--mode", mode, "--json").json()
    assert doc["results"] == [], doc["results"]
    assert "not_related" in [n["code"] for n in doc["notes"]]
    doc = run("notes", "search", "When does the dog need its walk?", "--mode", mode,
              "--json").json()
    assert doc["results"] and doc["results"][0]["name"] == "dog", doc


def test_keyword_mode_answers_nothing_for_an_incidental_word(run, notes, rag_db):
    """Keyword mode has a floor too (search/pipeline.py `keyword_floor`): a question that
    shares one everyday word with a note ("release": the deploy note's release branch;
    bench/corpus_floor_data's tune split) gets nothing; a paraphrase holding a good share
    of the question's words, and a keyword typed to find, still get their note."""
    query = "Which gas do plants release?"
    doc = run("notes", "search", query, "--mode", "keyword", "--json").json()
    assert doc["results"] == [], doc["results"]
    assert "not_related" in [n["code"] for n in doc["notes"]]
    doc = run("rag", "search", "docs", query, "--mode", "keyword", "--json").json()
    assert doc["results"] == [], doc["results"]
    assert "not_related" in [n["code"] for n in doc["notes"]]
    related = "Which branch do production releases go out from?"
    doc = run("notes", "search", related, "--mode", "keyword", "--json").json()
    assert doc["results"] and doc["results"][0]["name"] == "deploy", doc
    doc = run("rag", "search", "docs", related, "--mode", "keyword", "--json").json()
    assert doc["results"] and doc["results"][0]["relpath"] == "deploy.md", doc
    doc = run("notes", "search", "release", "--mode", "keyword", "--json").json()
    assert [r["name"] for r in doc["results"]] == ["deploy"], doc


def test_keyword_score_over_one_note_is_not_shown_as_zero(run):
    """FTS5's BM25 gives ~0 to a word that half the notes or more hold (one note: every
    word): the JSON keeps the value on its documented scale (docs/json-vocabulary.md, bm25:
    0 to unbounded), the text says why it is ~0 instead of printing 0.000."""
    assert run("notes", "add", "coffee", "--content", NOTES["coffee"]).exit_code == 0
    doc = run("notes", "search", "coffee", "--mode", "keyword", "--json").json()
    hit = doc["results"][0]
    assert hit["score_kind"] == "bm25" and 0 < hit["score"] < 0.001, hit
    res = run("notes", "search", "coffee", "--mode", "keyword")
    assert res.exit_code == 0
    row = next(line for line in res.stdout.splitlines() if "coffee" in line.split()[:2])
    assert "0.000" not in row and "~0" in row, res.stdout
    assert "half the notes or more" in res.stdout, res.stdout


NEAR_MISSES = ["How do I deploy a Flask app with Docker?",
               "How do you brew coffee with a French press?",
               "What is the best food for an old dog?"]
NAMED_RELATED = [("Does the user take oat milk in the coffee?", "coffee"),
                 ("When does the shiba inu need its morning walk?", "dog"),
                 ("Can we deploy on a Friday afternoon?", "deploy")]


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_a_near_miss_gets_nothing_while_a_question_naming_the_same_word_keeps_its_note(
        run, notes, rag_db, mode):
    """A near miss names a note's word ("deploy", "coffee", "dog") but asks what no note
    says (bench/corpus_floor_data tune3.json / tune2.json): the question drifts away from
    the note compared with the words it names (search/corpus.py NEAR_MISS), so notes and
    RAG answer nothing, in hybrid too (its keyword matches hold the named word). A
    question naming the same word about what the note says keeps its note."""
    for query in NEAR_MISSES:
        doc = run("notes", "search", query, "--mode", mode, "--json").json()
        assert doc["results"] == [], (query, doc["results"])
        assert "not_related" in [n["code"] for n in doc["notes"]]
        doc = run("rag", "search", "docs", query, "--mode", mode, "--json").json()
        assert doc["results"] == [], (query, doc["results"])
    for query, name in NAMED_RELATED:
        doc = run("notes", "search", query, "--mode", mode, "--json").json()
        assert doc["results"] and doc["results"][0]["name"] == name, (query, doc)
        doc = run("rag", "search", "docs", query, "--mode", mode, "--json").json()
        assert doc["results"] and doc["results"][0]["relpath"] == f"{name}.md", (query, doc)


def test_the_notes_floor_takes_the_stored_passage_vectors(run, notes, monkeypatch):
    """The floor weighs the top notes' index vectors: a note's passage vector was made of
    exactly that passage by the index model (a new content is a new note id), so a search
    embeds no note text again, and answers as when it did (same notes, same scores)."""
    query = "How does the user take their coffee?"
    first = run("notes", "search", query, "--mode", "semantic", "--json").json()
    texts = documents_embedded(monkeypatch)
    again = run("notes", "search", query, "--mode", "semantic", "--json").json()
    assert [(r["name"], r["score"]) for r in again["results"]] == \
        [(r["name"], r["score"]) for r in first["results"]]
    assert again["results"][0]["name"] == "coffee"
    unrelated = run("notes", "search", "What is the capital of France?", "--mode",
                    "semantic", "--json").json()
    assert unrelated["results"] == []
    assert texts == [], texts


def test_the_rag_floor_takes_the_stored_chunk_vectors(run, rag_db, monkeypatch):
    """A chunk's stored vector was made of exactly its embedded text ("relpath · heading"
    and its text; a changed file's chunks are new rows, their old vectors deleted first:
    rag/commit.py), so a RAG search embeds no chunk text again, and answers as when it did."""
    query = "How does the user take their coffee?"
    first = run("rag", "search", "docs", query, "--mode", "semantic", "--json").json()
    texts = documents_embedded(monkeypatch)
    again = run("rag", "search", "docs", query, "--mode", "semantic", "--json").json()
    assert [(r["relpath"], r["score"]) for r in again["results"]] == \
        [(r["relpath"], r["score"]) for r in first["results"]]
    assert again["results"][0]["relpath"] == "coffee.md"
    unrelated = run("rag", "search", "docs", "What is the capital of France?", "--mode",
                    "semantic", "--json").json()
    assert unrelated["results"] == []
    assert texts == [], texts
