"""bench/import_memory: peak memory (ru_maxrss of the child), time and messages per second
of `agenvoy import FORMAT FILE` for generated inputs of growing size, through the CLI.

The targets (issue #41): any file size imports in at most 100 MiB (a 1 GiB input of each
format), Claude Code and Codex at 10,000 messages/s or more. Every reader streams (JSON
Lines a line at a time, a JSON array or request body a value at a time:
transfer/stream.py), so the peak must stay flat as the input grows: the bench prints it per
size, beside a tiny import's (the interpreter and imports). `--format` picks the input
(chatgpt, the default, or one of bench/import_shapes.py's: claude-code, codex,
openai-jsonl, openai-request, openai-batch, agenvoy); `--code DIR` runs another checkout's
agenvoy_cli (A/B, interleaved with this one's by --rounds).

The export is generated, deterministic (--seed) and shaped like a real one: a mapping tree
per conversation with a hidden system root, regenerated answers (branches; current_node
follows the last), long English and CJK texts, code-interpreter calls and their outputs,
image parts in multimodal_text, and the metadata padding real exports carry.

Usage: python bench/import_memory.py [--format F] [--sizes 50,100,200] [--seed 7] [--keep DIR]
       python bench/import_memory.py --format claude-code --sizes 20 --rounds 3 --code /old
       python bench/import_memory.py --generate 200 --output conversations.json
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

MiB = 1 << 20
_EN = ("the deploy script needs a retry budget because the database migration can time out "
       "while the cache warms up so we measure the queue and the worker before the release "
       "a memory of past sessions lets the agent answer with context instead of guessing "
       "please review this function and explain why the test fails on the second run only "
       "kernel network docker python golang sqlite vector index search summary token window")
_ZH = ("記憶層讓代理在每一輪對話前取得過去會話的摘要與最近訊息，部署腳本失敗時應先檢查權限與設定，"
       "資料庫遷移需要備份，向量索引在背景補齊，搜尋可依關鍵字或語意，壓縮只從最舊的一端修剪。")


def _pool(rng: random.Random) -> tuple[list[str], list[str]]:
    """Paragraphs to draw from (cheap to generate 1 GiB of text from)."""
    words = _EN.split()
    en = [" ".join(rng.choice(words) for _ in range(rng.randint(30, 160))) + "."
          for _ in range(400)]
    zh = []
    for _ in range(200):
        a = rng.randrange(len(_ZH) - 40)
        zh.append(_ZH[a:a + rng.randint(20, 40)] + _ZH[:rng.randint(10, 60)])
    return en, zh


def _text(rng: random.Random, pool: tuple[list[str], list[str]], paragraphs: int,
          tag: str) -> str:
    en, zh = pool
    parts = [rng.choice(zh) if rng.random() < 0.25 else rng.choice(en)
             for _ in range(paragraphs)]
    return f"{tag} " + "\n\n".join(parts)


def _node(nid: str, parent: str | None, message: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": nid, "message": message, "parent": parent, "children": []}


def _message(nid: str, role: str, t: float, content: dict[str, Any], recipient: str = "all",
             name: str | None = None, hidden: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"is_visually_hidden_from_conversation": True} if hidden else {
        "model_slug": "gpt-4o", "default_model_slug": "auto", "parent_id": nid[:8],
        "request_id": nid[-12:], "timestamp_": "absolute", "finish_details": {
            "type": "stop", "stop_tokens": [200002]}, "citations": [], "content_references": []}
    return {"id": nid, "author": {"role": role, "name": name, "metadata": {}},
            "create_time": t, "update_time": None, "content": content,
            "status": "finished_successfully", "end_turn": role == "assistant", "weight": 1.0,
            "metadata": meta, "recipient": recipient, "channel": None}


def conversation(rng: random.Random, pool: tuple[list[str], list[str]], index: int
                 ) -> tuple[dict[str, Any], int]:
    """One conversation and the number of messages its current branch imports as."""
    ids = iter(str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(10_000))
    start = 1_700_000_000.0 + index * 3600
    mapping: dict[str, Any] = {}

    def add(parent: str | None, message_of: Any) -> str:
        nid = next(ids)
        mapping[nid] = _node(nid, parent, message_of(nid) if message_of else None)
        if parent is not None:
            mapping[parent]["children"].append(nid)
        return nid

    root = add(None, None)
    tip = add(root, lambda n: _message(n, "system", start, {"content_type": "text",
                                                            "parts": [""]}, hidden=True))
    turns = min(int(rng.paretovariate(1.2) * 4), 120)
    t, count = start, 0
    for turn in range(turns):
        t += rng.randint(20, 600)
        tag = f"c{index}t{turn}"
        if rng.random() < 0.1:  # a pasted screenshot
            content = {"content_type": "multimodal_text", "parts": [
                {"content_type": "image_asset_pointer", "asset_pointer":
                 f"file-service://file-{next(ids)[:12]}", "size_bytes": 123456,
                 "width": 1024, "height": 768},
                _text(rng, pool, 1, tag)]}
        else:
            content = {"content_type": "text", "parts": [_text(rng, pool, rng.randint(1, 3),
                                                               tag)]}
        user = add(tip, lambda n, c=content, t=t: _message(n, "user", t, c))
        count += 1
        tip = user
        if rng.random() < 0.15:  # code interpreter: a call and its output
            code = {"content_type": "code", "language": "python",
                    "text": "import pandas as pd\ndf = pd.read_csv('x.csv')\n" * 3}
            tip = add(tip, lambda n, c=code, t=t: _message(n, "assistant", t + 1, c, "python"))
            out = {"content_type": "execution_output", "text": _text(rng, pool, 1, tag)}
            tip = add(tip, lambda n, c=out, t=t: _message(n, "tool", t + 2, c, name="python"))
            count += 2
        answers = 2 if rng.random() < 0.2 else 1  # a regenerated answer: a branch
        for _ in range(answers):
            reply = {"content_type": "text", "parts": [
                _text(rng, pool, rng.randint(2, 12), tag + "a")]}
            last = add(tip, lambda n, c=reply, t=t: _message(n, "assistant", t + 5, c))
        tip = last  # the newest answer is the branch the user saw
        count += 1
    conv = {"title": f"Generated conversation {index}", "create_time": start,
            "update_time": t, "mapping": mapping, "moderation_results": [],
            "current_node": tip, "plugin_ids": None, "conversation_id": next(ids),
            "conversation_template_id": None, "gizmo_id": None, "is_archived": False,
            "safe_urls": [], "default_model_slug": "gpt-4o", "id": str(index)}
    return conv, count


def chatgpt_export(path: Path, size: int, seed: int = 7) -> tuple[int, int]:
    """Write a conversations.json of at least `size` bytes: (conversations, messages)."""
    rng = random.Random(seed)
    pool = _pool(rng)
    written, convs, msgs = 1, 0, 0
    with open(path, "wb") as out:
        out.write(b"[")
        while written < size:
            conv, count = conversation(rng, pool, convs)
            data = (b", " if convs else b"") + orjson.dumps(conv)
            out.write(data)
            written += len(data)
            convs += 1
            msgs += count
        out.write(b"]")
    return convs, msgs


def measure(argv: list[str], home: Path, code: str | None = None
            ) -> tuple[float, float, int, bytes]:
    """(wall s, CPU s, peak RSS bytes, stdout) of a child run to the end (code: the folder
    whose agenvoy_cli runs, on PYTHONPATH)."""
    env = {**os.environ, "AGENVOY_HOME": str(home), "AGENVOY_PROGRESS_SECONDS": "30"}
    exe = Path(sys.executable).with_name("agenvoy")
    cmd = [str(exe)] if exe.exists() and not code else [sys.executable, "-m", "agenvoy_cli"]
    if code:
        env["PYTHONPATH"] = code
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen([*cmd, *argv], env=env, stdout=out, cwd=code or None)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        data = out.read()
    if proc.returncode != 0:
        raise SystemExit(f"{argv}: exit {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, data


def make_input(fmt: str, path: Path, size: int, seed: int) -> tuple[str, int, int | None]:
    """Write an input of `fmt`: (import format, messages, conversations or None)."""
    if fmt == "chatgpt":
        convs, msgs = chatgpt_export(path, size, seed)
        return "chatgpt", msgs, convs
    sys.path.insert(0, str(Path(__file__).parent))
    from import_shapes import GENERATORS

    make, kind, _ = GENERATORS[fmt]
    return kind, make(path, size, seed), None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--format", default="chatgpt",
                        help="chatgpt, claude-code, codex, openai-jsonl, openai-request, "
                             "openai-batch or agenvoy")
    parser.add_argument("--sizes", default="50,100,200", help="MiB, comma separated")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=1, help="runs per size (medians)")
    parser.add_argument("--code", help="also run this checkout's agenvoy_cli (A/B)")
    parser.add_argument("--keep", help="keep the generated files and homes here")
    parser.add_argument("--generate", type=int, metavar="MIB", help="only write an input")
    parser.add_argument("--output", default="conversations.json")
    args = parser.parse_args()
    if args.generate is not None:
        kind, msgs, convs = make_input(args.format, Path(args.output), args.generate * MiB,
                                       args.seed)
        print(f"{args.output}: {args.format}, {msgs} messages")
        return
    import agenvoy_cli

    codes: list[str | None] = [None] + ([args.code] if args.code else [])
    for code in codes:
        root = Path(code) / "agenvoy_cli" if code else Path(agenvoy_cli.__file__).parent
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(root)], check=True)
    work = Path(args.keep or tempfile.mkdtemp(prefix="import-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"format {args.format}; load average before: {os.getloadavg()[0]:.2f} "
          f"{os.getloadavg()[1]:.2f}")
    tiny = work / "tiny.input"
    kind, _, _ = make_input(args.format, tiny, 64 << 10, args.seed)
    _, _, floor, _ = measure(["import", kind, str(tiny), "--now", "--json"], work / "home-tiny")
    print(f"floor (a 64 KiB input): peak RSS {floor / MiB:.0f} MiB")
    print(f"{'code':>5} {'input MiB':>9} {'messages':>9} {'peak RSS MiB':>12} {'wall s':>7} "
          f"{'CPU s':>6} {'msg/s wall':>10} {'msg/s CPU':>9}")
    for size in (int(s) for s in args.sizes.split(",")):
        path = work / f"input-{size}"
        kind, msgs, convs = make_input(args.format, path, size * MiB, args.seed)
        runs: dict[str | None, list[tuple[float, float, int]]] = {c: [] for c in codes}
        added: dict[str | None, int] = {}
        for _ in range(args.rounds):
            for code in codes:  # interleaved: a busy moment falls on both
                home = work / f"home-{size}"
                shutil.rmtree(home, ignore_errors=True)
                now = [] if code else ["--now"]  # (an older checkout has no --now)
                wall, cpu, rss, out = measure(["import", kind, str(path), *now, "--json"],
                                              home, code)
                doc = orjson.loads(out)
                # sources beyond the first 1,000 are folded into one entry ("folded")
                read = sum(s.get("folded") or 1 for s in doc["sources"])
                if code is None and (doc["added"] != msgs or (convs and read != convs)):
                    raise SystemExit(f"{size} MiB: imported {doc['added']} of {msgs} messages")
                added[code] = doc["added"]  # (an older checkout may keep fewer: its own count)
                runs[code].append((wall, cpu, rss))
                shutil.rmtree(home)
        real = path.stat().st_size / MiB
        for code, got in runs.items():
            wall = statistics.median(r[0] for r in got)
            cpu = statistics.median(r[1] for r in got)
            rss = max(r[2] for r in got)
            count = added[code]
            print(f"{'B' if code else 'A':>5} {real:9.0f} {count:9d} {rss / MiB:12.0f} "
                  f"{wall:7.1f} {cpu:6.1f} {count / wall:10.0f} {count / cpu:9.0f}", flush=True)
        if not args.keep:
            path.unlink()
    print(f"load average after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; "
          f"this process's own peak: "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
