"""bench/web: the server time of `agenvoy web`'s pages on a big home (issue #48: a page of a
100,000-message session renders in <= 200 ms of server time; nothing loads a whole archive).

Builds a home with one session of --messages messages (history.json written here, then
`agenvoy backfill`, as a user importing an existing Agenvoy home would; no vectors) and a
small session of 100, starts the real `agenvoy web` on 127.0.0.1 and asks it over HTTP,
interleaved round by round: the big session's newest page, its oldest page, a page in the
middle, its context preview, the sessions list, and the small session's newest page (the
baseline: A/B ratios big/small). Reported per page: the server's own time (its
Server-Timing header: wall and CPU of the request) and the client's wall time, medians over
--runs rounds, and `uptime`'s load beside them. Nothing is tuned on these numbers (no
split is needed: there is no parameter fitted to them).

Usage: python bench/web.py [--runs 30] [--messages 100000] [--work /tmp/agenvoy-web-bench]
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def build(home: Path, sid: str, count: int) -> None:
    msgs = []
    for i in range(count):
        clock = f"{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}"
        day = 1 + i // 86_400
        head = f"---\n當前時間: 2024-01-{day:02d} {clock}\n---\n"
        role = "user" if i % 2 == 0 else "assistant"
        msgs.append({"role": role, "content": head + f"message {i} about the deploy "
                     + "lorem ipsum dolor " * (i % 7 + 1)})
    folder = home / "sessions" / sid
    folder.mkdir(parents=True)
    (folder / "history.json").write_bytes(orjson.dumps(msgs))


def ask(port: int, path: str, token: str) -> tuple[float, float, float]:
    """(server wall ms, server CPU ms, client wall ms) of one GET."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    start = time.perf_counter()
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
    res = conn.getresponse()
    body = res.read()
    wall = (time.perf_counter() - start) * 1000
    conn.close()
    if res.status != 200:
        raise SystemExit(f"{path}: {res.status} {body[:300]!r}")
    timing = res.getheader("server-timing") or ""
    app = float(re.search(r"app;dur=([\d.]+)", timing).group(1))
    cpu = float(re.search(r"cpu;dur=([\d.]+)", timing).group(1))
    return app, cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/agenvoy-web-bench"))
    args = parser.parse_args()
    import agenvoy_cli

    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    str(Path(agenvoy_cli.__file__).parent)], check=True)
    home = args.work / f"home-{args.messages}"
    env = {**os.environ, "AGENVOY_HOME": str(home), "AGENVOY_MAX_HISTORY_BYTES": str(1 << 30)}
    exe = [sys.executable, "-m", "agenvoy_cli"]
    if not (home / ".store" / "history.db").exists():
        build(home, "big", args.messages)
        build(home, "small", 100)
        subprocess.run(exe + ["backfill", "--all"], env=env, check=True, stdout=subprocess.DEVNULL)
    rows = orjson.loads(subprocess.run(exe + ["session", "show", "big", "--json"], env=env,
                                       check=True, capture_output=True).stdout)["row_count"]
    proc = subprocess.Popen(exe + ["web", "--listen", "127.0.0.1:0"], env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        login = ""
        assert proc.stderr is not None
        for line in proc.stderr:
            if "/login?token=" in line:
                login = line.split("open ", 1)[1].strip()
                break
        port = int(re.search(r":(\d+)/login", login).group(1))
        token = login.rpartition("token=")[2]
        pages = {"big newest": "/s/big", "big oldest": "/s/big?before=50",
                 "big middle": f"/s/big?before={rows // 2}", "big context": "/context/big",
                 "sessions": "/", "small newest": "/s/small"}
        for path in pages.values():
            ask(port, path, token)  # warm: imports, first connection
        got: dict[str, list[tuple[float, float, float]]] = {k: [] for k in pages}
        for _ in range(args.runs):
            for name, path in pages.items():  # interleaved: noise hits every page alike
                got[name].append(ask(port, path, token))
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"agenvoy web, session 'big' of {rows} archived messages, {args.runs} rounds; "
          f"load: {load}")
    med = {k: [statistics.median(r[i] for r in v) for i in range(3)] for k, v in got.items()}
    for name, (app, cpu, wall) in med.items():
        print(f"  {name:13s} server {app:7.1f} ms (cpu {cpu:7.1f} ms)  client {wall:7.1f} ms"
              f"   big/small server {app / med['small newest'][0]:5.2f}x")
    worst = max(v[0] for k, v in med.items() if k.startswith("big"))
    print(f"  worst big-session page: {worst:.1f} ms server time (target <= 200 ms): "
          f"{'ok' if worst <= 200 else 'OVER'}")


if __name__ == "__main__":
    main()
