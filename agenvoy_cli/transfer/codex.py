"""Codex CLI rollouts: ~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl, lines of
{timestamp, type, payload}. response_item payloads become messages: message (user,
assistant; developer -> system), reasoning (-> reasoning_content of the next assistant
message), function_call / custom_tool_call / local_shell_call (-> assistant tool_calls) and
their outputs (-> tool messages). session_meta gives the id and cwd; the rest is skipped."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from agenvoy_cli.transfer.records import Record, Unit, local_time, slug, text_parts


def _parts(content: Any) -> str | list[dict[str, Any]] | None:
    parts = []
    for part in content if isinstance(content, list) else []:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text") and str(part.get("text", "")).strip():
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "input_image":
            parts.append({"type": "image_url", "image_url": {"url": part.get("image_url")}})
    return text_parts(parts)


def _output(output: Any) -> Any:
    if isinstance(output, dict):
        output = output.get("content", "")
    if isinstance(output, list):
        return _parts(output) or ""
    return output if isinstance(output, str) else orjson.dumps(output).decode()


def convert(payload: dict[str, Any], reasoning: list[str]) -> list[dict[str, Any]]:
    kind = payload.get("type")
    if kind == "message":
        role = payload.get("role")
        role = "system" if role == "developer" else role
        content = _parts(payload.get("content"))
        if content is None:
            return []
        msg: dict[str, Any] = {"role": role, "content": content}
        if role == "assistant" and reasoning:
            msg["reasoning_content"] = "\n".join(reasoning)
            reasoning.clear()
        return [msg]
    if kind == "reasoning":
        texts = [s.get("text", "") for s in payload.get("summary") or [] if isinstance(s, dict)]
        texts += [c.get("text", "") for c in payload.get("content") or [] if isinstance(c, dict)]
        reasoning.extend(t for t in texts if t)
        return []
    if kind in ("function_call", "custom_tool_call", "local_shell_call"):
        name: str | None
        args: str | None
        if kind == "local_shell_call":
            name, args = "local_shell", orjson.dumps(payload.get("action") or {}).decode()
        else:
            name = payload.get("name")
            args = payload.get("arguments") if kind == "function_call" else \
                orjson.dumps({"input": payload.get("input")}).decode()
        call_id = payload.get("call_id") or payload.get("id")
        msg = {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}]}
        if reasoning:
            msg["reasoning_content"] = "\n".join(reasoning)
            reasoning.clear()
        return [msg]
    if kind in ("function_call_output", "custom_tool_call_output"):
        return [{"role": "tool", "tool_call_id": payload.get("call_id"),
                 "content": _output(payload.get("output"))}]
    return []


def read(path: Path, meta: dict[str, Any]) -> list[Record]:
    records: list[Record] = []
    reasoning: list[str] = []
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            if not line.endswith(b"\n"):
                break  # still being written: the next import reads it whole
            if not line.strip():
                continue
            try:
                entry = orjson.loads(line)
                payload = entry.get("payload") if isinstance(entry, dict) else None
                if not isinstance(payload, dict):
                    raise ValueError("no payload object")
            except (orjson.JSONDecodeError, ValueError) as exc:
                records.append(Record(line, [], f"line {number}: {exc}"))
                continue
            if entry.get("type") == "session_meta":
                meta["cwd"] = payload.get("cwd") or meta.get("cwd")
                branch = (payload.get("git") or {}).get("branch")
                if branch:
                    meta["git_branch"] = branch
            if entry.get("type") != "response_item":
                records.append(Record(line, []))
                continue
            moment = local_time(entry.get("timestamp"))
            records.append(Record(line, [(m, moment) for m in convert(payload, reasoning)]))
    while records and records[-1].messages and records[-1].messages[-1][0].get("tool_calls"):
        records.pop()  # the call's output is not written yet
    return records


def _meta_line(file: Path) -> dict[str, Any]:
    with open(file, "rb") as handle:
        for _, line in zip(range(5), handle):
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(entry, dict) and entry.get("type") == "session_meta":
                return entry.get("payload") or {}
    return {}


def units(path: Path, session: str | None) -> Iterator[Unit]:
    files = [path] if path.is_file() else sorted(path.rglob("rollout-*.jsonl"))
    for file in files:
        stat = file.stat()
        head = _meta_line(file)
        ident = str(head.get("id") or file.stem)
        meta: dict[str, Any] = {"path": str(file.resolve())}
        name = slug(Path(str(head.get("cwd") or "")).name) or "session"
        yield Unit(f"codex:{ident}", "codex", session or f"codex-{name}-{ident[:8]}",
                   partial(read, file, meta), meta, stat.st_size,
                   stat.st_mtime_ns)
