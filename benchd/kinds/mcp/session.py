"""One MCP session per probe: the handshake, ``tools/list`` and ``tools/call``.

:class:`McpSession` opens its wire on first use (``initialize``, then the
``notifications/initialized`` notification), and opens a new one when the
old one ended (a stdio server that exited, an HTTP session the server
forgot): the call that met the end fails (kind ``connect``), the next call
starts over. A stdio server that exited between calls is started again
before the next one, and a call the server never ran (answered 404 in a
session it forgot, or written to the closed stdin of a process that had
exited) is sent once more on a new wire: a restart between cycles costs
no cycle. Every answer is
validated with the MCP SDK's own types
(``mcp_types``), so a server that breaks the protocol is a ``decode``
error naming the method. A tool answer with ``isError`` is a
:class:`McpToolError` carrying the tool's own message. Validation runs in
the reducer each request hands its wire, where the answer is decoded: in
the decode worker for a large one, which hands back only what the caller
keeps (``call_tool``'s ``keep``).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError

from benchd.errors import TargetProtocolError, TargetToolError
from benchd.http.client import RetryingClient
from benchd.http.messages import words
from benchd.kinds.mcp.messages import ERROR_CHARS
from benchd.kinds.mcp.wire import Message, NeverRan, Reduce, Wire

__all__ = ["McpSession", "McpToolError", "ServerInfo", "ToolAnswer", "ToolSpec"]

MAX_TOOL_PAGES = 100
"""``tools/list`` pages read at most (a server whose cursor never ends is cut there)."""

class McpToolError(TargetToolError):
    """A tool answered with ``isError``, or the server a call with a JSON-RPC error (kind
    ``tool_error``), carrying its own text.

    MCP carries a tool's failure inside a successful answer (an HTTP 200, a
    stdio line): no HTTP status to count it as, so it has a kind of its own.
    """


class _ToolRefused(TargetToolError):
    """A tool's ``isError`` as its reducer reports it: the tool's text, not yet masked (the
    decode worker has no secrets to mask); the session raises :class:`McpToolError`."""

    def __init__(self, name: str, text: str) -> None:
        super().__init__(name)
        self.name = name
        self.text = text

    def __reduce__(self) -> tuple[Any, ...]:
        return (_ToolRefused, (self.name, self.text))


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as ``tools/list`` describes it: its name and argument names."""

    name: str
    arguments: frozenset[str]
    required: frozenset[str]
    open_arguments: bool  # the schema allows arguments it does not name


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What the initialize answer said."""

    name: str
    version: str
    protocol_version: str


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """A tool's successful answer: its structured content, else its text parts."""

    structured: Any  # None when the tool gave no structuredContent
    texts: tuple[str, ...]


