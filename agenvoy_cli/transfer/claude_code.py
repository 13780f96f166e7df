"""Claude Code transcripts: ~/.claude/projects/<project>/<session uuid>.jsonl, and the
sub-agents' (<session uuid>/subagents/agent-<id>.jsonl, or agent-<id>.jsonl beside it).

user/assistant records become messages (tool_use parts -> assistant tool_calls, tool_result
parts -> tool messages with their tool_call_id, thinking -> reasoning_content, images ->
image_url parts); summary, file-history-snapshot, queue-operation, progress and every other
record are skipped. Claude Code writes one assistant record per content block as the blocks
stream (thinking, text, each tool_use), all with the message's `message.id`, seconds apart:
those records are one message, archived only once it is complete - a record of another
message follows, or the transcript has been quiet for `quiet` seconds (or the caller knows
the turn ended: `settled`). Until then the cursor stays before its first record. A result
of its calls written between its blocks (Claude Code 2.1: calls A and B, A's result, call C)
does not end it: the results written before its last block follow it there.
Sidechain (sub-agent) records go to a session of their own, named after the parent session
and the agent's id, or are skipped."""

from __future__ import annotations

import os
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
    Line,
    files,
    lines,
    open_input,
    too_long,
)
from agenvoy_cli.transfer.records import (
    OPEN_FROM,
    OWED,
    Item,
    Learnt,
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


class _Blocks:
    """One record's content blocks, sorted into what its messages are made of."""

    def __init__(self) -> None:
        self.parts: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []
        self.thinking: list[str] = []
        self.results: list[dict[str, Any]] = []  # tool messages, in order

    def add(self, part: Any) -> None:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str) and part["text"].strip():
            self.parts.append({"type": "text", "text": part["text"]})
        elif kind == "image":
            self.parts.append(_image(part))
        elif kind == "thinking" and isinstance(part.get("thinking"), str) and part["thinking"]:
            self.thinking.append(part["thinking"])
        elif kind == "tool_use":
            self.calls.append({"id": part.get("id"), "type": "function", "function": {
                "name": part.get("name"), "arguments": orjson.dumps(part.get("input", {}))
                .decode()}})
        elif kind == "tool_result":
            self.results.append({"role": "tool", "tool_call_id": part.get("tool_use_id"),
                                 "content": _tool_output(part.get("content"))})

    def messages(self, role: Any) -> list[dict[str, Any]]:
        """The tool results, then the assistant's message or the user's."""
        if role == "assistant":
            if not (self.parts or self.calls or self.thinking):
                return self.results
            msg: dict[str, Any] = {"role": "assistant", "content": text_parts(self.parts)}
            if self.calls:
                msg["tool_calls"] = self.calls
            if self.thinking:
                msg["reasoning_content"] = "\n".join(self.thinking)
            return [*self.results, msg]
        if self.parts:
            return [*self.results, {"role": "user", "content": text_parts(self.parts)}]
        return self.results


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
    blocks = _Blocks()
    for part in content:
        blocks.add(part)
    return blocks.messages(role)


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
    the message they make so far, and the results of its calls written between its blocks
    (Claude Code 2.1 writes a result before the message's next tool_use)."""

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

    def answers(self, messages: list[dict[str, Any]]) -> bool:
        """Whether a record's messages are all results of this message's calls."""
        ids = {c.get("id") for c in (self.message or {}).get("tool_calls") or []}
        return bool(messages) and all(m.get("role") == "tool" and m.get("tool_call_id") in ids
                                      for m in messages)

    def done(self) -> list[Record]:
        """Its records, the message on its last block, followed there by the results
        written before that block (the later ones stay on their own records)."""
        out = list(self.records)
        if self.message is None:
            return out
        early = [item for r in out[:self.last] for item in r.messages]
        out[:self.last] = [r._replace(messages=[]) for r in out[:self.last]]
        out[self.last] = out[self.last]._replace(
            messages=[(self.message, self.moment), *early], start=self.first)
        return out


# as Claude Code writes it (a pattern: one scan of the line finds either spacing)
_MAIN = re.compile(rb'"isSidechain": ?false')
_SIDE = re.compile(rb'"isSidechain": ?true')
_CONVERT_ERRORS = (ValueError, AttributeError, TypeError)


def _message_id(entry: dict[str, Any]) -> str | None:
    """An assistant record's message.id (the blocks of one message share it)."""
    body = entry.get("message")
    msg_id = body.get("id") if entry.get("type") == "assistant" and \
        isinstance(body, dict) else None
    return msg_id if msg_id and isinstance(msg_id, str) else None


class _Reader:
    """read()'s state over one pass: the records yielded, the message held open."""

    def __init__(self, sidechain: bool, limit: int, skip: int) -> None:
        self.sidechain, self.limit, self.skip = sidechain, limit, skip
        self.count = 0  # records yielded
        self.current: _Open | None = None

    def _out(self, records: list[Record]) -> list[Record]:
        self.count += len(records)
        return records

    def _entry(self, line: Line, raw: bytes) -> tuple[Any, Record | None]:
        """(the parsed record, None) or (None, the bookkeeping Record it is)."""
        data = line.data
        if self.count < self.skip or (self.sidechain and data is not None and
                                      _MAIN.search(data)):
            return None, Record(raw, [])  # before the cursor, or the main one's (a side pass)
        if data is None:  # a line no side can claim: counted once, by the main one
            return None, Record(raw, [], None if self.sidechain else too_long(line, self.limit))
        try:
            entry = orjson.loads(data)
            if not isinstance(entry, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            return None, Record(raw, [], None if self.sidechain else
                                f"line {line.number}: {decode_error(exc)}")
        if entry.get("type") not in ("user", "assistant") or \
                bool(entry.get("isSidechain")) != self.sidechain:
            return None, Record(raw, [])
        return entry, None

    def line(self, line: Line) -> list[Item]:
        """What this line tells: the meta its record carries, then the records it
        completes (none while a message is held open)."""
        raw = line.data if line.data is not None else line.raw
        entry, record = self._entry(line, raw)
        messages: list[dict[str, Any]] = []
        learnt: list[Item] = []
        if entry is not None:
            learnt = _learnt(entry)
            try:
                messages = convert(entry)
            except _CONVERT_ERRORS as exc:
                record = Record(raw, [], f"line {line.number}: {exc}")
        if record is not None:  # bookkeeping: it neither opens nor closes a message
            if self.current is not None:
                self.current.records.append(record)
                return learnt
            return [*learnt, *self._out([record])]
        return [*learnt, *self._message(entry, raw, messages)]

    def _message(self, entry: dict[str, Any], raw: bytes,
                 messages: list[dict[str, Any]]) -> list[Record]:
        moment = moment_ns(entry.get("timestamp"))
        msg_id = _message_id(entry)
        current = self.current
        if current is not None and msg_id == current.msg_id and len(messages) <= 1:
            current.add(raw, messages[0] if messages else None, moment)
            return []
        if current is not None and msg_id is None and current.answers(messages):
            current.records.append(Record(raw, [(m, moment) for m in messages]))
            return []  # its next block may follow: held with it
        out = self._out(current.done()) if current is not None else []
        self.current = None
        if msg_id is not None and len(messages) <= 1:
            self.current = _Open(msg_id, self.count + 1)
            self.current.add(raw, messages[0] if messages else None, moment)
            return out
        return out + self._out([Record(raw, [(m, moment) for m in messages])])

    def end(self, settled: bool) -> list[Item]:
        """What is held open at the end: yielded when the transcript is settled, and
        its first record named (OPEN_FROM) so that the next import reads it again (#49);
        else counted as `open` in the result."""
        if self.current is None:
            return [Learnt(dropped=(OPEN_FROM,))]
        if settled:
            first = self.current.first
            return [Learnt(dropped=(OPEN_FROM,), meta={OPEN_FROM: first}),
                    *self._out(self.current.done())]
        return [Learnt(dropped=(OPEN_FROM,), report={"open": len(self.current.records)})]


def _learnt(entry: dict[str, Any]) -> list[Item]:
    """The meta a message record carries (its cwd, its git branch)."""
    found = {key: value for name, key in (("cwd", "cwd"), ("gitBranch", "git_branch"))
             if (value := entry.get(name)) and isinstance(value, str)}
    return [Learnt(meta=found)] if found else []


def read(path: Path, sidechain: bool, settled: bool, limit: int = MAX_RECORD_BYTES,
         owes: str | None = None, skip: int = 0, *, ready: bool = True) -> Iterator[Item]:
    """The records of a transcript for the main conversation or for its sidechains; an
    assistant message still being written (see the module) is held back, with the records
    after it. The first `skip` records are passed unparsed (Unit.skips). `owes`: the key
    of the side pass the main one's cursor names (records.OWED) when it read a sidechain.
    Not `ready` (its head held no message record): nothing, so that no cursor names its
    session before what it is named after is known. Learnt: `open` (records held back at
    the end), `sidechain` (the main pass saw a sidechain record), its records' meta."""
    reader = _Reader(sidechain, limit, skip)
    yield Learnt(report={"open": 0})
    if not ready:
        return
    side = False
    with open_input(path) as handle:
        for line in lines(handle, limit):
            if not line.complete:
                break  # still being written: the next import reads it whole
            if not sidechain and not side and line.data is not None and \
                    _SIDE.search(line.data):
                side = True  # its sidechains' pass is worth reading
                yield Learnt(report={"sidechain": True})
            yield from reader.line(line)
    yield from reader.end(settled)
    if owes is not None and side:
        yield Learnt(meta={OWED: owes})


HEAD_LINES = 1000  # read for the first message record at most


def _head(file: Path, limit: int) -> dict[str, Any]:
    """cwd, sessionId and agentId from the records up to the first message (user or
    assistant) record; "message": whether there is one (or HEAD_LINES were read). What a
    session is named after is known then: the same whenever its first import runs."""
    found: dict[str, Any] = {}
    if not file.is_file():
        return found
    with open_input(file) as handle:
        for count, line in enumerate(lines(handle, limit), 1):
            if not line.complete or count > HEAD_LINES:
                found["message"] = found.get("message") or count > HEAD_LINES
                break
            try:
                entry = orjson.loads(line.data) if line.data is not None else None
            except orjson.JSONDecodeError:
                continue
            if not isinstance(entry, dict):
                continue
            for key in ("cwd", "sessionId", "agentId"):
                if isinstance(entry.get(key), str) and entry[key] and key not in found:
                    found[key] = entry[key]
            if entry.get("type") in ("user", "assistant"):
                found["message"] = True
                break
    return found


def _named(head: dict[str, Any], project: str) -> str:
    """What a transcript's sessions are named after: its first records' cwd, else its
    project folder's last word."""
    first = head.get("cwd")
    return slug(Path(first).name if first else project.rsplit("-", 1)[-1]) or "project"


def _parent_transcript(file: Path, parent_uuid: str) -> Path:
    """A sub-agent's parent transcript: <project>/<uuid>.jsonl, beside its folder."""
    project = file.parent.parent.parent if file.parent.name == "subagents" else file.parent
    return project / f"{parent_uuid}.jsonl"


def _fit(name: str) -> str:
    return name.encode()[:NAME_MAX_BYTES].decode("utf-8", "ignore").rstrip("-")


def transcripts(path: Path) -> list[Path]:
    """A file, or the transcripts under a folder: the parents before their sub-agents."""
    if not path.is_dir():
        return [path]
    found = list(files(path, (".jsonl",)))
    return sorted(found, key=lambda p: (p.name.startswith("agent-"), p))


class _Transcript:
    """What one transcript's units are named after and read with."""

    def __init__(self, file: Path, session: str | None, sidechains: str, settled: bool,
                 limit: int, stat: os.stat_result) -> None:
        self.file, self.session, self.sidechains, self.limit = file, session, sidechains, limit
        self.settled, self.stat = settled, stat
        self.head = _head(file, limit)
        self.stem = file.stem
        self.agent = file.name.startswith("agent-")
        in_subagents = file.parent.name == "subagents"
        self.project = file.parent.parent.parent.name if in_subagents else file.parent.name
        self.parent_uuid = str(self.head.get("sessionId") or (
            file.parent.parent.name if in_subagents else self.stem))
        # a sub-agent is named after its parent (its own cwd may be anywhere)
        head = _head(_parent_transcript(file, self.parent_uuid), limit) if self.agent \
            else self.head
        self.name = _named(head, self.project)
        self.ready = bool(self.head.get("message"))  # no message record yet: nothing to
        # import, nor a name

    def _session(self, side: bool) -> tuple[str, str | None]:
        """The unit's session id and its parent unit's key."""
        if self.agent:  # a sub-agent's own transcript, named after its parent and full id
            agent_id = str(self.head.get("agentId") or self.stem.removeprefix("agent-"))
            parent_sid = f"cc-{self.name}-{self.parent_uuid[:8]}"
            return (self.session or _fit(f"{parent_sid}-agent-{slug(agent_id, 120) or 'x'}"),
                    f"{KIND}:{self.parent_uuid}")
        sid = (self.session or f"cc-{self.name}-{self.stem[:8]}") + ("-side" if side else "")
        return sid, f"{KIND}:{self.stem}" if side else None

    def unit(self, side: bool, resume_only: bool = False) -> Unit:
        meta: dict[str, Any] = {"path": str(self.file.resolve()), "project": self.project}
        sid, parent = self._session(side)
        owes = f"{KIND}:{self.stem}#sidechain" if not side and self.sidechains != "skip" \
            else None
        return Unit(f"{KIND}:{self.stem}" + ("#sidechain" if side else ""), KIND, sid,
                    partial(read, self.file, side, self.settled, self.limit, owes,
                            ready=self.ready), meta,
                    self.stat.st_size, self.stat.st_mtime_ns, part_of=part_of,
                    rescan=True, skips=True, parent=parent, resume_only=resume_only)


def file_units(file: Path, session: str | None, sidechains: str, *,
               quiet: float = QUIET_SECONDS, now: bool = False,
               limit: int = MAX_RECORD_BYTES) -> Iterator[Unit]:
    """The units of one transcript: its main conversation and its sidechains (a sub-agent's
    own transcript: only those)."""
    stat = file.stat()
    settled = now or time.time() - stat.st_mtime >= quiet
    transcript = _Transcript(file, session, sidechains, settled, limit, stat)
    if transcript.agent:
        if sidechains != "skip":
            yield transcript.unit(True)
        return
    main = transcript.unit(False)
    yield main  # its report (what the engine folded in) is read once the main pass is done
    if sidechains == "skip" or main.report.get("sidechain"):
        if sidechains != "skip":
            yield transcript.unit(True)
        return
    # the main pass read no sidechain record: no side pass; when it read nothing (the file
    # unchanged since it was read whole), one only to finish a side pass an earlier run
    # began and did not end (killed, a full disk)
    if "open" not in main.report:
        yield transcript.unit(True, resume_only=True)
