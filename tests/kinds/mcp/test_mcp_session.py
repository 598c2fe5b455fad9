"""The mcp kind's client layer against real MCP servers: stdio and streamable HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_servers import (
    sdk_server_argv,
    sdk_server_over_http,
    server_memory_argv,
    server_memory_over_http,
)

from benchd.errors import TargetProtocolError, TargetUnreachable
from benchd.kinds.mcp.config import McpConfig, SearchTool, ToolMap, WriteTool
from benchd.kinds.mcp.connect import open_session
from benchd.kinds.mcp.session import McpSession, McpToolError
from benchd.kinds.mcp.tools import ToolStore, map_problems
from benchd.redact import clear_secrets, register_secret

pytestmark = pytest.mark.anyio

NODES = SearchTool(name="search_nodes", arguments={"query": "{q}"}, ids="entities[*].name")


def stdio(argv: list[str], env: dict[str, str] | None = None, **kw: Any) -> McpConfig:
    return McpConfig(
        tools=kw.pop("tools", ToolMap(search=NODES)),
        command=argv[0],
        args=tuple(argv[1:]),
        env=env or {},
        timeout_s=60.0,
        **kw,
    )


def entity(name: str, text: str) -> dict[str, Any]:
    return {"name": name, "entityType": "memory", "observations": [text]}


async def test_server_memory_over_stdio_writes_its_configured_file_and_searches(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "benchd.jsonl"
    session = open_session(stdio(server_memory_argv(), {"MEMORY_FILE_PATH": str(memory)}), None)
    try:
        tools = await session.list_tools()
        assert {"create_entities", "search_nodes", "read_graph", "delete_entities"} <= set(tools)
        await session.call_tool("create_entities", {"entities": [entity("m1", "the red kite")]})
        answer = await session.call_tool("search_nodes", {"query": "kite"})
        assert [e["name"] for e in answer.structured["entities"]] == ["m1"]
        assert session.server is not None and session.server.name == "memory-server"
    finally:
        await session.aclose()
    assert json.loads(memory.read_text())["name"] == "m1"


async def test_a_tool_error_is_a_target_error_carrying_the_tools_message(tmp_path: Path) -> None:
    env = {"MEMORY_FILE_PATH": str(tmp_path / "m.jsonl")}
    session = open_session(stdio(server_memory_argv(), env), None)
    try:
        with pytest.raises(McpToolError) as caught:
            await session.call_tool("search_nodes", {})
    finally:
        await session.aclose()
    assert "search_nodes" in str(caught.value) and "query" in str(caught.value)
    assert caught.value.kind == "tool_error"  # not an HTTP status: the call itself went fine


async def test_a_tool_errors_text_is_masked_then_cut_to_one_line() -> None:
    secret = "sk-tool-0123456789abcdef"
    register_secret(secret)
    text = f"upstream refused key {secret}\n" + "x" * 5000
    session = open_session(stdio(sdk_server_argv(), {"MEMSERVER_SEARCH_ERROR": text}), None)
    try:
        with pytest.raises(McpToolError) as caught:
            await session.call_tool("search_memories", {"user_id": "u", "query": "q"})
    finally:
        await session.aclose()
        clear_secrets()
    message = str(caught.value)
    assert "tool 'search_memories' failed: " in message and "upstream refused key" in message
    assert secret not in message and "sk-tool" not in message
    assert "\n" not in message and len(message) < 600 and "x" * 200 in message


async def test_concurrent_calls_share_one_stdio_process_and_each_gets_its_answer() -> None:
    session = open_session(stdio(sdk_server_argv()), None)
    try:
        memories = [{"id": f"m{i}", "content": f"topic{i} note"} for i in range(8)]
        await session.call_tool("add_memories", {"user_id": "u", "memories": memories})
        got: dict[int, str] = {}

        async def one(i: int) -> None:
            args = {"user_id": "u", "query": f"topic{i}", "limit": 1}
            answer = await session.call_tool("search_memories", args)
            got[i] = answer.structured["results"][0]["id"]

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(one, i)
        assert got == {i: f"m{i}" for i in range(8)}
        assert session.starts == 1
    finally:
        await session.aclose()


async def test_a_line_past_max_line_bytes_is_decode_and_the_next_call_starts_over(
    tmp_path: Path,
) -> None:
    env = {"MEMORY_FILE_PATH": str(tmp_path / "m.jsonl")}
    big = open_session(stdio(server_memory_argv(), env), None)
    try:
        await big.call_tool("create_entities", {"entities": [entity("m1", "x" * 20_000)]})
    finally:
        await big.aclose()
    small = open_session(stdio(server_memory_argv(), env, max_line_bytes=8192), None)
    try:
        with pytest.raises(TargetProtocolError) as caught:
            await small.call_tool("read_graph", {})
        assert "max_line_bytes = 8192" in str(caught.value)
        answer = await small.call_tool("search_nodes", {"query": "absent"})
        assert answer.structured == {"entities": [], "relations": []}
        assert small.starts == 2
    finally:
        await small.aclose()


async def test_a_server_that_dies_fails_the_call_with_connect_and_the_next_call_restarts_it(
    tmp_path: Path,
) -> None:
    flag = tmp_path / "die"
    flag.touch()
    session = open_session(stdio(sdk_server_argv(), {"MEMSERVER_DIE_FLAG": str(flag)}), None)
    args = {"user_id": "u", "query": "anything"}
    try:
        with pytest.raises(TargetUnreachable) as caught:
            await session.call_tool("search_memories", args)
        assert caught.value.kind == "connect" and "exit status 3" in str(caught.value)
        answer = await session.call_tool("search_memories", args)
        assert answer.structured == {"results": []}
        assert session.starts == 2
    finally:
        await session.aclose()


def http(url: str, **kw: Any) -> McpConfig:
    return McpConfig(
        tools=kw.pop("tools", ToolMap(search=NODES)),
        transport="http",
        url=url,
        timeout_s=60.0,
        **kw,
    )


async def test_server_memory_through_the_http_bridge_answers_as_server_sent_events(
    tmp_path: Path,
) -> None:
    with server_memory_over_http(tmp_path / "m.jsonl") as url:
        session = open_session(http(url), None)
        try:
            await session.call_tool("create_entities", {"entities": [entity("m1", "blue heron")]})
            answer = await session.call_tool("search_nodes", {"query": "heron"})
            assert [e["name"] for e in answer.structured["entities"]] == ["m1"]
            wire = session._wire
            assert wire is not None and getattr(wire, "session_id", None)
        finally:
            await session.aclose()


async def test_the_sdk_server_over_streamable_http_answers_as_json() -> None:
    with sdk_server_over_http() as url:
        session = open_session(http(url), None)
        try:
            memories = [{"id": "a", "content": "alpine lakes"}, {"id": "b", "content": "deserts"}]
            await session.call_tool("add_memories", {"user_id": "u", "memories": memories})
            answer = await session.call_tool(
                "search_memories", {"user_id": "u", "query": "alpine lakes", "limit": 2}
            )
            assert [r["id"] for r in answer.structured["results"]] == ["a", "b"]
        finally:
            await session.aclose()


async def test_a_map_naming_a_missing_tool_or_argument_gives_one_line_naming_each(
    tmp_path: Path,
) -> None:
    tools = ToolMap(
        search=SearchTool(name="search_everything", arguments={"query": "{q}"}, ids="x"),
        write=WriteTool(name="create_entities", arguments={"entities": "{records}", "user": "u"}),
    )
    env = {"MEMORY_FILE_PATH": str(tmp_path / "m.jsonl")}
    config = stdio(server_memory_argv(), env, tools=tools, namespace_by="server")
    session: McpSession = open_session(config, None)
    try:
        problems = await ToolStore(config, session).check()
        offered = await session.list_tools()
    finally:
        await session.aclose()
    assert problems == [
        "[probe.target.tools.search]: the server has no tool 'search_everything' (it offers: "
        + ", ".join(sorted(offered))
        + ")",
        "[probe.target.tools.write]: tool 'create_entities' has no argument 'user' (it takes: "
        "entities)",
    ]
    fixed = ToolMap(search=NODES, write=WriteTool(name="create_entities", arguments={}))
    adopted = stdio(server_memory_argv(), tools=fixed, adopt_namespace=True)
    assert map_problems(adopted, offered) == [
        "[probe.target.tools.write]: tool 'create_entities' requires argument 'entities', "
        "which the map does not give"
    ]


async def test_an_http_answer_past_max_response_bytes_is_decode_and_the_session_goes_on() -> None:
    with sdk_server_over_http() as url:
        session = open_session(http(url, max_response_bytes=4096, max_retries=0), None)
        try:
            big = [{"id": "big", "content": "word " * 2000}]
            await session.call_tool("add_memories", {"user_id": "u", "memories": big})
            with pytest.raises(TargetProtocolError) as caught:
                await session.call_tool("list_memories", {"user_id": "u"})
            assert "exceeds max_response_bytes = 4096" in str(caught.value)
            answer = await session.call_tool("list_memories", {"user_id": "nobody"})
            assert answer.structured == {"memories": []}
            assert session.starts == 1
        finally:
            await session.aclose()
