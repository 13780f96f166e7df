"""Generated inputs of every import format, of any size, shaped like the real files
(bench/import_memory.py imports them through the CLI). Deterministic for a seed.

- claude-code: one transcript of turns as Claude Code 2.1 writes them: the prompt, then one
  assistant record per content block (thinking, text, tool_use...) with the message's id,
  a tool_result record per call, file-history snapshots, system records, the metadata every
  record carries (uuid, parentUuid, sessionId, cwd, gitBranch, version, usage);
- codex: one rollout (session_meta, turn_context, event_msg, response_item: messages,
  reasoning, function calls and outputs, web searches);
- openai-jsonl: messages, one a line; openai-request: one request body {"model", "messages",
  "tools"}, pretty-printed; openai-batch: Batch API lines ({"custom_id", "body"}) of 10-40
  turns each (a session each: 1 GiB is ~25,000 sessions);
- agenvoy: this tool's export (session, message and summary lines).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

_TEXT = ("the deploy script needs a retry budget because the database migration can time "
         "out while the cache warms up so we measure the queue and the worker before the "
         "release please review this function and explain why the test fails on the second "
         "run only kernel network docker python golang sqlite vector index search summary "
         "token window")
_WORDS = _TEXT.split(" ")
_ZH = ("記憶層讓代理在每一輪對話前取得過去會話的摘要與最近訊息"
       "部署腳本失敗時應先檢查權限與設定資料庫遷移需要備份")


class Text:
    """Cheap varied text: a few hundred sentences drawn from once."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.sentences = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 30)))
                          .capitalize() + "." for _ in range(500)]
        self.sentences += [_ZH[rng.randrange(20):][:rng.randint(10, 40)] + "。"
                           for _ in range(100)]

    def __call__(self, low: int, high: int) -> str:
        out: list[str] = []
        want = self.rng.randint(low, high)
        size = 0
        while size < want:
            s = self.rng.choice(self.sentences)
            out.append(s)
            size += len(s) + 1
        return " ".join(out)


def _write(path: Path, size: int, items: Iterator[bytes]) -> int:
    """Write items until the file is at least `size` bytes; the items written."""
    count, written = 0, 0
    with open(path, "wb") as out:
        for data in items:
            out.write(data)
            written += len(data)
            count += 1
            if written >= size:
                break
    return count


def _stamp(t: float) -> str:
    whole = int(t)
    ms = int((t - whole) * 1000)
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{ms:03d}Z"


