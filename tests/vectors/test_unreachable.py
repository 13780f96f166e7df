"""Vectors Chroma's HNSW graph holds but no search reaches (vectors/check.py unreachable):
collections we create are built so that a session's repeated messages leave none
(vectors/collection.py CONSTRUCTION_EF, NEIGHBOURS); doctor finds them in a collection an
older version built and --repair rebuilds it with the parameters of today.

With Chroma's defaults (construction_ef 100, M 16) the sets below left 20-130 of 2,000 vectors
unreachable in every build measured; with ours, none (bench/hnsw_unreachable.py). Sessions
up to vectors/exact.py EXACT_MAX are searched exactly instead (tests/vectors/test_exact.py):
these tests pin every collection to HNSW."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.helpers.chroma import new_process, session_collection

# what an older version of this tool created: Chroma's default graph
OLD = {"hnsw:space": "cosine", "hnsw:sync_threshold": 100, "hnsw:batch_size": 100,
       "hnsw:search_ef": 1000}


@pytest.fixture(autouse=True)
def hnsw(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the HNSW graph: every collection searched by it, whatever its
    size (below vectors/exact.py EXACT_MAX a session is searched exactly: tests/vectors/
    test_exact.py)."""
    from agenvoy_cli.vectors import exact

    monkeypatch.setattr(exact, "EXACT_MAX", 0)


def _store(home: Path):
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.vectors.hooks import open_store

    return open_store(Layout(home))


