"""Hostile MCP servers over stdio and streamable HTTP, each beside a healthy one.

Every case ends as a counted kind (``decode``, ``timeout``, ``connect``) or as
the right answer, never as ``internal``; the healthy session next to it gets
every one of its answers. Large answers come back reduced to what benchd keeps
(decoded in the decode worker); how long they hold the event loop is
measured by ``bench/loop_hold.py``, not asserted here.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from mcp_servers import free_port, http_server

from benchd.errors import TargetError, TargetProtocolError, TargetTimeout, TargetUnreachable
from benchd.http import decoder
from benchd.kinds.mcp.config import McpConfig, SearchTool, ToolMap
from benchd.kinds.mcp.connect import open_session
from benchd.kinds.mcp.session import McpSession, McpToolError
from benchd.kinds.mcp.tools import ToolStore
from benchd.redact import clear_secrets, register_secret

pytestmark = pytest.mark.anyio

HOSTILE = Path(__file__).resolve().parent / "hostile_server.py"
RESULTS = SearchTool(name="search", arguments={"query": "{q}"}, ids="results[*].id")
GRAPH = SearchTool(
    name="search", arguments={"query": "{q}"}, ids="entities[*].name", returns="set"
)


def argv(mode: str, *extra: str) -> list[str]:
    return [sys.executable, str(HOSTILE), "--mode", mode, *extra]


def stdio(mode: str, *extra: str, search: SearchTool = RESULTS, **kw: Any) -> McpConfig:
    command = argv(mode, *extra)
    return McpConfig(
        tools=ToolMap(search=search),
        command=command[0],
        args=tuple(command[1:]),
        timeout_s=kw.pop("timeout_s", 60.0),
        **kw,
    )


@contextmanager
def over_http(mode: str, *extra: str) -> Iterator[str]:
    port = free_port()
    with http_server(
        [*argv(mode, *extra), "--transport", "http", "--port", str(port)],
        f"hostile listening on {port}",
    ):
        yield f"http://127.0.0.1:{port}/mcp"


def http(url: str, search: SearchTool = RESULTS, **kw: Any) -> McpConfig:
    return McpConfig(
        tools=ToolMap(search=search),
        transport="http",
        url=url,
        timeout_s=kw.pop("timeout_s", 60.0),
        max_retries=0,
        **kw,
    )


async def beside_healthy(hostile: Callable[[], Awaitable[Any]]) -> Any:
    """Run ``hostile`` while a healthy session searches; the healthy one must get every
    answer. What ``hostile`` returned, or the target error it raised."""
    healthy = open_session(stdio("healthy"), None)
    store = ToolStore(stdio("healthy"), healthy)
    outcome: list[Any] = []
    answered: list[list[str]] = []
    done = anyio.Event()

    async def run_hostile() -> None:
        try:
            outcome.append(await hostile())
        except TargetError as exc:
            outcome.append(exc)
        finally:
            done.set()

    async def run_healthy() -> None:
        while not done.is_set() or not answered:
            ids, _ = await store.search("q", 10)
            answered.append(ids)

    try:
        await store.search("warm", 10)  # started before the hostile call goes
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_hostile)
            tg.start_soon(run_healthy)
    finally:
        await healthy.aclose()
    assert answered and all(ids == ["m1"] for ids in answered)
    return outcome[0]


async def search_with(config: McpConfig) -> Any:
    session = open_session(config, None)
    try:
        return await ToolStore(config, session).search("q", 10)
    finally:
        await session.aclose()


async def test_a_5_mib_tool_text_comes_back_as_its_ids_decoded_in_the_worker() -> None:
    ids, scores = await beside_healthy(lambda: search_with(stdio("big-text", search=GRAPH)))
    assert len(ids) == 60_000 and ids[0] == "memory-000000" and scores == []
    assert decoder.worker_pid() is not None  # the worker decoded it, not the loop


async def test_a_5_mib_tool_text_over_an_event_stream_comes_back_as_its_ids() -> None:
    with over_http("big-text") as url:
        ids, _ = await beside_healthy(lambda: search_with(http(url, GRAPH)))
    assert len(ids) == 60_000 and ids[-1] == "memory-059999"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_flood_of_20000_notifications_then_the_answer_is_read_through(
    transport: str,
) -> None:
    extra = ("--entities", "20000")
    if transport == "stdio":
        found = await beside_healthy(lambda: search_with(stdio("flood", *extra)))
    else:
        with over_http("flood", *extra) as url:
            found = await beside_healthy(lambda: search_with(http(url)))
    assert found == (["m1"], [])


async def test_a_7_9_mb_line_is_spilled_and_decoded_off_the_loop() -> None:
    found = await beside_healthy(lambda: search_with(stdio("big-line")))
    assert found == (["m1"], [])


async def test_a_line_past_max_line_bytes_while_spilled_is_decode() -> None:
    config = stdio("big-line", max_line_bytes=2 * 1024 * 1024)
    failed = await beside_healthy(lambda: search_with(config))
    assert isinstance(failed, TargetProtocolError) and "max_line_bytes" in str(failed)


@pytest.mark.parametrize("mode", ["list-id", "object-id"])
async def test_an_answer_whose_id_is_not_a_string_or_number_is_decode_over_stdio(
    mode: str,
) -> None:
    failed = await beside_healthy(lambda: search_with(stdio(mode)))
    assert isinstance(failed, TargetProtocolError), failed
    assert failed.kind == "decode" and "a JSON-RPC id is a string or a number" in str(failed)


@pytest.mark.parametrize("mode", ["list-id", "object-id"])
async def test_an_answer_whose_id_is_not_a_string_or_number_is_decode_over_http(
    mode: str,
) -> None:
    with over_http(mode) as url:
        failed = await beside_healthy(lambda: search_with(http(url)))
    assert isinstance(failed, TargetProtocolError) and failed.kind == "decode", failed


async def test_a_session_id_header_outside_ascii_is_decode() -> None:
    with over_http("bad-session") as url:
        failed = await beside_healthy(lambda: search_with(http(url)))
    assert isinstance(failed, TargetProtocolError), failed
    assert "Mcp-Session-Id" in str(failed) and failed.kind == "decode"


async def test_an_event_stream_kept_open_after_its_answer_returns_at_the_answer() -> None:
    with over_http("keep-alive") as url:
        config = http(url, timeout_s=10.0)  # a failure bound: the answer is there at once
        session = open_session(config, None)
        store = ToolStore(config, session)
        try:
            for _ in range(3):  # each call a stream left open by the server
                assert await store.search("q", 10) == (["m1"], [])
        finally:
            await session.aclose()


async def test_a_server_that_never_answers_shows_the_end_of_its_stderr() -> None:
    config = stdio("silent", timeout_s=1.0)
    failed = await beside_healthy(lambda: search_with(config))
    assert isinstance(failed, TargetTimeout), failed
    assert "no answer within 1 s" in str(failed)
    assert "its stderr ends: npm error code E404 | npm error 404 Not Found" in str(failed)


async def test_a_server_dying_mid_call_is_connect_with_its_exit_status() -> None:
    failed = await beside_healthy(lambda: search_with(stdio("die")))
    assert isinstance(failed, TargetUnreachable) and "exit status 3" in str(failed)


async def test_calls_in_flight_when_the_server_dies_and_restarts_are_all_connect() -> None:
    """Many calls on one process, which exits mid-call: each call fails as ``connect`` or
    is answered by the next process, whichever it met; none fails otherwise."""
    session: McpSession = open_session(stdio("die"), None)
    outcomes: list[str] = []

    async def one() -> None:
        try:
            await session.call_tool("search", {"query": "q"})
            outcomes.append("ok")
        except TargetError as exc:
            outcomes.append(exc.kind)

    try:
        await session.list_tools()
        async with anyio.create_task_group() as tg:
            for _ in range(16):
                tg.start_soon(one)
    finally:
        await session.aclose()
    assert outcomes and set(outcomes) == {"connect"} and len(outcomes) == 16


async def test_what_the_decode_worker_hands_back_is_the_reduced_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handed: list[Any] = []
    call = decoder.call

    def spy(handle: decoder.Call, function: Any, *args: Any) -> Any:
        value = call(handle, function, *args)
        handed.append(value)
        return value

    monkeypatch.setattr(decoder, "call", spy)
    ids, _ = await search_with(stdio("big-text", search=GRAPH))
    assert len(ids) == 60_000
    (message,) = handed
    assert set(message) == {"id", "result"}
    assert message["result"] == (ids, [])  # the ids alone: no tool answer, no entities


async def test_a_request_waiting_to_write_when_the_wire_is_closed_is_connect() -> None:
    """A call that waits for the pipe while another ends the wire (a server killed in the
    load pass, the session opening a new one) fails as ``connect``."""
    config = stdio("healthy")
    session: McpSession = open_session(config, None)
    await session.list_tools()
    wire: Any = session._wire
    outcome: list[BaseException] = []
    waiting = anyio.Event()

    async def call() -> None:
        waiting.set()
        try:
            await wire.request({"jsonrpc": "2.0", "id": 99, "method": "ping"}, 30.0)
        except Exception as exc:
            outcome.append(exc)

    try:
        async with anyio.create_task_group() as tg:
            await wire._write_lock.acquire()  # a write in progress
            tg.start_soon(call)
            await waiting.wait()
            await anyio.lowlevel.checkpoint()  # the call now waits for the lock
            await session.aclose()  # the wire ends while it waits
            wire._write_lock.release()
    finally:
        await session.aclose()
    (failed,) = outcome
    assert isinstance(failed, TargetUnreachable) and failed.kind == "connect", repr(failed)


async def test_a_large_tool_refusal_is_masked_though_it_is_read_in_the_worker() -> None:
    secret = "sk-hostile-0123456789abcdef"
    register_secret(secret)
    try:
        failed = await search_with(stdio("big-error", env={"HOSTILE_KEY": secret}))
    except McpToolError as exc:
        failed = exc
    finally:
        clear_secrets()
    assert isinstance(failed, McpToolError) and failed.kind == "tool_error"
    message = str(failed)
    assert "tool 'search' failed: upstream refused key" in message
    assert secret not in message and "sk-hostile" not in message and len(message) < 600
