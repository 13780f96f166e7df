"""bench/agenvoy_v032: `append` and `context` on a 5 MiB Agenvoy v0.32 history, today's code
against this tree, and what recognising Agenvoy's normalise rewrite costs (issue #25).

Homes are built once per run in a temp folder (history.json by tests/agenvoy_sim_v032.py's
record writer: realistic message sizes, senders, tool calls whose fields the record drops),
then every timed command runs in a fresh `agenvoy` process on its own fresh copy of the
home, the two sources interleaved (the order alternates per round). Reported: median wall
and median child CPU (user+sys from wait4) per case and source, and new/old ratios.

Cases, old (--old, default: a `git worktree` of 6afc31b at /tmp/old6afc31b) against new:
  append-own       one message; history.json is the one our last append wrote (fast path)
  append-agenvoy   one message after Agenvoy appended one (it rewrote the whole file)
  context          `context --json` after our last append
  context-agenvoy  `context --json` after Agenvoy's append
Rewrite recognition, this tree only, on a ~5 MiB *header* session we wrote (tool calls too):
  fast             `append`, the file untouched since our last append
  plain            `append`, the same rewritten bytes in a home that archived them as they
                   are (the file is read and matched, nothing to recognise)
  rewrite          `append` right after Agenvoy's normalise rewrite of the whole file
                   (header -> sendAt, tool-call fields dropped): every message recognised
Target: rewrite / plain <= 1.0 (recognition costs no more than the plain read-and-match).

--callgrind: instead of timing, the instructions (valgrind --tool=callgrind, user space,
PYTHONHASHSEED=0; load-independent) of one `append` on a fresh copy of each of the plain
and rewrite homes, and their ratio (--callgrind-keep DIR keeps the callgrind.out files for
callgrind_annotate).

Usage: python bench/agenvoy_v032.py [--rounds 7] [--mib 5] [--old DIR] [--skip-old]
       python bench/agenvoy_v032.py --callgrind [--callgrind-keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.gendata import text  # noqa: E402
from tests.agenvoy_sim_v032 import GoAgentV032, go_marshal, normalize  # noqa: E402

OLD_COMMIT = "6afc31b"
SID = "s"
SENDERS = ("alice", "bob", "")
NS = 1_000_000_000
START = 1_767_225_600 * NS  # 2026-01-01 00:00 UTC


def agenvoy_bin() -> str:
    return str(Path(sys.executable).with_name("agenvoy"))


def env_for(home: Path, src: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AGENVOY_") and k != "PYTHONPATH"}
    env["AGENVOY_HOME"] = str(home)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # each source shadows the installed (editable) package: the old checkout, or this tree
    # (a worktree of its own: the editable install may point at another)
    env["PYTHONPATH"] = str(src if src is not None else ROOT)
    return env


def run(cmd: list[str], env: dict[str, str], data: bytes | None = None) -> tuple[float, float]:
    """(wall, user+sys) of one child process, from wait4."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=tempfile.gettempdir(), stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stderr is not None
    if data:
        proc.stdin.write(data)
    proc.stdin.close()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}\n{err.decode()}")
    return wall, usage.ru_utime + usage.ru_stime


def cli(home: Path, src: Path | None, *args: str) -> tuple[float, float]:
    return run([agenvoy_bin(), *args], env_for(home, src))


# -- generated conversation ----------------------------------------------------------------
def body(rng: random.Random, i: int, lo: int, hi: int) -> str:
    parts, size, want = [], 0, rng.randint(lo, hi)
    while size < want:
        parts.append(text(rng, i + len(parts)))
        size += len(parts[-1]) + 1
    return " ".join(parts)[:want]


def conversation(seed: int) -> Iterator[dict[str, Any]]:
    """Entries with sendAt/sender (and tool-call fields, which a v0.32 record drops):
    user 40-600 characters, assistant 200-3000, every sixth turn a tool call and result."""
    rng = random.Random(seed)
    ns, i = START, 0
    while True:
        ns += rng.randint(5, 300) * NS
        who = rng.choice(SENDERS)
        user = {"role": "user", "content": body(rng, i, 40, 600), "sendAt": ns}
        if who:
            user["sender"] = who
        yield user
        if i % 6 == 3:
            call = f"call_{i}"
            ns += NS
            yield {"role": "assistant", "content": None, "sendAt": ns,
                   "tool_calls": [{"id": call, "type": "function", "function": {
                       "name": "read_file", "arguments": json.dumps({"path": f"src/f{i}.go"})}}]}
            ns += NS
            yield {"role": "tool", "content": body(rng, i + 1, 300, 2000), "sendAt": ns,
                   "tool_call_id": call}
        ns += rng.randint(2, 60) * NS
        yield {"role": "assistant", "content": body(rng, i + 2, 200, 3000), "sendAt": ns}
        i += 3


def entries(limit: int, seed: int = 25) -> list[dict[str, Any]]:
    out, size = [], 2
    for entry in conversation(seed):
        size += len(json.dumps(entry, ensure_ascii=False).encode()) + 1
        if size > limit:
            return out
        out.append(entry)
    raise AssertionError("unreachable")


