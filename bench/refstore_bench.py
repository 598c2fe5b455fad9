"""Reference-store speed: import, BM25 search latency and throughput over HTTP.

Starts ``benchd refstore`` (one server process, bm25 unless --retriever)
on a free loopback port, imports a synthetic corpus of N memories in
500-record requests, then measures:

- import time for the whole corpus (goal <= 10 s for 10,000);
- search p50/p99 at concurrency 1 (goal p50 <= 2 ms at 10,000);
- searches/s at concurrency 16 for a few seconds (goal >= 500/s).

Beside it, the peer figure: the same FTS5 BM25 query run in-process on a
plain SQLite table with no HTTP at all (the floor any HTTP store pays on
top of), with the ratio. Run from the repo root::

    .venv/bin/python bench/refstore_bench.py [--memories 10000] [--retriever bm25]

``--listing N [N ...]`` instead lists a namespace of N records (beside a
quarter as many of another tenant's) in pages of 500 on the store's index
object, the way ``GET /export`` pages it: by OFFSET as before (every page
counts the namespace and steps over every earlier row) and by page cursor
(the rows after the previous page's last one), with seconds per page at the
start and the end of the listing (goal: the end no slower than 2x the
start, i.e. O(page)). ``--ms-cursor`` adds the zengram-4.3 profile's pages
(newest first by a millisecond cursor): walked from the start on every
page as before, and resumed from the previous page's cursor now.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import httpx

from benchd.refstore.catalog import SearchFilter
from benchd.refstore.index import MemoryIndex
from benchd.refstore.records import parse_record
from benchd.refstore.text import STOPWORDS, fts_match

GOALS = {"import_s": 10.0, "p50_ms": 2.0, "rps": 500.0, "listing_end_over_start": 2.0}
LISTING_PAGE = 500


def corpus(n: int, seed: int = 7) -> tuple[list[dict[str, Any]], list[str]]:
    """N synthetic memories over a Zipf vocabulary, and 300 queries drawn from them.

    As in English text, the most frequent words are function words (benchd's
    stopword list) and content words follow them in the Zipf ranking.
    """
    rng = random.Random(seed)
    vocab = sorted(STOPWORDS) + [
        "".join(
            rng.choice("bcdfghjklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 4))
        )
        for _ in range(6000)
    ]
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]
    memories = []
    for i in range(n):
        words = rng.choices(vocab, weights=weights, k=rng.randint(15, 40))
        memories.append({"id": f"bench-{i}", "content": " ".join(words), "type": "fact"})
    queries = []
    for _ in range(300):
        words = rng.choice(memories)["content"].split()
        queries.append(" ".join(rng.sample(words, min(4, len(words)))))
    return memories, queries


def start_server(retriever: str, key: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "BENCH_REFSTORE_KEY": key}
    cmd = [
        sys.executable, "-m", "benchd", "refstore", "--listen", "127.0.0.1:0",
        "--api-key-env", "BENCH_REFSTORE_KEY", "--retriever", retriever,
        "--read-limit", "0", "--write-limit", "0", "--log-level", "warning",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()  # the server prints its URL once listening
    if not url.startswith("http://"):
        proc.kill()
        raise SystemExit(f"refstore did not start (printed {url!r})")
    return proc, url


def bench_import(client: httpx.Client, memories: list[dict[str, Any]]) -> float:
    start = time.perf_counter()
    for offset in range(0, len(memories), 500):
        body = {"data": memories[offset : offset + 500], "operator_approved": True}
        client.post("/export/import", json=body, timeout=120).raise_for_status()
    return time.perf_counter() - start


class RawClient:
    """A lean HTTP/1.1 keep-alive client (asyncio streams), so the figures are the store's.

    httpx's async client costs ~2 ms of client CPU per request on this
    machine, which would hide the server's own speed.
    """

    def __init__(self, url: str, key: str) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self.host, self.port, self.key = host, int(port), key
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def get(self, path: str) -> bytes:
        if self._reader is None or self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        head = f"GET {path} HTTP/1.1\r\nhost: {self.host}\r\nx-api-key: {self.key}\r\n\r\n"
        self._writer.write(head.encode())
        raw = await self._reader.readuntil(b"\r\n\r\n")
        status = raw[9:12]
        length = 0
        for line in raw.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await self._reader.readexactly(length)
        if status != b"200":
            raise RuntimeError(f"search answered {status.decode()}: {body[:200]!r}")
        return body

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def _path(q: str) -> str:
    query = urlencode(
        {"q": q, "limit": "10", "format": "index", "read_only": "true", "client_id": "global"}
    )
    return f"/memory/search?{query}"


async def bench_serial(url: str, key: str, queries: list[str], rounds: int) -> list[float]:
    client = RawClient(url, key)
    for q in queries[:50]:  # warm-up
        await client.get(_path(q))
    samples = []
    for i in range(rounds):
        path = _path(queries[i % len(queries)])
        start = time.perf_counter()
        await client.get(path)
        samples.append(time.perf_counter() - start)
    await client.close()
    return samples


async def bench_concurrent(
    url: str, key: str, queries: list[str], workers: int, seconds: float
) -> float:
    done = 0
    deadline = time.perf_counter() + seconds
    paths = [_path(q) for q in queries]

    async def worker(offset: int) -> None:
        nonlocal done
        client = RawClient(url, key)
        i = offset
        while time.perf_counter() < deadline:
            await client.get(paths[i % len(paths)])
            done += 1
            i += workers
        await client.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(workers)))
    return done / (time.perf_counter() - start)


def peer_sqlite(memories: list[dict[str, Any]], queries: list[str], rounds: int) -> list[float]:
    """The floor: the same FTS5 BM25 top-10 in-process, no HTTP, no JSON."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(body, tokenize = 'porter unicode61')")
    db.executemany("INSERT INTO f (body) VALUES (?)", [(m["content"],) for m in memories])
    sql = "SELECT rowid, bm25(f) FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT 10"
    samples = []
    for i in range(rounds):
        match = fts_match(queries[i % len(queries)]) or '""'
        start = time.perf_counter()
        db.execute(sql, (match,)).fetchall()
        samples.append(time.perf_counter() - start)
    return samples


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0


