"""Bringing histories in and taking them out: `agenvoy import` (Claude Code, Codex CLI,
ChatGPT exports, OpenAI-style messages, other homes) and `agenvoy export` (lossless JSONL,
Markdown for people). Every write goes through the conversation's Store."""