def in_header_format(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry as this tool writes it in a header session (conversation/history_format.py)."""
    from datetime import datetime

    from agenvoy_cli.conversation.history_format import header_block

    out = {k: v for k, v in entry.items() if k not in ("sendAt", "sender")}
    if isinstance(out.get("content"), str):
        moment = datetime.fromtimestamp(entry["sendAt"] // NS)
        out["content"] = header_block(moment, entry.get("sender", "")) + out["content"]
    return out


# -- homes -----------------------------------------------------------------------------------
def history_path(home: Path) -> Path:
    return home / "sessions" / SID / "history.json"


def copy_home(src: Path, dst: Path) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, symlinks=True)
    return dst


def agenvoy_say(home: Path, i: int) -> None:
    agent = GoAgentV032(home)
    try:
        agent.append(SID, [{"role": "assistant", "content": f"agenvoy reply {i}: done",
                            "sendAt": time.time_ns()}])
    finally:
        agent.close()


def agenvoy_rewrite(home: Path) -> None:
    """Agenvoy's normalise of the whole file before an append, without the append."""
    agent = GoAgentV032(home)
    try:
        history_path(home).write_bytes(go_marshal(normalize(agent.read(SID))))
    finally:
        agent.close()


def build_v032(tmp: Path, limit: int, sources: dict[str, Path | None]
               ) -> dict[tuple[str, str], Path]:
    """An Agenvoy-first v0.32 session (file and rows by the simulator), then per source:
    backfill + one append (own), and that plus one Agenvoy append (agenvoy)."""
    base = tmp / "v032-base"
    agent = GoAgentV032(base)
    agent.append(SID, entries(limit))
    agent.close()
    homes = {}
    for name, src in sources.items():
        own = copy_home(base, tmp / f"v032-{name}-own")
        cli(own, src, "backfill", SID)
        cli(own, src, "append", SID, "--role", "user", "--content", "warm up")
        later = copy_home(own, tmp / f"v032-{name}-agenvoy")
        agenvoy_say(later, 0)
        homes[(name, "own")], homes[(name, "agenvoy")] = own, later
    return homes


def build_rewrite(tmp: Path, limit: int, src: Path | None) -> dict[str, Path]:
    """A header session we wrote (backfilled + one append), its rewrite by Agenvoy, and a
    home that archived the rewritten bytes as they are."""
    from agenvoy_cli.conversation.history import dump_history

    fast = tmp / "hdr-fast"
    history_path(fast).parent.mkdir(parents=True)
    history_path(fast).write_bytes(dump_history([in_header_format(e) for e in entries(limit, 7)]))
    cli(fast, src, "backfill", SID)
    cli(fast, src, "append", SID, "--role", "user", "--content", "warm up")
    rewrite = copy_home(fast, tmp / "hdr-rewrite")
    agenvoy_rewrite(rewrite)
    plain = tmp / "hdr-plain"
    history_path(plain).parent.mkdir(parents=True)
    shutil.copy2(history_path(rewrite), history_path(plain))
    cli(plain, src, "backfill", SID)
    GoAgentV032(plain).close()  # Agenvoy ran here too: its tables (file_history), as in rewrite
    later = time.time() + 5  # a file changed since our last look: read and matched
    os.utime(history_path(plain), (later, later))
    return {"fast": fast, "plain": plain, "rewrite": rewrite}


# -- timing ----------------------------------------------------------------------------------
def command(case: str, i: int) -> list[str]:
    if case.startswith("context"):
        return ["context", SID, "--json"]
    return ["append", SID, "--role", "user", "--content", f"bench message {i}"]


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def report(title: str, times: dict[tuple[str, str], list[tuple[float, float]]],
           pairs: list[tuple[str, str, str]]) -> None:
    print(f"\n{title}")
    print(f"{'case':<22}{'wall ms':>10}{'cpu ms':>10}   n")
    for (case, name), got in sorted(times.items()):
        wall = statistics.median(w for w, _ in got) * 1000
        cpu = statistics.median(c for _, c in got) * 1000
        print(f"{case + ' ' + name:<22}{wall:>10.1f}{cpu:>10.1f}   {len(got)}")
    for label, a, b in pairs:
        ka, kb = tuple(a.split("/")), tuple(b.split("/"))
        if ka not in times or kb not in times:
            continue
        wa = statistics.median(w for w, _ in times[ka])  # type: ignore[index]
        wb = statistics.median(w for w, _ in times[kb])  # type: ignore[index]
        ca = statistics.median(c for _, c in times[ka])  # type: ignore[index]
        cb = statistics.median(c for _, c in times[kb])  # type: ignore[index]
        print(f"  {label}: CPU {ratio(ca, cb)}, wall {ratio(wa, wb)}")


def callgrind(home: Path, out: Path) -> int:
    """Instructions (Ir, user space) of one `append` in a fresh process, under callgrind."""
    env = env_for(home, None)
    env["PYTHONHASHSEED"] = "0"
    got = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                          agenvoy_bin(), *command("append", 0)], env=env,
                         cwd=tempfile.gettempdir(), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if got.returncode:
        raise SystemExit(f"callgrind: exit {got.returncode}\n{got.stderr}")
    for line in got.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1])
    raise SystemExit(f"callgrind: no total in\n{got.stderr}")


