"""The one harness of the retrieval benches: a set, a split and a mode in, the figures out.

Every retrieval script under bench/ (LoCoMo, the probes, zh_memory, zh_dialogue, the
MemoryBank set, same_answers) differs only in its data; what they share lives here and
nowhere else, and this module imports nothing from bench/ (scripts import only downward:
tests/test_bench_harness.py checks there is no import circle).

- the command's paths: `cli` (one in-process `agenvoy ...` through click's CliRunner over the
  real command), `search_process` (one `agenvoy search ... --json` process), `Server` /
  `Served` (`agenvoy mcp --http` in the bench's home: the CLI's fast path);
- the embedder behind an on-disk cache (`CachingEmbedder`, installed through the supported
  setting AGENVOY_EMBEDDER=python:...: the real model's vectors, a rerun embeds nothing twice);
- the figures: `ranked_hits` (the hits of a JSON document, best first), `scores` (R@k, hit@k
  and MRR of one question), `mean`, `by_group`, `empty_rate` (the relevance floor: how many
  unrelated questions got nothing), and `evaluate` (every question in every mode).

    python bench/harness.py --serve HOME --cache DIR --log FILE   # the server Server starts
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
AGENVOY = Path(sys.executable).with_name("agenvoy")

# search(session, query, mode, limit) -> the command's JSON document
Search = Callable[[str, str, str, int], dict]


# ----------------------------------------------------------------------------- figures


def ranked_hits(doc: dict) -> list[int]:
    """seqs of the hits, best first (rank when given, else score)."""
    hits = [r for r in doc["results"] if r["hit"]]
    if hits and "rank" in hits[0]:
        hits.sort(key=lambda r: r["rank"])
    else:
        hits.sort(key=lambda r: (-(r["score"] or 0.0), -r["seq"]))
    return [r["seq"] for r in hits]


def scores(ranked: Sequence[Any], gold: Iterable[Any], recall: Sequence[int] = (5, 10),
           hit: Sequence[int] = ()) -> dict[str, float]:
    """One question's figures: R@k = |gold in top k| / |gold| for k in `recall`, hit@k = any
    gold in the top k for k in `hit`, MRR = 1 / rank of the first gold (0 when none). The
    caller truncates `ranked` to the list it scores (the --limit it asked for)."""
    g = set(gold)
    out = {f"R@{k}": len(g & set(ranked[:k])) / len(g) for k in recall}
    out.update({f"hit@{k}": float(bool(g & set(ranked[:k]))) for k in hit})
    out["MRR"] = next((1.0 / (r + 1) for r, i in enumerate(ranked) if i in g), 0.0)
    return out


def mean(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    """The per-question figures averaged (macro), {} for no rows."""
    return {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]} if rows else {}


def by_group(rows: Sequence[tuple[str, dict[str, float]]], head: Sequence[str] = (),
             head_name: str = "head") -> dict[str, Any]:
    """{group: mean} over (group, figures) rows, plus `head_name` (the mean over the groups in
    `head`, when given) and "n" (questions per group)."""
    groups: dict[str, list[dict[str, float]]] = defaultdict(list)
    for name, s in rows:
        groups[name].append(s)
    out: dict[str, Any] = {}
    if head:
        out[head_name] = mean([s for g, s in rows if g in head])
    out["n"] = {head_name: sum(len(groups[g]) for g in head)} if head else {}
    for name in sorted(groups):
        out[name] = mean(groups[name])
        out["n"][name] = len(groups[name])
    return out


def empty_rate(docs: Iterable[dict], hits_only: bool = True) -> tuple[int, int]:
    """(documents with no hit, documents): the relevance floor's figure on unrelated questions
    (hits_only=False: with no result row at all, hit or not)."""
    docs = list(docs)
    return sum(not (ranked_hits(d) if hits_only else d["results"]) for d in docs), len(docs)


def cells(m: dict[str, float], keys: Sequence[str] = ("R@5", "R@10", "MRR")) -> str:
    return " / ".join(f"{m[k]:.3f}" for k in keys) if m else "–"


# ----------------------------------------------------------------------------- a set


@dataclass(frozen=True)
class Question:
    """One question: the session it is asked of, the text, the keys of the messages that
    hold its answer, and the group its figures are also reported under (a category)."""

    session: str
    query: str
    gold: tuple[Any, ...]
    group: str = ""


@dataclass
class RetrievalSet:
    """What a script gives the harness: its questions (of one split) and how a hit's seq maps
    to a gold key (`keys[session][seq]`; no entry for a session: the seq is the key)."""

    name: str
    split: str
    questions: list[Question]
    keys: dict[str, dict[int, Any]] = field(default_factory=dict)
    top: int = 50
    recall: tuple[int, ...] = (5, 10)
    hit: tuple[int, ...] = ()

    def ranked(self, session: str, seqs: Sequence[int]) -> list[Any]:
        """The gold keys of a ranking (a seq the set does not name: "filler")."""
        keys = self.keys.get(session)
        got = list(seqs)[: self.top]
        return got if keys is None else [keys.get(s, "filler") for s in got]


@dataclass
class Result:
    """Per mode: every question's (group, figures) and its ranking (seqs), in asking order."""

    rows: dict[str, list[tuple[str, dict[str, float]]]]
    rankings: dict[str, list[list[int]]]

    def summary(self, head: Sequence[str] = (), head_name: str = "head") -> dict[str, Any]:
        return {m: {"all": mean([s for _, s in r]), **by_group(r, head, head_name)}
                for m, r in self.rows.items()}


