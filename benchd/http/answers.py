"""Reading a store's answer: one bounded way for every target kind and both passes.

An answer passes these bounds before an adapter sees it:

- **head** — at most :data:`MAX_HEAD_BYTES` of status line and headers and
  :data:`MAX_HEADERS` header lines (both HTTP layers);
- **size** — the HTTP layer (:mod:`benchd.http.client` for adapters,
  :mod:`benchd.http.sender` for the load pass) refuses an answer whose
  declared ``Content-Length`` exceeds ``max_response_bytes`` before reading
  it, and stops reading at that many bytes;
- **decoded size** — :class:`Inflater` undoes at most :data:`MAX_CODINGS`
  content-codings as the body arrives, counting what each stage produces
  *inside* the decompressor (``max_length``), so a bomb stacked in several
  codings never holds more than a piece of itself in memory;
- **numbers** — a score is a finite number of magnitude at most
  :data:`MAX_SCORE` (:func:`finite_number`): beyond, the drift stage's sums
  and differences would overflow;
- **depth** — JSON nested deeper than :data:`MAX_DEPTH` is a ``decode``
  error (CPython's parser raises ``RecursionError`` near 1,000 levels, and
  any recursive walk of a deep value would too);
- **time** — decoding JSON holds the interpreter for its whole run, in
  proportion to the answer's size, and a thread does not help. So an answer
  over :data:`INLINE_DECODE_BYTES` (well above a listing page or a search
  answer; ``bench/decode_line.py``, figures in docs/load.md) is decoded in
  benchd's decode worker process
  (:mod:`benchd.http.decoder`), which hands back only what the adapter
  needs (``reduce``: ids cut to the limit, counts, listed records). Another
  probe's scheduled sends then never wait behind a large decode. The worker
  starts at the first large answer, once per process, and never runs the
  user's ``__main__``;
- **shape** — counts must be non-negative integers no larger than what was
  sent (:func:`count`), ranked ids are cut to the requested limit
  (:func:`first_ids`); a listing stops at :func:`benchd.store.listing.listing_limit` records.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import weakref
import zlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import orjson
from anyio.lowlevel import RunVar

from benchd import redact
from benchd.errors import TargetProtocolError
from benchd.http import decoder

__all__ = [
    "INLINE_DECODE_BYTES",
    "LABEL_SOURCE_CHARS",
    "MAX_CODINGS",
    "MAX_DEPTH",
    "MAX_HEADERS",
    "MAX_HEAD_BYTES",
    "MAX_SCORE",
    "Body",
    "BodyBuffer",
    "DecodeError",
    "Inflater",
    "Spill",
    "count",
    "decode",
    "finite_number",
    "first_ids",
    "loads",
    "reduced",
]

T = TypeVar("T")

LABEL_SOURCE_CHARS = 4096
"""How much of a store's label (a model or version name) an adapter keeps.

