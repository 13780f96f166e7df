"""A session as Markdown for people: a heading per message (time and role), reasoning, tool
calls and results folded in <details>, images as links (a web address) or a placeholder
(inline bytes, never pasted into the text)."""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

import orjson

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


def _folded(summary: str, body: str) -> str:
    return f"<details><summary>{html.escape(summary)}</summary>\n\n{body}\n\n</details>\n"


def _image(part: dict[str, Any]) -> str:
    """An image part: a link to a web address, else a placeholder naming what it holds."""
    box = part.get("image_url")
    url = box.get("url") if isinstance(box, dict) else box
    if isinstance(url, str) and url.startswith(("http://", "https://")):
        return f"![image]({url.replace(')', '%29').replace(' ', '%20')})"
    if isinstance(url, str) and url.startswith("data:"):
        kind = url[5:].split(";", 1)[0] or "image"
        size = len(url.split(",", 1)[-1]) * 3 // 4
        return f"*[{html.escape(kind)}, {size:,} bytes, kept in the export]*"
    return "*[image]*"


def _parts(content: Any) -> list[str]:
    """What a message's non-text parts show."""
    out = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict) or part.get("type") == "text":
            continue
        if part.get("type") == "image_url":
            out.append(_image(part))
        else:
            out.append(f"*[{html.escape(str(part.get('type')))}]*")
    return out


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
                call_id = str(msg.get("tool_call_id"))
                out.append(_folded(f"tool result {call_id}", _fence(text)))
                continue
            reasoning = msg.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning.strip():
                out.append(_folded("reasoning", reasoning.strip()))
            if text:
                out.append(text + "\n")
            shown = _parts(msg.get("content"))
            if shown:
                out.append("\n".join(shown) + "\n")
            for call in tool_calls(msg):
                fn = call_function(call)
                out.append(_folded(f"tool call {fn.get('name')}",
                                   _fence(str(fn.get("arguments")))))
        elif line["type"] == "summary" and line.get("summary"):
            out.append("## Summary\n\n" + _fence(orjson.dumps(
                line["summary"], option=orjson.OPT_INDENT_2).decode()) + "\n")
    return "\n".join(out)
