"""summary.json / summary.meta.json: reading, validation and the context injection."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from agenvoy_cli.conversation.messages import TIME_FORMAT
from agenvoy_cli.errors import CorruptStore
from agenvoy_cli.home.files import read_json

KEYS = ("key_decisions", "past_discussions", "current_discussion")
LEGACY_KEYS = ("core_discussion", "discussion_log", "confirmed_needs", "current_conclusion")
DISCUSSED_FORMAT = "%Y-%m-%d %H:%M"

CONTEXT_TEMPLATE = """# Prior Conversation Context

The following is a background summary of prior discussion in this session, provided **for your reference only** so you understand what has been discussed, decided, or is still pending.

**Strict rules:**
- This is context, not a task. Do NOT generate, echo, or reproduce a summary in your reply.
- Never output a `<summary>...</summary>` block, `[summary]...[/summary]` block, or any JSON summary structure.
- Never quote, paraphrase, or restate the JSON below unless the user explicitly asks for it.
- Summary maintenance runs separately on a schedule — it is never your job in this turn.

**Prior summary (reference only):**
```json
{summary}
```"""  # noqa: E501 - upstream's summary_context.md, verbatim


def is_valid_summary(data: Any) -> bool:
    """At least two of the three keys (or two of the legacy keys), as upstream accepts."""
    if not isinstance(data, dict):
        return False
    return (sum(k in data for k in KEYS) >= 2) or (sum(k in data for k in LEGACY_KEYS) >= 2)


def has_content(data: Any) -> bool:
    return isinstance(data, dict) and any(v not in (None, "", [], {}) for v in data.values())


def read_summary(path: Path) -> dict[str, Any] | None:
    data = read_json(path, default=None, hint="fix or delete it; `summarize` rebuilds it")
    return data if has_content(data) else None


def drop_stale_discussions(summary: dict[str, Any], oldest: datetime | None) -> dict[str, Any]:
    """past_discussions last discussed before the oldest window message are dropped."""
    past = summary.get("past_discussions")
    if oldest is None or not isinstance(past, list):
        return summary
    floor = oldest.replace(second=0, microsecond=0)
    kept = []
    for item in past:
        stamp = item.get("last_discussed") if isinstance(item, dict) else None
        try:
            when = datetime.strptime(str(stamp), DISCUSSED_FORMAT)
        except ValueError:
            kept.append(item)  # undated entries are kept, as upstream does
            continue
        if when >= floor:
            kept.append(item)
    return {**summary, "past_discussions": kept}


def context_message(summary: dict[str, Any], oldest: datetime | None) -> dict[str, str]:
    body = orjson.dumps(drop_stale_discussions(summary, oldest), option=orjson.OPT_INDENT_2)
    return {"role": "system", "content": CONTEXT_TEMPLATE.format(summary=body.decode())}


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
