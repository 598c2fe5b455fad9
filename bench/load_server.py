"""A fixed-delay HTTP/1.1 search target for the latency benchmarks (run as its own process).

Every request is answered with a small Zengram-shaped JSON body ``--delay-ms``
after its headers arrive. With ``--stall-s`` the target stalls once: requests
arriving between ``--stall-after-s`` and ``--stall-after-s + --stall-s``
(counted from the first request) are held until the stall ends.

    .venv/bin/python bench/load_server.py --port 18090 --delay-ms 20
"""

from __future__ import annotations

import argparse
import asyncio
import time

BODY = (
    b'{"query":"q","count":2,"results":'
    b'[{"id":"mem-1","effective_score":0.9},{"id":"mem-2","effective_score":0.5}]}'
)
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
    len(BODY),
    BODY,
)


class Clock:
    """When to answer a request that arrives now."""

    def __init__(self, delay_s: float, stall_after_s: float, stall_s: float) -> None:
        self.delay_s = delay_s
        self.stall_after_s = stall_after_s
        self.stall_s = stall_s
        self.first: float | None = None

    def answer_at(self, now: float) -> float:
        if self.first is None:
            self.first = now
        stall_from = self.first + self.stall_after_s
        if self.stall_s > 0 and stall_from <= now < stall_from + self.stall_s:
            return stall_from + self.stall_s + self.delay_s
        return now + self.delay_s


class Answerer(asyncio.Protocol):
    """Answers each request (headers only, no body) after the clock's delay."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        loop = asyncio.get_running_loop()
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            self.buffer = self.buffer[end + 4 :]
            at = self.clock.answer_at(time.monotonic())
            loop.call_at(at, self._answer)

    def _answer(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(ANSWER)


async def serve(port: int, clock: Clock) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Answerer(clock), "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--stall-after-s", type=float, default=0.0)
    parser.add_argument("--stall-s", type=float, default=0.0)
    args = parser.parse_args()
    clock = Clock(args.delay_ms / 1000, args.stall_after_s, args.stall_s)
    asyncio.run(serve(args.port, clock))


if __name__ == "__main__":
    main()
