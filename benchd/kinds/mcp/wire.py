"""MCP's two wires, each carrying JSON-RPC messages under benchd's bounds.

A *wire* sends one JSON-RPC request and hands back the response with the
same id; it knows framing, never methods:

- :class:`StdioWire` runs the server as a child process (its own process
  group, so a wrapper such as ``npx`` dies with it) and speaks newline-
  delimited JSON over its pipes. Many requests share one pipe: whichever
  caller holds the read lock reads the next line and files it under its
  id, so concurrent calls need no background task (a target lives across
  cycles and tasks). A line longer than ``max_line_bytes``, a line that is
  not JSON-RPC, or the process exiting ends the wire: every waiting call
  fails (``decode`` / ``connect``) and the session starts a new process on
  its next call. The server's stderr goes to a file whose last lines the
  errors quote (a server that never answers says why: npx's own message).
- :class:`HttpWire` posts each request to the streamable-HTTP endpoint
  through benchd's :class:`~benchd.http.client.RetryingClient` (the one
  error map, bounded reads, service time) and reads the answer as JSON or as
  a server-sent event stream, returning at the answer's event whether or not
  the stream closes (:mod:`.events`); it carries the ``Mcp-Session-Id`` the
  initialize answer gave.

Each message is decoded and reduced by :func:`~.messages.shaped` (with the
request's reducer), in the decode worker when it is large, so the loop never
parses, validates or receives a large answer whole.

The SDK's own transports are not used for the client: its stdio reader
buffers a line without limit and its HTTP transport reads a JSON answer
whole, and neither maps failures to benchd's error kinds.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import signal
import tempfile
from collections.abc import Mapping
from contextlib import suppress
from typing import Any, Protocol

import anyio
import anyio.lowlevel
from anyio.abc import Process

from benchd import redact
from benchd.errors import (
    TargetError,
    TargetHTTPError,
    TargetProtocolError,
    TargetTimeout,
    TargetUnreachable,
)
from benchd.http.answers import Body, decode
from benchd.http.client import RetryingClient
from benchd.kinds.mcp.events import ANSWER_CONTENT_TYPE, EVENT_STREAM, is_answer
from benchd.kinds.mcp.messages import LineReader, LineTooLong, Message, Reduce, shaped

__all__ = [
    "EXIT_GRACE_S",
    "HttpWire",
    "Message",
    "Reduce",
    "StdioWire",
    "Wire",
    "sse_messages",
]

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

    async def request(
        self, message: Message, timeout_s: float, reduce: Reduce | None = None
    ) -> Message:
        """Send a request; return the response carrying its id, its result reduced by
        ``reduce`` (a failure of it under ``failed``; see :func:`~.messages.shaped`)."""
        ...

    async def notify(self, message: Message) -> None:
        """Send a notification (no answer)."""
        ...

    async def aclose(self) -> None: ...


def _dumps(message: Message) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


# -- stdio ----------------------------------------------------------------------------

STDERR_KEPT_BYTES = 1024 * 1024
"""A stdio server's stderr file is emptied past this size (only its end is ever shown)."""

STDERR_TAIL_BYTES = 2048
"""How much of the end of a server's stderr an error may quote."""

STDERR_TAIL_LINES = 5
"""Most lines of a server's stderr an error quotes."""

_YIELD_EVERY = 32
"""Messages filed between two checkpoints: a flood of notifications never holds the loop."""


