"""Claude Code transcripts: ~/.claude/projects/<project>/<session uuid>.jsonl, and the
sub-agents' (<session uuid>/subagents/agent-<id>.jsonl, or agent-<id>.jsonl beside it).

user/assistant records become messages (tool_use parts -> assistant tool_calls, tool_result
parts -> tool messages with their tool_call_id, thinking -> reasoning_content, images ->
image_url parts); summary, file-history-snapshot, queue-operation, progress and every other
record are skipped. Claude Code writes one assistant record per content block as the blocks
stream (thinking, text, each tool_use), all with the message's `message.id`, seconds apart:
those records are one message, archived only once it is complete - a record of another
message follows, or the transcript has been quiet for `quiet` seconds (or the caller knows
the turn ended: `settled`). Until then the cursor stays before its first record.
Sidechain (sub-agent) records go to a session of their own, named after the parent session
and the agent's id, or are skipped."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from agenvoy_cli.home.layout import NAME_MAX_BYTES
from agenvoy_cli.transfer.inputs import (
    MAX_RECORD_BYTES,
    QUIET_SECONDS,
    files,
    lines,
    open_input,
    too_long,
)
from agenvoy_cli.transfer.records import (
    OPEN_FROM,
    OWED,
    Record,
    Unit,
    decode_error,
    moment_ns,
    part_of,
    slug,
    text_parts,
)

KIND = "claude-code"


def _image(part: dict[str, Any]) -> dict[str, Any]:
    source = part.get("source")
    source = source if isinstance(source, dict) else {}
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
    message = entry.get("message")
    message = message if isinstance(message, dict) else {}
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
        if kind == "text" and isinstance(part.get("text"), str) and part["text"].strip():
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "image":
            parts.append(_image(part))
        elif kind == "thinking" and isinstance(part.get("thinking"), str) and part["thinking"]:
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


def _listed(content: Any) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def merge(into: dict[str, Any] | None, more: dict[str, Any]) -> dict[str, Any]:
    """A later block of the same assistant message added to what it had."""
    if into is None:
        return dict(more)
    if more.get("content"):
        a, b = into.get("content"), more["content"]
        if not a:
            into["content"] = b
        elif isinstance(a, str) and isinstance(b, str):
            into["content"] = f"{a}\n{b}"
        else:
            into["content"] = _listed(a) + _listed(b)
    if more.get("tool_calls"):
        into["tool_calls"] = into.get("tool_calls", []) + more["tool_calls"]
    if more.get("reasoning_content"):
        into["reasoning_content"] = "\n".join(
            t for t in (into.get("reasoning_content"), more["reasoning_content"]) if t)
    return into


class _Open:
    """The assistant message being written: the records read of it (and those after it),
    the message they make so far."""

    def __init__(self, msg_id: str, first: int) -> None:
        self.msg_id, self.first = msg_id, first  # first: its first record's number
        self.records: list[Record] = []
        self.message: dict[str, Any] | None = None
        self.moment: int | None = None
        self.last = -1  # the index in records of its last block

    def add(self, raw: bytes, message: dict[str, Any] | None, moment: int | None) -> None:
        self.records.append(Record(raw, []))
        self.last = len(self.records) - 1
        if message is not None:
            self.message = merge(self.message, message)
            self.moment = self.moment if self.moment is not None else moment

    def done(self) -> list[Record]:
        """Its records, the message on its last block."""
        out = list(self.records)
        if self.message is not None:
            out[self.last] = out[self.last]._replace(messages=[(self.message, self.moment)],
                                                     start=self.first)
        return out


# as Claude Code writes it (a pattern: one scan of the line finds either spacing)
_MAIN = re.compile(rb'"isSidechain": ?false')
_SIDE = re.compile(rb'"isSidechain": ?true')


def read(path: Path, sidechain: bool, meta: dict[str, Any], settled: bool,
         report: dict[str, Any], limit: int = MAX_RECORD_BYTES, owes: str | None = None,
         skip: int = 0) -> Iterator[Record]:
    """The records of a transcript for the main conversation or for its sidechains; an
    assistant message still being written (see the module) is held back, with the records
    after it. The first `skip` records are passed unparsed (Unit.skips). `owes`: the key
    of the side pass the main one's cursor names (records.OWED) when it read a sidechain."""
    count = 0  # records yielded
    current: _Open | None = None
    report["open"] = 0
    loads = orjson.loads
    with open_input(path) as handle:
        for line in lines(handle, limit):
            data = line.data
            if not line.complete:
                break  # still being written: the next import reads it whole
            raw = data if data is not None else line.raw
            if not sidechain and data is not None and _SIDE.search(data):
                report["sidechain"] = True  # its sidechains' pass is worth reading
            record: Record | None = None
            entry: Any = None
            if count < skip or (sidechain and data is not None and _MAIN.search(data)):
                record = Record(raw, [])  # before the cursor, or the main one's (a side pass)
            elif data is None:  # a line no side can claim: counted once, by the main one
                record = Record(raw, [], None if sidechain else too_long(line, limit))
            else:
                try:
                    entry = loads(data)
                    if not isinstance(entry, dict):
                        raise ValueError("not a JSON object")
                except ValueError as exc:
                    record = Record(raw, [], None if sidechain else
                                    f"line {line.number}: {decode_error(exc)}")
            kind = entry.get("type") if record is None else None
            if record is None and (kind not in ("user", "assistant") or
                                   bool(entry.get("isSidechain")) != sidechain):
                record = Record(raw, [])
            if record is None:
                for name, key in (("cwd", "cwd"), ("gitBranch", "git_branch")):
                    value = entry.get(name)
                    if value and isinstance(value, str):
                        meta[key] = value
                try:
                    messages = convert(entry)
                except (ValueError, AttributeError, TypeError) as exc:
                    record = Record(raw, [], f"line {line.number}: {exc}")
            if record is not None:  # bookkeeping: it neither opens nor closes a message
                if current is not None:
                    current.records.append(record)
                else:
                    count += 1
                    yield record
                continue
            moment = moment_ns(entry.get("timestamp"))
            body = entry.get("message")
            msg_id = body.get("id") if kind == "assistant" and isinstance(body, dict) else None
            msg_id = msg_id if msg_id and isinstance(msg_id, str) else None
            if current is not None and msg_id == current.msg_id and len(messages) <= 1:
                current.add(raw, messages[0] if messages else None, moment)
                continue
            if current is not None:  # a record of another message: that one is complete
                for done in current.done():
                    count += 1
                    yield done
                current = None
            if msg_id is not None and len(messages) <= 1:
                current = _Open(msg_id, count + 1)
                current.add(raw, messages[0] if messages else None, moment)
                continue
            count += 1
            yield Record(raw, [(m, moment) for m in messages])
    meta.pop(OPEN_FROM, None)
    if current is not None:
        if settled:  # maybe not the end of it (#49): the next import reads it again
            meta[OPEN_FROM] = current.first
            yield from current.done()
        else:
            report["open"] = len(current.records)
    if owes is not None and report.get("sidechain"):
        meta[OWED] = owes