Far more than any output shows (``redact.LABEL_CHARS``): the output path then
masks a key whole before it cuts. Cutting here at the shown length would leave
the first characters of a key that straddles the cut standing, unmasked.
"""

MAX_DEPTH = 64
"""Deepest JSON nesting accepted (a store's answers nest 3-5 levels)."""

MAX_HEAD_BYTES = 64 * 1024
"""Most bytes of an answer's status line and headers (a store's are well under 2 KiB)."""

MAX_HEADERS = 100
"""Most header lines in an answer."""

MAX_CODINGS = 2
"""Most content-codings stacked on one answer (``gzip`` is one; ``gzip, gzip`` two)."""

MAX_SCORE = 1e15
"""Largest score magnitude kept (larger ones are read as absent, like NaN)."""

_PIECE = 64 * 1024  # each stage inflates at most this much per call

INLINE_DECODE_BYTES = 512 * 1024
"""Answers up to this size are decoded on the event loop; larger ones in the worker."""


# One decode worker per event loop: large decodes queue for it, so at most one
# large answer is held decoded at a time (a bound on memory as well as on CPU).
_WORKER: RunVar[anyio.CapacityLimiter] = RunVar("benchd_decode_worker")


def _worker_limiter() -> anyio.CapacityLimiter:
    try:
        return _WORKER.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(1)
        _WORKER.set(limiter)
        return limiter


def loads(body: bytes, what: str) -> Any:
    """``body`` as JSON, or :class:`TargetProtocolError` (kind ``decode``) naming ``what``.

    The value and every error are ``json.loads``'s: orjson decodes an answer up
    to :data:`INLINE_DECODE_BYTES` first, and whatever it refuses (NaN, a
    number beyond a double, a lone surrogate, a BOM, UTF-16 or -32, anything
    malformed) or may read otherwise (an integer beyond 64 bits, which it makes
    a float) is decoded again by ``json``. A larger answer (in the decode
    worker) is ``json``'s alone: orjson's peak memory is about twice json's.
    """
    if len(body) > INLINE_DECODE_BYTES:
        return _json_loads(body, what)
    try:
        value = orjson.loads(body)
    except Exception:  # whatever orjson refuses, json decides: its value or its error
        return _json_loads(body, what)
    shallow = _shallow(value, exact=True)
    if shallow is None:
        return _json_loads(body, what)
    if not shallow:
        raise _too_deep(what)
    return value


def _json_loads(body: bytes, what: str) -> Any:
    """:func:`loads` by the ``json`` module alone."""
    try:
        value = json.loads(body)
    except RecursionError:
        raise _too_deep(what) from None
    except (ValueError, UnicodeDecodeError):
        raise TargetProtocolError(f"{what}: answer is not JSON ({len(body)} bytes)") from None
    if not _shallow(value):
        raise _too_deep(what)
    return value


def _too_deep(what: str) -> TargetProtocolError:
    return TargetProtocolError(f"{what}: answer nests JSON deeper than {MAX_DEPTH} levels")


def _shallow(value: Any, exact: bool = False) -> bool | None:
    """Whether no container in ``value`` is nested deeper than :data:`MAX_DEPTH`.

    ``exact`` (orjson's ``value``): None when it holds a float of magnitude at
    least 2^63 (maybe an integer ``json`` keeps exact) or NaN. Level by level,
    never recursive (its cost: docs/load.md); one type test a scalar.
    """
    if type(value) is float:
        return True if not exact or -_INT64 < value < _INT64 else None
    watched = _WATCHED if exact else _CONTAINERS
    level: list[Any] = [value] if type(value) in _CONTAINERS else []
    huge = False  # set by a float out of range (few or none): only a float pays its test
    for _ in range(MAX_DEPTH):
        if not level:
            return True
        # the next level: the containers (a float out of range ends the walk)
        level = [
            child
            for node in level
            for child in (node.values() if type(node) is dict else node)
            if type(child) in watched
            and (type(child) is not float or (not -_INT64 < child < _INT64 and (huge := True)))
        ]
        if huge:
            return None
    return not level


_CONTAINERS = frozenset((dict, list))  # what JSON nests: one set lookup a value
_WATCHED = frozenset((dict, list, float))
_INT64 = 2.0**63  # orjson reads an integer beyond 64 bits as a float at least this large


class Spill:
    """A large answer's body in a temporary file, written chunk by chunk as it arrives.

    A large body held as one buffer is copied whole at least three times on
    its way to the decode worker (joined, pickled, buffered for the pipe),
    each copy holding the event loop. Written as it arrives it costs the
    loop only small writes, and the worker reads the file itself.
    The file is removed when the decode is done or the object is dropped.
    """

    def __init__(self) -> None:
        fd, self.path = tempfile.mkstemp(prefix="benchd-answer-")
        self._file = os.fdopen(fd, "wb")
        self.size = 0
        self._remove = weakref.finalize(self, _remove, self.path)

    def write(self, chunk: bytes) -> None:
        self._file.write(chunk)
        self.size += len(chunk)

    def close(self) -> None:
        self._file.close()

    def discard(self) -> None:
        self._file.close()
        self._remove()

    def __len__(self) -> int:
        return self.size


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


Body = bytes | Spill
"""An answer's body: bytes, or a :class:`Spill` past :data:`INLINE_DECODE_BYTES`."""


_COALESCE_BYTES = 16384


class BodyBuffer:
    """Collects a body in memory up to :data:`INLINE_DECODE_BYTES`, then in a :class:`Spill`."""

    def __init__(self, spill: bool = True) -> None:
        self._chunks: list[bytes] = []
        self._small = bytearray()  # tiny reads, coalesced (an object per read costs more)
        self._spill: Spill | None = None
        self._may_spill = spill  # False: keep it in memory (a body still to be inflated)
        self.size = 0

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self._spill is not None:
            self._spill.write(chunk)
            return
        if len(chunk) < _COALESCE_BYTES:
            self._small += chunk
            if len(self._small) >= _COALESCE_BYTES:
                self._chunks.append(bytes(self._small))
                self._small.clear()
        else:
            self._flush_small()
            self._chunks.append(chunk)
        if self._may_spill and self.size > INLINE_DECODE_BYTES:
            self._flush_small()
            self._spill = Spill()
            for held in self._chunks:
                self._spill.write(held)
            self._chunks = []

    def _flush_small(self) -> None:
        if self._small:
            self._chunks.append(bytes(self._small))
            self._small.clear()

    def take(self) -> Body:
        """The whole body (the buffer is empty afterwards)."""
        spill, self._spill = self._spill, None
        if spill is not None:
            spill.close()
            return spill
        self._flush_small()
        body, self._chunks = b"".join(self._chunks), []
        return body

    def discard(self) -> None:
        self._chunks = []
        self._small = bytearray()
        if self._spill is not None:
            self._spill.discard()
            self._spill = None


_WORKER_NICE = 10
_niced: list[bool] = []  # set once in the worker process


def _lower_priority() -> None:
    """Run the decode worker at a lower CPU priority than the daemon's event loop.

    Decoding a large answer is background work beside the timed sends; on a
    busy 2-core box the loop should win the CPU when both want it.
    """
    if not _niced:
        _niced.append(True)
        with contextlib.suppress(OSError, AttributeError):
            os.nice(_WORKER_NICE)


def _reduced_in_worker(body: bytes, what: str, reduce: Callable[[Any], T] | None) -> T:
    """:func:`reduced`, in the decode worker."""
    _lower_priority()
    return reduced(body, what, reduce)


def _reduced_file(path: str, what: str, reduce: Callable[[Any], T] | None) -> T:
    """:func:`reduced` on a spilled body, in the decode worker."""
    _lower_priority()
    with open(path, "rb") as file:
        body = file.read()
    return reduced(body, what, reduce)


def reduced(body: bytes, what: str, reduce: Callable[[Any], T] | None) -> T:
    """Decode ``body`` and apply ``reduce`` to it; any surprise in ``reduce`` is ``decode``."""
    value = loads(body, what)
    if reduce is None:
        return value  # type: ignore[no-any-return]
    try:
        return reduce(value)
    except TargetProtocolError:
        raise
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError) as exc:
        detail = redact.text(exc, 200, one_line=True)
        raise TargetProtocolError(
            f"{what}: unexpected answer ({type(exc).__name__}: {detail})"
        ) from None