class _Stderr:
    """A server's stderr in an unlinked temporary file, for the last lines an error quotes.

    A pipe would need a reader at all times (a chatty server blocks on a full
    pipe); a file opened for appending needs none, and is emptied once it
    passes :data:`STDERR_KEPT_BYTES`.
    """

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile(prefix="benchd-mcp-stderr-")  # noqa: SIM115
        fd = self.file.fileno()
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)

    def bound(self) -> None:
        with suppress(OSError, ValueError):
            if os.fstat(self.file.fileno()).st_size > STDERR_KEPT_BYTES:
                os.ftruncate(self.file.fileno(), 0)

    def tail(self) -> str:
        """The last lines written, one line, masked ("" when there are none)."""
        try:
            fd = self.file.fileno()
            size = os.fstat(fd).st_size
            raw = os.pread(fd, STDERR_TAIL_BYTES, max(0, size - STDERR_TAIL_BYTES))
        except (OSError, ValueError):
            return ""
        lines = [ln.strip() for ln in raw.decode("utf-8", "replace").splitlines()]
        kept = [ln for ln in lines if ln][-STDERR_TAIL_LINES:]
        return redact.text(" | ".join(kept), 600, one_line=True)

    def close(self) -> None:
        with suppress(OSError):
            self.file.close()


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
    ) -> None:
        self._argv = [command, *args]
        self._env = {**os.environ, **env}
        self._cwd = cwd
        self._process: Process | None = None
        self._stderr: _Stderr | None = None
        self._lines = LineReader(max_line_bytes)
        self._max_line = max_line_bytes
        self._answers: dict[Any, Message] = {}
        self._waiting: dict[Any, Reduce | None] = {}
        self._read_lock = anyio.Lock()
        self._write_lock = anyio.Lock()
        self._ended: TargetError | None = None

    @property
    def where(self) -> str:
        return f"mcp stdio server {os.path.basename(self._argv[0])!r}"

    @property
    def alive(self) -> bool:
        """False once the wire ended, or the process exited between calls (it is reaped)."""
        exited = self._process is not None and self._process.returncode is not None
        return self._ended is None and not exited

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def start(self) -> None:
        """Start the process; a command that cannot run is ``connect``."""
        self._stderr = _Stderr()
        try:
            self._process = await anyio.open_process(
                self._argv,
                env=self._env,
                cwd=self._cwd,
                stderr=self._stderr.file,
                start_new_session=True,
            )
        except OSError as exc:
            self._ended = TargetUnreachable(
                f"{self.where}: cannot start {self._argv[0]!r} ({exc.strerror or exc}); "
                "check command and args in [probe.target]"
            )
            self._stderr.close()
            raise self._ended from None

    async def notify(self, message: Message) -> None:
        await self._send(message)

    async def request(
        self, message: Message, timeout_s: float, reduce: Reduce | None = None
    ) -> Message:
        ident = message["id"]
        self._waiting[ident] = reduce
        if self._stderr is not None:
            self._stderr.bound()
        try:
            with anyio.fail_after(timeout_s):
                await self._send(message)
                return await self._answer(ident)
        except TimeoutError:
            raise TargetTimeout(
                f"{self.where}: no answer within {timeout_s:g} s{self._said()}"
            ) from None
        finally:
            self._waiting.pop(ident, None)
            self._answers.pop(ident, None)

    def _said(self) -> str:
        """The end of the server's stderr, as an error quotes it ("" when it wrote none)."""
        tail = self._stderr.tail() if self._stderr is not None else ""
        return f"; its stderr ends: {tail}" if tail else ""

    async def _send(self, message: Message) -> None:
        process = self._process
        if self._ended is not None or process is None or process.stdin is None:
            raise self._ended or self._end(self._exited("it is not running"))
        try:
            async with self._write_lock:
                if self._ended is not None:  # ended while this waited for the lock
                    raise self._ended
                await process.stdin.send(_dumps(message) + b"\n")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            ended = self._end(self._exited("its stdin closed"))
            raise NeverRan(str(ended)) from None  # no process read it

    async def _answer(self, ident: Any) -> Message:
        filed = 0
        while ident not in self._answers:
            async with self._read_lock:  # one reader at a time files every answer it reads
                if ident in self._answers:
                    break
                if self._ended is not None:
                    raise self._ended
                await self._file(await self._line())
            filed += 1
            if filed % _YIELD_EVERY == 0:
                await anyio.lowlevel.checkpoint()
        return self._answers[ident]

    async def _line(self) -> Body:
        process = self._process
        if process is None or process.stdout is None:
            raise self._end(self._exited("it is not running"))
        try:
            while (line := self._lines.line()) is None:
                try:
                    chunk = await process.stdout.receive(_CHUNK)
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    with anyio.move_on_after(EXIT_GRACE_S):  # for its exit status
                        await process.wait()
                    raise self._end(self._exited("it closed its stdout")) from None
                self._lines.feed(chunk)
        except LineTooLong as exc:
            raise self._end(TargetProtocolError(
                f"{self.where}: a message of {exc.size}+ bytes exceeds max_line_bytes = "
                f"{self._max_line}; raise max_line_bytes in [probe.target] if the server "
                "really sends this much"
            )) from None
        return line

    async def _file(self, line: Body) -> None:
        if isinstance(line, bytes) and not line.strip():
            return
        reduce = functools.partial(shaped, where=self.where, reducers=dict(self._waiting))
        try:
            message: Message = await decode(line, self.where, reduce)
        except TargetProtocolError as exc:
            raise self._end(exc) from None
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
            f"{self.where}: the server process ended: {how}{status}{self._said()}; benchd "
            "starts it again on the next call"
        )

    def _end(self, error: TargetError) -> TargetError:
        if self._ended is None:
            self._ended = error
        return self._ended

    async def aclose(self) -> None:
        """Close stdin, give the server :data:`EXIT_GRACE_S` to exit, then kill its group."""
        self._end(TargetUnreachable(f"{self.where}: closed"))
        process, self._process = self._process, None
        stderr, self._stderr = self._stderr, None
        self._lines.discard()
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
            if stderr is not None:
                stderr.close()


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
MAX_SESSION_ID_CHARS = 1024
"""Longest ``Mcp-Session-Id`` kept (the spec's ids are UUIDs, JWTs or hashes)."""


