"""Bringing histories in and taking them out: `agenvoy import` (Claude Code, Codex CLI,
ChatGPT exports, OpenAI-style messages, other homes) and `agenvoy export` (lossless JSONL,
Markdown for people). Every write goes through the conversation's Store."""

from agenvoy_cli.exports import lazy

# What the layers above use, and the room that holds it (None: the room itself).
_EXPORTS: dict[str, str | None] = {
    "MAX_INPUT": "hooks",
    "claude_code_event": "hooks",
    "codex_notify": "hooks",
    "log_line": "hooks",
    "parse_event": "hooks",
    "export": "service",
    "import_": "service",
    "origins": "sources",
    "parents": "sources",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy(__name__, _EXPORTS)
