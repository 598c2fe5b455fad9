"""JSON-RPC messages as the wires keep them: decoded, checked and reduced in one step.

:func:`shaped` runs wherever a message is decoded: on the event loop for a
small one, in benchd's decode worker for one over
:data:`~benchd.http.answers.INLINE_DECODE_BYTES` (a 5 MiB tool answer
must never be parsed, validated or handed back whole on the loop). It keeps
what the wire and the session need — the id, the method of a server's own
message, a bounded error — and passes an answer's ``result`` through the
*reducer* the request gave, which validates it and keeps only what benchd
uses (ids, scores, labels). A reducer's failure (the MCP schema broken, a
tool's ``isError``) is carried in the message under ``failed`` and raised
for that one call; a message that is not JSON-RPC at all (not an object, an
id that is not a string or a number) is a ``decode`` error of the wire.

:class:`LineReader` splits a stdio server's output into lines without
holding the loop: it scans only the bytes it has not scanned, and a line
past the inline size is written to a :class:`~benchd.http.answers.Spill`
as it arrives, so the decode worker reads it from the file.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from benchd import redact
from benchd.errors import TargetError, TargetProtocolError
from benchd.http.answers import INLINE_DECODE_BYTES, Body, Spill

__all__ = ["ERROR_CHARS", "LineReader", "LineTooLong", "Message", "Reduce", "shaped", "valid_id"]

Message = dict[str, Any]
"""One JSON-RPC message as a wire keeps it."""

Reduce = Callable[[Any], Any]
"""Turns an answer's ``result`` into what the caller keeps (picklable: it may run in the
decode worker)."""

ERROR_CHARS = 4096
"""Most characters of a JSON-RPC error's message kept (the session shows fewer)."""

_SURPRISES = (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError)


def valid_id(ident: Any) -> bool:
    """Whether ``ident`` is a JSON-RPC id benchd can match: a string or a number (not a bool)."""
    return type(ident) in (str, int, float)


def shaped(value: Any, where: str, reducers: Mapping[Any, Reduce | None]) -> Message:
    """A decoded message reduced to what the wire keeps (see the module docstring).

    ``reducers`` holds the ids of the answers waited for: an answer to one is
    passed through its reducer (kept whole where it is None); any other
    answer's result is dropped (nobody waits for it).
    """
    if not isinstance(value, dict):
        raise TargetProtocolError(f"{where}: a message is not a JSON object")
    ident = value.get("id")
    if ident is not None and not valid_id(ident):
        raise TargetProtocolError(
            f"{where}: a message carries the id {redact.text(repr(ident), 40, one_line=True)}; "
            "a JSON-RPC id is a string or a number"
        )
    if "method" in value:  # the server's own request or notification: only what answers it
        method = value["method"]
        out: Message = {"method": method if isinstance(method, str) else ""}
        if "id" in value:
            out["id"] = ident
        return out
    if "error" in value:
        return {"id": ident, "error": _error(value["error"])}
    if "result" not in value:
        return {"id": ident}
    if ident not in reducers:
        return {"id": ident, "result": None}
    reduce = reducers[ident]
    if reduce is None:
        return {"id": ident, "result": value["result"]}
    try:
        return {"id": ident, "result": reduce(value["result"])}
    except TargetError as exc:
        return {"id": ident, "failed": exc}
    except _SURPRISES as exc:
        detail = redact.text(exc, 200, one_line=True)
        failed = TargetProtocolError(f"{where}: unexpected answer ({type(exc).__name__}: {detail})")
        return {"id": ident, "failed": failed}


def _error(error: Any) -> dict[str, Any]:
    """A JSON-RPC error object, bounded: its integer code and the start of its message."""
    if not isinstance(error, dict):
        return {"code": None, "message": ""}
    code = error.get("code")
    message = error.get("message")
    return {
        "code": code if type(code) is int else None,
        "message": message[:ERROR_CHARS] if isinstance(message, str) else "",
    }


class LineTooLong(Exception):
    """A line past the reader's ``max_bytes`` (``.size``: the bytes seen of it)."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class LineReader:
    """Newline-delimited messages from a byte stream (see the module docstring)."""

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no newline
        self._spill: Spill | None = None  # the long line being written to a file
        self._ready: deque[Body] = deque()  # spilled lines complete, in order

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes read; raises :class:`LineTooLong` past ``max_bytes``."""
        spill = self._spill
        if spill is None:
            self._buffer += chunk
            return
        end = chunk.find(b"\n")
        if end < 0:
            spill.write(chunk)
            if spill.size > self._max:
                self._drop()
                raise LineTooLong(spill.size)
            return
        spill.write(chunk[:end])
        self._spill = None
        if spill.size > self._max:
            spill.discard()
            raise LineTooLong(spill.size)
        spill.close()
        self._ready.append(spill)
        self._buffer += chunk[end + 1 :]

    def line(self) -> Body | None:
        """The next complete line (bytes, or a :class:`Spill` when long), else None."""
        if self._ready:
            return self._ready.popleft()
        if self._spill is not None:
            return None
        end = self._buffer.find(b"\n", self._scanned)
        if end < 0:
            self._scanned = len(self._buffer)
            if self._scanned > self._max:
                raise LineTooLong(self._scanned)
            if self._scanned > INLINE_DECODE_BYTES:
                self._spill = Spill()
                self._spill.write(bytes(self._buffer))
                self._buffer.clear()
                self._scanned = 0
            return None
        if end > self._max:
            raise LineTooLong(end)
        with memoryview(self._buffer) as view:
            line = bytes(view[:end])
        del self._buffer[: end + 1]
        self._scanned = 0
        return line

    def _drop(self) -> None:
        if self._spill is not None:
            self._spill.discard()
            self._spill = None

    def discard(self) -> None:
        """Drop what is held (files included)."""
        self._drop()
        while self._ready:
            body = self._ready.popleft()
            if isinstance(body, Spill):
                body.discard()
        self._buffer.clear()