def _head(file: Path, limit: int) -> dict[str, Any]:
    """cwd, sessionId and agentId from the first records that carry them."""
    found: dict[str, Any] = {}
    with open_input(file) as handle:
        for _, line in zip(range(50), lines(handle, limit)):
            try:
                entry = orjson.loads(line.data) if line.data is not None else None
            except orjson.JSONDecodeError:
                continue
            if isinstance(entry, dict):
                for key in ("cwd", "sessionId", "agentId"):
                    if isinstance(entry.get(key), str) and entry[key] and key not in found:
                        found[key] = entry[key]
            if len(found) == 3:
                break
    return found


def _fit(name: str) -> str:
    return name.encode()[:NAME_MAX_BYTES].decode("utf-8", "ignore").rstrip("-")


def transcripts(path: Path) -> list[Path]:
    """A file, or the transcripts under a folder: the parents before their sub-agents."""
    if not path.is_dir():
        return [path]
    found = list(files(path, (".jsonl",)))
    return sorted(found, key=lambda p: (p.name.startswith("agent-"), p))


def file_units(file: Path, session: str | None, sidechains: str, *,
               quiet: float = QUIET_SECONDS, now: bool = False,
               limit: int = MAX_RECORD_BYTES) -> Iterator[Unit]:
    """The units of one transcript: its main conversation and its sidechains (a sub-agent's
    own transcript: only those)."""
    stat = file.stat()
    settled = now or time.time() - stat.st_mtime >= quiet
    head = _head(file, limit)
    stem = file.stem
    agent = file.name.startswith("agent-")
    in_subagents = file.parent.name == "subagents"
    project = file.parent.parent.parent.name if in_subagents else file.parent.name
    first = head.get("cwd")
    name = slug(Path(first).name if first else project.rsplit("-", 1)[-1]) or "project"
    parent_uuid = str(head.get("sessionId") or (file.parent.parent.name if in_subagents
                                                 else stem))
    parent_sid = f"cc-{name}-{parent_uuid[:8]}"
    main: dict[str, Any] = {}
    for side in (False, True):
        if (side and sidechains == "skip") or (agent and not side):
            continue
        # the main pass read no sidechain record: no side pass; when it read nothing (the
        # file unchanged since it was read whole), one only to finish a side pass an
        # earlier run began and did not end (killed, a full disk)
        resume_only = side and not agent and not main.get("sidechain") and "open" not in main
        if side and not agent and not main.get("sidechain") and not resume_only:
            continue
        meta: dict[str, Any] = {"path": str(file.resolve()), "project": project}
        report: dict[str, Any] = main if not side else {}
        if agent:  # a sub-agent's own transcript, named after its parent and its full id
            agent_id = str(head.get("agentId") or stem.removeprefix("agent-"))
            sid = session or _fit(f"{parent_sid}-agent-{slug(agent_id, 120) or 'x'}")
            parent: str | None = f"{KIND}:{parent_uuid}"
        else:
            sid = (session or f"cc-{name}-{stem[:8]}") + ("-side" if side else "")
            parent = f"{KIND}:{stem}" if side else None
        owes = f"{KIND}:{stem}#sidechain" if not side and sidechains != "skip" else None
        yield Unit(f"{KIND}:{stem}" + ("#sidechain" if side else ""), KIND, sid,
                   partial(read, file, side, meta, settled, report, limit, owes), meta,
                   stat.st_size, stat.st_mtime_ns, report=report, part_of=part_of,
                   rescan=True, skips=True, parent=parent, resume_only=resume_only)