def evaluate(rset: RetrievalSet, modes: Sequence[str], search: Search,
             interleave: bool = True, on_question: Callable[[str, Question, dict], None]
             | None = None) -> Result:
    """Every question of the set in every mode through search(session, query, mode, limit).
    interleave: question by question, each in every mode in turn (A and B under one load);
    else mode by mode."""
    res = Result({m: [] for m in modes}, {m: [] for m in modes})

    def ask(mode: str, q: Question) -> None:
        doc = search(q.session, q.query, mode, rset.top)
        seqs = ranked_hits(doc)[: rset.top]
        res.rankings[mode].append(seqs)
        res.rows[mode].append((q.group, scores(rset.ranked(q.session, seqs), q.gold,
                                               rset.recall, rset.hit)))
        if on_question is not None:
            on_question(mode, q, doc)

    if interleave:
        for q in rset.questions:
            for mode in modes:
                ask(mode, q)
    else:
        for mode in modes:
            for q in rset.questions:
                ask(mode, q)
    return res


# ----------------------------------------------------------------------------- the CLI


def cli(*args: str, input: bytes | None = None) -> dict:
    """One in-process `agenvoy ARGS...` (click's CliRunner over the real command); its JSON
    document when --json is among the arguments, else {}. A non-zero exit stops the bench."""
    from click.testing import CliRunner

    from agenvoy_cli.cli import cli as command

    res = CliRunner().invoke(command, list(args), input=input, catch_exceptions=False)
    if res.exit_code != 0:
        raise SystemExit(f"agenvoy {' '.join(args)}: exit {res.exit_code}: {res.stderr}")
    return json.loads(res.stdout) if "--json" in args else {}


def home_cli(home: Path, *args: str, input: bytes | None = None) -> dict:
    """One in-process `agenvoy --home HOME ARGS...`."""
    return cli("--home", str(home), *args, input=input)


def inprocess_search(home: Path | None = None) -> Search:
    """search() through the in-process command (AGENVOY_HOME when home is None)."""
    pre = ("--home", str(home)) if home is not None else ()

    def search(session: str, query: str, mode: str, limit: int) -> dict:
        return cli(*pre, "search", session, query, "--mode", mode, "--limit", str(limit),
                   "--json")

    return search


def search_process(home: Path, session: str, mode: str, question: str, limit: int = 50
                   ) -> dict:
    """One `agenvoy search ... --json` process answered by the home's server; its document.
    A search that fell back to the local path stops the bench."""
    res = subprocess.run([str(AGENVOY), "--home", str(home), "search", session, "--mode", mode,
                          "--limit", str(limit), "--json", "--", question],
                         capture_output=True,
                         env={k: v for k, v in os.environ.items()
                              if k not in ("AGENVOY_HOME", "AGENVOY_EMBEDDER")})
    if res.returncode != 0:
        raise SystemExit(f"agenvoy search {session} {question!r}: exit {res.returncode}: "
                         f"{res.stderr.decode()}")
    if b"searching locally" in res.stderr:
        raise SystemExit(f"the fast path was not taken: {res.stderr.decode()}")
    return json.loads(res.stdout)  # type: ignore[no-any-return]


