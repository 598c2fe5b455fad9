"""Seeding a slow store: benchd's read-back beside a blind retry, against the real server's pacing.

Starts ``benchd refstore --profile zengram-4.3`` (imports pause 100 ms per
10 records, as Zengram v4.3 does) on a free loopback port, then seeds N
records (default 500, one import request) three ways and prints, for each,
what was reported (imported / skipped / missing), the requests retried and
the seed's duration:

- benchd with its default import deadline (timeout_s + 0.02 s per record);
- benchd with a deadline shorter than the import (``--short-timeout``):
  the import times out, is read back and only the rest is re-sent;
- the peer: a client that re-sends the same batch blindly after a timeout,
  the way benchd did before (its reading: ``skipped`` for records the server
  wrote after the client gave up).

Each run gets a fresh store. Run from the repo root::

    .venv/bin/python bench/slow_import.py [--records 500] [--short-timeout 2]
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import time
from typing import Any

import anyio
import httpx

from benchd.config.secrets import Secret
from benchd.errors import TargetError
from benchd.kinds.zengram import ZengramConfig, ZengramTarget


def _records(n: int) -> list[dict[str, Any]]:
    return [{"id": f"slow-{i}", "type": "event", "content": f"slow import {i}"} for i in range(n)]


class _Store:
    """``benchd refstore --profile zengram-4.3`` in its own process."""

    def __init__(self) -> None:
        self.key = "bench-" + secrets.token_hex(8)
        env = {**os.environ, "SLOW_BENCH_KEY": self.key}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchd", "refstore", "--listen", "127.0.0.1:0",
             "--api-key-env", "SLOW_BENCH_KEY", "--profile", "zengram-4.3",
             "--read-limit", "0", "--write-limit", "0", "--log-level", "error"],
            env=env, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def listed(self, namespace: str) -> int:
        params = {"client_id": namespace, "limit": 5000}
        body = httpx.get(f"{self.url}/export", params=params, headers={"x-api-key": self.key})
        return int(body.json()["total"])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


async def _benchd(store: _Store, n: int, **settings: Any) -> str:
    target = ZengramTarget(ZengramConfig(url=store.url, **settings), Secret(store.key, "bench"))
    started = time.monotonic()
    try:
        r = await target.seed(_records(n))
    except TargetError as exc:
        return f"FAILED {exc.kind} after {time.monotonic() - started:.1f} s"
    finally:
        await target.aclose()
    return (
        f"imported {r.imported:4d}  skipped {r.skipped:4d}  missing {len(r.missing):4d}  "
        f"retries {r.retries}  {r.duration_s:5.1f} s"
    )


async def _blind(
    store: _Store, n: int, timeout_s: float, retry_timeout_s: float, attempts: int = 4
) -> str:
    """The peer: POST the batch; on a timeout, POST the same batch again (``retry_timeout_s``)."""
    body = {"data": [{**r, "client_id": "blind"} for r in _records(n)], "operator_approved": True}
    headers = {"x-api-key": store.key}
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=store.url, headers=headers) as http:
        for attempt in range(attempts):
            try:
                timeout = timeout_s if attempt == 0 else retry_timeout_s
                reply = await http.post("/export/import", json=body, timeout=timeout)
                counts = reply.json()
            except httpx.TimeoutException:
                continue
            took = time.monotonic() - started
            return (
                f"imported {counts['imported']:4d}  skipped {counts['skipped']:4d}  "
                f"stored {store.listed('blind'):4d}  retries {attempt}  {took:5.1f} s"
            )
    return f"FAILED timeout after {time.monotonic() - started:.1f} s ({attempts} attempts)"


async def main(args: argparse.Namespace) -> None:
    n, short = args.records, args.short_timeout
    runs: list[tuple[str, Any]] = [
        ("benchd, default deadline", lambda s: _benchd(s, n)),
        (
            f"benchd, {short:g} s deadline",
            lambda s: _benchd(s, n, timeout_s=short, import_timeout_per_record_s=0.0),
        ),
        (f"peer: blind retry, {short:g} s", lambda s: _blind(s, n, short, short)),
        (f"peer: {short:g} s, retried with 30 s", lambda s: _blind(s, n, short, 30.0)),
    ]
    print(f"{n} records in one import; the store pauses 100 ms per 10 (>= {n / 100:.1f} s)")
    for label, run in runs:
        store = _Store()
        try:
            print(f"{label:32s} {await run(store)}")
        finally:
            store.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=500)
    parser.add_argument("--short-timeout", type=float, default=2.0)
    anyio.run(main, parser.parse_args())
