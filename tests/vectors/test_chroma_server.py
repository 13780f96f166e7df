"""AGENVOY_CHROMA_URL: every vector operation goes to a real `chroma run` server.

Same behaviour as the embedded directory, checked through the CLI with the default local
embedder; the server's contents are checked with chromadb's own HttpClient. A server that
is down is one clear error for what needs vectors, and nothing else stops working.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import orjson
import pytest

from tests.conftest import agenvoy

CHROMA = Path(sys.executable).parent / "chroma"
MESSAGES = "agenvoy_messages"  # agenvoy_cli.vectors.api.MESSAGES
ERRORS = "agenvoy_errors"  # agenvoy_cli.vectors.api.ERRORS
START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def heartbeat(url: str) -> bool:
    for path in ("/api/v2/heartbeat", "/api/v1/heartbeat"):
        with contextlib.suppress(OSError), urllib.request.urlopen(url + path, timeout=1) as res:
            if res.status == 200:
                return True
    return False


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory):
    """A `chroma run` on a free port of 127.0.0.1, for the whole module."""
    if not CHROMA.exists():
        pytest.skip(f"no chroma server binary at {CHROMA} (it ships with the chromadb package)")
    root = tmp_path_factory.mktemp("chroma-server")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (root / "server.log").open("wb")
    proc = subprocess.Popen([str(CHROMA), "run", "--path", str(root / "data"),
                             "--host", "127.0.0.1", "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not heartbeat(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (root / "server.log").read_bytes()[-2000:].decode(errors="replace")
                pytest.fail(f"chroma run did not answer on {url} within {START_TIMEOUT:g}s "
                            f"(exit {proc.poll()}):\n{tail}")
            time.sleep(0.2)
        import chromadb
        from chromadb.config import Settings

        api = chromadb.HttpClient(host="127.0.0.1", port=port,
                                  settings=Settings(anonymized_telemetry=False))
        yield url, api
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


@pytest.fixture
def server(chroma_server, monkeypatch):
    """The server, emptied, and AGENVOY_CHROMA_URL pointing at it."""
    url, api = chroma_server
    for collection in api.list_collections():
        api.delete_collection(collection if isinstance(collection, str) else collection.name)
    monkeypatch.setenv("AGENVOY_CHROMA_URL", url)
    monkeypatch.setenv("AGENVOY_SEARCH_BUDGET", "600")  # these tests count every vector
    return api


def entries(api, name: str, session_id: str | None = None) -> dict[str, dict]:
    """Entries of the collection `name` of the (one) home under test: on a server the
    collection names carry a per-home suffix (messages: one collection per session, each
    with its own infix)."""
    names = [c if isinstance(c, str) else c.name for c in api.list_collections()]
    found = [n for n in names if n == name or n.startswith(name + "-")]
    out: dict[str, dict] = {}
    for cname in found:
        got = api.get_collection(cname).get(
            where={"session_id": session_id} if session_id else None, include=["metadatas"])
        out.update(zip(got["ids"], got["metadatas"]))
    return out


def ok(res):
    assert res.exit_code == 0, res.stderr
    return res


def append(run, sid: str, contents: list[str], time_: str = "2026-11-01 10:00:00") -> None:
    batch = [{"role": "user" if i % 2 == 0 else "assistant", "content": c}
             for i, c in enumerate(contents)]
    ok(run("append", sid, "--messages", "-", "--time", time_, "--no-compact",
           input=orjson.dumps(batch)))


CAT = "我家的猫叫小橘，今年三岁了。"
DEPLOY = "The deploy failed because the database migration timed out."
CONVERSATION = [CAT, "好可愛的名字！", DEPLOY, "Let's raise the migration timeout."] + [
    f"small talk number {i}" for i in range(16)]


def test_search_semantic_and_hybrid_through_the_server(run, home, server):
    append(run, "s", CONVERSATION)
    doc = ok(run("search", "s", "how old is my cat", "--limit", "1", "--json")).json()
    assert doc["indexed"] == 20
    assert [r["content"] for r in doc["results"] if r["hit"]][0] == CAT
    doc = ok(run("search", "s", "why did the deploy fail", "--mode", "hybrid", "--json")).json()
    assert DEPLOY in [r["content"] for r in doc["results"] if r["hit"]]
    # the vectors live on the server, none in the home
    assert sorted(int(m["seq"]) for m in entries(server, MESSAGES, "s").values()) == \
        list(range(20))
    assert not (home / ".store" / "chroma").exists()
    assert ok(run("search", "s", "cat", "--mode", "semantic", "--json")).json()["indexed"] == 0
    assert ok(run("doctor", "--json")).json()  # clean: exit 0


def test_compact_removes_vectors_older_than_the_trim_point(run, server):
    append(run, "c", [f"message {i} about topic {i % 5} " + "x" * 60 for i in range(30)])
    ok(run("search", "c", "topic 3", "--json"))  # indexes the recent part
    assert len(entries(server, MESSAGES, "c")) == 30
    ok(run("compact", "c", "--max-bytes", "1024"))
    start = ok(run("session", "show", "c", "--json")).json()["trim_point"]["start_seq"]
    assert start > 0
    seqs = sorted(int(m["seq"]) for m in entries(server, MESSAGES, "c").values())
    assert seqs and min(seqs) >= start, (start, seqs)
    assert ok(run("doctor", "c", "--json"))


def test_session_reset_clears_the_sessions_vectors(run, server):
    append(run, "r", CONVERSATION)
    append(run, "keep", CONVERSATION)
    for sid in ("r", "keep"):
        ok(run("search", sid, "cat", "--json"))
    assert len(entries(server, MESSAGES, "r")) == 20
    ok(run("session", "reset", "r", "--yes", "--no-summary"))
    assert entries(server, MESSAGES, "r") == {}
    assert len(entries(server, MESSAGES, "keep")) == 20
    ok(run("session", "remove", "keep", "--yes"))
    assert entries(server, MESSAGES, "keep") == {}
    assert ok(run("doctor", "--json"))


def test_errors_record_and_lookup_through_the_server(run, server):
    if ok(run("errors", "--help")).stdout.count("lookup") == 0:
        pytest.skip("the errors command is not built")
    rid = ok(run("errors", "record", "--tool", "ssh", "--keyword", "auth",
                 "--symptom", "ssh: authentication rejected", "--action",
                 "load the deploy key", "--outcome", "resolved")).stdout.strip()
    ok(run("errors", "record", "--tool", "shell", "--keyword", "storage", "--symptom",
           "write failed: no space left on device", "--action", "clean /tmp",
           "--outcome", "failed"))
    # an error text of the same failure (a paraphrase sharing no word is not hinted: #39)
    doc = ok(run("errors", "lookup", "ssh deploy@build-01: authentication rejected by the "
                 "server", "--json")).json()
    assert doc["mode"] == "semantic"
    assert doc["records"] and doc["records"][0]["id"] == rid
    assert len(entries(server, ERRORS)) == 2
    assert ok(run("doctor", "--json"))


# --------------------------------------------------------------------------- server down


@pytest.fixture
def down(monkeypatch):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    monkeypatch.setenv("AGENVOY_CHROMA_URL", url)
    return url


def test_a_server_that_is_down_is_one_clear_error(home, down):
    batch = orjson.dumps([{"role": "user" if i % 2 == 0 else "assistant", "content": c}
                          for i, c in enumerate(CONVERSATION)])
    res = agenvoy("append", "d", "--messages", "-", "--time", "2026-11-01 10:00:00",
                  input=batch)
    assert res.returncode == 0, res.stderr
    res = agenvoy("context", "d", "--json")
    assert res.returncode == 0, res.stderr
    assert len(orjson.loads(res.stdout)["messages"]) == 16  # no summary yet: the last 16
    res = agenvoy("search", "d", "deploy", "--mode", "keyword", "--json")
    assert res.returncode == 0, res.stderr
    assert DEPLOY in [r["content"] for r in orjson.loads(res.stdout)["results"]]
    # an append that compacts still exits 0 (the vectors are derived; doctor catches up)
    big = orjson.dumps([{"role": "user" if i % 2 == 0 else "assistant",
                         "content": f"line {i} " + "y" * 80} for i in range(30)])
    res = agenvoy("append", "big", "--messages", "-", input=big,
                  env={"AGENVOY_MAX_HISTORY_BYTES": "1024"})
    assert res.returncode == 0, res.stderr
    res = agenvoy("session", "show", "big", "--json")
    assert orjson.loads(res.stdout)["trim_point"]["start_seq"] > 0
    for mode in ("semantic", "hybrid"):
        res = agenvoy("search", "d", "my cat", "--mode", mode)
        err = res.stderr.decode()
        assert res.returncode == 1, (mode, err)
        assert res.stdout == b""
        assert len(err.strip().splitlines()) == 1, err
        assert down in err and "Traceback" not in err, err
    # what must clear vectors refuses, changing nothing (no orphans left on the server)
    res = agenvoy("session", "reset", "d", "--yes", "--no-summary")
    err = res.stderr.decode()
    assert res.returncode == 1 and len(err.strip().splitlines()) == 1 and down in err, err
    assert (home / "sessions" / "d" / "history.json").exists()


def test_two_homes_on_one_server_never_meet(run, home, server, tmp_path, monkeypatch):
    append(run, "main", ["the llama farm is in Peru"] + [f"pad {i}" for i in range(17)])
    assert ok(run("search", "main", "llama farm", "--json")).json()["indexed"] == 18
    other = tmp_path / "other-home"
    monkeypatch.setenv("AGENVOY_HOME", str(other))
    append(run, "main", ["my bicycle is blue"] + [f"pad {i}" for i in range(17)])
    doc = ok(run("search", "main", "llama farm", "--json")).json()
    assert doc["indexed"] == 18  # its own index, not the first home's entries
    assert "the llama farm is in Peru" not in [r["content"] for r in doc["results"]]
    names = [c if isinstance(c, str) else c.name for c in server.list_collections()]
    assert len([n for n in names if n.startswith(MESSAGES)]) == 2
    ok(run("session", "reset", "main", "--yes", "--no-summary"))
    monkeypatch.setenv("AGENVOY_HOME", str(home))
    doc = ok(run("search", "main", "llama farm", "--json")).json()
    assert "the llama farm is in Peru" in [r["content"] for r in doc["results"]]


def test_a_server_named_in_config_json_serves_rag_too(run, home, chroma_server, server,
                                                      tmp_path, monkeypatch):
    """config.json agenvoy.chroma_url is the same setting as AGENVOY_CHROMA_URL for every
    command: `rag search` searches the server's vectors (it fell back to keyword only) and
    `rag remove` deletes the database's collection there (it was left behind)."""
    url = chroma_server[0]
    monkeypatch.delenv("AGENVOY_CHROMA_URL")
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(orjson.dumps({"agenvoy": {"chroma_url": url}}).decode())
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "cats.md").write_text("# Cats\n\nOur cat Miso sleeps on the warm laptop.\n")
    (docs / "deploy.md").write_text("# Deploys\n\nA migration timeout failed the release.\n")
    ok(run("rag", "create", "notes", "--path", str(docs), "--json"))
    assert not (home / ".store" / "chroma").exists()  # the vectors went to the server
    names = [c if isinstance(c, str) else c.name for c in server.list_collections()]
    assert [n for n in names if n.startswith("agenvoy_rag")], names
    doc = ok(run("rag", "search", "notes", "where does the pet nap", "--mode", "semantic",
                 "--json")).json()
    assert doc["results"] and doc["results"][0]["score_kind"] == "cosine", doc
    ok(run("rag", "remove", "notes", "--yes"))
    names = [c if isinstance(c, str) else c.name for c in server.list_collections()]
    assert not [n for n in names if n.startswith("agenvoy_rag")], names
