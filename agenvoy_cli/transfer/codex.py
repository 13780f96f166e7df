"""Codex CLI rollouts: ~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl, lines of
{timestamp, type, payload}. response_item payloads become messages: message (user,
assistant; developer -> system), reasoning (-> reasoning_content of the next assistant
message), function_call / custom_tool_call / local_shell_call (-> assistant tool_calls) and
their outputs (-> tool messages), web_search_call (-> a web_search tool call with its query,
and a tool message saying the rollout keeps no results). session_meta gives the id and cwd;
the rest is skipped. Codex writes each item once it is complete; calls made together
(no output between them) are one assistant message; a call whose output is not written yet
is held back (with what follows it) until it is, or the rollout has been quiet for `quiet`
seconds."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from agenvoy_cli.conversation.messages import stored_form
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

CALLS = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output")


def _parts(content: Any) -> str | list[dict[str, Any]] | None:
    parts = []
    for part in content if isinstance(content, list) else []:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str) \
                and part["text"].strip():
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
    return text_parts(parts)


def _output(output: Any) -> Any:
    if isinstance(output, dict):
        output = output.get("content", "")
    if isinstance(output, list):
        return _parts(output) or ""
    return output if isinstance(output, str) else orjson.dumps(output).decode()


def _call(call_id: Any, name: Any, args: Any, reasoning: list[str]) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {
            "name": name, "arguments": args if isinstance(args, str)
            else orjson.dumps(args).decode()}}]}
    if reasoning:
        msg["reasoning_content"] = "\n".join(reasoning)
        reasoning.clear()
    return msg


def _message(payload: dict[str, Any], reasoning: list[str]) -> list[dict[str, Any]]:
    content = _parts(payload.get("content"))
    if content is None:
        return []
    msg = stored_form({"role": payload.get("role"), "content": content})
    if msg["role"] == "assistant" and reasoning:
        msg["reasoning_content"] = "\n".join(reasoning)
        reasoning.clear()
    return [msg]


def _reasoning(payload: dict[str, Any], reasoning: list[str]) -> list[dict[str, Any]]:
    """No message: its texts wait for the message they lead to."""
    texts = [s.get("text") for s in _list(payload.get("summary")) if isinstance(s, dict)]
    texts += [c.get("text") for c in _list(payload.get("content")) if isinstance(c, dict)]
    reasoning.extend(t for t in texts if isinstance(t, str) and t)
    return []


def _a_call(payload: dict[str, Any], reasoning: list[str]) -> list[dict[str, Any]]:
    kind = payload.get("type")
    call_id = payload.get("call_id") or payload.get("id")
    if kind == "local_shell_call":
        return [_call(call_id, "local_shell", payload.get("action") or {}, reasoning)]
    args = payload.get("arguments") if kind == "function_call" else \
        {"input": payload.get("input")}
    return [_call(call_id, payload.get("name"), args, reasoning)]


def _an_output(payload: dict[str, Any], reasoning: list[str]) -> list[dict[str, Any]]:
    return [{"role": "tool", "tool_call_id": payload.get("call_id"),
             "content": _output(payload.get("output"))}]


def _web_search(payload: dict[str, Any], reasoning: list[str]) -> list[dict[str, Any]]:
    """A call and its output in one (the rollout keeps no results)."""
    action = payload.get("action")
    action = action if isinstance(action, dict) else {}
    call_id = payload.get("id") or payload.get("call_id") or "web_search"
    status = payload.get("status") if isinstance(payload.get("status"), str) else "done"
    return [_call(call_id, "web_search", action, reasoning),
            {"role": "tool", "tool_call_id": call_id,
             "content": f"web search {status} (the rollout keeps no results)"}]


Converter = Callable[[dict[str, Any], list[str]], list[dict[str, Any]]]


def _converter(kind: Any) -> Converter | None:
    if kind in CALLS:
        return _a_call
    if kind in OUTPUTS:
        return _an_output
    return {"message": _message, "reasoning": _reasoning,
            "web_search_call": _web_search}.get(kind) if isinstance(kind, str) else None


def convert(payload: dict[str, Any], reasoning: list[str]) -> list[dict[str, Any]]:
    """A response item's messages; `reasoning` carries texts to the message they lead to."""
    converter = _converter(payload.get("type"))
    return converter(payload, reasoning) if converter is not None else []


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _merged(held: list[Record], first: int) -> list[Record]:
    """Held records whose calls were made together (no output between them): one assistant
    message with every call, on the last call's record (`start`: the first's number)."""
    places = [i for i, r in enumerate(held) if r.messages]
    if len(places) < 2:
        return held
    message = dict(held[places[0]].messages[0][0])
    moment = held[places[0]].messages[0][1]
    reasoning = [message.get("reasoning_content")]
    for i in places[1:]:
        more = held[i].messages[0][0]
        message["tool_calls"] = message["tool_calls"] + more["tool_calls"]
        reasoning.append(more.get("reasoning_content"))
    if any(reasoning):
        message["reasoning_content"] = "\n".join(t for t in reasoning if t)
    out = [r._replace(messages=[]) for r in held]
    out[places[-1]] = out[places[-1]]._replace(messages=[(message, moment)], start=first)
    return out


