"""MCP's two wires, each carrying JSON-RPC messages under benchd's bounds.

A *wire* sends one JSON-RPC request and hands back the response with the
same id; it knows framing, never methods:

- :class:`StdioWire` runs the server as a child process (its own process
  group, so a wrapper such as ``npx`` dies with it) and speaks newline-
  delimited JSON over its pipes. Many requests share one pipe: whichever
  caller holds the read lock reads the next line and files it under its
  id, so concurrent calls need no background task (a target lives across
  cycles and tasks). A line longer than ``max_line_bytes`` or the process
  exiting ends the wire: every waiting call fails (``decode`` / ``connect``)
  and the session starts a new process on its next call.
- :class:`HttpWire` posts each request to the streamable-HTTP endpoint
  through benchd's :class:`~benchd.targets.client.RetryingClient` (the one
  error map, bounded reads, service time) and reads the answer as JSON or as
  a server-sent event stream; it carries the ``Mcp-Session-Id`` the
  initialize answer gave.

The SDK's own transports are not used for the client: its stdio reader
buffers a line without limit and its HTTP transport reads a JSON answer
whole, and neither maps failures to benchd's error kinds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Mapping
from contextlib import suppress
from typing import Any, Protocol

import anyio
from anyio.abc import Process

from benchd.errors import (
    TargetError,
    TargetHTTPError,
    TargetProtocolError,
    TargetTimeout,
    TargetUnreachable,
)
from benchd.targets.answers import Body, decode
from benchd.targets.client import RetryingClient

__all__ = [
    "EXIT_GRACE_S",
    "HttpWire",
    "Message",
    "StdioWire",
    "Wire",
    "sse_messages",
]

Message = dict[str, Any]
"""One JSON-RPC message as decoded JSON."""

EXIT_GRACE_S = 2.0
"""How long a stdio server may take to exit once its stdin is closed, before it is killed."""

_CHUNK = 64 * 1024


class Wire(Protocol):
    """Carries JSON-RPC messages to one MCP server."""

    @property
    def where(self) -> str:
        """The server as error messages name it (command or URL, no secrets)."""
        ...

    @property
    def alive(self) -> bool:
        """False once the wire has ended; the session then opens a new one."""
        ...

    async def request(self, message: Message, timeout_s: float) -> Message:
        """Send a request; return the response carrying its id."""
        ...

    async def notify(self, message: Message) -> None:
        """Send a notification (no answer)."""
        ...

    async def aclose(self) -> None: ...


def _dumps(message: Message) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


# -- stdio ----------------------------------------------------------------------------


class StdioWire:
    """A server process and its pipes; see the module docstring."""

    def __init__(
        self,
        command: str,
        args: tuple[str, ...],
        env: Mapping[str, str],
        *,
        cwd: str | None,
        max_line_bytes: int,
        reply: Any = None,
    ) -> None:
        self._argv = [command, *args]
        self._env = {**os.environ, **env}
        self._cwd = cwd
        self._max_line = max_line_bytes
        self._process: Process | None = None
        self._buffer = bytearray()
        self._answers: dict[Any, Message] = {}
        self._waiting: set[Any] = set()
        self._read_lock = anyio.Lock()
        self._write_lock = anyio.Lock()
        self._ended: TargetError | None = None
        self._reply = reply  # answers a server's own request (ping) with this result

    @property
    def where(self) -> str:
        return f"mcp stdio server {os.path.basename(self._argv[0])!r}"

    @property
    def alive(self) -> bool:
        return self._ended is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def start(self) -> None:
        """Start the process; a command that cannot run is ``connect``."""
        try:
            self._process = await anyio.open_process(
                self._argv,
                env=self._env,
                cwd=self._cwd,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            self._ended = TargetUnreachable(
                f"{self.where}: cannot start {self._argv[0]!r} ({exc.strerror or exc}); "
                "check command and args in [probe.target]"
            )
            raise self._ended from None

    async def notify(self, message: Message) -> None:
        await self._send(message)

    async def request(self, message: Message, timeout_s: float) -> Message:
        ident = message["id"]
        self._waiting.add(ident)
        try:
            with anyio.fail_after(timeout_s):
                await self._send(message)
                return await self._answer(ident)
        except TimeoutError:
            raise TargetTimeout(f"{self.where}: no answer within {timeout_s:g} s") from None
        finally:
            self._waiting.discard(ident)
            self._answers.pop(ident, None)

    async def _send(self, message: Message) -> None:
        if self._ended is not None:
            raise self._ended
        assert self._process is not None and self._process.stdin is not None
        try:
            async with self._write_lock:
                await self._process.stdin.send(_dumps(message) + b"\n")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            raise self._end(self._exited("its stdin closed")) from None

    async def _answer(self, ident: Any) -> Message:
        while ident not in self._answers:
            async with self._read_lock:  # one reader at a time files every answer it reads
                if ident in self._answers:
                    break
                if self._ended is not None:
                    raise self._ended
                await self._file(await self._line())
        return self._answers[ident]

    async def _line(self) -> bytes:
        assert self._process is not None and self._process.stdout is not None
        while (end := self._buffer.find(b"\n")) < 0:
            if len(self._buffer) > self._max_line:
                raise self._end(TargetProtocolError(
                    f"{self.where}: a message longer than max_line_bytes = {self._max_line}; "
                    "raise max_line_bytes in [probe.target] if the server really sends this much"
                ))
            try:
                self._buffer += await self._process.stdout.receive(_CHUNK)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                with anyio.move_on_after(EXIT_GRACE_S):  # for its exit status
                    await self._process.wait()
                raise self._end(self._exited("it closed its stdout")) from None
        if end > self._max_line:
            raise self._end(TargetProtocolError(
                f"{self.where}: a message of {end} bytes exceeds max_line_bytes = "
                f"{self._max_line}"
            ))
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        return line

    async def _file(self, line: bytes) -> None:
        if not line.strip():
            return
        message: Any = await decode(line, self.where)
        if not isinstance(message, dict):
            raise self._end(TargetProtocolError(f"{self.where}: a message is not a JSON object"))
        if "method" in message:  # the server's own request or notification
            if "id" in message:
                await self._send(_server_request_answer(message))
            return
        if message.get("id") in self._waiting:
            self._answers[message["id"]] = message

    def _exited(self, how: str) -> TargetUnreachable:
        code = self._process.returncode if self._process is not None else None
        status = f" (exit status {code})" if code is not None else ""
        return TargetUnreachable(
            f"{self.where}: the server process ended: {how}{status}; benchd starts it "
            "again on the next call"
        )

    def _end(self, error: TargetError) -> TargetError:
        if self._ended is None:
            self._ended = error
        return self._ended

    async def aclose(self) -> None:
        """Close stdin, give the server :data:`EXIT_GRACE_S` to exit, then kill its group."""
        self._end(TargetUnreachable(f"{self.where}: closed"))
        process, self._process = self._process, None
        if process is None:
            return
        with anyio.CancelScope(shield=True):
            if process.stdin is not None:
                with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await process.stdin.aclose()
            with anyio.move_on_after(EXIT_GRACE_S):
                await process.wait()
            if process.returncode is None:
                _kill_group(process.pid)
                await process.wait()
            else:
                _kill_group(process.pid)  # what a wrapper (npx, sh) left behind
            await process.aclose()


def _kill_group(pid: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _server_request_answer(message: Message) -> Message:
    """benchd's answer to a request the server sends it: an empty result to ``ping``."""
    if message.get("method") == "ping":
        return {"jsonrpc": "2.0", "id": message["id"], "result": {}}
    return {
        "jsonrpc": "2.0",
        "id": message["id"],
        "error": {"code": -32601, "message": "benchd offers no client features"},
    }


