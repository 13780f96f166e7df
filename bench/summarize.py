"""What one `summarize` run costs: calls, bytes sent, time spent outside the LLM.

    python bench/summarize.py [--messages 100] [--sessions 1] [--real] [--show]

Builds sessions in a temporary home and summarizes them against the fake chat-completions
server of the tests (tests/llm_server.py), or, with --real, against the endpoint configured
in the environment (AGENVOY_LLM_BASE_URL, AGENVOY_LLM_MODEL, AGENVOY_LLM_API_KEY).
--show prints the first request and response as they went over the wire.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from click.testing import CliRunner  # noqa: E402

from agenvoy_cli.cli import cli  # noqa: E402
from tests.llm_server import FakeLLM, completion, merged_summary, wrap  # noqa: E402


def build(runner: CliRunner, sid: str, count: int) -> None:
    t0 = datetime(2024, 5, 1, 9, 0, 0)
    batch = []
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        stamp = (t0 + timedelta(minutes=i)).strftime("%Y-%m-%d %H:%M:%S")
        text = (f"Question {i}: should the cache layer use SQLite or Redis?" if role == "user"
                else f"Answer {i}: SQLite, one file, no daemon; revisit above 10k writes/s.")
        batch.append({"role": role, "content": f"---\n當前時間: {stamp}\n---\n{text}"})
    res = runner.invoke(cli, ["append", sid, "--messages", "-"], input=json.dumps(batch))
    assert res.exit_code == 0, res.output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--sessions", type=int, default=1)
    parser.add_argument("--real", action="store_true", help="use the configured endpoint")
    parser.add_argument("--show", action="store_true", help="print the first request/response")
    args = parser.parse_args()

    home = tempfile.mkdtemp(prefix="agenvoy-bench-")
    os.environ["AGENVOY_HOME"] = home
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    runner = CliRunner()
    ids = [f"bench{n}" for n in range(args.sessions)]
    for sid in ids:
        build(runner, sid, args.messages)

    with FakeLLM() as fake:
        if not args.real:
            os.environ.update(AGENVOY_LLM_BASE_URL=fake.url, AGENVOY_LLM_MODEL="fake-model",
                              AGENVOY_LLM_API_KEY="sk-bench")
        began = time.perf_counter()
        res = runner.invoke(cli, ["summarize", "--pending", "--json"])
        wall = time.perf_counter() - began
        doc = json.loads(res.stdout)
        calls = sum(s["summarized"] for s in doc["sessions"])
        print(f"{args.sessions} session(s) x {args.messages} messages: {calls} LLM calls "
              f"({calls / args.sessions:g} per session), exit {res.exit_code}, {wall:.2f}s wall")
        if fake.calls:
            sizes = [len(json.dumps(c.body, ensure_ascii=False).encode()) for c in fake.calls]
            print(f"request bodies: {min(sizes)}..{max(sizes)} bytes "
                  f"(system prompt + old summary + <=17 messages)")
        again = time.perf_counter()
        res = runner.invoke(cli, ["summarize", "--pending", "--json"])
        print(f"second --pending run: {len(json.loads(res.stdout)['sessions'])} pending, "
              f"{time.perf_counter() - again:.3f}s")
        if args.show and fake.calls:
            first = fake.calls[0]
            print("\n--- request", first.path)
            print(json.dumps({k: v for k, v in first.headers.items()
                              if k.lower() in ("authorization", "content-type")}, indent=2))
            print(json.dumps(first.body, ensure_ascii=False, indent=2))
            print("\n--- response")
            reply = completion(wrap(merged_summary(first.body, 1), "tag"), "fake-model")
            print(json.dumps(reply, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