class _Rollout:
    """read()'s state over one pass: the records yielded and those held back."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.reasoning: list[str] = []
        self.held: list[Record] = []  # from a call whose output, or reasoning whose
        # message, is not there
        self.since = 0  # the place in held of the record that began the waiting reasoning
        self.count = 0  # records yielded

    def line(self, line: Line) -> list[Item]:
        """What this line tells: the meta it carries, then the records it lets go (none
        while it is held back)."""
        waiting = bool(self.reasoning)  # before this record
        learnt: list[Item] = []
        if line.data is None:
            record = Record(line.raw, [], too_long(line, self.limit))
        else:
            record, learnt = _record(line.raw, line.number, self.reasoning)
        calls = [m for m, _ in record.messages if m.get("tool_calls")]
        answered = any(m.get("role") != "assistant" or not m.get("tool_calls")
                       for m, _ in record.messages)
        out: list[Item] = learnt
        if self.held and answered:
            merged = _merged(self.held, self.count + 1)
            self.count += len(merged)
            out = [*out, *merged]
            self.held = []
        if self.held or (calls and not answered) or self.reasoning:
            self.since = self.since if waiting else len(self.held)
            self.held.append(record)  # (reasoning waits for the message it leads to)
            return out
        self.count += 1
        return [*out, record]


def read(path: Path, settled: bool, limit: int = MAX_RECORD_BYTES, skip: int = 0, *,
         quiet: bool = True) -> Iterator[Item]:
    """The records of a rollout; a call without its output, or reasoning without the message
    it leads to, is held back with what follows it. The first `skip` records are passed
    unparsed (Unit.skips). `settled` and not `quiet` (the caller says the turn ended, the
    file is fresh): reasoning at the end still waits for its message (Codex notifies the
    turn's end before it has written the last one, at times). Learnt: `open` (records held
    back at the end), the session's cwd and git branch."""
    rollout = _Rollout(limit)
    yield Learnt(report={"open": 0})
    with open_input(path) as handle:
        for line in lines(handle, limit):
            if not line.complete:
                break  # still being written: the next import reads it whole
            if rollout.count < skip:
                rollout.count += 1
                yield Record(line.raw, [])
                continue
            yield from rollout.line(line)
    held = rollout.held
    keep = rollout.since if rollout.reasoning and not quiet else len(held)
    if settled:
        yield from _merged(held[:keep], rollout.count + 1)
        held = held[keep:]
    yield Learnt(report={"open": len(held)})


def _record(raw: bytes, number: int, reasoning: list[str]) -> tuple[Record, list[Item]]:
    """A line's record, and the meta it carries (a session_meta line's)."""
    try:
        entry = orjson.loads(raw)
        payload = entry.get("payload") if isinstance(entry, dict) else None
        if not isinstance(payload, dict):
            raise ValueError("no payload object")
    except ValueError as exc:
        return Record(raw, [], f"line {number}: {decode_error(exc)}"), []
    if entry.get("type") == "session_meta":
        return Record(raw, []), _session_meta(payload)
    if entry.get("type") != "response_item":
        return Record(raw, []), []
    moment = moment_ns(entry.get("timestamp"))
    return Record(raw, [(m, moment) for m in convert(payload, reasoning)]), []


def _session_meta(payload: dict[str, Any]) -> list[Item]:
    found: dict[str, Any] = {}
    if isinstance(payload.get("cwd"), str):
        found["cwd"] = payload["cwd"]
    git = payload.get("git")
    branch = git.get("branch") if isinstance(git, dict) else None
    if isinstance(branch, str) and branch:
        found["git_branch"] = branch
    return [Learnt(meta=found)] if found else []


def _meta_line(file: Path, limit: int) -> dict[str, Any]:
    with open_input(file) as handle:
        for _, line in zip(range(5), lines(handle, limit)):
            try:
                entry = orjson.loads(line.data) if line.data is not None else None
            except orjson.JSONDecodeError:
                continue
            if not isinstance(entry, dict) or entry.get("type") != "session_meta":
                continue
            payload = entry.get("payload")
            if isinstance(payload, dict):
                return payload
    return {}


def rollouts(path: Path) -> list[Path]:
    return [path] if not path.is_dir() else list(files(path, (".jsonl",), "rollout-*"))


def file_unit(file: Path, session: str | None, *, quiet: float = QUIET_SECONDS,
              now: bool = False, limit: int = MAX_RECORD_BYTES) -> Unit:
    stat = file.stat()
    head = _meta_line(file, limit)
    found = head.get("id")
    ident = found if isinstance(found, str) and found else file.stem
    meta: dict[str, Any] = {"path": str(file.resolve())}
    cwd = head.get("cwd")
    cwd = cwd if isinstance(cwd, str) else ""
    name = slug(Path(cwd).name) or "session"
    still = time.time() - stat.st_mtime >= quiet
    return Unit(f"codex:{ident}", "codex", session or f"codex-{name}-{ident[:8]}",
                partial(read, file, now or still, limit, quiet=still), meta, stat.st_size,
                stat.st_mtime_ns, part_of=part_of, skips=True)