class NeverRan(TargetUnreachable):
    """The server never ran the request: its session was forgotten (HTTP 404), or its
    process had exited before the request was written (stdin closed)."""


class SessionForgotten(NeverRan):
    """The server answered 404 to a request in its session: it never ran the request."""


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
                raise SessionForgotten(
                    f"{self.where}: the server ended the MCP session (HTTP 404); benchd "
                    "opens a new one on the next call"
                ) from None
            raise
        del status
        return headers, body

    async def notify(self, message: Message) -> None:
        await self._post(message, None)

    async def request(
        self, message: Message, timeout_s: float, reduce: Reduce | None = None
    ) -> Message:
        headers, body = await self._post(message, timeout_s)
        if message.get("method") == "initialize" and headers.get(SESSION_HEADER):
            self.session_id = self._session_id(headers[SESSION_HEADER])
        kind = headers.get("content-type", "").split(";")[0].strip().lower()
        what = message.get("method")
        if kind == EVENT_STREAM:  # compressed: read whole, split here
            body = _answer_event(_bytes(body), self.where, what)
        elif headers.get("content-type") == ANSWER_CONTENT_TYPE and not len(body):
            raise TargetProtocolError(
                f"{self.where}: the event stream ended without the answer to {what!r}"
            )
        reducers = {message["id"]: reduce}
        shape = functools.partial(shaped, where=self.where, reducers=reducers)
        answer: Message = await decode(body, self.where, shape)
        if "method" in answer or answer.get("id") != message["id"]:
            raise TargetProtocolError(
                f"{self.where}: the answer to {what!r} is not its JSON-RPC response"
            )
        return answer

    def _session_id(self, value: str) -> str:
        """The ``Mcp-Session-Id`` to send back: visible ASCII only, as the spec requires."""
        if not value or len(value) > MAX_SESSION_ID_CHARS or not all(
            "\x21" <= c <= "\x7e" for c in value
        ):
            raise TargetProtocolError(
                f"{self.where}: the initialize answer's Mcp-Session-Id header is not "
                f"1-{MAX_SESSION_ID_CHARS} visible ASCII characters; the server breaks the "
                "streamable-HTTP transport"
            )
        return value

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


def _answer_event(raw: bytes, where: str, what: Any) -> bytes:
    """The data of a whole event stream's answer event (a compressed stream, inflated)."""
    for item in sse_messages(raw):
        if is_answer(item):
            return item
    raise TargetProtocolError(f"{where}: the event stream ended without the answer to {what!r}")


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
