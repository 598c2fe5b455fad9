"""Answers bounded while they are read and decoded, through both of benchd's HTTP stacks.

Hypothesis generates the hostile class itself and a raw loopback server
(``tests/hostile_store.py``'s :class:`RawAnswers`) sends it: bodies under one
to four stacked content-codings at several ratios, heads that never end or
hold thousands of lines, numbers at the edges of a double. Each answer goes
through the adapters' retrying client (over benchd's own pool, as adapters
send, and over httpx, as an MCP session or an injected transport sends) and
through the load pass's sender;
the outcome must be the decoded body when it is within every bound, else one
``decode`` error — and the memory this process held meanwhile (tracemalloc's
peak) stays a small multiple of a decode piece, whatever the bomb's size.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import math
import ssl
import tracemalloc
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import anyio
import httpx
import pytest
from connection_support import ConnectionSettings
from hostile_store import RawAnswers, response
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchd.drift.stats import Pool, noise_tests
from benchd.errors import TargetError
from benchd.http.answers import (
    INLINE_DECODE_BYTES,
    MAX_CODINGS,
    MAX_HEAD_BYTES,
    MAX_HEADERS,
    MAX_SCORE,
    Body,
    Spill,
    finite_number,
)
from benchd.http.client import RetryingClient, RetryPolicy, open_clients
from benchd.http.sender import make_http_fire

LIMIT = 1 << 20  # max_response_bytes in these tests
STACK = 1 << 20
"""What the HTTP stack may hold while reading, besides the body: asyncio allocates a 256 KiB
buffer for every socket read, anyio queues what was read ahead of the reader (up to about one
such read), h11 keeps its own 64 KiB. How much of it is live at once depends on who is ahead."""
PEAK = STACK + 2 * INLINE_DECODE_BYTES
"""Most this process may hold while reading any answer below: the stack, plus a body kept in
memory up to INLINE_DECODE_BYTES and joined once (a larger one spills to a file). PEAK was a
flat 1 MiB, set when the inline size was 32 KiB; at 512 KiB a body just under the cap held
512 KiB before spilling and the stack's read buffers took the peak to 1.12 MB (every time with
4 KiB server writes; 0.99-1.09 MB with 64 KiB writes). A bomb decoded whole holds its 9-64 MiB,
far past either bound."""
CODINGS = ("gzip", "deflate", "deflate-raw")  # deflate-raw: "deflate" sent without zlib header
SIZES = (1_000, 200_000, LIMIT - 64, LIMIT + 64, 9 << 20, 64 << 20)
FILLS = ("zeros", "text")
HOSTILE = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def raw() -> Iterator[RawAnswers]:
    with RawAnswers() as server:
        # first use imports and caches (~1.3 MB) that later answers must not be charged for
        for stack in STACKS.values():
            server.answer = functools.partial(_answer, gzip.compress(b"{}"), ("gzip",), 64)
            anyio.run(stack, server.url)
        yield server


# -- building answers ---------------------------------------------------------------


ZEROS = b"0" * (1 << 20)
TEXT = (b"harbor ferry quartz lamp " * 41944)[: 1 << 20]
TLS = ssl.create_default_context()  # built once: httpx would build one per client (~1 MB)


def _payload_chunks(size: int, fill: str) -> Iterator[bytes]:
    """A JSON document of exactly ``size`` bytes, in 1 MiB pieces."""
    head, tail = b'{"results":[{"id":"m1"}],"pad":"', b'"}'
    yield head
    left = size - len(head) - len(tail)
    unit = ZEROS if fill == "zeros" else TEXT
    while left > 0:
        yield unit[:left]
        left -= len(unit)
    yield tail


def _compressor(coding: str) -> Any:
    wbits = {"gzip": 31, "deflate": 15, "deflate-raw": -15}[coding]
    return zlib.compressobj(9, zlib.DEFLATED, wbits)


@functools.lru_cache(maxsize=256)
def encoded(size: int, fill: str, codings: tuple[str, ...]) -> bytes:
    """The payload under ``codings`` (applied in order), cached: each layer is built once."""
    if not codings:
        return b"".join(_payload_chunks(size, fill)) if size <= 2 * LIMIT else b""
    if len(codings) == 1:
        z = _compressor(codings[0])
        return b"".join(z.compress(c) for c in _payload_chunks(size, fill)) + z.flush()
    inner = encoded(size, fill, codings[:-1])
    z = _compressor(codings[-1])
    return z.compress(inner) + z.flush()


def _answer(body: bytes, codings: tuple[str, ...], chunk: int) -> list[bytes]:
    names = ", ".join("deflate" if c == "deflate-raw" else c for c in codings)
    head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    if names:
        head += f"Content-Encoding: {names}\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return [head.encode()] + [body[i : i + chunk] for i in range(0, len(body), chunk)]


# -- the two stacks --------------------------------------------------------------------


def _read(body: Body) -> bytes:
    """The body's SHA-256, read in pieces (so reading it back holds no copy of it)."""
    if not isinstance(body, Spill):
        return hashlib.sha256(body).digest()
    digest = hashlib.sha256()
    with open(body.path, "rb") as file:
        while piece := file.read(65536):
            digest.update(piece)
    body.discard()
    return digest.digest()


