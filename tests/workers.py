"""Child processes for the concurrency and crash tests: `python -m tests.workers KIND ...`.

Each runs the real CLI in-process many times (as many separate commands) and prints one
line per acknowledged command, flushed, so the parent knows what exited 0 before a kill.
"""

from __future__ import annotations

import contextlib
import io
import sys

import orjson

from agenvoy_cli.cli import cli


def invoke(args: list[str]) -> int:
    """One command, its own stdout swallowed (the acks below are this worker's output)."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(args, prog_name="agenvoy", standalone_mode=False)
    except SystemExit as exc:
        return int(exc.code or 0)
    return int(code or 0)


def main() -> None:
    kind, *rest = sys.argv[1:]
    if kind == "append":  # append SESSION PREFIX COUNT
        session, prefix, count = rest[0], rest[1], int(rest[2])
        for i in range(count):
            role = "user" if i % 2 == 0 else "assistant"
            content = f"{prefix}-{i} " + "x" * 120
            code = invoke(["append", session, "--role", role, "--content", content])
            if code == 0:
                print(f"{prefix}-{i}", flush=True)
            elif code != 75:  # busy is a documented, retryable outcome
                print(f"FAILED {code}", flush=True)
    elif kind == "compact":  # compact SESSION COUNT MAXBYTES
        for _ in range(int(rest[1])):
            code = invoke(["compact", rest[0], "--max-bytes", rest[2]])
            print("compacted" if code == 0 else f"FAILED {code}", flush=True)
    elif kind == "backfill":  # backfill COUNT
        for _ in range(int(rest[0])):
            code = invoke(["backfill", "--all"])
            print("backfilled" if code == 0 else f"FAILED {code}", flush=True)
    elif kind == "summarize":  # summarize COUNT (AGENVOY_LLM_BASE_URL set by the parent)
        for _ in range(int(rest[0])):
            code = invoke(["summarize", "--pending"])
            print("summarized" if code == 0 else f"FAILED {code}", flush=True)
    elif kind == "errors":  # errors PREFIX COUNT
        for i in range(int(rest[1])):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = cli.main(["errors", "record", "--tool", "web_fetch", "--keyword", "t",
                                 "--symptom", f"{rest[0]}-{i} timeout", "--action", "retry",
                                 "--outcome", "resolved", "--json"], prog_name="agenvoy",
                                standalone_mode=False)
            if not code:
                print("rec", orjson.loads(out.getvalue())["records"][0]["id"], flush=True)
    elif kind == "rag-sync":  # rag-sync NAME COUNT
        for _ in range(int(rest[1])):
            code = invoke(["rag", "sync", rest[0]])
            print("synced" if code == 0 else f"FAILED {code}", flush=True)
    elif kind == "reset":  # reset COUNT: append a pair, then reset or remove the session
        for i in range(int(rest[0])):
            sid = f"r{i % 3}"
            invoke(["append", sid, "--role", "user", "--content", f"r{i}"])
            invoke(["append", sid, "--role", "assistant", "--content", f"r{i} ok"])
            code = invoke(["session", "reset", sid, "--yes", "--no-summary"] if i % 2
                          else ["session", "remove", sid, "--yes"])
            print("cleared" if code == 0 else f"FAILED {code}", flush=True)
    elif kind == "hold-lock":  # hold-lock SECONDS
        import time

        from agenvoy_cli.home.layout import Layout, resolve_home
        from agenvoy_cli.vectors.hooks import open_store

        store = open_store(Layout(resolve_home()))
        with store.write_lock():
            print("locked", flush=True)
            time.sleep(float(rest[0]))
    else:
        raise SystemExit(f"unknown worker {kind}")


if __name__ == "__main__":
    main()
