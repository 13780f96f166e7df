"""The notes' vectors: made after the rows, caught up like the messages' (a semantic or
hybrid search embeds what lacks a vector first, for at most its budget; the MCP server does
it in the background), checked and repaired by doctor.

A note is embedded as passages (its paragraphs packed, at most MAX_PASSAGES of them),
each prefixed by the note's name: a long note is found by the
passage that matches, and that passage is the hit's snippet."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from agenvoy_cli.notes import store as note_store
from agenvoy_cli.notes.store import NOTES, Note, Warn, quiet

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store

MAX_PASSAGES = 16  # past this a note's text is found by keyword only (docs/notes.md)
PASSAGE_CHARS = 1000  # inside the embedders' window (they see 2,000 characters at most)
BATCH = 8  # notes embedded per lock round-trip


def passages(note: Note) -> list[str]:
    """The texts embedded for a note: its name, then a passage of its content each (its
    paragraphs packed up to PASSAGE_CHARS, a longer paragraph cut; at most MAX_PASSAGES)."""
    chunks: list[str] = []
    current = ""
    for block in re.split(r"\n\s*\n", note.content.replace("\r\n", "\n")):
        block = block.strip()
        while block:
            piece, block = block[:PASSAGE_CHARS], block[PASSAGE_CHARS:]
            if current and len(current) + len(piece) + 2 > PASSAGE_CHARS:
                chunks.append(current)
                current = ""
            current = f"{current}\n\n{piece}" if current else piece
    if current:
        chunks.append(current)
    return [f"{note.name}\n{text}" for text in chunks[:MAX_PASSAGES]] or [note.name]


def embed_notes(store: Store, notes: list[Note]) -> tuple[list[list[list[float]]], str]:
    """Each note's passage vectors and the model id. Outside the lock."""
    from agenvoy_cli.vectors import api as vectors

    emb = vectors.embedder(store)
    texts = [passages(n) for n in notes]
    flat = emb.embed_documents([t for group in texts for t in group])
    out, at = [], 0
    for group in texts:
        out.append([list(v) for v in flat[at:at + len(group)]])
        at += len(group)
    return out, emb.model_id


def pending(store: Store) -> list[Note]:
    """Notes without vectors yet."""
    return note_store.list_notes(store, "vector_model IS NULL", order="id")


def catch_up(store: Store, budget: float | None, warn: Warn = quiet) -> int:
    """Embed notes that have no vector yet, for at most `budget` seconds of embedding (None:
    all); how many are left (found by keyword meanwhile)."""
    todo = pending(store)
    if not todo or budget == 0:
        return len(todo)
    from agenvoy_cli.vectors.budget import embed_within

    def step(batch: list[Note]) -> None:
        vecs, model = embed_notes(store, batch)
        with store.write_lock():
            note_store.add_vectors(store, list(zip(batch, vecs)), model)

    done = embed_within(store, todo, BATCH, budget, step, warn,
                        "could not embed the notes without a vector; they are found by "
                        "keyword")
    return len(todo) - done


# --------------------------------------------------------------------------- doctor


def _inspect(store: Store) -> tuple[list[str], dict[str, object]]:
    """Hold write_lock. (problems, what repair needs)."""
    problems: list[str] = []
    fix: dict[str, object] = {"fts": False, "drop": False, "stale": [], "unflag": []}
    conn = store.db()
    broken = note_store.check_fts(conn)
    if broken is not None:
        fix["fts"] = True
        problems.append(f"knowledge notes full-text index: {broken}")
    if not note_store.has_vector_dir(store):
        flagged = [n.id for n in note_store.fetch(conn, "vector_model IS NOT NULL")]
        if flagged:
            fix["unflag"] = flagged
            problems.append(f"{len(flagged)} note(s) have lost their vectors (there is no "
                            "vector index); searched by keyword until embedded again")
        return problems, fix
    from agenvoy_cli.vectors import api as vectors

    if not vectors.index_exists(store, NOTES):
        have: dict[str, dict[str, object]] = {}
    else:
        index = vectors.open_index(store, NOTES, create=False)
        built = (index.collection.metadata or {}).get("model_id")
        current = vectors.embedder(store).model_id
        if built != current:
            fix["drop"] = True
            problems.append(f"the notes' vector index was built with {built}, the embedder "
                            f"is {current}: it must be rebuilt")
            return problems, fix
        have = index.get()
    notes = {n.id: n for n in note_store.fetch(conn)}
    stale = sorted(v for v in have if note_store.note_of(v) not in notes)
    if stale:
        fix["stale"] = stale
        problems.append(f"{len(stale)} note vector(s) belong to no note (a replaced or "
                        "removed note's)")
    lost = [n.id for n in notes.values() if n.vector_model is not None
            and any(v not in have for v in n.vector_ids())]
    if lost:
        fix["unflag"] = lost
        problems.append(f"{len(lost)} note(s) have lost their vectors; searched by keyword "
                        "until embedded again")
    return problems, fix


def check_note_index(store: Store) -> list[str]:
    """What is out of line between the notes and their indexes (doctor)."""
    if not store.layout.db.exists():
        return []
    with store.write_lock():  # Chroma access holds the lock; nothing is changed
        return _inspect(store)[0]


def repair_note_index(store: Store, warn: Warn = quiet) -> list[str]:
    """Bring the indexes back in line with the notes; what was done. Notes left without
    vectors are embedded by the next semantic search (or here, when `embed`)."""
    if not store.layout.db.exists():
        return []
    from agenvoy_cli.vectors import api as vectors

    done: list[str] = []
    with store.write_lock():
        _, fix = _inspect(store)
        if fix["fts"]:
            note_store.rebuild_fts(store)
            done.append("rebuilt the notes' full-text index")
        if fix["drop"]:
            vectors.drop_index(store, NOTES)
            note_store.unflag_vectors(store)
            done.append("dropped the notes' vector index (built with another model)")
        stale = list(fix["stale"])  # type: ignore[call-overload]
        if stale:
            vectors.open_index(store, NOTES, create=False).delete(stale)
            done.append(f"deleted {len(stale)} stale note vector(s)")
        unflag = list(fix["unflag"])  # type: ignore[call-overload]
        if unflag:
            note_store.unflag_vectors(store, unflag)
            done.append(f"{len(unflag)} note(s) marked for embedding again")
    left = catch_up(store, None, warn) if done and pending(store) else 0
    if left:
        done.append(f"{left} note(s) still without vectors")
    return done