def _digest(chunks: Iterable[bytes]) -> bytes:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return digest.digest()


async def via_client(url: str) -> bytes:
    client = httpx.AsyncClient(
        base_url=url, headers={"accept-encoding": "gzip, deflate"}, verify=TLS
    )
    async with client:
        http = RetryingClient(client, RetryPolicy(max_retries=0), url, max_response_bytes=LIMIT)
        answer = await http.request("GET", "/memory/search")
        assert "content-encoding" not in answer.headers
        return _read(answer.body)


async def via_adapter(url: str) -> bytes:
    """As the adapters send: open_clients' retrying client over benchd's own pool."""
    clients = open_clients(ConnectionSettings(url, timeout_s=60.0, max_response_bytes=LIMIT), {})
    try:
        answer = await clients.http.request("GET", "/memory/search")
        assert "content-encoding" not in answer.headers
        return _read(answer.body)
    finally:
        await clients.http.aclose()


async def via_sender(url: str) -> bytes:
    got: list[bytes] = []

    def parse(_q: int, _s: int, headers: Mapping[str, str], body: Body) -> tuple[str, ...]:
        assert "content-encoding" not in headers
        got.append(_read(body))
        return ("m1",)

    build = lambda _q: httpx.Request("GET", f"{url}/memory/search")  # noqa: E731
    async with make_http_fire(
        build, parse, concurrency=1, timeout_s=60, max_response_bytes=LIMIT
    ) as fire:
        await fire(0)
    return got[0]


STACKS = {"adapter": via_adapter, "client": via_client, "sender": via_sender}


def outcome(
    raw: RawAnswers, answer: Callable[[], Iterable[bytes]], stack: str
) -> tuple[bytes | TargetError, int]:
    """What ``stack`` made of the server's ``answer()``, and tracemalloc's peak meanwhile.

    The peak covers the server thread too, which holds at most one chunk
    and asyncio's 64 KiB write buffer.
    """
    raw.answer = answer
    tracemalloc.start()
    try:
        result: bytes | TargetError = anyio.run(STACKS[stack], raw.url)
    except TargetError as exc:
        result = exc
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return result, peak


# -- decoded size ---------------------------------------------------------------------


@HOSTILE
@given(
    codings=st.lists(st.sampled_from(CODINGS), min_size=0, max_size=4).map(tuple),
    size=st.sampled_from(SIZES),
    fill=st.sampled_from(FILLS),
    chunk=st.sampled_from([1, 7, 1024, 65536]),
    stack=st.sampled_from(sorted(STACKS)),
)
def test_stacked_codings_decode_within_the_cap_or_fail_as_decode_without_holding_them(
    raw: RawAnswers, codings: tuple[str, ...], size: int, fill: str, chunk: int, stack: str
) -> None:
    body = encoded(size, fill, codings)
    if not codings and size > 2 * LIMIT:
        body = b"".join(_payload_chunks(2 * LIMIT, fill))  # identity: the wire cap meets it
    if chunk == 1 and len(body) > 65536:
        chunk = 4096  # one byte at a time is tested on small bodies; big ones would take minutes
    chunks = _answer(body, codings, chunk)
    result, peak = outcome(raw, lambda: chunks, stack)
    within = len(codings) <= MAX_CODINGS and size <= LIMIT and len(body) <= LIMIT
    if within:
        assert result == _digest(_payload_chunks(size, fill))
    else:
        assert isinstance(result, TargetError) and result.kind == "decode", result
        if len(codings) > MAX_CODINGS:
            assert "content-codings" in str(result)
        else:
            assert "max_response_bytes" in str(result)
    assert peak < PEAK, f"held {peak} bytes"


