"""What the import tests share: the fixtures' paths and the rule a provider holds a message
list to."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "transfer"
PROJECT = DATA / "claude-turn" / "-home-ada-src-shop"
# a Claude Code turn: thinking, text, two tool_use, two results, a second answer
TURN = PROJECT / "5b0d8e21-3c4f-4a7e-9d12-8f6a2b7c1e90.jsonl"
AGENT = PROJECT / TURN.stem / "subagents" / "agent-a91c4e2f.jsonl"  # a sub-agent of it
# a Claude Code transcript with sidechain records (a Task sub-agent's, inline)
SIDECHAINS = DATA / "claude" / "-home-ada-src-shop" / "7f3c2a10-5b1e-4c2d-9a8f-0e1d2c3b4a59.jsonl"
CODEX = next((DATA / "codex").rglob("rollout-*.jsonl"))


def provider_errors(messages: list[dict]) -> list[str]:
    """OpenAI chat-completions rules for a message list: roles known; an assistant message
    has content or tool_calls; every tool message answers a call of the assistant message
    before its run of tool messages, each call at most once."""
    errors, open_calls = [], set()
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            errors.append(f"{i}: role {role!r}")
        if role == "assistant":
            if not m.get("content") and not m.get("tool_calls"):
                errors.append(f"{i}: assistant with neither content nor tool_calls")
            open_calls = {c["id"] for c in m.get("tool_calls") or []}
        elif role == "tool":
            if m.get("tool_call_id") not in open_calls:
                errors.append(f"{i}: tool message without its call")
            open_calls.discard(m.get("tool_call_id"))
        else:
            open_calls = set()
    return errors


def calls_and_results(messages: list[dict]) -> tuple[list[str], list[str]]:
    calls = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    results = [m["tool_call_id"] for m in messages if m.get("role") == "tool"]
    return sorted(calls), sorted(results)


def openai_shape(messages: list[dict]) -> None:
    """Raises unless each message is one of the openai package's chat message params, and
    each call is followed by one result per call id (what the API checks beyond types)."""
    from openai.types.chat import ChatCompletionMessageParam
    from pydantic import TypeAdapter

    checked = TypeAdapter(list[ChatCompletionMessageParam]).validate_python(messages)
    for m in checked:
        for call in m.get("tool_calls") or []:  # lazily validated: walk them
            assert call["type"] == "function" and call["function"]["name"]
    assert provider_errors(messages) == []
    i = 0
    while i < len(messages):
        calls = [c["id"] for c in messages[i].get("tool_calls") or []]
        answers = [m.get("tool_call_id") for m in messages[i + 1:i + 1 + len(calls)]]
        assert answers == calls, (i, calls, answers)
        i += 1 + len(calls)