# ----------------------------------------------------------------------------- embeddings


class CachingEmbedder:
    """Wraps the project's embedder; vectors cached on disk by (model id, kind, text)."""

    def __init__(self, inner: Any, cache: Path) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        safe = re.sub(r"[^\w.-]+", "_", self.model_id)
        self.path = cache / f"{safe}.pkl"
        self.data: dict[str, list[float]] = {}
        if self.path.exists():
            self.data = pickle.loads(self.path.read_bytes())
        self.embedded = 0
        self.seconds = 0.0

    def _key(self, kind: str, text: str) -> str:
        return hashlib.sha1(f"{kind}\0{text}".encode()).hexdigest()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        keys = [self._key("d", t) for t in texts]
        todo = [(k, t) for k, t in zip(keys, texts) if k not in self.data]
        if todo:
            start = time.perf_counter()
            for k, v in zip([k for k, _ in todo],
                            self.inner.embed_documents([t for _, t in todo])):
                self.data[k] = v
            self.seconds += time.perf_counter() - start
            self.embedded += len(todo)
        return [self.data[k] for k in keys]

    def embed_query(self, text: str) -> list[float]:
        key = self._key("q", text)
        if key not in self.data:
            self.data[key] = self.inner.embed_query(text)
        return self.data[key]

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(self.data))
        tmp.replace(self.path)


_IN_USE: dict[str, object] = {}  # the embedder use_embedder installed (this process)


def current_embedder() -> object:
    """AGENVOY_EMBEDDER=python:<this module>:current_embedder: the one use_embedder set."""
    return _IN_USE["embedder"]


def use_embedder(emb: object) -> None:
    """Give the in-process commands `emb` through the supported setting (AGENVOY_EMBEDDER)."""
    _IN_USE["embedder"] = emb
    os.environ["AGENVOY_EMBEDDER"] = f"python:{__name__}:current_embedder"


install = use_embedder  # the name bench/locomo_cli.py gave it


def vectors_module() -> tuple[Any, Any]:
    """(the module holding the embedder cache the command uses, the embedders module)."""
    for vec, emb in (("agenvoy_cli.vectors.api", "agenvoy_cli.models.embedders"),
                     ("agenvoy_cli.storage.vectors", "agenvoy_cli.storage.embedders")):
        try:
            return importlib.import_module(vec), importlib.import_module(emb)
        except ImportError:
            continue
    raise SystemExit("no vectors module found")


def cached_embedder(cache: Path, spec: str | None = None) -> CachingEmbedder:
    """The command's embedder (spec, default: the built-in one) behind the cache, installed."""
    from agenvoy_cli.models.embedders import get_embedder

    wrap = CachingEmbedder(get_embedder(spec or None), cache)
    use_embedder(wrap)
    return wrap


def backfill(home: Path, sessions: Iterable[str], cache: Path) -> CachingEmbedder:
    """`agenvoy backfill SESSION --vectors` for each session (as the README advises: index
    ahead, once), the built-in model behind the cache."""
    wrap = cached_embedder(cache)
    for session in sessions:
        home_cli(home, "backfill", session, "--vectors")
    wrap.save()
    return wrap


# ----------------------------------------------------------------------------- the server