@pytest.mark.parametrize("stack", sorted(STACKS))
@pytest.mark.parametrize("coding", ["br", "zstd", "compress", "gzip, br"])
def test_a_coding_benchd_does_not_speak_is_refused_before_reading(
    raw: RawAnswers, stack: str, coding: str
) -> None:
    head = f"HTTP/1.1 200 OK\r\nContent-Encoding: {coding}\r\nContent-Length: 4\r\n\r\n"
    result, _ = outcome(raw, lambda: [head.encode(), b"abcd"], stack)
    assert isinstance(result, TargetError) and result.kind == "decode"
    assert "unsupported content-encoding" in str(result)


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_a_truncated_or_corrupt_coding_is_a_decode_error(raw: RawAnswers, stack: str) -> None:
    whole = gzip.compress(b'{"results": []}' * 100)
    for body in (whole[: len(whole) // 2], b"\x1f\x8b" + b"\xff" * 40):
        result, _ = outcome(raw, functools.partial(_answer, body, ("gzip",), 1024), stack)
        assert isinstance(result, TargetError) and result.kind == "decode", result


# -- heads ------------------------------------------------------------------------------


def _endless_head(line: bytes, repeat_name: bool) -> Iterator[bytes]:
    yield b"HTTP/1.1 200 OK\r\n"
    for i in range(10_000_000):  # ~ endless: the client must hang up long before
        yield line if repeat_name else b"X-%d: " % i + line
    yield b"Content-Length: 2\r\n\r\n{}"


def _endless_value(piece: bytes) -> Iterator[bytes]:
    yield b"HTTP/1.1 200 OK\r\nX-Long: "
    for _ in range(10_000_000):
        yield piece
    yield b"\r\nContent-Length: 2\r\n\r\n{}"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.sampled_from(["lines", "distinct-lines", "one-value"]),
    width=st.sampled_from([3, 100, 4096, 65536]),
    stack=st.sampled_from(sorted(STACKS)),
)
def test_a_head_that_never_ends_is_refused_early_and_cheaply(
    raw: RawAnswers, shape: str, width: int, stack: str
) -> None:
    answer: Callable[[], Iterable[bytes]]
    if shape == "one-value":
        answer = functools.partial(_endless_value, b"v" * width)
    else:
        line = b"X-Repeat: " + b"v" * width + b"\r\n"
        answer = functools.partial(_endless_head, line, shape == "lines")
    result, peak = outcome(raw, answer, stack)
    assert isinstance(result, TargetError) and result.kind == "decode", result
    # what the server got out before the client hung up: the head cap, one read,
    # and the loopback socket buffers -- never the 10^7 lines it had ready
    assert raw.sent < 32 << 20, raw.sent
    assert peak < 4 * MAX_HEAD_BYTES + (1 << 20), f"held {peak} bytes"


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_a_head_within_its_bounds_is_read(raw: RawAnswers, stack: str) -> None:
    lines = b"".join(b"X-Ok-%d: %s\r\n" % (i, b"v" * 100) for i in range(MAX_HEADERS - 5))
    head = b"HTTP/1.1 200 OK\r\n" + lines + b"Content-Length: 26\r\n\r\n"
    result, _ = outcome(raw, lambda: [head, b'{"results":[{"id":"m1"}]}\n'], stack)
    assert result == hashlib.sha256(b'{"results":[{"id":"m1"}]}\n').digest()


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_more_header_lines_than_the_bound_is_a_decode_error(raw: RawAnswers, stack: str) -> None:
    lines = b"".join(b"X-Many: %d\r\n" % i for i in range(MAX_HEADERS + 1))
    answer = [b"HTTP/1.1 200 OK\r\n" + lines + b"Content-Length: 2\r\n\r\n{}"]
    result, _ = outcome(raw, lambda: answer, stack)
    assert isinstance(result, TargetError) and result.kind == "decode"


# -- numbers ---------------------------------------------------------------------------

EXTREMES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1.7976931348623157e308, -1.7976931348623157e308, 5e-324, MAX_SCORE]),
    st.integers(min_value=-(10**400), max_value=10**400),
)


