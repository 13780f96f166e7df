"""Ctrl-C's delay (issue #51 item 5): `agenvoy backfill s --vectors --rebuild` on 160 long
messages in a home under /tmp, SIGINT when the first batch's progress line comes (the
second batch is then in the model); per trial, the seconds from the signal to the "kept"
line and to the exit, and `uptime`.

    python -m compileall -q agenvoy_cli
    python bench/interrupt.py [TRIALS]
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    home = Path(tempfile.mkdtemp(prefix="agenvoy-interrupt-"))
    env = {**os.environ, "AGENVOY_HOME": str(home), "AGENVOY_PROGRESS_SECONDS": "0"}
    text = "The deployment failed because the cache was cold and the migration ran twice. " * 3
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{i} {text}"}
            for i in range(160)]
    cmd = [sys.executable, "-m", "agenvoy_cli"]
    subprocess.run([*cmd, "append", "s", "--messages", "-"], input=orjson.dumps(msgs),
                   env=env, cwd=ROOT, check=True, capture_output=True)
    exits = []
    for trial in range(trials):
        proc = subprocess.Popen([*cmd, "backfill", "s", "--vectors", "--rebuild"], cwd=ROOT,
                                stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
        lines: queue.Queue[tuple[float, str | None]] = queue.Queue()

        def read(stream: object = proc.stderr, into: queue.Queue = lines) -> None:
            for raw in iter(stream.readline, b""):  # type: ignore[attr-defined]
                into.put((time.monotonic(), raw.decode()))
            into.put((time.monotonic(), None))

        threading.Thread(target=read, daemon=True).start()
        while True:
            _, line = lines.get(timeout=600)
            if line is None or ("backfill" in line and "messages" in line):
                break
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        kept = None
        while True:
            at, line = lines.get(timeout=600)
            if line is None:
                break
            if "are kept" in line and kept is None:
                kept = at - sent
        proc.wait()
        exits.append(time.monotonic() - sent)
        print(f"trial {trial}: exit {proc.returncode}, 'kept' line after "
              f"{kept if kept is None else round(kept, 2)} s, exit after {exits[-1]:.2f} s")
    exits.sort()
    print(f"median exit after the signal: {exits[len(exits) // 2]:.2f} s (target 1 s)")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
