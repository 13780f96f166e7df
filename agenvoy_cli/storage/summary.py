"""summary.json / summary.meta.json: reading, validation and the context injection."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from agenvoy_cli.storage.jsonfs import read_json

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