class Server:
    """`agenvoy mcp --http 127.0.0.1:0` in the home (this file's --serve), until stop()."""

    def __init__(self, home: Path, cache: Path, log: Path) -> None:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
        self.cpu_total = 0.0
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", str(home),
                                      "--cache", str(cache), "--log", str(log)],
                                     env=env, stdin=subprocess.DEVNULL)
        announce = home / ".store" / "http.json"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if json.loads(announce.read_text())["pid"] == self.proc.pid:
                    return
            except (OSError, ValueError, KeyError):
                pass
            if self.proc.poll() is not None:
                raise SystemExit(f"agenvoy mcp --http exited with {self.proc.returncode}")
            time.sleep(0.2)
        raise SystemExit("agenvoy mcp --http did not announce itself in 180 s")

    def cpu(self) -> float:
        """CPU seconds the server has used so far (utime + stime of /proc/PID/stat)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.cpu_total = self.cpu()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)


def serve(home: Path, cache: Path, log: Path) -> None:
    """`agenvoy --home HOME mcp --http 127.0.0.1:0` in this process, the model behind the
    bench's embedding cache (saved when the server stops)."""
    import atexit

    # bench/mcp.py would shadow the SDK's package
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH]
    from agenvoy_cli.cli import cli as command

    wrap = cached_embedder(cache)
    atexit.register(wrap.save)
    try:
        command.main(["--home", str(home), "mcp", "--http", "127.0.0.1:0", "--log-file",
                      str(log)], prog_name="agenvoy", standalone_mode=False)
    finally:
        wrap.save()


class Served:
    """The process path for a bench's own home: its sessions indexed once (in process, the
    cached embedder), then `agenvoy mcp --http` in it; search() is one `agenvoy search`
    process answered by that server. Use as a context manager."""

    def __init__(self, home: Path, sessions: list[str], cache: Path) -> None:
        self.home = home
        backfill(home, sessions, cache)
        self.server = Server(home, cache, home.parent / f"{home.name}-server.log")

    def search(self, session: str, query: str, mode: str, limit: int) -> dict:
        return search_process(self.home, session, mode, query, limit)

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


@contextlib.contextmanager
def searching(home: Path, path: str, cache: Path, log: Path) -> Iterator[Search]:
    """search() over a built home by `path`: "process" (one `agenvoy search` process per
    question, answered by the home's server) or in process (the cached embedder, saved at
    the end)."""
    if path == "process":
        server = Server(home, cache, log)
        try:
            yield lambda session, query, mode, limit: search_process(home, session, mode,
                                                                     query, limit)
        finally:
            server.stop()
        return
    wrap = cached_embedder(cache)
    try:
        yield lambda session, query, mode, limit: home_cli(
            home, "search", session, "--mode", mode, "--limit", str(limit), "--json", "--",
            query)
    finally:
        wrap.save()


def interleaved_ab(rounds: int, arms: tuple[str, str], use: Callable[[str], None],
                   run: Callable[[int], object]) -> dict[str, tuple[float, float]]:
    """Two arms of one in-process step, interleaved (the order swapped every round), after
    `use(arm)` switches to the arm: each arm's median wall and CPU in ms."""
    import statistics

    times: dict[str, tuple[list[float], list[float]]] = {a: ([], []) for a in arms}
    for r in range(rounds):
        for arm in (arms if r % 2 == 0 else arms[::-1]):
            use(arm)
            w0, c0 = time.perf_counter(), time.process_time()
            run(r)
            times[arm][0].append(time.perf_counter() - w0)
            times[arm][1].append(time.process_time() - c0)
    return {a: (statistics.median(w) * 1000, statistics.median(c) * 1000)
            for a, (w, c) in times.items()}


def ab_line(what: str, rounds: int, medians: dict[str, tuple[float, float]],
            labels: tuple[str, str]) -> str:
    """One line for `interleaved_ab`'s medians: A and B, their ratio, the load."""
    (a, (aw, ac)), (b, (bw, bc)) = medians.items()
    return (f"{what}, interleaved {rounds} rounds: {labels[0]} median wall {aw:.0f} ms / CPU "
            f"{ac:.0f} ms; {labels[1]} {bw:.0f} / {bc:.0f} ms; ratio of medians: wall "
            f"{aw / bw:.2f}, CPU {ac / bc:.2f}; load {os.getloadavg()[0]:.1f}")


def load_line() -> str:
    """The load average, to print beside every figure (the machine is shared)."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description="the harness's server (Server starts it)")
    ap.add_argument("--serve", type=Path, required=True, metavar="HOME")
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--log", type=Path, required=True)
    args = ap.parse_args()
    # the module by its name, not __main__: AGENVOY_EMBEDDER names `harness`
    sys.path.insert(0, str(BENCH))
    harness = importlib.import_module("harness")
    harness.serve(args.serve, args.cache, args.log)


if __name__ == "__main__":
    main()