@settings(max_examples=400, deadline=None)
@given(values=st.lists(EXTREMES, min_size=2, max_size=8), current=EXTREMES)
def test_scores_kept_from_an_answer_never_overflow_the_drift_arithmetic(
    values: list[Any], current: Any
) -> None:
    kept = [v for v in map(finite_number, values) if v is not None]
    now = finite_number(current)
    for v in [*kept, now]:
        assert v is None or (math.isfinite(v) and abs(v) <= MAX_SCORE)
    if len(kept) < 2 or now is None:
        return
    pool = Pool([kept, kept], [now, kept[0]])
    assert math.isfinite(pool.delta())
    pool.moved()
    test = noise_tests({"score": pool}, n_resamples=50, seed=1, two_sided=True)["score"]
    assert 0.0 <= test.p_value <= 1.0 and math.isfinite(test.delta)


def test_json_numbers_past_a_double_are_absent_scores_not_errors() -> None:
    decoded = json.loads("[1e400, -1e400, 1e308, 1e16, 12.5]")
    assert [finite_number(v) for v in decoded] == [None, None, None, None, 12.5]


# -- a healthy store beside them -----------------------------------------------------------


def test_a_healthy_sender_beside_bombs_and_endless_heads_loses_no_request(
    raw: RawAnswers,
) -> None:
    """On one event loop, 200 healthy searches all answer while 40 hostile ones all fail."""
    bomb = encoded(64 << 20, "zeros", ("gzip", "gzip"))
    endless = functools.partial(_endless_head, b"X-Repeat: v\r\n", True)
    answers = [functools.partial(_answer, bomb, ("gzip", "gzip"), 65536), endless]
    calls = [0]

    def hostile_answer() -> Iterable[bytes]:
        calls[0] += 1
        return answers[calls[0] % 2]()

    raw.answer = hostile_answer
    with RawAnswers() as healthy:
        healthy.route = lambda _m, _t: response(200, b'{"results":[{"id":"m1"}]}')

        def parse(_q: int, _s: int, _h: Mapping[str, str], body: Body) -> tuple[str, ...]:
            data = body if isinstance(body, bytes) else b""
            return tuple(r["id"] for r in json.loads(data)["results"])

        async def main() -> tuple[int, int]:
            ok = failed = 0
            good = make_http_fire(
                lambda i: httpx.Request("GET", f"{healthy.url}/memory/search?i={i}"),
                parse, concurrency=4, timeout_s=60, max_response_bytes=LIMIT,
            )  # fmt: skip
            bad = make_http_fire(
                lambda i: httpx.Request("GET", f"{raw.url}/memory/search?i={i}"),
                parse, concurrency=2, timeout_s=60, max_response_bytes=LIMIT,
            )  # fmt: skip
            async with good as good_fire, bad as bad_fire:

                async def healthy_loop() -> None:
                    nonlocal ok
                    for i in range(200):
                        assert await good_fire(i) == ("m1",)
                        ok += 1

                async def hostile_loop() -> None:
                    nonlocal failed
                    for i in range(40):
                        with pytest.raises(TargetError) as caught:
                            await bad_fire(i)
                        assert caught.value.kind == "decode"
                        failed += 1

                async with anyio.create_task_group() as tg:
                    tg.start_soon(healthy_loop)
                    tg.start_soon(hostile_loop)
            return ok, failed

        assert anyio.run(main) == (200, 40)
