"""How long one MCP probe's large answers hold the event loop, beside a reference-store probe.

One command::

    .venv/bin/python bench/loop_hold.py [--repeats 5]

Starts the reference store (``benchd refstore``, a subprocess) and, for each
case, the hand-written MCP server of the tests
(``tests/kinds/mcp/hostile_server.py``, a subprocess). On one event loop,
as in the daemon, a zengram probe searches the reference store back to back
while the MCP probe reads, ``--repeats`` times, through the same tool store
a probe uses:

- ``text 5.5 MiB``: a ``read_graph`` text of 60,000 entities (stdio), kept as
  its 60,000 ids;
- ``text 5.5 MiB http``: the same as one event of an event stream;
- ``20,000 notifications``: ``notifications/progress`` lines, then the answer;
- ``line 7.9 MB``: one stdio line of 7.9 MB.

A ticker task sleeps 1 ms at a time and records how late it wakes (the
longest *hold* of the loop, wall clock) and how much CPU this process spent
between two wakes, all its threads together (the same hold — a helper
thread unpickling the decode worker's answer holds the GIL, so it counts —
without the time the machine gave to other processes: on a shared 2-core
box under load the wall figure is mostly other processes' time slices, the
reference probe alone shows how much). Goal: under 20 ms each. It prints
both, beside the reference-store probe's slowest search, and a line for
the reference probe alone; exit status 1 when a CPU hold is over the goal.
Not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from benchd.config.secrets import Secret
from benchd.kinds.mcp.config import McpConfig, SearchTool, ToolMap
from benchd.kinds.mcp.connect import open_session
from benchd.kinds.mcp.tools import ToolStore
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.store.target import SearchQuery

REPO = Path(__file__).resolve().parents[1]
HOSTILE = REPO / "tests" / "targets" / "mcp" / "hostile_server.py"
GOAL_MS = 20.0
RESULTS = SearchTool(name="search", arguments={"query": "{q}"}, ids="results[*].id")
GRAPH = SearchTool(
    name="search", arguments={"query": "{q}"}, ids="entities[*].name", returns="set"
)


class Ticker:
    """How late a 1 ms sleep wakes (wall) and this process's CPU between two wakes."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self.running = True

    async def run(self) -> None:
        while self.running:
            wall, cpu = time.perf_counter(), time.process_time()
            await anyio.sleep(0.001)
            self.wall = max(self.wall, time.perf_counter() - wall - 0.001)
            self.cpu = max(self.cpu, time.process_time() - cpu)


def start_refstore(key: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "BENCH_REFSTORE_KEY": key}
    cmd = [
        sys.executable, "-m", "benchd", "refstore", "--listen", "127.0.0.1:0",
        "--api-key-env", "BENCH_REFSTORE_KEY", "--retriever", "bm25",
        "--read-limit", "0", "--write-limit", "0", "--log-level", "warning",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()  # printed once listening
    if not url.startswith("http://"):
        proc.kill()
        raise SystemExit(f"refstore did not start (printed {url!r})")
    return proc, url


@asynccontextmanager
async def http_server(mode: str) -> AsyncIterator[str]:
    with anyio.fail_after(60):
        proc = await anyio.open_process(
            [sys.executable, str(HOSTILE), "--mode", mode, "--transport", "http", "--port", "0"]
        )
    try:
        assert proc.stdout is not None
        line = b""
        while not line.endswith(b"\n"):
            line += await proc.stdout.receive(1)
        yield f"http://127.0.0.1:{int(line.split()[-1])}/mcp"
    finally:
        proc.kill()
        await proc.wait()
        await proc.aclose()


def stdio_config(mode: str, search: SearchTool, *extra: str) -> McpConfig:
    return McpConfig(
        tools=ToolMap(search=search),
        command=sys.executable,
        args=(str(HOSTILE), "--mode", mode, *extra),
        timeout_s=120.0,
    )


async def beside(
    ref: ZengramTarget, mcp: Callable[[], Awaitable[Any]], repeats: int
) -> dict[str, float]:
    """The loop's longest hold while ``mcp`` runs ``repeats`` times beside the ref probe."""
    ticker = Ticker()
    slowest = [0.0]

    async def ref_probe() -> None:
        while ticker.running:
            started = time.perf_counter()
            await ref.search(SearchQuery(q="alpine lakes", limit=10))
            slowest[0] = max(slowest[0], time.perf_counter() - started)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker.run)
        tg.start_soon(ref_probe)
        try:
            for _ in range(repeats):
                await mcp()
        finally:
            ticker.running = False
    return {"wall": ticker.wall * 1000, "cpu": ticker.cpu * 1000, "ref": slowest[0] * 1000}


async def measure(url: str, key: str, repeats: int) -> dict[str, dict[str, float]]:
    ref = ZengramTarget(ZengramConfig(url=url, max_retries=0), Secret(key, "bench"))
    await ref.search(SearchQuery(q="warm", limit=10))
    rows: dict[str, dict[str, float]] = {}
    cases = {
        "text 5.5 MiB": (stdio_config("big-text", GRAPH), 60_000),
        "20,000 notifications": (stdio_config("flood", RESULTS, "--entities", "20000"), 1),
        "line 7.9 MB": (stdio_config("big-line", RESULTS), 1),
    }
    try:
        rows["reference probe alone"] = await beside(ref, anyio.lowlevel.checkpoint, 1)
        for name, (config, expected) in cases.items():
            rows[name] = await one_case(ref, config, expected, repeats)
        async with http_server("big-text") as mcp_url:
            config = McpConfig(
                tools=ToolMap(search=GRAPH), transport="http", url=mcp_url, timeout_s=120.0
            )
            rows["text 5.5 MiB http"] = await one_case(ref, config, 60_000, repeats)
    finally:
        await ref.aclose()
    return rows


async def one_case(
    ref: ZengramTarget, config: McpConfig, expected: int, repeats: int
) -> dict[str, float]:
    session = open_session(config, None)
    store = ToolStore(config, session)

    async def call() -> None:
        ids, _ = await store.search("q", 10)
        assert len(ids) == expected, len(ids)

    try:
        await call()  # the server started, the decode worker up
        return await beside(ref, call, repeats)
    finally:
        await session.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    key = secrets.token_hex(16)
    proc, url = start_refstore(key)
    try:
        rows = anyio.run(measure, url, key, args.repeats)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print(f"longest event-loop hold, {args.repeats} answers each (goal: under {GOAL_MS:g} ms)")
    print(f"  {'case':24} {'wall ms':>8} {'cpu ms':>8} {'ref search max ms':>18}")
    print(f"  (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    worst = 0.0
    for name, row in rows.items():
        print(f"  {name:24} {row['wall']:8.1f} {row['cpu']:8.1f} {row['ref']:18.1f}")
        if name != "reference probe alone":
            worst = max(worst, row["cpu"])
    return 0 if worst < GOAL_MS else 1


if __name__ == "__main__":
    sys.exit(main())