def run_callgrind(hdr: dict[str, Path], work: Path, keep: Path | None) -> None:
    counts = {}
    for case in ("plain", "rewrite"):
        home = copy_home(hdr[case], work)
        out = (keep or work.parent) / f"callgrind.{case}.out"
        counts[case] = callgrind(home, out)
    print("\ninstructions of one `append` (callgrind, PYTHONHASHSEED=0)")
    for case, n in counts.items():
        print(f"{case:<10}{n:>16,}  ({n / 1e6:.1f} M)")
    print(f"  rewrite/plain (target <= 1.000): {counts['rewrite'] / counts['plain']:.4f}x")
    if keep:
        print(f"  callgrind.out files in {keep}")


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def old_tree(path: Path) -> Path:
    if not (path / "agenvoy_cli").is_dir():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path),
                        OLD_COMMIT], check=True, stdout=subprocess.DEVNULL)
    return path.resolve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--mib", type=float, default=5.0,
                        help="history.json size (a little under: no compaction at 5 MiB)")
    parser.add_argument("--old", type=Path, default=Path("/tmp/old6afc31b"))
    parser.add_argument("--skip-old", action="store_true", help="only the rewrite cases")
    parser.add_argument("--skip-rewrite", action="store_true")
    parser.add_argument("--callgrind", action="store_true",
                        help="instructions of one append, plain and rewrite (implies --skip-old)")
    parser.add_argument("--callgrind-keep", type=Path, default=None,
                        help="a folder to keep the callgrind.out files in")
    args = parser.parse_args()
    if args.callgrind:
        args.skip_old, args.skip_rewrite = True, False
    limit = int(args.mib * (1 << 20)) - (24 << 10)
    sources: dict[str, Path | None] = {"new": None}
    if not args.skip_old:
        sources["old"] = old_tree(args.old)
    for src in [ROOT, *(s for s in sources.values() if s is not None)]:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(src / "agenvoy_cli")],
                       check=True)
    for name, src in sources.items():  # each source really runs its own tree
        where = subprocess.run([sys.executable, "-c", "import agenvoy_cli; print(agenvoy_cli."
                                "__file__)"], env=env_for(Path(tempfile.gettempdir()), src),
                               cwd=tempfile.gettempdir(), capture_output=True, text=True,
                               check=True).stdout.strip()
        if not where.startswith(str(src or ROOT)):
            raise SystemExit(f"{name}: agenvoy_cli imported from {where}, not {src or ROOT}")
    print("load before:", uptime())
    tmp = Path(tempfile.mkdtemp(prefix="bench-v032-"))
    try:
        homes = {} if args.skip_old else build_v032(tmp, limit, sources)
        hdr = {} if args.skip_rewrite else build_rewrite(tmp, limit, None)
        if args.callgrind:
            if args.callgrind_keep:
                args.callgrind_keep.mkdir(parents=True, exist_ok=True)
            run_callgrind(hdr, tmp / "run", args.callgrind_keep)
            return
        sizes = {k: history_path(v).stat().st_size for k, v in
                 [(("v032", "own"), homes.get(("new", "own"))), (("header", ""), hdr.get("fast"))]
                 if v is not None}
        print("history.json bytes:", sizes)
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        rw: dict[tuple[str, str], list[tuple[float, float]]] = {}
        work = tmp / "run"
        for r in range(args.rounds):
            names = list(sources) if r % 2 == 0 else list(sources)[::-1]
            for case, state in (("append-own", "own"), ("append-agenvoy", "agenvoy"),
                                ("context", "own"), ("context-agenvoy", "agenvoy")):
                for name in names if homes else []:
                    home = copy_home(homes[(name, state)], work)
                    if state == "own":  # a copy is a new inode: our append sets it again
                        cli(home, sources[name], *command("append", -1))
                    times.setdefault((case, name), []).append(
                        cli(home, sources[name], *command(case, r)))
            cases = ["fast", "plain", "rewrite"]
            for case in cases if r % 2 == 0 else cases[::-1]:
                if hdr:
                    home = copy_home(hdr[case], work)
                    if case == "fast":
                        cli(home, None, *command("append", -1))
                    rw.setdefault((case, "new"), []).append(cli(home, None, *command(case, r)))
        if homes:
            report(f"5 MiB v0.32 history, {args.rounds} rounds (new = {ROOT}, old = "
                   f"{sources.get('old')})", times,
                   [(f"{c} new/old", f"{c}/new", f"{c}/old")
                    for c in ("append-own", "append-agenvoy", "context", "context-agenvoy")])
        if hdr:
            report("rewrite recognition, header session (new code)", rw,
                   [("rewrite/plain (target <= 1.0)", "rewrite/new", "plain/new"),
                    ("rewrite/fast", "rewrite/new", "fast/new"),
                    ("plain/fast", "plain/new", "fast/new")])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\nload after:", uptime())


if __name__ == "__main__":
    main()
