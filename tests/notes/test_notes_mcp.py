"""Knowledge notes over MCP (#39), through the official SDK's stdio client on a real server:
find_knowledge with upstream's schema, modes, limits and answers (agenvoy/Agenvoy v0.32.7
internal/tools/knowledge/findKnowledge.go, internal/knowledge/search.go), the spec-side
search_notes / read_note / save_note, and get_context saying whether notes exist."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import agenvoy
from tests.helpers.schemas import validate
from tests.mcp_client import connect, run_async, text_of

pytest.importorskip("mcp")

KNOWLEDGE = {"mode": ("string", ["search", "list", "read"], "search"),
             "keywords": ("array", None, None),
             "name": ("string", None, None),
             "limit": ("integer", None, 5)}


def add(name: str, content: str) -> None:
    from agenvoy_cli.api import Memory

    with Memory() as memory:  # this test's home (AGENVOY_HOME)
        memory.add_note(content, name)


def note_names(home: Path) -> list[str]:
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        return [r[0] for r in conn.execute("SELECT name FROM notes ORDER BY name")]


def test_find_knowledge_schema_is_upstreams() -> None:
    async def body() -> dict[str, Any]:
        out = {}
        for which in ("spec", "agenvoy", "both"):
            async with connect("--tools", which) as s:
                out[which] = {t.name: t for t in (await s.list_tools()).tools}
        return out

    out = run_async(body)
    assert "find_knowledge" not in out["spec"]
    assert {"search_notes", "read_note", "save_note"} <= set(out["spec"])
    assert {"find_knowledge", "save_note"} <= set(out["agenvoy"])
    assert not {"search_notes", "read_note"} & set(out["agenvoy"])
    for which in ("agenvoy", "both"):
        schema = out[which]["find_knowledge"].input_schema
        assert {k: (v["type"], v.get("enum"), v.get("default"))
                for k, v in schema["properties"].items()} == KNOWLEDGE
        assert "required" not in schema
        assert schema["properties"]["keywords"]["items"] == {"type": "string"}
        assert out[which]["find_knowledge"].description.startswith(
            "Notes the operator wrote — house rules")


def test_find_knowledge_in_each_mode(home: Path) -> None:
    add("deploy", "Deploy through the release branch. <b> & done")
    add("部署規範", "上線前先跑 deploy 檢查，再部署。")
    add("coffee", "oat milk flat white")
    for n in range(25):
        add(f"misc {n:02d}", "filler deploy")

    async def body() -> dict[str, Any]:
        async with connect("--tools", "agenvoy") as s:
            call = s.call_tool
            return {
                "list": await call("find_knowledge", {"mode": "list"}),
                "omitted": await call("find_knowledge", {}),  # no keywords, no name: list
                "search": await call("find_knowledge", {"keywords": ["DEPLOY", "部署"]}),
                "limit": await call("find_knowledge", {"mode": "search",
                                                       "keywords": ["deploy"], "limit": 30}),
                "three": await call("find_knowledge", {"keywords": ["deploy"], "limit": 3}),
                "upper": await call("find_knowledge", {"mode": " SEARCH ",
                                                       "keywords": ["oat"]}),
                "none": await call("find_knowledge", {"keywords": ["kubernetes"]}),
                "blank": await call("find_knowledge", {"keywords": ["  ", ""]}),
                "read": await call("find_knowledge", {"name": "deploy"}),
                "cjk": await call("find_knowledge", {"mode": "read", "name": " 部署規範 "}),
                "missing": await call("find_knowledge", {"mode": "read", "name": "nope"}),
                "no_name": await call("find_knowledge", {"mode": "read"}),
                "no_kw": await call("find_knowledge", {"mode": "search"}),
                "bad": await call("find_knowledge", {"mode": "peek"}),
                "typed": await call("find_knowledge", {"keywords": "deploy"}),
            }

    out = run_async(body)
    names = json.loads(text_of(out["list"]))
    assert names[:2] == ["coffee", "deploy"] and names[-1] == "部署規範" and len(names) == 28
    assert text_of(out["omitted"]) == text_of(out["list"])
    assert out["list"].structured_content["count"] == 28
    hits = json.loads(text_of(out["search"]))
    assert hits[0] == {"name": "部署規範", "hits": 2}  # most matched first
    assert len(hits) == 5 and all(h["hits"] == 1 for h in hits[1:])  # default limit 5
    assert len(json.loads(text_of(out["limit"]))) == 5  # above 20: the default
    assert len(json.loads(text_of(out["three"]))) == 3
    assert json.loads(text_of(out["upper"])) == [{"name": "coffee", "hits": 1}]
    assert text_of(out["none"]) == "no matching note"
    assert text_of(out["blank"]) == "no matching note"  # every keyword empty once trimmed
    record = json.loads(text_of(out["read"]))
    assert list(record) == ["name", "content", "updated_at"]  # upstream's Record, in order
    assert record["content"] == "Deploy through the release branch. <b> & done"
    assert "\\u003cb\\u003e \\u0026 done" in text_of(out["read"])  # Go's HTML escaping
    assert isinstance(record["updated_at"], int) and record["updated_at"] < 10**11  # seconds
    assert json.loads(text_of(out["cjk"]))["name"] == "部署規範"
    assert out["missing"].is_error and text_of(out["missing"]) == 'no note named "nope"'
    assert out["no_name"].is_error and text_of(out["no_name"]) == \
        "name is required when mode=read"
    assert out["no_kw"].is_error and text_of(out["no_kw"]) == \
        "keywords is required when mode=search"
    assert out["bad"].is_error and text_of(out["bad"]) == \
        'unknown mode "peek"; available: search, list, read'
    assert out["typed"].is_error


def test_find_knowledge_on_an_empty_home_and_the_legacy_folder(home: Path) -> None:
    async def empty() -> Any:
        async with connect("--tools", "agenvoy") as s:
            return await s.call_tool("find_knowledge", {"mode": "list"})

    assert text_of(run_async(empty)) == "no note"
    (home / "knowledge").mkdir(parents=True)
    (home / "knowledge" / "old rules.md").write_text("kept by Agenvoy v0.32.5", "utf-8")

    async def legacy() -> Any:
        async with connect("--tools", "agenvoy") as s:
            return await s.call_tool("find_knowledge", {"keywords": ["v0.32.5"]})

    assert json.loads(text_of(run_async(legacy))) == [{"name": "old rules", "hits": 1}]


def test_spec_tools_search_read_save_and_get_context(home: Path) -> None:
    env = {"AGENVOY_EMBEDDER": "python:tests.words_embedder:WordsEmbedder"}
    assert agenvoy("append", "s", "--role", "user", "--content", "hi").returncode == 0

    async def body() -> dict[str, Any]:
        async with connect("--session", "s", env=env) as s:
            call = s.call_tool
            out = {"before": await call("get_context", {})}
            out["saved"] = await call("save_note", {"content": "# Deploy rules\n\nUse the "
                                                    "release branch; never deploy on Friday."})
            out["again"] = await call("save_note", {"content": "# Deploy rules\n\nother"})
            out["bad"] = await call("save_note", {"name": "a/b", "content": "x"})
            out["found"] = await call("search_notes", {"query": "friday deploy"})
            out["keyword"] = await call("search_notes", {"query": "release",
                                                          "mode": "keyword"})
            out["read"] = await call("read_note", {"name": "Deploy rules"})
            out["gone"] = await call("read_note", {"name": "nope"})
            out["after"] = await call("get_context", {})
            return out

    out = run_async(body)
    assert out["before"].structured_content["knowledge_note_count"] == 0
    assert "[knowledge]" not in text_of(out["before"])
    assert out["saved"].structured_content["name"] == "Deploy rules"
    assert out["saved"].structured_content["source"] == "mcp"
    assert out["again"].is_error and "exists" in text_of(out["again"])
    assert out["bad"].is_error and "path separator" in text_of(out["bad"])
    found = out["found"].structured_content
    assert found["results"][0]["name"] == "Deploy rules" and found["mode"] == "hybrid"
    assert "never deploy on Friday" in found["results"][0]["snippet"]
    assert text_of(out["found"]).startswith("1. Deploy rules — ")
    assert out["keyword"].structured_content["results"][0]["matched_terms"] == ["release"]
    assert text_of(out["read"]).startswith("# Deploy rules\n\n# Deploy rules")
    assert out["gone"].is_error and out["gone"].structured_content["error"]["kind"] == \
        "not_found"
    after = out["after"].structured_content
    assert after["knowledge_note_count"] == 1 and "[knowledge]" in text_of(out["after"])
    validate(out["saved"].structured_content, "notes-add")
    validate(found, "notes-search")
    validate(out["read"].structured_content, "notes-show")
    validate(after, "context")
    assert note_names(home) == ["Deploy rules"]