def claude_code(path: Path, size: int, seed: int = 7) -> int:
    """A transcript of at least `size` bytes; the number of messages it imports as."""
    rng = random.Random(seed)
    text = Text(rng)
    session = str(uuid.UUID(int=rng.getrandbits(128)))
    base = {"isSidechain": False, "userType": "external", "cwd": "/home/ada/src/shop",
            "sessionId": session, "version": "2.1.3", "gitBranch": "main"}
    counted = [0]

    def records() -> Iterator[bytes]:
        for turn in range(1, 10**9):
            yield b"".join(turn_lines(turn))

    state = {"t": 1_762_000_000.0, "parent": None}

    def turn_lines(turn: int) -> Iterator[bytes]:
        t, parent = state["t"], state["parent"]
        if True:
            t += rng.randint(30, 600)
            uid = f"u{turn}"
            yield orjson.dumps({"type": "file-history-snapshot", "messageId": uid,
                                "snapshot": {"messageId": uid, "trackedFileBackups": {},
                                             "timestamp": _stamp(t)},
                                "isSnapshotUpdate": False}) + b"\n"
            yield orjson.dumps({"parentUuid": parent, **base, "type": "user", "uuid": uid,
                                "timestamp": _stamp(t), "message": {
                                    "role": "user", "content": text(10, 200)}}) + b"\n"
            counted[0] += 1
            parent = uid
            for step in range(rng.randint(1, 4)):
                mid = f"msg_{turn:06d}{step}"
                blocks: list[dict[str, Any]] = [
                    {"type": "thinking", "thinking": text(10, 160), "signature": "Es" * 30}]
                if rng.random() < 0.5:
                    blocks.append({"type": "text", "text": text(10, 120)})
                calls = [f"toolu_{turn:06d}{step}{k}" for k in range(rng.randint(0, 2))]
                blocks += [{"type": "tool_use", "id": c, "name": rng.choice(
                    ["Bash", "Read", "Grep", "Edit"]), "input": {"command": text(10, 80)}}
                    for c in calls]
                if not calls:
                    blocks.append({"type": "text", "text": text(20, 240)})
                for block in blocks:
                    t += rng.random() * 3
                    aid = f"a{turn}.{step}.{blocks.index(block)}"
                    yield orjson.dumps({"parentUuid": parent, **base, "type": "assistant",
                                        "uuid": aid, "timestamp": _stamp(t),
                                        "requestId": f"req_{mid}", "message": {
                                            "model": "claude-sonnet-4-5-20250929", "id": mid,
                                            "type": "message", "role": "assistant",
                                            "content": [block], "stop_reason": None,
                                            "usage": {"input_tokens": 9,
                                                      "output_tokens": 120}}}) + b"\n"
                    parent = aid
                counted[0] += 1
                for c in calls:
                    t += rng.random() * 8
                    rid = f"r{c}"
                    out = text(10, rng.choice((60, 60, 60, 400)))
                    yield orjson.dumps({"parentUuid": parent, **base, "type": "user",
                                        "uuid": rid, "timestamp": _stamp(t), "message": {
                                            "role": "user", "content": [{
                                                "tool_use_id": c, "type": "tool_result",
                                                "content": out}]},
                                        "toolUseResult": {"stdout": out[:200],
                                                          "stderr": ""}}) + b"\n"
                    counted[0] += 1
                    parent = rid
                if not calls:
                    break
            yield orjson.dumps({"parentUuid": parent, **base, "type": "system",
                                "subtype": "turn_duration", "uuid": f"s{turn}",
                                "timestamp": _stamp(t), "durationMs": 9000}) + b"\n"
        state["t"], state["parent"] = t, parent

    _write(path, size, records())
    return counted[0]


