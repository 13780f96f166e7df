"""Claude Code transcripts: ~/.claude/projects/<project>/<session uuid>.jsonl.

user/assistant records become messages (tool_use parts -> assistant tool_calls, tool_result
parts -> tool messages with their tool_call_id, thinking -> reasoning_content, images ->
image_url parts); summary, file-history-snapshot, queue-operation and every other record
are skipped. Claude Code writes one assistant record per content block: consecutive blocks
of one message.id are one assistant message. Sidechain (sub-agent) records go to a
session of their own ("<id>-side"), or are skipped."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from agenvoy_cli.transfer.records import Record, Unit, local_time, slug, text_parts


def _image(part: dict[str, Any]) -> dict[str, Any]:
    source = part.get("source") or {}
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    else:
        url = str(source.get("url", ""))
    return {"type": "image_url", "image_url": {"url": url}}


def _tool_output(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and part.get("type") == "text":
            parts.append({"type": "text", "text": str(part.get("text", ""))})
        elif isinstance(part, dict) and part.get("type") == "image":
            parts.append(_image(part))
    return text_parts(parts) or ""


def convert(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages of one user or assistant record."""
    message = entry.get("message") or {}
    role = message.get("role") or entry.get("type")
    content = message.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}] if content.strip() else []
    if not isinstance(content, list):
        raise ValueError("message.content is neither a string nor a list")
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    calls, thinking = [], []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and str(part.get("text", "")).strip():
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "image":
            parts.append(_image(part))
        elif kind == "thinking" and part.get("thinking"):
            thinking.append(part["thinking"])
        elif kind == "tool_use":
            calls.append({"id": part.get("id"), "type": "function", "function": {
                "name": part.get("name"), "arguments": orjson.dumps(part.get("input", {}))
                .decode()}})
        elif kind == "tool_result":
            tool = {"role": "tool", "tool_call_id": part.get("tool_use_id"),
                    "content": _tool_output(part.get("content"))}
            out.append(tool)
    if role == "assistant":
        if parts or calls or thinking:
            msg: dict[str, Any] = {"role": "assistant", "content": text_parts(parts)}
            if calls:
                msg["tool_calls"] = calls
            if thinking:
                msg["reasoning_content"] = "\n".join(thinking)
            out.append(msg)
    elif parts:
        out.append({"role": "user", "content": text_parts(parts)})
    return out


def _merge(into: dict[str, Any], more: dict[str, Any]) -> None:
    """A later block of the same assistant message."""
    if more.get("content"):
        a, b = into.get("content"), more["content"]
        if not a:
            into["content"] = b
        elif isinstance(a, str) and isinstance(b, str):
            into["content"] = f"{a}\n{b}"
        else:
            def listed(c: Any) -> list[Any]:
                return [{"type": "text", "text": c}] if isinstance(c, str) else list(c)
            into["content"] = listed(a) + listed(b)
    if more.get("tool_calls"):
        into["tool_calls"] = into.get("tool_calls", []) + more["tool_calls"]
    if more.get("reasoning_content"):
        into["reasoning_content"] = "\n".join(
            t for t in (into.get("reasoning_content"), more["reasoning_content"]) if t)


def read(path: Path, sidechain: bool, meta: dict[str, Any]) -> list[Record]:
    """The records of a transcript for the main conversation or for its sidechains. A
    trailing assistant message whose tool calls have no result yet is held back (the tool
    is still running: the next import takes it whole)."""
    records: list[Record] = []
    last_id: Any = None
    last_msg: dict[str, Any] | None = None
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            if not line.endswith(b"\n"):
                break  # still being written: the next import reads it whole
            if not line.strip():
                continue
            try:
                entry = orjson.loads(line)
                if not isinstance(entry, dict):
                    raise ValueError("not a JSON object")
            except (orjson.JSONDecodeError, ValueError) as exc:
                # a line no side can claim: counted once, by the main conversation
                records.append(Record(line, [], None if sidechain else f"line {number}: {exc}"))
                last_id = None
                continue
            if entry.get("type") not in ("user", "assistant") or \
                    bool(entry.get("isSidechain")) != sidechain:
                records.append(Record(line, []))
                continue
            for name, key in (("cwd", "cwd"), ("gitBranch", "git_branch")):
                if entry.get(name):
                    meta[key] = entry[name]
            try:
                messages = convert(entry)
            except (ValueError, AttributeError, TypeError) as exc:
                records.append(Record(line, [], f"line {number}: {exc}"))
                continue
            moment = local_time(entry.get("timestamp"))
            msg_id = (entry.get("message") or {}).get("id")
            if (entry.get("type") == "assistant" and msg_id and msg_id == last_id
                    and last_msg is not None and len(messages) == 1):
                _merge(last_msg, messages[0])
                records.append(Record(line, []))
                continue
            last_id = msg_id if entry.get("type") == "assistant" else None
            last_msg = messages[-1] if messages and last_id else None
            records.append(Record(line, [(m, moment) for m in messages]))
    while records and records[-1].messages and \
            records[-1].messages[-1][0].get("tool_calls"):
        records.pop()  # its tool results are not written yet
        while records and not records[-1].messages and not records[-1].error:
            records.pop()
    return records


def units(path: Path, session: str | None, sidechains: str) -> Iterator[Unit]:
    files = [path] if path.is_file() else sorted(path.rglob("*.jsonl"))
    for file in files:
        stat = file.stat()
        stem = file.stem
        project = file.parent.name if file.parent.name != "subagents" else \
            file.parent.parent.parent.name
        for side in (False, True):
            if side and sidechains == "skip":
                continue
            meta: dict[str, Any] = {"path": str(file.resolve()), "project": project}
            first = _first_cwd(file)
            name = slug(Path(first).name if first else project.rsplit("-", 1)[-1]) or "project"
            sid = session or f"cc-{name}-{stem[:8]}"
            yield Unit(f"claude-code:{stem}" + ("#sidechain" if side else ""), "claude-code",
                       sid + ("-side" if side else ""),
                       partial(read, file, side, meta), meta,
                       stat.st_size, stat.st_mtime_ns)


def _first_cwd(file: Path) -> str | None:
    with open(file, "rb") as handle:
        for _, line in zip(range(50), handle):
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            cwd = entry.get("cwd") if isinstance(entry, dict) else None
            if isinstance(cwd, str):
                return cwd
    return None
