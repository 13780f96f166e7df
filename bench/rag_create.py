"""`agenvoy rag create` through the CLI, as a user runs it: vectors or --no-vectors, and the
cost of the Markdown parser (markdown-it-py) against the code before it.

    python bench/rag_create.py                        # 200 files, 3 rounds
    python bench/rag_create.py --files 60 --repeat 2  # quicker
    python bench/rag_create.py --old /tmp/old         # also the code before #18's RAG work:
        git archive df15cc5^ agenvoy_cli | tar -x -C /tmp/old

Part 1, a generated tree (seeded): Markdown notes (headings, lists, fences, tables), UTF-8
text, Big5 text (Traditional Chinese) and Python files, ~3 KB each. One `agenvoy rag create
NAME --path TREE --json` per run in a fresh home, with the default embedding model and with
--no-vectors, interleaved (A B / B A ...). Reported: median wall and CPU (user+sys of the
child process) per variant, files/s, the ratio.

Part 2, one 1 MiB Markdown file: `rag create` with --no-vectors (the parse, chunking and
SQLite), and - for the comparison with --old, whose code always embeds - both versions
against a stub embedding server on 127.0.0.1 (a constant-cost OpenAI-style /v1/embeddings;
AGENVOY_EMBEDDER=openai:stub) so the difference between them is reading and parsing.
Also the parser alone, in this process, on the same file (both versions when --old).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_WORDS = ("memory agent session archive vector index search summary cursor chunk token "
          "retry policy deploy server client request reply latency budget window history "
          "record error hint keyword model embed batch file folder sync")
_ZH = ("記憶 代理 會話 檔案 搜尋 摘要 向量 索引 錯誤 提示 關鍵字 模型 同步 資料夾 部署 "
       "伺服器 請求 回覆 延遲 預算 視窗 歷史 紀錄")
WORDS = tuple(_WORDS.split())
ZH = tuple(_ZH.split())


def sentence(rng: random.Random, words: tuple[str, ...] | list[str], n: int,
             sep: str = " ") -> str:
    return sep.join(rng.choice(words) for _ in range(n))


def markdown_doc(rng: random.Random, size: int) -> str:
    parts: list[str] = []
    n = 0
    while sum(map(len, parts)) < size:
        n += 1
        parts.append(f"# Section {n}: {sentence(rng, WORDS, 3)}\n\n")
        parts.append(sentence(rng, WORDS, 60).capitalize() + ".\n\n")
        parts.append(f"## Details {n}\n\n")
        parts.extend(f"- {sentence(rng, WORDS, 8)}\n" for _ in range(4))
        parts.append("\n```python\n" + "".join(
            f"def {rng.choice(WORDS)}_{i}(x):\n    return x + {i}\n" for i in range(3))
            + "```\n\n")
        parts.append("| key | value |\n|---|---|\n" + "".join(
            f"| {rng.choice(WORDS)} | {rng.randint(1, 999)} |\n" for _ in range(3)) + "\n")
        parts.append(f"Setext heading {n}\n---------------\n\n"
                     + sentence(rng, WORDS, 40) + ".\n\n")
    return "".join(parts)


def make_tree(root: Path, files: int, seed: int, size: int = 3000) -> int:
    rng = random.Random(seed)
    total = 0
    for i in range(files):
        kind = i % 20
        folder = root / f"d{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        if kind < 9:
            path, data = folder / f"note{i}.md", markdown_doc(rng, size).encode()
        elif kind < 13:
            path = folder / f"text{i}.txt"
            data = "\n".join(sentence(rng, WORDS, 12) for _ in range(size // 80)).encode()
        elif kind < 16:
            path = folder / f"zh{i}.txt"
            data = "\n".join(sentence(rng, ZH, 30, "") + "。" for _ in range(size // 100)
                             ).encode("big5")
        else:
            path = folder / f"code{i}.py"
            data = "".join(f"def {rng.choice(WORDS)}_{j}(value):\n    \"\"\""
                           f"{sentence(rng, WORDS, 10)}\"\"\"\n    return value * {j}\n\n"
                           for j in range(size // 75)).encode()
        path.write_bytes(data)
        total += len(data)
    return total


class StubEmbeddings:
    """/v1/embeddings answering a fixed vector per text, at once."""

    DIM = 64

    def __enter__(self) -> StubEmbeddings:
        dim = self.DIM

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                data = [{"index": i, "embedding": [((len(t) + k) % 7) / 7.0 + 0.01
                                                   for k in range(dim)]}
                        for i, t in enumerate(texts)]
                out = json.dumps({"data": data, "model": "stub"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.env = {"AGENVOY_EMBEDDER": "openai:stub", "AGENVOY_EMBED_DIM": str(dim),
                    "AGENVOY_EMBED_BASE_URL": f"http://127.0.0.1:{self.httpd.server_port}/v1",
                    "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()


def cli_run(code: Path | None, folder: Path, flags: list[str], env: dict[str, str]
            ) -> tuple[float, float, dict]:
    """One `agenvoy rag create` in a fresh home: (wall s, child CPU s, its JSON)."""
    home = Path(tempfile.mkdtemp(prefix="agenvoy-bench-home-"))
    run_env = {**os.environ, **env, "AGENVOY_HOME": str(home)}
    if code is not None:
        run_env["PYTHONPATH"] = str(code)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "agenvoy_cli", "rag", "create", "d", "--path",
                          str(folder), *flags, "--json"], capture_output=True, text=True,
                         env=run_env, cwd=tempfile.gettempdir(), timeout=3600)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if res.returncode != 0:
        raise SystemExit(f"rag create failed ({res.returncode}): {res.stderr[-2000:]}")
    subprocess.run(["rm", "-rf", str(home)], check=False)
    return wall, cpu, json.loads(res.stdout)


def interleaved(variants: dict[str, tuple], repeat: int) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(repeat):
        for name in (names if r % 2 == 0 else names[::-1]):
            code, folder, flags, env = variants[name]
            wall, cpu, doc = cli_run(code, folder, flags, env)
            out[name].append((wall, cpu, doc))
            print(f"  round {r + 1} {name}: {wall:.2f}s wall, {cpu:.2f}s CPU", flush=True)
    return out


def report(results: dict[str, list[tuple]], files: int) -> dict[str, float]:
    medians = {}
    for name, runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        sync = runs[0][2].get("sync") or {}
        skipped = sync.get("skipped")
        chunks = sync.get("chunk_count", sync.get("chunks"))  # the old code's name
        medians[name] = wall
        print(f"{name:28s} median {wall:7.2f}s wall {cpu:7.2f}s CPU  "
              f"{files / wall:7.1f} files/s  indexed {sync.get('indexed')} chunks {chunks} "
              f"skipped {len(skipped) if isinstance(skipped, list) else skipped}")
    return medians


def parse_alone(code: Path | None, text: str, rounds: int = 3) -> float:
    """Median seconds of the Markdown parser alone on text (that version's function)."""
    src = ("import sys, time, statistics\n"
           "text = sys.stdin.read()\n"
           "try:\n    from agenvoy_cli.rag.markdown import markdown_blocks\n"
           "except ImportError:\n    from agenvoy_cli.rag.formats import markdown_blocks\n"
           "markdown_blocks('# warm\\n\\ntext\\n')\n"
           "times = []\n"
           f"for _ in range({rounds}):\n"
           "    t = time.perf_counter(); blocks = markdown_blocks(text)\n"
           "    times.append(time.perf_counter() - t)\n"
           "print(statistics.median(times), len(blocks))\n")
    env = {**os.environ}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    res = subprocess.run([sys.executable, "-c", src], input=text, capture_output=True,
                         text=True, env=env, cwd=tempfile.gettempdir(), timeout=600)
    if res.returncode != 0:
        raise SystemExit(res.stderr[-2000:])
    seconds, blocks = res.stdout.split()
    print(f"  parser alone ({'old' if code else 'new'}): {float(seconds):.3f}s, "
          f"{blocks} blocks")
    return float(seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--file-bytes", type=int, default=3000, help="about this big each")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--md-bytes", type=int, default=1 << 20)
    parser.add_argument("--old", type=Path, help="a folder holding the old agenvoy_cli")
    parser.add_argument("--skip-tree", action="store_true")
    parser.add_argument("--skip-vectors", action="store_true",
                        help="part 1 without the default-model runs")
    parser.add_argument("--seed", type=int, default=18)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="agenvoy-rag-create-"))
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")

    if not args.skip_tree:
        tree = work / "tree"
        size = make_tree(tree, args.files, args.seed, args.file_bytes)
        print(f"\n[1] tree: {args.files} files, {size / 1024:.0f} KiB (Markdown, UTF-8 text, "
              "Big5 text, Python)")
        variants = {"new --no-vectors": (None, tree, ["--no-vectors"], {})}
        if not args.skip_vectors:
            variants["new, vectors (default model)"] = (None, tree, [], {})
        medians = report(interleaved(variants, args.repeat), args.files)
        if len(medians) == 2:
            ratio = medians["new, vectors (default model)"] / medians["new --no-vectors"]
            print(f"vectors / --no-vectors: {ratio:.1f}x wall")

    md = work / "md"
    md.mkdir()
    text = markdown_doc(random.Random(args.seed), args.md_bytes)
    (md / "big.md").write_text(text)
    print(f"\n[2] one Markdown file of {len(text.encode()) / 1048576:.2f} MiB")
    with StubEmbeddings() as stub:
        big = ["--max-file-size", "8M"]  # the default limit (1 MiB) would skip it
        variants = {"new --no-vectors": (None, md, [*big, "--no-vectors"], {}),
                    "new, stub embedder": (None, md, big, stub.env)}
        if args.old:
            variants["old, stub embedder"] = (args.old, md, big, stub.env)
        results = interleaved(variants, args.repeat)
        for name, runs in results.items():
            sync = runs[0][2].get("sync") or {}
            if sync.get("indexed") != 1:
                raise SystemExit(f"{name}: the Markdown file was not indexed: {sync}")
        medians = report(results, 1)
    if args.old:
        print(f"new / old (stub embedder): "
              f"{medians['new, stub embedder'] / medians['old, stub embedder']:.2f}x wall")
    new_parse = parse_alone(None, text)
    if args.old:
        old_parse = parse_alone(args.old, text)
        print(f"parser alone new / old: {new_parse / old_parse:.1f}x")
    subprocess.run(["rm", "-rf", str(work)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
