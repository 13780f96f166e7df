"""The text injected into the agent's next turn."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from agenvoy_cli.errormem.records import HINT_FIELD

if TYPE_CHECKING:
    from agenvoy_cli.errormem.records import Hit
    pass


def _clip(text: str, limit: int = HINT_FIELD) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def hint(hits: Sequence[Hit]) -> str:
    """The text injected into the agent's next turn; "" when nothing was found."""
    if not hits:
        return ""
    lines = [f"[ERROR_MEMORY] {len(hits)} earlier tool failure(s) related to this error, "
             "most relevant first:"]
    for n, h in enumerate(hits, 1):
        r = h.record
        head = f"{n}. tool={r.tool_name} outcome={r.outcome}"
        if r.error_type:
            head += f" error_type={r.error_type}"
        lines.append(head)
        lines.append(f"   symptom: {_clip(r.symptom)}")
        if r.cause:
            lines.append(f"   cause: {_clip(r.cause)}")
        if r.outcome == "resolved":
            lines.append(f"   MUST APPLY this fix (it resolved the error): {_clip(r.action)}")
        else:
            how = "it failed" if r.outcome == "failed" else "it was abandoned"
            lines.append(f"   MUST AVOID this strategy ({how}): {_clip(r.action)}")
    lines.append("Apply the fixes marked MUST APPLY and avoid the strategies marked MUST "
                 "AVOID in your next call. Do NOT output this message as your response.")
    return "\n".join(lines)