def codex(path: Path, size: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    text = Text(rng)
    ident = str(uuid.UUID(int=rng.getrandbits(128)))
    counted = [0]

    def line(t: float, kind: str, payload: dict[str, Any]) -> bytes:
        return orjson.dumps({"timestamp": _stamp(t), "type": kind, "payload": payload}) + b"\n"

    state = {"t": 1_762_000_000.0}

    def items() -> Iterator[bytes]:
        t = state["t"]
        yield line(t, "session_meta", {"id": ident, "timestamp": _stamp(t),
                                       "cwd": "/home/ada/src/api", "originator": "codex_cli_rs",
                                       "cli_version": "0.60.0", "git": {"branch": "main"}})
        for turn in range(1, 10**9):
            yield b"".join(turn_items(turn))

    def turn_items(turn: int) -> Iterator[bytes]:
        t = state["t"]
        if True:
            t += rng.randint(30, 600)
            prompt = text(10, 200)
            yield line(t, "response_item", {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": prompt}]})
            yield line(t, "event_msg", {"type": "user_message", "message": prompt})
            yield line(t, "turn_context", {"cwd": "/home/ada/src/api", "model": "gpt-5-codex"})
            counted[0] += 1
            for step in range(rng.randint(1, 4)):
                t += rng.random() * 3
                yield line(t, "response_item", {"type": "reasoning", "summary": [
                    {"type": "summary_text", "text": text(10, 120)}], "content": None,
                    "encrypted_content": "gAAA" * 20})
                if rng.random() < 0.1:
                    yield line(t, "response_item", {
                        "type": "web_search_call", "id": f"ws_{turn}_{step}",
                        "status": "completed", "action": {"type": "search",
                                                          "query": text(10, 40)}})
                    counted[0] += 2
                call = f"call_{turn}_{step}"
                yield line(t, "response_item", {"type": "function_call", "name": "shell",
                                                "arguments": orjson.dumps({"command": [
                                                    "bash", "-lc", text(10, 60)]}).decode(),
                                                "call_id": call})
                t += rng.random() * 5
                yield line(t, "response_item", {"type": "function_call_output", "call_id": call,
                                                "output": orjson.dumps({
                                                    "output": text(10, rng.choice((60, 60, 400))),
                                                    "metadata": {"exit_code": 0}}).decode()})
                counted[0] += 2
            yield line(t, "response_item", {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": text(20, 240)}]})
            counted[0] += 1
        state["t"] = t

    _write(path, size, items())
    return counted[0]


def _chat(rng: random.Random, text: Text, turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for turn in range(turns):
        out.append({"role": "user", "content": text(40, 400)})
        if rng.random() < 0.3:
            call = f"call_{turn}"
            out.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": call, "type": "function", "function": {
                    "name": "lookup", "arguments": orjson.dumps({"q": text(5, 40)}).decode()}}]})
            out.append({"role": "tool", "tool_call_id": call, "content": text(20, 800)})
        out.append({"role": "assistant", "content": text(50, 600)})
    return out


def openai_jsonl(path: Path, size: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    text = Text(rng)

    def lines() -> Iterator[bytes]:
        while True:
            for message in _chat(rng, text, 50):
                yield orjson.dumps(message) + b"\n"

    return _write(path, size, lines())


def openai_request(path: Path, size: int, seed: int = 7) -> int:
    """One request body, pretty-printed, its messages far beyond any bound on one value."""
    rng = random.Random(seed)
    text = Text(rng)
    count = 0
    with open(path, "wb") as out:
        out.write(b'{\n  "model": "gpt-4o",\n  "temperature": 0.2,\n  "messages": [\n')
        written = 0
        while written < size:
            for message in _chat(rng, text, 50):
                data = (b",\n" if count else b"") + orjson.dumps(
                    message, option=orjson.OPT_INDENT_2)
                out.write(data)
                written += len(data)
                count += 1
        out.write(b'\n  ],\n  "tools": [{"type": "function", "function": {"name": "lookup"}}]'
                  b"\n}\n")
    return count


def openai_batch(path: Path, size: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    text = Text(rng)
    counted = [0]

    def lines() -> Iterator[bytes]:
        n = 0
        while True:
            n += 1
            chat = _chat(rng, text, rng.randint(10, 40))  # fine-tuning-length conversations
            counted[0] += len(chat)
            yield orjson.dumps({"custom_id": f"request-{n}", "method": "POST",
                                "url": "/v1/chat/completions",
                                "body": {"model": "gpt-4o-mini", "messages": chat}}) + b"\n"

    _write(path, size, lines())
    return counted[0]


def agenvoy_export(path: Path, size: int, seed: int = 7) -> int:
    """An export of sessions of a few thousand messages each."""
    rng = random.Random(seed)
    text = Text(rng)
    counted = [0]

    def lines() -> Iterator[bytes]:
        session = 0
        while True:
            session += 1
            chat = _chat(rng, text, 1500)
            yield orjson.dumps({"type": "session", "format": "agenvoy-export", "version": 1,
                                "session_id": f"exported-{session}", "home": "/old/home",
                                "start_seq": 0, "message_count": len(chat),
                                "history_format": "header"}) + b"\n"
            t = 1_762_000_000 * 10**9 + session * 10**13
            for seq, message in enumerate(chat):
                t += rng.randint(1, 90) * 10**9
                yield orjson.dumps({"type": "message", "seq": seq, "send_at": t,
                                    "role": message["role"], "gone": 0, "sender": "",
                                    "message": message}) + b"\n"
            counted[0] += len(chat)
            yield orjson.dumps({"type": "summary", "summary": None, "meta": None}) + b"\n"

    _write(path, size, lines())
    return counted[0]


GENERATORS = {"claude-code": (claude_code, "claude-code", "transcript.jsonl"),
              "codex": (codex, "codex", "rollout-2025-11-01T10-00-00-bench.jsonl"),
              "openai-jsonl": (openai_jsonl, "openai", "messages.jsonl"),
              "openai-request": (openai_request, "openai", "request.json"),
              "openai-batch": (openai_batch, "openai", "batch.jsonl"),
              "agenvoy": (agenvoy_export, "agenvoy", "export.jsonl")}
