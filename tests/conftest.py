from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agenvoy_cli.cli import cli
from agenvoy_cli.environment import start_program

ROOT = Path(__file__).resolve().parent.parent
# The search budget (AGENVOY_SEARCH_BUDGET) of every test that does not give one: a search
# right after an append embeds the new messages first, and the default 3 s of wall time ran
# out on a loaded machine (two test processes on 2 busy cores), leaving them to keyword
# ranking. The tests of the budget pass --budget (or MCP `budget`) themselves.
TEST_BUDGET = "600"

# The test run is a program like the CLI: its OpenMP threads set where it starts (the commands
# it runs in-process never set them).
start_program()
# The helpers test modules share (tests/helpers/) get pytest's assert messages, as tests do.
pytest.register_assert_rewrite("tests.helpers")


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One derived model cache for the run (models/usem3_fast.py), never the user's."""
    return tmp_path_factory.mktemp("model-cache")


def isolate(monkeypatch: pytest.MonkeyPatch, home: Path, model_cache: Path) -> None:
    """The environment every test runs in: `home` as the Agenvoy home, the run's model
    cache, Taipei's time zone, a search budget no busy machine runs out of (TEST_BUDGET),
    nothing else of AGENVOY_* or OPENAI_* from outside."""
    monkeypatch.setenv("AGENVOY_HOME", str(home))
    monkeypatch.setenv("TZ", "Asia/Taipei")
    for name in list(os.environ):
        if name.startswith(("AGENVOY_", "OPENAI_")) and name != "AGENVOY_HOME":
            monkeypatch.delenv(name)
    monkeypatch.setenv("AGENVOY_MODEL_CACHE", str(model_cache))
    monkeypatch.setenv("AGENVOY_SEARCH_BUDGET", TEST_BUDGET)
    import time

    time.tzset()


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_cache: Path) -> Path:
    """Every test gets its own Agenvoy home; nothing leaks from the real one."""
    home = tmp_path / "home"
    isolate(monkeypatch, home, model_cache)
    return home


@pytest.fixture(scope="module")
def module_env(tmp_path_factory: pytest.TempPathFactory, model_cache: Path):
    """The tests' environment (isolate) for a module-scoped fixture that seeds a home once
    (its tests copy it: fault_sweep.copy_home); yields a folder of its own."""
    folder = tmp_path_factory.mktemp("module")
    with pytest.MonkeyPatch.context() as monkeypatch:
        isolate(monkeypatch, folder / "home", model_cache)
        yield folder
    import time

    time.tzset()


class Result:
    def __init__(self, exit_code: int, stdout: str, stderr: str) -> None:
        self.exit_code, self.stdout, self.stderr = exit_code, stdout, stderr

    def json(self):
        import orjson

        return orjson.loads(self.stdout)


@pytest.fixture(scope="session")
def embedders():
    """The test process's Embedders: every in-process command shares it (as one process's
    Stores would), so the default model is loaded once for the whole run."""
    from agenvoy_cli.models.embedders import Embedders

    return Embedders()


@pytest.fixture
def run(embedders):
    """Run the CLI in-process (CliRunner, stdout and stderr kept apart)."""

    def invoke(*args: str, input: str | bytes | None = None) -> Result:
        runner = CliRunner()
        res = runner.invoke(cli, list(args), input=input, catch_exceptions=False,
                            obj={"embedders": embedders})
        return Result(res.exit_code, res.stdout, res.stderr)

    return invoke


def agenvoy(*args: str, input: bytes | str | None = None, env: dict | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the real program in a subprocess."""
    if isinstance(input, str):
        input = input.encode()
    return subprocess.run([sys.executable, "-m", "agenvoy_cli", *args], input=input,
                          capture_output=True, timeout=timeout, env={**os.environ, **(env or {})},
                          cwd=ROOT)


def vm_steps(conn, call):
    """(SQLite VM steps in blocks of 50, call's result): the work a query does, counted the
    same on a busy machine as on an idle one (the cost tests compare these, not times)."""
    counter = [0]

    def tick() -> int:
        counter[0] += 1
        return 0

    conn.set_progress_handler(tick, 50)
    try:
        result = call()
    finally:
        conn.set_progress_handler(None, 0)
    return counter[0], result


# -- shared fixtures (once imported between test files)

@pytest.fixture
def words(monkeypatch):
    """The stand-in embedder (tests/words_embedder.py) for in-process runs, through
    AGENVOY_EMBEDDER; the instance counts what it embedded."""
    from tests import words_embedder

    emb = words_embedder.WordsEmbedder()
    words_embedder.use(monkeypatch, emb)
    return emb


@pytest.fixture
def embed_server(monkeypatch):
    """An OpenAI-compatible /v1/embeddings on 127.0.0.1 (hashed words), for subprocesses."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tests.words_embedder import WordsEmbedder

    emb = WordsEmbedder()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            data = [{"index": i, "embedding": emb.vec(t)} for i, t in enumerate(body["input"])]
            out = json.dumps({"data": data}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    env = {"AGENVOY_EMBEDDER": "openai:hashed", "AGENVOY_EMBED_DIM": "512",
           "AGENVOY_EMBED_BASE_URL": f"http://127.0.0.1:{server.server_port}/v1"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    yield env
    server.shutdown()


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs to fill (tests/helpers/disk.py); skipped where mount is not allowed."""
    from tests.helpers.disk import tmpfs

    with tmpfs(tmp_path / "small") as mount:
        yield mount


KEY = "sk-test-SECRET-0123456789"  # the API key the `llm` fixture sets


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch):
    """The summarizer's stand-in LLM server (tests/llm_server.py), set as its endpoint."""
    from tests.llm_server import FakeLLM

    with FakeLLM() as server:
        monkeypatch.setenv("AGENVOY_LLM_BASE_URL", server.url)
        monkeypatch.setenv("AGENVOY_LLM_MODEL", "test-model")
        monkeypatch.setenv("AGENVOY_LLM_API_KEY", KEY)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
        yield server


# Whole modules whose tests spawn servers or many processes, build the wheel or load a second
# model: `pytest -m 'not slow'` (the README's fast subset) leaves them out. CI runs them all.
SLOW_MODULES = {
    "tests.conversation.test_crash", "tests.test_mcp", "tests.test_mcp_http",
    "tests.test_mcp_agenvoy_tools", "tests.test_load", "tests.test_concurrency",
    "tests.test_vectors_multiprocess", "tests.vectors.test_chroma_server", "tests.test_scale",
    "tests.release.test_packaging", "tests.test_fault_sweep", "tests.test_disk_full",
    "tests.test_doctor_faults", "tests.conversation.test_forget_faults",
    "tests.vectors.test_doctor_vectors", "tests.test_server_lifecycle", "tests.test_interrupt",
    "tests.test_contention", "tests.test_small_floor",
}


# Tests that measure time against a bound or a ratio, or load the machine themselves: CI runs
# them alone, after the parallel pass (`-m 'not serial'` with pytest-xdist, then `-m serial`).
SERIAL_MODULES = {"tests.test_interrupt", "tests.test_load"}
SERIAL_TESTS = {
    "tests/test_contention.py::test_a_library_search_with_two_busy_competitors_keeps_its_speed",
}


@pytest.hookimpl(tryfirst=True)  # before -m deselects by mark
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        name = module.__name__ if module is not None else ""
        if name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
        if name in SERIAL_MODULES or item.nodeid.split("[")[0] in SERIAL_TESTS:
            item.add_marker(pytest.mark.serial)