def _repetitive(dim: int, n: int = 2000, seed: int = 0, one: float = 0.02):
    """n unit vectors around 20 directions: 5 % exact copies of a direction (the ack of many
    turns) and `one` copies of one vector (one tool output again and again)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    base = rng.normal(size=(20, dim))
    out = []
    for _ in range(n):
        draw = rng.random()
        if draw < one:
            v = base[0].copy()
        elif draw < one + 0.05:
            v = base[rng.integers(20)].copy()
        else:
            v = rng.normal(size=dim) + 3 * base[rng.integers(20)]
        out.append(v / np.linalg.norm(v))
    return np.array(out, dtype=np.float32)


def test_a_collection_we_create_leaves_no_vector_unreachable(home: Path, words) -> None:
    from agenvoy_cli.vectors.check import unreachable
    from agenvoy_cli.vectors.collection import VectorIndex

    vecs = _repetitive(words.dim)
    store = _store(home)
    try:
        index = VectorIndex(store, "copies-test")
        for i in range(0, len(vecs), 100):  # as the catch-up adds them: a batch at a time
            index.add([str(j) for j in range(i, i + 100)], vecs[i:i + 100].tolist(),
                      [{"i": j} for j in range(i, i + 100)])
        lost = unreachable(index.collection)
    finally:
        store.close()
    assert not lost, f"{len(lost)} of {len(vecs)} vectors no search returns"


def _near_copies(dim: int, n: int = 2000, share: float = 0.2, seed: int = 0):
    """n unit vectors around 20 directions, `share` of them one vector plus noise of 1e-3 (one
    text embedded in batches of other sizes: the last bits differ)."""
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


def test_near_copies_leave_no_vector_unreachable(home: Path, words) -> None:
    """20 % near copies of one vector: more than today's graph parameters hold (129 and 128 of
    5,000 unreachable in two builds, bench/hnsw_unreachable.py census). An add that moved
    vectors into the graph takes the census and adds what it cannot reach again."""
    from agenvoy_cli.vectors.check import unreachable
    from agenvoy_cli.vectors.collection import VectorIndex

    vecs = _near_copies(words.dim)
    store = _store(home)
    try:
        index = VectorIndex(store, "near-copies-test")
        for i in range(0, len(vecs), 64):  # the catch-up's batch
            index.add([str(j) for j in range(i, min(i + 64, len(vecs)))], vecs[i:i + 64].tolist(),
                      [{"i": j} for j in range(i, min(i + 64, len(vecs)))])
        lost = unreachable(index.collection)
    finally:
        store.close()
    assert not lost, f"{len(lost)} of {len(vecs)} vectors no search returns"


def _messages(n: int, seed: int = 0) -> bytes:
    """A session that says the same few things many times (acks, one tool output) among
    varied messages."""
    import random

    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(400)]
    texts = []
    for _ in range(n):
        draw = rng.random()
        if draw < 0.06:
            texts.append("ok thanks")
        elif draw < 0.10:
            texts.append("build passed: 0 failures")
        else:
            texts.append(" ".join(rng.sample(vocab, 6)))
    return orjson.dumps([{"role": "user" if i % 2 == 0 else "assistant", "content": t}
                         for i, t in enumerate(texts)])


def _old_session_collection(home: Path, sid: str, dim: int, model_id: str) -> None:
    """The session's collection as an older version created it (Chroma's default graph), before
    anything is indexed: the catch-up then fills it, as it would have then."""
    from agenvoy_cli.vectors.collection import client
    from agenvoy_cli.vectors.messages import collection_for

    store = _store(home)
    try:
        with store.write_lock():
            client(store).create_collection(
                collection_for(sid), embedding_function=None,
                metadata={**OLD, "model_id": model_id, "dim": dim, "session_id": sid})
    finally:
        store.close()


def _census(home: Path, sid: str) -> tuple[set[str], dict[str, Any]]:
    from agenvoy_cli.vectors.check import unreachable

    with session_collection(home, sid) as col:
        return unreachable(col), dict((col.configuration_json or {}).get("hnsw") or {})


def _old_home_with_unreachable(home: Path, run, words, monkeypatch
                               ) -> tuple[str, dict[str, Any]]:
    """A session indexed into an old-style collection, as an older version did (Chroma's default
    graph, no census after an add), until the census finds vectors no search reaches (bounded:
    a few sessions; each one measured did)."""
    from agenvoy_cli.vectors import collection

    for attempt in range(4):
        sid = f"s{attempt}"
        _old_session_collection(home, sid, words.dim, words.model_id)
        assert run("append", sid, "--messages", "-",
                   input=_messages(1500, attempt)).exit_code == 0
        with monkeypatch.context() as old_code:
            old_code.setattr(collection, "REACH_ROUNDS", 0)
            res = run("backfill", sid, "--vectors")
        assert res.exit_code == 0, res.stderr
        lost, hnsw = _census(home, sid)
        assert hnsw.get("ef_construction", 100) == 100
        # what doctor sees is a fresh process's graph, which can differ from this one's
        # (docs/vectors.md, Not done): build until doctor finds some
        found = _doctor(run) if lost else {}
        if found.get("problems"):
            return sid, found
    raise AssertionError("four old-style builds left every vector reachable")


def _doctor(run, *args: str) -> dict[str, Any]:
    new_process()
    res = run("doctor", *args, "--json")
    assert res.exit_code in (0, 1), res.stderr
    doc = dict(res.json())
    # what doctor says that is no problem (the stand-in embedder has no calibration profile)
    doc["problems"] = [p for p in doc["problems"] if not p.get("note")]
    return doc


def test_doctor_finds_unreachable_vectors_and_repair_rebuilds(home: Path, run, words,
                                                              monkeypatch) -> None:
    sid, found = _old_home_with_unreachable(home, run, words, monkeypatch)
    built = [f"s{i}" for i in range(int(sid[1:]) + 1)]
    # The census of one process and the next can differ (measured: 1 then 2; an earlier
    # session with none, then one; the cause was not established): doctor must find this
    # session or an earlier one, each built the old way.
    assert found["problems"], found
    for problem in found["problems"]:
        assert problem["session_id"] in built and problem["check"] == "vectors-unreachable"
        assert re.match(r"[1-9]\d* of 1500 vector\(s\) are in the HNSW index but no search "
                        r"reaches them .*construction_ef 100, M 16", problem["detail"]), found

    repaired = _doctor(run, "--repair")
    for problem in repaired["problems"]:
        assert problem["repaired"].startswith("rebuilt the session's collection: kept 1500, "
                                              "re-embedded 0, deleted 0 stale"), repaired
    for rebuilt in {p["session_id"] for p in repaired["problems"]}:
        after, hnsw = _census(home, rebuilt)
        assert not after
        assert (hnsw["ef_construction"], hnsw["max_neighbors"]) == (400, 32)
    assert not [p for p in _doctor(run)["problems"] if p["session_id"] in
                {p["session_id"] for p in repaired["problems"]}]


def test_a_healthy_home_has_no_unreachable_finding(home: Path, run, words) -> None:
    assert run("append", "s", "--messages", "-", input=_messages(300)).exit_code == 0
    assert run("backfill", "s", "--vectors").exit_code == 0
    assert _census(home, "s")[0] == set()
    assert _doctor(run)["problems"] == []


def test_too_many_copies_of_one_vector_are_rebuilt_and_what_remains_said(home: Path, run,
                                                                          words, monkeypatch
                                                                          ) -> None:
    """15 % copies of one vector: more than any graph parameters measured can hold (docs/
    vectors.md, Not done), added without the census an add takes (as an older version did).
    doctor reports it; --repair rebuilds and says what is still unreachable after (the
    rebuild's own adds mend what they can: the count may be 0)."""
    from agenvoy_cli.vectors import collection
    from agenvoy_cli.vectors.check import unreachable
    from agenvoy_cli.vectors.collection import VectorIndex

    assert run("append", "s", "--messages", "-", input=_messages(5)).exit_code == 0
    store = _store(home)
    try:
        with monkeypatch.context() as unmended:
            unmended.setattr(collection, "REACH_ROUNDS", 0)  # the graph as built
            for attempt in range(5):  # 4 of 4 builds measured left 12-21 (raw chromadb)
                index = VectorIndex(store, f"copies-{attempt}")
                vecs = _repetitive(words.dim, n=3000, seed=attempt, one=0.15)
                for i in range(0, len(vecs), 1000):
                    index.add([str(j) for j in range(i, i + 1000)], vecs[i:i + 1000].tolist(),
                              [{"i": j} for j in range(i, i + 1000)])
                if unreachable(index.collection):
                    break
            else:
                raise AssertionError("five builds left every vector reachable")
    finally:
        store.close()
    found = _doctor(run)
    said = [p for p in found["problems"] if p["check"] == "vectors-unreachable"]
    assert len(said) == 1 and "construction_ef 400, M 32" in said[0]["detail"], found
    repaired = _doctor(run, "--repair")
    said = [p for p in repaired["problems"] if p["check"] == "vectors-unreachable"]
    assert re.fullmatch(r"rebuilt the collection keeping its 3000 vector\(s\)(; \d+ vector\(s\) "
                        r"still unreachable \(too many copies of one vector.*)?",
                        said[0]["repaired"]), said


def _plain(n: int) -> bytes:
    return orjson.dumps([{"role": "user" if i % 2 == 0 else "assistant",
                          "content": f"message {i} about topic{i % 37} and item{i}"}
                         for i in range(n)])


@pytest.mark.parametrize("failure", ["enospc", "eio"])
@pytest.mark.parametrize("step", ["delete", "upsert"])
def test_a_fault_in_the_census_re_add_loses_nothing(home: Path, run, words, monkeypatch,
                                                    failure: str, step: str) -> None:
    """The census's re-add is a delete then an upsert: a full or failing disk at either is
    said as such (never "internal error"), the messages stay, and the next backfill puts
    back every vector the delete took (the catch-up finds them without one)."""
    from agenvoy_cli.home import faults
    from agenvoy_cli.vectors import check, collection

    assert run("append", "s", "--messages", "-", input=_plain(120)).exit_code == 0
    real = check.unreachable
    first: list[set[str]] = []

    def census(col: Any, ids: Any = None) -> set[str]:  # as a build that left 10 unreachable
        if not first:
            first.append(set(sorted(col.get(include=[])["ids"])[:10]))
            return first[0]
        return real(col, ids)

    real_before = collection.before_write
    seen: list[str] = []

    def before_write(what: str) -> None:  # the injector's chroma failure, at the re-add
        if first:
            seen.append(what)
            if what == step:
                raise collection._chroma_failure(faults.FAILURES[failure])
        real_before(what)

    monkeypatch.setattr(check, "unreachable", census)
    monkeypatch.setattr(collection, "before_write", before_write)
    res = run("backfill", "s", "--vectors")
    assert seen[-1] == step and seen[0] == "delete", seen
    assert res.exit_code == 1, (res.stdout, res.stderr)
    said = res.stderr.strip()
    assert "internal error" not in said and len(said.splitlines()) == 1, said
    assert ("no space left" if failure == "enospc" else "I/O error") in said, said
    monkeypatch.setattr(collection, "before_write", real_before)

    shown = run("session", "show", "s", "--json")
    assert shown.exit_code == 0 and shown.json()["message_count"] == 120, shown.stdout
    assert run("backfill", "s", "--vectors").exit_code == 0
    with session_collection(home, "s") as col:
        assert col.count() == 120
        assert real(col) == set()
    assert _doctor(run)["problems"] == []
