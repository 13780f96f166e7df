"""summary.json / summary.meta.json: reading, validation and the context injection."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any, TypeGuard

import orjson

from agenvoy_cli.conversation.messages import TIME_FORMAT
from agenvoy_cli.errors import CorruptStore
from agenvoy_cli.home.files import read_json

KEYS = ("key_decisions", "past_discussions", "current_discussion")
LEGACY_KEYS = ("core_discussion", "discussion_log", "confirmed_needs", "current_conclusion")
DISCUSSED_FORMAT = "%Y-%m-%d %H:%M"

CONTEXT_TEMPLATE_FILE = "summary_context.md"  # upstream configs/prompts/, verbatim
REFUSAL_MARKERS = ("無法執行此操作", "[KARAPPO]")  # upstream drops these from the window
# list field -> its time field, as upstream's GetPrompt filters them
DATED_LISTS = (("past_discussions", "last_discussed"), ("discussion_log", "time"))


def context_template() -> str:
    from importlib import resources

    text = (resources.files("agenvoy_cli") / "prompts" / CONTEXT_TEMPLATE_FILE).read_text("utf-8")
    return text.strip()


def is_valid_summary(data: Any) -> TypeGuard[dict[str, Any]]:
    """At least two of the three keys (or two of the legacy keys), as upstream accepts."""
    if not isinstance(data, dict):
        return False
    return (sum(k in data for k in KEYS) >= 2) or (sum(k in data for k in LEGACY_KEYS) >= 2)


def has_content(data: Any) -> bool:
    return isinstance(data, dict) and any(v not in (None, "", [], {}) for v in data.values())


def read_summary(path: Path) -> dict[str, Any] | None:
    data = read_json(path, default=None, hint="fix or delete it; `summarize` rebuilds it")
    return data if has_content(data) else None


def is_refusal(message: dict[str, Any]) -> bool:
    """A refusal or guardrail reply that upstream keeps out of the context window (only a
    string content is looked at, as upstream does)."""
    content = message.get("content")
    return isinstance(content, str) and any(mark in content for mark in REFUSAL_MARKERS)


def drop_stale_discussions(summary: dict[str, Any], cutoff: datetime | None) -> dict[str, Any]:
    """Upstream's filter: in past_discussions (last_discussed) and the legacy discussion_log
    (time), an entry dated before the cutoff is dropped; an entry that is not an object is
    dropped; an undated or unparsable one is kept. Dates are minutes, the cutoff seconds."""
    if cutoff is None:
        return summary
    out = dict(summary)
    for field, time_field in DATED_LISTS:
        items = out.get(field)
        if not isinstance(items, list):
            continue
        kept = []
        for item in items:
            if not isinstance(item, dict):
                continue
            stamp = item.get(time_field)
            if not isinstance(stamp, str):
                kept.append(item)
                continue
            try:
                when = datetime.strptime(stamp, DISCUSSED_FORMAT)
            except ValueError:
                kept.append(item)
                continue
            if when >= cutoff:
                kept.append(item)
        out[field] = kept
    return out


def go_json(data: Any) -> str:
    """JSON as Go's json.Marshal writes a map: compact, keys sorted, <, >, & escaped, so the
    injected text is the same whichever program builds the context."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


def context_message(summary: dict[str, Any], cutoff: datetime | None) -> dict[str, str]:
    body = go_json(drop_stale_discussions(summary, cutoff))
    return {"role": "system", "content": context_template().replace("{{.Summary}}", body)}


# -- summarize helpers (read-only: writing is the summarizer's, under the locks) -------------
CURSOR_KEY = "last_message_time"
_FENCED = re.compile(r"```(?:json|summary)?[ \t]*\r?\n(.*?)\r?\n[ \t]*```", re.S | re.I)
_TAGGED = re.compile(r"<summary>\s*(.*?)\s*</summary>", re.S | re.I)
_BRACKETED = re.compile(r"\[summary\]\s*(.*?)\s*\[/summary\]", re.S | re.I)
_THINKING = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.S | re.I)
_MAX_BARE_STARTS = 32  # '{' positions tried for bare JSON: bounds the work on garbage


def read_cursor(path: Path) -> dict[str, Any]:
    """summary.meta.json as a dict ({} when missing). A last_message_time that is not
    'YYYY-MM-DD HH:MM:SS' is refused rather than guessed (it decides what is re-sent)."""
    data = read_json(path, default={}, hint="fix or delete it")
    if not isinstance(data, dict):
        raise CorruptStore(f"{path} is not a JSON object; fix or delete it")
    stamp = data.get(CURSOR_KEY)
    if stamp not in (None, ""):
        try:
            datetime.strptime(str(stamp), TIME_FORMAT)
        except ValueError:
            raise CorruptStore(f"{path}: {CURSOR_KEY} {stamp!r} is not YYYY-MM-DD HH:MM:SS; "
                               "fix or delete it") from None
    return data


def _load_valid(text: str) -> dict[str, Any] | None:
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return data if is_valid_summary(data) else None


def parse_summary_reply(text: str) -> dict[str, Any] | None:
    """The summary in an LLM reply, as upstream accepts it: a ```json fence, a <summary>
    block, a [summary] block, else bare JSON; only a valid summary counts."""
    text = _THINKING.sub("", text)  # reasoning models may put braces in their thoughts
    for pattern in (_FENCED, _TAGGED, _BRACKETED):
        for match in pattern.finditer(text):
            found = _load_valid(match.group(1))
            if found is not None:
                return found
    decoder = json.JSONDecoder()
    start = text.find("{")
    for _ in range(_MAX_BARE_STARTS):
        if start < 0:
            break
        try:
            data, _end = decoder.raw_decode(text, start)  # trailing prose is tolerated
        except ValueError:
            data = None
        if is_valid_summary(data):
            return data
        start = text.find("{", start + 1)
    return None
