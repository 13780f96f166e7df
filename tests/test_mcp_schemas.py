"""Issue #18: the MCP tools' structured content is the document the CLI prints with --json
(docs/schema/): checked through the official SDK's stdio client on a real server process,
bounded in time; a tool error is the CLI's error document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import agenvoy
from tests.helpers.schemas import validate
from tests.mcp_client import connect, run_async

# tool -> the CLI command whose schema its structured content follows
SCHEMA_OF = {"append_messages": "append", "get_context": "context",
             "search_chat_history": "search", "remember_error": "errors-list",
             "search_error_history": "errors-lookup", "read_error": "errors-show",
             "list_rag": "rag-list", "search_rag": "rag-search"}


def test_structured_content_validates_against_the_cli_schemas(home: Path, tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "deploy.md").write_text("# Deploying\n\nblue-green switch at the balancer\n")
    res = agenvoy("rag", "create", "notes", "--path", str(docs), "--no-vectors")
    assert res.returncode == 0, res.stderr
    record = {"tool_name": "bash", "keywords": ["perm"], "symptom": "permission denied",
              "action": "use sudo", "outcome": "resolved"}

    async def body() -> dict[str, Any]:
        out: dict[str, Any] = {}
        env = {"AGENVOY_ERRORS_SEMANTIC": "0"}
        async with connect(env=env) as s:
            async def call(tool: str, args: dict[str, Any]) -> Any:
                res = await s.call_tool(tool, args)
                out.setdefault(tool, res)
                return res

            await call("append_messages", {"session_id": "s", "messages": [
                {"role": "user", "content": "the deploy failed"},
                {"role": "assistant", "content": "retry with the blue-green switch"}]})
            await call("get_context", {"session_id": "s"})
            await call("search_chat_history", {"session_id": "s", "keyword": "deploy",
                                               "mode": "keyword", "time_range": "all"})
            rid = (await call("remember_error", record)).structured_content["records"][0]["id"]
            await call("search_error_history", {"keyword": "permission denied",
                                                "tool_name": "bash"})
            await call("read_error", {"hash": rid})
            await call("list_rag", {})
            await call("search_rag", {"mode": "keyword", "db": "notes", "q": "balancer"})
            out["error"] = await s.call_tool("get_context", {"session_id": "nope"})
        return out

    out = run_async(body)
    wrong = []
    for tool, schema in SCHEMA_OF.items():
        res = out[tool]
        assert not res.is_error, (tool, res.content)
        try:
            validate(res.structured_content, schema)
        except AssertionError as exc:
            wrong.append(f"{tool}: {str(exc).splitlines()[0]}")
    assert not wrong, "\n".join(wrong)
    assert out["error"].is_error
    validate(out["error"].structured_content, "error")
    assert out["error"].structured_content["error"]["kind"] == "not_found"