async def decode(body: Body, what: str, reduce: Callable[[Any], T] | None = None) -> T:
    """Decode a store's answer and reduce it, in the decode worker when it is large.

    ``reduce`` turns the decoded JSON into what the adapter keeps; for an
    answer over :data:`INLINE_DECODE_BYTES` it runs in the worker process, so
    it must be picklable (a module-level function or a ``functools.partial``
    of one) and should return something small.
    """
    if isinstance(body, bytes) and len(body) <= INLINE_DECODE_BYTES:
        return reduced(body, what, reduce)
    handle = decoder.Call()
    try:
        if isinstance(body, Spill):
            call: tuple[Any, ...] = (_reduced_file, body.path, what, reduce)
        else:
            call = (_reduced_in_worker, body, what, reduce)
        result: T = await anyio.to_thread.run_sync(
            decoder.call, handle, *call, abandon_on_cancel=True, limiter=_worker_limiter()
        )
    except decoder.WorkerStopped:
        raise TargetProtocolError(
            f"{what}: the decode worker stopped while reading a {len(body)}-byte answer "
            "(out of memory?); lower max_response_bytes"
        ) from None
    except anyio.get_cancelled_exc_class():
        decoder.cancel(handle)  # ends the worker only if it is decoding this answer
        raise
    finally:
        if isinstance(body, Spill):
            body.discard()
    return result