def _row(name: str, value: str, goal: str = "-", peer: str = "-", ratio: str = "-") -> str:
    return f"{name:34} {value:>10} {goal:>8} {peer:>10} {ratio:>7}"


def report(n: int, import_s: float, serial: list[float], rps: float, peer: list[float]) -> None:
    p50, peer_p50 = pct(serial, 0.5), pct(peer, 0.5)
    print(f"corpus: {n} memories; one refstore process; 2-core loopback")
    print(_row("figure", "refstore", "goal", "peer", "ratio"))
    print(_row("import (s)", f"{import_s:.2f}", f"<={GOALS['import_s']:g}"))
    print(
        _row(
            "search p50, concurrency 1 (ms)",
            f"{p50:.3f}",
            f"<={GOALS['p50_ms']:g}",
            f"{peer_p50:.3f}",
            f"{p50 / peer_p50:.1f}x",
        )
    )
    print(
        _row(
            "search p99, concurrency 1 (ms)",
            f"{pct(serial, 0.99):.3f}",
            "-",
            f"{pct(peer, 0.99):.3f}",
        )
    )
    print(_row("searches/s, concurrency 16", f"{rps:.0f}", f">={GOALS['rps']:g}"))
    print("peer = the same FTS5 BM25 top-10 query in-process on plain SQLite (no HTTP, no JSON)")
    ok = import_s <= GOALS["import_s"] and p50 <= GOALS["p50_ms"] and rps >= GOALS["rps"]
    print("goals met" if ok else "GOALS NOT MET" if n == 10_000 else "(goals are for 10,000)")
    print(f"(mean serial {statistics.fmean(serial) * 1000:.3f} ms over {len(serial)} searches)")


