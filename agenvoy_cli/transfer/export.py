"""`agenvoy export`: sessions out of the home, as JSON Lines (lossless: what `import
agenvoy` rebuilds the session from) or Markdown (for people). Reads only; never writes
inside the home."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from agenvoy_cli.conversation import archive
from agenvoy_cli.conversation.messages import Message, content_text, ns_to_local, strip_header
from agenvoy_cli.conversation.store import Store
from agenvoy_cli.errors import BadInput
from agenvoy_cli.home.files import read_json
from agenvoy_cli.transfer.agenvoy import FORMAT_VERSION

EXPORT_FORMATS = ("jsonl", "markdown")


def outside_home(store: Store, output: Path) -> Path:
    home = store.layout.home.resolve()
    target = output.expanduser().resolve()
    if target == home or home in target.parents:
        raise BadInput(f"--output {output} is inside the home {home}: export never writes there")
    return target


def _rows(store: Store, sid: str) -> tuple[list[Message], set[int], Any]:
    with store.read_lock():
        store.require(sid)
        conn = store.db_readonly()
        rows = archive.rows_from(conn, sid) if conn is not None else []
        if rows:
            live = {m.seq for m in archive.rows_from(conn, sid, live=True)}
        else:  # never archived (history.json only): what it holds, all live
            rows = store.recent(sid)
            live = {m.seq for m in rows}
        trim = store.trim_point(sid)
        summary = read_json(store.layout.summary(sid), default=None)
        cursor = read_json(store.layout.summary_meta(sid), default=None)
    return rows, live, (trim, summary, cursor)


def jsonl_lines(store: Store, sid: str) -> Iterator[bytes]:
    rows, live, ((start_seq, start_at), summary, cursor) = _rows(store, sid)
    yield orjson.dumps({"type": "session", "format_version": FORMAT_VERSION,
                        "session_id": sid, "start_seq": start_seq, "start_at": start_at,
                        "message_count": len(rows), "summary": summary,
                        "cursor": cursor}) + b"\n"
    for m in rows:
        yield orjson.dumps({"type": "message", "session_id": sid, "seq": m.seq,
                            "send_at": m.send_at, "time": ns_to_local(m.send_at),
                            "role": m.role, "gone": m.seq not in live,
                            "message": m.raw}) + b"\n"


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _block(text: str, lang: str = "") -> str:
    fence = _fence(text)
    return f"{fence}{lang}\n{text}\n{fence}\n"


def _details(summary: str, body: str) -> str:
    return f"<details>\n<summary>{summary}</summary>\n\n{body}\n</details>\n"


def markdown_text(store: Store, sid: str) -> str:
    rows, _live, (_trim, summary, _cursor) = _rows(store, sid)
    out = [f"# Session {sid}\n"]
    if isinstance(summary, dict) and summary:
        out.append(_details("Summary", _block(orjson.dumps(
            summary, option=orjson.OPT_INDENT_2).decode(), "json")))
    for m in rows:
        raw = m.raw
        out.append(f"## {ns_to_local(m.send_at)} · {m.role}\n")
        if m.role == "tool":
            label = f"tool result {raw.get('tool_call_id') or ''}".strip()
            out.append(_details(label, _block(strip_header(content_text(raw.get("content"))))))
            continue
        reasoning = raw.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            out.append(_details("reasoning", _block(reasoning)))
        text = strip_header(content_text(raw.get("content")))
        if text:
            out.append(text + "\n")
        content = raw.get("content")
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") != "text":
                out.append(f"*[{part.get('type')} part]*\n")
        for call in raw.get("tool_calls") or []:
            fn = call.get("function") or {} if isinstance(call, dict) else {}
            out.append(_details(f"tool call {fn.get('name') or ''} {call.get('id') or ''}"
                                .strip(), _block(str(fn.get("arguments") or ""), "json")))
    return "\n".join(out)


def run_export(store: Store, ids: list[str], all_sessions: bool, fmt: str,
               output: Path | None, stdout: IO[bytes]) -> dict[str, Any]:
    if fmt not in EXPORT_FORMATS:
        raise BadInput(f"unknown export format {fmt!r} (one of {', '.join(EXPORT_FORMATS)})")
    if bool(ids) == all_sessions:
        raise BadInput("give SESSION... or --all (not both)")
    ids = store.session_ids() if all_sessions else ids
    for sid in ids:
        store.require(sid)
    target = outside_home(store, output) if output is not None else None
    written: list[str] = []
    if fmt == "jsonl":
        handle = open(target, "wb") if target else stdout
        try:
            for sid in ids:
                for line in jsonl_lines(store, sid):
                    handle.write(line)
        finally:
            if target:
                handle.close()
        written = [str(target)] if target else []
    else:
        if target is not None and (len(ids) > 1 or target.is_dir()):
            target.mkdir(parents=True, exist_ok=True)
        for sid in ids:
            text = markdown_text(store, sid).encode()
            if target is None:
                stdout.write(text + b"\n")
                continue
            path = target / f"{sid}.md" if target.is_dir() else target
            path.write_bytes(text)
            written.append(str(path))
    return {"format": fmt, "session_ids": ids, "count": len(ids), "files": written}
