"""Exact search at session scale (vectors/exact.py): a collection up to EXACT_MAX vectors is
searched by inner product over a kept matrix, so no vector is ever unreachable; the kept copy
follows every write (this holder's, another holder's, another process's) through the
generation token."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from tests.conftest import ROOT
from tests.helpers.chroma import PY, env_for, new_process

# what an older version of this tool created: Chroma's default graph (test_unreachable.py)
OLD = {"hnsw:space": "cosine", "hnsw:sync_threshold": 100, "hnsw:batch_size": 100,
       "hnsw:search_ef": 1000}


def _near_copies(dim: int, n: int = 2000, share: float = 0.2, seed: int = 0):
    """n unit vectors around 20 directions, `share` of them one vector plus noise of 1e-3
    (as test_unreachable.py makes them)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    base = rng.normal(size=(20, dim))
    one = base[0] / np.linalg.norm(base[0])
    out = []
    for _ in range(n):
        if rng.random() < share:
            v = one + rng.normal(size=dim) * 1e-3 / np.sqrt(dim)
        else:
            v = rng.normal(size=dim) + 3 * base[rng.integers(20)]
        out.append(v / np.linalg.norm(v))
    return np.array(out, dtype=np.float32)


def _store(home: Path):
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.vectors.hooks import open_store

    return open_store(Layout(home))


def _fill(store, name: str, vecs, metadata: dict | None = None) -> object:
    """The vectors added as the catch-up adds them; `metadata`: the collection made first
    with it (an older version's graph parameters)."""
    from agenvoy_cli.vectors.collection import VectorIndex, client, embedder

    if metadata is not None:
        emb = embedder(store)
        with store.write_lock():
            client(store).create_collection(name, embedding_function=None, metadata={
                **metadata, "model_id": emb.model_id, "dim": emb.dim})
    index = VectorIndex(store, name, create=metadata is None)
    for i in range(0, len(vecs), 64):  # the catch-up's batch
        top = min(i + 64, len(vecs))
        index.add([str(j) for j in range(i, top)], vecs[i:top].tolist(),
                  [{"i": j} for j in range(i, top)])
    return index


def test_every_vector_is_reachable_below_the_threshold(home: Path, words) -> None:
    """20 % near copies of one vector, in a collection an older version built (Chroma's
    default graph: dozens of them unreachable by HNSW, which failed this test before
    vectors/exact.py). Searched exactly, a fresh holder's search as wide as the collection
    returns all of them, and a filtered one exactly those that pass."""
    from agenvoy_cli.vectors.collection import VectorIndex

    vecs = _near_copies(words.dim)
    store = _store(home)
    try:
        index = _fill(store, "near-copies-exact", vecs, OLD)
        assert index.path() == "exact"
    finally:
        store.close()
    new_process()
    store = _store(home)
    try:
        index = VectorIndex(store, "near-copies-exact", create=False)
        probe = [1.0] + [0.0] * (words.dim - 1)
        every = index.query(probe, len(vecs))
        assert sorted(int(h.id) for h in every) == list(range(len(vecs)))
        assert [h.distance for h in every] == sorted(h.distance for h in every)
        some = index.query(vecs[1500].tolist(), 2000, where={"i": {"$gte": 1000}})
        assert sorted(int(h.id) for h in some) == list(range(1000, 2000))
        assert some[0].id == "1500" and some[0].distance == pytest.approx(0.0, abs=1e-5)
        assert all(h.metadata["i"] == int(h.id) for h in some)
    finally:
        store.close()


def test_a_kept_matrix_follows_another_holders_and_its_own_writes(home: Path, words) -> None:
    """Holder A searches (its matrix is read), holder B adds and deletes: A's next search
    answers from the directory as it is now; A's own add is in A's copy without a re-read."""
    import numpy as np

    from agenvoy_cli.vectors import context
    from agenvoy_cli.vectors.collection import VectorIndex

    rng = np.random.default_rng(1)
    vecs = rng.normal(size=(300, words.dim)).astype(np.float32)
    a, b = _store(home), _store(home)
    try:
        index_a = _fill(a, "follow", vecs[:200])
        assert len(index_a.query(vecs[0].tolist(), 500)) == 200
        kept = context.of(a).exact["follow"]
        index_b = VectorIndex(b, "follow")
        index_b.add(["new"], [vecs[250].tolist()], [{"i": 250}])
        index_b.delete(["0"])
        hits = index_a.query(vecs[250].tolist(), 500)
        assert hits[0].id == "new" and "0" not in {h.id for h in hits} and len(hits) == 200
        assert context.of(a).exact["follow"] is not kept  # read again: B wrote
        kept = context.of(a).exact["follow"]
        index_a.add(["mine"], [vecs[260].tolist()], [{"i": 260}])
        assert context.of(a).exact["follow"] is kept  # patched, not read again
        assert index_a.query(vecs[260].tolist(), 1)[0].id == "mine"
    finally:
        a.close()
        b.close()


def test_a_warm_process_sees_another_process_write(home: Path, run, words) -> None:
    """A real second process (tests/vector_workers.py serve) appends and indexes while this
    process holds a kept matrix of the session: this holder's next vector search finds the
    new message."""
    from agenvoy_cli.search.semantic import vector_hits

    sid = "s"
    first = orjson.dumps([{"role": "user", "content": f"note {i} about lunch"} for i in range(40)])
    assert run("append", sid, "--messages", "-", input=first).exit_code == 0
    assert run("backfill", sid, "--vectors").exit_code == 0
    store = _store(home)
    try:
        query = words.embed_query("nomad river")
        with store.write_lock():
            before = vector_hits(store, sid, query, 100, lo_seq=0, hi_seq=None)[0]
        assert len(before) == 40
        child = subprocess.run([*PY, "serve"], cwd=ROOT, env=env_for(home), timeout=120,
                               capture_output=True, input=b"\n".join([
                                   orjson.dumps({"args": ["append", sid, "--role", "user",
                                                          "--content", "nomad river crossing"]}),
                                   orjson.dumps({"args": ["backfill", sid, "--vectors"]})]) + b"\n")
        answers = [orjson.loads(line) for line in child.stdout.splitlines()]
        assert [a["code"] for a in answers] == [0, 0], (answers, child.stderr[-2000:])
        with store.write_lock():
            after = vector_hits(store, sid, query, 100, lo_seq=0, hi_seq=None)[0]
        assert len(after) == 41 and after[0][0] == 40, after[:3]
    finally:
        store.close()


def test_doctor_says_how_each_collection_is_searched(home: Path, run, words,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from agenvoy_cli.vectors import exact

    data = orjson.dumps([{"role": "user", "content": f"line {i}"} for i in range(12)])
    for sid in ("a", "b"):
        assert run("append", sid, "--messages", "-", input=data).exit_code == 0
        assert run("backfill", sid, "--vectors").exit_code == 0
    doc = run("doctor", "--json")
    assert doc.exit_code == 0, doc.stdout
    paths = doc.json()["vector_paths"]
    assert sorted((p["session_id"], p["path"], p["vectors"]) for p in paths) == [
        ("a", "exact", 12), ("b", "exact", 12)]
    assert "vector search: exact for 2 collection(s), hnsw for 0" in run("doctor").stdout
    monkeypatch.setattr(exact, "EXACT_MAX", 11)
    paths = run("doctor", "--json").json()["vector_paths"]
    assert {p["path"] for p in paths} == {"hnsw"}