# -- streamable HTTP ------------------------------------------------------------------

ACCEPT = "application/json, text/event-stream"
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"


class HttpWire:
    """POSTs JSON-RPC to one streamable-HTTP endpoint; see the module docstring."""

    def __init__(self, http: RetryingClient, url: str, path: str) -> None:
        self._http = http
        self._url = url
        self._path = path
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._alive = True

    @property
    def where(self) -> str:
        return f"mcp server {self._url}"

    @property
    def alive(self) -> bool:
        return self._alive

    def _headers(self) -> dict[str, str]:
        headers = {"accept": ACCEPT, "content-type": "application/json"}
        if self.session_id is not None:
            headers[SESSION_HEADER] = self.session_id
        if self.protocol_version is not None:
            headers[VERSION_HEADER] = self.protocol_version
        return headers

    async def _post(
        self, message: Message, timeout_s: float | None
    ) -> tuple[Mapping[str, str], Body]:
        try:
            status, headers, body = await self._http.request_allowing(
                "POST",
                self._path,
                allow=(),
                content=_dumps(message),
                headers=self._headers(),
                deadline_s=timeout_s,
            )
        except TargetHTTPError as exc:
            if exc.status == 404 and self.session_id is not None:
                self._alive = False  # the server forgot the session: start a new one
                raise TargetUnreachable(
                    f"{self.where}: the server ended the MCP session (HTTP 404); benchd "
                    "opens a new one on the next call"
                ) from None
            raise
        del status
        return headers, body

    async def notify(self, message: Message) -> None:
        await self._post(message, None)

    async def request(self, message: Message, timeout_s: float) -> Message:
        headers, body = await self._post(message, timeout_s)
        if message.get("method") == "initialize" and headers.get(SESSION_HEADER):
            self.session_id = headers[SESSION_HEADER]
        kind = headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "text/event-stream":
            raw = _bytes(body)
            for item in sse_messages(raw):
                event: Any = await decode(item, self.where)
                if isinstance(event, dict) and event.get("id") == message["id"]:
                    return event
            raise TargetProtocolError(
                f"{self.where}: the event stream ended without the answer to "
                f"{message.get('method')!r}"
            )
        answer: Any = await decode(body, self.where)
        if not isinstance(answer, dict) or answer.get("id") != message["id"]:
            raise TargetProtocolError(
                f"{self.where}: the answer to {message.get('method')!r} is not its JSON-RPC "
                "response"
            )
        return answer

    async def aclose(self) -> None:
        """End the session (``DELETE``, best effort); the pool is the target's to close."""
        self._alive = False
        if self.session_id is None:
            return
        with anyio.move_on_after(2.0), suppress(TargetError):
            await self._http.request_allowing(
                "DELETE", self._path, allow=(404, 405), headers=self._headers()
            )
        self.session_id = None


def _bytes(body: Body) -> bytes:
    """A body's bytes (an event stream is split before each event is decoded)."""
    if isinstance(body, bytes):
        return body
    try:
        with open(body.path, "rb") as spilled:
            return spilled.read()
    finally:
        body.discard()


def sse_messages(raw: bytes) -> list[bytes]:
    """The ``data`` of each event in a server-sent event stream (one message per event)."""
    events: list[bytes] = []
    data: list[bytes] = []
    for line in raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"):
        if not line:
            if data:
                events.append(b"\n".join(data))
                data = []
            continue
        if line.startswith(b"data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(b" ") else value)
    if data:
        events.append(b"\n".join(data))
    return events
