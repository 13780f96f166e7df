"""A session as Markdown for people: a heading per message (time and role), tool calls and
results folded in <details>."""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from agenvoy_cli.conversation.messages import (
    call_function,
    content_text,
    ns_to_local,
    strip_header,
    tool_calls,
)


def _fence(text: str) -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}\n{text}\n{ticks}"


def render(lines: Iterable[dict[str, Any]]) -> str:
    out: list[str] = []
    for line in lines:
        if line["type"] == "session":
            out.append(f"# Session {line['session_id']}\n")
        elif line["type"] == "message":
            msg = line["message"]
            when = ns_to_local(line["send_at"]) if line.get("send_at") else ""
            role = msg.get("role", "?")
            out.append(f"## {when} · {role}\n".replace(" · ", " · " if when else ""))
            text = strip_header(content_text(msg.get("content"))).strip()
            if role == "tool":
                answers = html.escape(str(msg.get("tool_call_id")))
                out.append(f"<details><summary>tool result {answers}"
                           f"</summary>\n\n{_fence(text)}\n\n</details>\n")
                continue
            if text:
                out.append(text + "\n")
            for call in tool_calls(msg):
                fn = call_function(call)
                out.append(f"<details><summary>tool call {html.escape(str(fn.get('name')))}"
                           f"</summary>\n\n{_fence(str(fn.get('arguments')))}\n\n</details>\n")
        elif line["type"] == "summary" and line.get("summary"):
            import orjson

            out.append("## Summary\n\n" + _fence(orjson.dumps(
                line["summary"], option=orjson.OPT_INDENT_2).decode()) + "\n")
    return "\n".join(out)