def listing_index(n: int) -> MemoryIndex:
    """An in-memory index holding N records of namespace ``bench``, every 5th row another's."""
    memories, _queries = corpus(n + n // 4)
    index = MemoryIndex(None, dims=1)
    now = "2026-12-01T00:00:00.000Z"
    index.begin()
    for i, raw in enumerate(memories):
        tenant = "other" if i % 5 == 4 else "bench"
        index.write(parse_record({**raw, "client_id": tenant, "type": "event"}, now))
    index.commit()
    return index


Page = Callable[[SearchFilter, bool, int, int], tuple[list[dict[str, Any]], int]]


def time_listing(export: Page) -> tuple[list[float], list[str]]:
    """Page through namespace ``bench``: seconds per page, and the ids listed."""
    where = SearchFilter(client_id="bench")
    seconds: list[float] = []
    ids: list[str] = []
    while True:
        start = time.perf_counter()
        rows, total = export(where, True, LISTING_PAGE, len(ids))
        seconds.append(time.perf_counter() - start)
        ids.extend(row["id"] for row in rows)
        if len(ids) >= total or not rows:
            return seconds, ids


def listing_ways(index: MemoryIndex, ms_cursor: bool) -> list[tuple[str, Page]]:
    """(name, page function) pairs, before then now; the zengram-4.3 profile's too if asked."""
    ways: list[tuple[str, Page]] = [
        ("OFFSET (before)", index.export_by_offset),
        ("cursor (now)", index.export),
    ]
    if ms_cursor:

        def walk_from_start(*args: Any) -> tuple[list[dict[str, Any]], int]:
            index._ms_cursors.sync(object())  # forget: count and walk from the start
            return index.export_by_ms_cursor(*args)

        ways += [
            ("ms walk (before)", walk_from_start),
            ("ms resumed (now)", index.export_by_ms_cursor),
        ]
    return ways


def bench_listing(n: int, ms_cursor: bool = False) -> bool:
    """Print each way's seconds per page at the start and the end; True if now no page
    costs more at the end of the listing than at its start (the cost per page does not grow
    with the offset)."""
    started = time.perf_counter()
    index = listing_index(n)
    print(
        f"listing {n:,} records (+{n // 4:,} another tenant's) in pages of {LISTING_PAGE}"
        f" (index built in {time.perf_counter() - started:.1f} s;"
        f" load average {os.getloadavg()[0]:.2f})"
    )
    print(f"{'paging':22} {'pages':>6} {'first ms/page':>14} {'last ms/page':>13}"
          f" {'last/first':>10} {'whole (s)':>10}")  # fmt: skip
    listed: list[list[str]] = []
    wholes: list[float] = []
    ratios: list[float] = []
    for name, export in listing_ways(index, ms_cursor):
        seconds, ids = time_listing(export)
        listed.append(ids)
        edge = max(1, min(10, len(seconds) // 4))  # pages averaged at each end
        head, tail = statistics.fmean(seconds[:edge]), statistics.fmean(seconds[-edge:])
        ratios.append(tail / head)
        wholes.append(sum(seconds))
        print(f"{name:22} {len(seconds):6} {head * 1000:14.2f} {tail * 1000:13.2f}"
              f" {ratios[-1]:9.1f}x {wholes[-1]:10.2f}")  # fmt: skip
    index.close()
    print(f"(first/last: the mean of the first and of the last {edge} pages)")
    pairs = range(0, len(listed), 2)  # (before, now)
    same = all(len(listed[i]) == n and listed[i] == listed[i + 1] for i in pairs)
    for i in pairs:
        label = "ms-cursor listing" if i else "whole listing"
        print(f"{label}: before / now = {wholes[i] / wholes[i + 1]:.1f}x")
    print(f"same {n:,} ids in the same order before and now: {'yes' if same else 'NO'}")
    return same and max(ratios[1::2]) <= GOALS["listing_end_over_start"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument(
        "--listing", type=int, nargs="+", metavar="N", help="list N records instead (see above)"
    )
    parser.add_argument(
        "--ms-cursor",
        action="store_true",
        help="with --listing: also the zengram-4.3 profile's millisecond-cursor pages",
    )
    parser.add_argument("--retriever", default="bm25")
    parser.add_argument("--rounds", type=int, default=2000, help="serial searches")
    parser.add_argument("--seconds", type=float, default=5.0, help="concurrent run length")
    args = parser.parse_args()
    if args.listing:
        met = [bench_listing(n, args.ms_cursor) for n in args.listing]
        print("goals met" if all(met) else "GOALS NOT MET")
        return 0
    memories, queries = corpus(args.memories)
    key = secrets.token_hex(16)
    proc, url = start_server(args.retriever, key)
    try:
        with httpx.Client(base_url=url, headers={"x-api-key": key}) as client:
            import_s = bench_import(client, memories)
        serial = asyncio.run(bench_serial(url, key, queries, args.rounds))
        rps = asyncio.run(bench_concurrent(url, key, queries, 16, args.seconds))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    report(args.memories, import_s, serial, rps, peer_sqlite(memories, queries, args.rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