class McpSession:
    """A long-lived session over wires that ``open_wire`` makes; see the module docstring."""

    def __init__(
        self,
        open_wire: Callable[[], Awaitable[Wire]],
        timeout_s: float,
        *,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._open_wire = open_wire
        self._on_close = on_close
        self._timeout_s = timeout_s
        self._wire: Wire | None = None
        self._opening = anyio.Lock()
        self._ids = itertools.count(1)
        self.server: ServerInfo | None = None
        self.starts = 0  # wires opened (a stdio server started, an HTTP session begun)
        self.http: RetryingClient | None = None  # the HTTP wire's client (its retry counts)

    async def _ready(self) -> Wire:
        wire = self._wire
        if wire is not None and wire.alive:
            return wire
        async with self._opening:
            if self._wire is not None and self._wire.alive:
                return self._wire
            if self._wire is not None:
                await self._wire.aclose()
                self._wire = None
            wire = await self._open_wire()
            self.starts += 1
            try:
                self.server = await self._handshake(wire)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await wire.aclose()
                raise
            self._wire = wire
            return wire

    async def _handshake(self, wire: Wire) -> ServerInfo:
        params = {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "benchd", "version": _benchd_version()},
        }
        reduce = functools.partial(_server_info, where=wire.where)
        info: ServerInfo = await self._exchange(wire, "initialize", params, reduce)
        if info.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            raise TargetProtocolError(
                f"{wire.where}: the server speaks MCP {info.protocol_version!r}, which this "
                f"SDK does not ({', '.join(HANDSHAKE_PROTOCOL_VERSIONS)})"
            )
        if hasattr(wire, "protocol_version"):
            wire.protocol_version = info.protocol_version
        await wire.notify({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return info

    async def _exchange(
        self, wire: Wire, method: str, params: Mapping[str, Any], reduce: Reduce | None = None
    ) -> Any:
        message: Message = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": method,
            "params": dict(params),
        }
        answer = await wire.request(message, self._timeout_s, reduce)
        if "failed" in answer:
            failed = answer["failed"]
            if isinstance(failed, _ToolRefused):  # masked here: the worker knows no secrets
                said = words(failed.text) or "no message"
                raise McpToolError(f"{wire.where}: tool {failed.name!r} failed: {said}")
            raise failed
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            text = words(str(error.get("message", "")))
            raise McpToolError(
                f"{wire.where}: {method} failed: JSON-RPC error {error.get('code')}: {text}"
            )
        if "result" not in answer:
            raise TargetProtocolError(f"{wire.where}: the answer to {method} has no result")
        return answer["result"]

    async def request(
        self, method: str, params: Mapping[str, Any], reduce: Reduce | None = None
    ) -> Any:
        """One request over the live wire (opened, or opened again, first); its result
        reduced by ``reduce`` where it is decoded."""
        return await self._once_more(method, params, lambda wire: reduce)

    async def list_tools(self) -> dict[str, ToolSpec]:
        """Every tool the server offers, by name (all pages)."""
        tools: dict[str, ToolSpec] = {}
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            params = {"cursor": cursor} if cursor else {}
            page, cursor = await self._once_more(
                "tools/list", params, lambda wire: functools.partial(_tools_page, where=wire.where)
            )
            tools.update(page)
            if not cursor:
                break
        return tools

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        keep: Callable[[ToolAnswer], Any] | None = None,
    ) -> Any:
        """Call a tool: its :class:`ToolAnswer`, or what ``keep`` makes of it where the
        answer is decoded (``keep`` must be picklable: it may run in the decode worker).
        ``isError`` is a :class:`McpToolError` with the tool's message."""
        params = {"name": name, "arguments": arguments}
        return await self._once_more(
            "tools/call",
            params,
            lambda wire: functools.partial(_tool_answer, name=name, where=wire.where, keep=keep),
        )

    async def _once_more(
        self, method: str, params: Mapping[str, Any], reduce_for: Callable[[Wire], Reduce | None]
    ) -> Any:
        """``method`` on the live wire; sent once more on a new wire when the server never
        ran it (it restarted or exited between calls: a forgotten session, a closed stdin)."""
        wire = await self._ready()
        try:
            return await self._exchange(wire, method, params, reduce_for(wire))
        except NeverRan:
            wire = await self._ready()
            return await self._exchange(wire, method, params, reduce_for(wire))

    async def aclose(self) -> None:
        wire, self._wire = self._wire, None
        if wire is not None:
            await wire.aclose()
        if self._on_close is not None:
            await self._on_close()


def _server_info(raw: Any, where: str) -> ServerInfo:
    """The initialize answer, validated (a reducer: see :mod:`.messages`)."""
    result = _validated(mcp_types.InitializeResult, raw, where, "initialize")
    return ServerInfo(
        result.server_info.name[:200], result.server_info.version[:200], result.protocol_version
    )


def _tools_page(raw: Any, where: str) -> tuple[dict[str, ToolSpec], str | None]:
    """A ``tools/list`` page, validated: its tools and the next cursor (a reducer)."""
    page = _validated(mcp_types.ListToolsResult, raw, where, "tools/list")
    tools = {tool.name: _spec(tool.name, tool.input_schema) for tool in page.tools}
    return tools, page.next_cursor


def _tool_answer(
    raw: Any, name: str, where: str, keep: Callable[[ToolAnswer], Any] | None
) -> Any:
    """A ``tools/call`` answer validated, then what ``keep`` keeps of it (a reducer)."""
    result = _validated(mcp_types.CallToolResult, raw, where, f"tool {name}")
    texts = tuple(
        part.text for part in result.content if isinstance(part, mcp_types.TextContent)
    )
    if result.is_error:
        raise _ToolRefused(name, " ".join(texts)[:ERROR_CHARS])
    answer = ToolAnswer(result.structured_content, texts)
    return answer if keep is None else keep(answer)


def _validated(model: Any, raw: Any, where: str, what: str) -> Any:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        at = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
        detail = f" at {at}: {errors[0]['msg']}" if errors else ""
        raise TargetProtocolError(
            f"{where}: the answer to {what} breaks the MCP schema{detail}"
        ) from None


def _spec(name: str, schema: Mapping[str, Any]) -> ToolSpec:
    properties = schema.get("properties")
    names = frozenset(properties) if isinstance(properties, dict) else frozenset()
    required = schema.get("required")
    needed = frozenset(
        r for r in (required if isinstance(required, list) else ()) if isinstance(r, str)
    )
    # an argument the schema does not name is a mismatch, unless the schema names none
    # or says outright that it takes others (additionalProperties true or a schema)
    extra = schema.get("additionalProperties")
    open_arguments = not names or extra is True or isinstance(extra, dict)
    return ToolSpec(name, names, needed, open_arguments=open_arguments)


def _benchd_version() -> str:
    from benchd import __version__

    return str(__version__)