def finite_number(value: Any) -> float | None:
    """``value`` as a float when it is a JSON number (not a boolean) within ±:data:`MAX_SCORE`.

    NaN, infinities and extreme finite values are None: a score of 1e308
    would overflow the drift stage's sums (``math.fsum`` raises, numpy gives
    inf) and fail every later cycle.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value) if abs(value) <= MAX_SCORE else math.nan
        if math.isfinite(number):
            return number
    return None


class DecodeError(Exception):
    """A body :class:`Inflater` refuses: too large once decoded, corrupt, or not decodable."""

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large


def codings(header: str | None) -> list[str]:
    """The content-codings of a ``Content-Encoding`` value, in the order they were applied."""
    names = [c.strip().lower() for c in (header or "").split(",")]
    return [c for c in names if c and c != "identity"]


class _Stage:
    """One gzip or deflate layer: inflates at most ``_PIECE`` bytes per step."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._z: Any = zlib.decompressobj(wbits=47) if coding == "gzip" else None
        self._start = b""  # "deflate": its first two bytes tell zlib-wrapped from raw

    def _deflate(self, data: bytes) -> bytes:
        """Pick zlib-wrapped or raw deflate (servers send both as "deflate") from 2 bytes."""
        self._start += data
        if len(self._start) < 2:
            return b""
        head = self._start[0] << 8 | self._start[1]
        wrapped = self._start[0] & 0x0F == 8 and head % 31 == 0
        self._z = zlib.decompressobj(wbits=15 if wrapped else -zlib.MAX_WBITS)
        data, self._start = self._start, b""
        return data

    def run(self, data: bytes) -> Iterator[bytes]:
        if self._z is None:
            data = self._deflate(data)
        while data:
            try:
                out = self._z.decompress(data, _PIECE)
            except zlib.error as exc:
                raise DecodeError(f"corrupt {self.coding} body ({exc})") from None
            data = self._z.unconsumed_tail
            if out:
                yield out
            if self._z.eof:
                return

    def finish(self) -> None:
        if self._z is None or not self._z.eof:
            raise DecodeError(f"truncated {self.coding} body")


class Inflater:
    """Undoes a body's content-codings as it arrives, bounding every stage's output.

    ``feed(chunk)`` yields decoded pieces; each stage inflates at most
    :data:`_PIECE` bytes per call (zlib's ``max_length``), and the bytes a
    stage has produced are counted as it produces them, so the cap holds
    *while* decoding: a small answer that would inflate to gigabytes stops
    at ``limit`` plus one piece. More than :data:`MAX_CODINGS` codings, or
    one benchd does not speak (only ``gzip`` and ``deflate``), is refused
    before any byte is read.
    """

    def __init__(self, header: str | None, limit: int) -> None:
        names = codings(header)
        if len(names) > MAX_CODINGS:
            raise DecodeError(
                f"{len(names)} stacked content-codings; benchd undoes at most {MAX_CODINGS}"
            )
        unknown = [c for c in names if c not in ("gzip", "x-gzip", "deflate")]
        if unknown:
            raise DecodeError(f"unsupported content-encoding {unknown[0]!r}")
        self._stages = [_Stage("gzip" if c == "x-gzip" else c) for c in reversed(names)]
        self._made = [0] * len(self._stages)
        self._limit = limit
        self.size = 0  # decoded bytes so far

    @property
    def identity(self) -> bool:
        return not self._stages

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        """The decoded pieces of ``chunk``; raises :class:`DecodeError` past the limit."""
        yield from self._through(0, chunk)

    def _through(self, i: int, data: bytes) -> Iterator[bytes]:
        if i == len(self._stages):
            self.size += len(data)
            if self.size > self._limit:
                raise DecodeError(f"more than {self._limit} bytes once decoded", too_large=True)
            yield data
            return
        for piece in self._stages[i].run(data):
            self._made[i] += len(piece)
            if self._made[i] > self._limit:
                raise DecodeError(f"more than {self._limit} bytes once decoded", too_large=True)
            yield from self._through(i + 1, piece)

    def finish(self) -> None:
        """Check every coding ended where the body did (a cut stream is corrupt)."""
        for stage in self._stages:
            stage.finish()


def first_ids(items: Any, limit: int, what: str, field: str = "id") -> list[str]:
    """The ``field`` of each of the first ``limit`` result objects, as strings.

    An answer longer than the limit is cut (what was asked is what is scored);
    a result without an id is a ``decode`` error.
    """
    if not isinstance(items, list):
        raise TargetProtocolError(f"{what}: answer has no 'results' array")
    ids: list[str] = []
    for item in items[: max(0, limit)]:
        raw = item.get(field) if isinstance(item, dict) else None
        if raw is None or isinstance(raw, bool | dict | list):
            raise TargetProtocolError(f"{what}: a result has no usable {field!r}")
        ids.append(str(raw))
    return ids


def count(value: Any, name: str, most: int, what: str) -> int:
    """A count from an answer: a non-negative integer at most ``most`` (what was sent)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TargetProtocolError(f"{what}: {name} is {_show(value)}, expected an integer count")
    if not 0 <= value <= most:
        raise TargetProtocolError(
            f"{what}: {name} = {_show(value)} is impossible for a request of {most}"
        )
    return value


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
