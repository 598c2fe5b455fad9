"""Scale: ``benchd once`` beside a plain client driving the same store API.

For each corpus size it writes a synthetic fixture (``benchd synth``, 100
queries) and runs pairs: ``benchd once`` (one cycle: seed, verify, serial
searches, cleanup) and a plain client that sends the same API requests
(500-record imports, 4 in flight; paged ``GET /export`` at 500; one search
per query; one ``DELETE`` per record, 4 in flight), each on a fresh
reference store (bm25, no rate limits). The plain client runs on aiohttp
where its interpreter has it, else on httpx with one client per worker (one
shared httpx client serializes its workers on its pool). Each runs in its
own process, measured with ``wait4``: wall time, CPU (user + system) and
peak RSS. The store counts the requests it answers, so CPU per request is
the client's CPU over the requests it sent. benchd's bytecode is compiled
first, as an install does (with ``PYTHONDONTWRITEBYTECODE`` set and stale or no
``__pycache__``, every ``benchd once`` would compile its modules again, while
the plain client's library comes compiled). Pairs alternate which side runs
first; each pair is printed, then every figure and its ratio (benchd over
the plain client) as min/median/max over the pairs, with the load average
each run began at. Run from the repo root::

    python -m venv /tmp/bench-venv && /tmp/bench-venv/bin/pip install aiohttp
    .venv/bin/python bench/scale.py --plain-python /tmp/bench-venv/bin/python
    .venv/bin/python bench/scale.py --full           # and 10^6 (--huge: the same)
    .venv/bin/python bench/scale.py --quick          # 10^3 and 10^4 only
    .venv/bin/python bench/scale.py --cleanup never --sizes 100000 --pairs 3
    .venv/bin/python bench/scale.py --cleanup never --sizes 100000 --store-times
    .venv/bin/python bench/scale.py --cleanup never --sizes 100000 --plain-records benchd

(``--plain-records benchd`` has the plain client import each memory as benchd's zengram
kind writes it, with its owned id, namespaced key or subject and owner mark, so the store
does the same work for both and the ratios are the clients' own; the default, the
fixture's memories as they are, also prices the store's work on benchd's marked records.
``--store-times`` also prints, for each run of requests of one route, the store
process's CPU seconds and the seconds it had one of them to answer: where the store
keeps a client waiting and where a client keeps the store idle.)

(``--plain-python`` defaults to ``$BENCH_PLAIN_PYTHON``, else this
interpreter.) The store and the clients share the machine: on a busy box
the walls move with the neighbours, the CPU figures much less.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

QUERIES = 100
BATCH = 500
IN_FLIGHT = 4
NAMESPACE = "bench-scale"
KEY_ENV = "BENCH_SCALE_KEY"


@dataclass(frozen=True)
class Span:
    """A run of requests of one route, as the store answered them."""

    route: str
    n: int
    seconds: float  # from the previous run's last answer to this run's
    cpu_s: float  # the store process's CPU over those seconds
    busy_s: float  # ... and the time it had at least one request of the run to answer


@dataclass
class Run:
    """One client's run: wall, CPU and peak RSS of its process, phases and requests."""

    wall_s: float
    cpu_s: float
    rss_mib: float
    requests: int
    phases: dict[str, float] = field(default_factory=dict)
    sequence: list[Span] = field(default_factory=list)  # runs of one route
    load: float = 0.0  # the 1-minute load average as the run started
    library: str = "benchd"  # the plain client's HTTP library

    @property
    def cpu_ms_per_request(self) -> float:
        return 1000.0 * self.cpu_s / max(1, self.requests)


# -- the reference store, counting requests ---------------------------------------------


def serve_store(port_file: str) -> None:
    """Serve the reference store (bm25, no limits) and count the requests it answers.

    ``GET /__requests`` answers the count and ``GET /__sequence`` the requests in the
    order they came, runs of one method and path as ``[method path, count, end, cpu,
    busy]``: the time of the run's last answer, the process's CPU seconds then, and the
    seconds within the run during which at least one of its requests was being answered
    (neither route counted itself).
    """
    import anyio

    from benchd.refstore.app import build_app
    from benchd.refstore.config import RefStoreConfig
    from benchd.refstore.server import _open_store, serve_app

    counted = [0]
    sequence: list[list[Any]] = []
    answering = [0, 0.0]  # requests being answered, and since when (at least one)

    def counting(app: Any) -> Any:
        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["path"] in ("/__requests", "/__sequence"):
                answer = counted[0] if scope["path"] == "/__requests" else sequence
                body = json.dumps(answer).encode()
                await send({"type": "http.response.start", "status": 200, "headers": []})
                await send({"type": "http.response.body", "body": body})
                return
            if scope["type"] == "http":
                counted[0] += 1
                path = scope["path"]
                path = "/memory/{id}" if scope["method"] == "DELETE" else path
                route = f"{scope['method']} {path}"
                if sequence and sequence[-1][0] == route:
                    sequence[-1][1] += 1
                else:
                    sequence.append([route, 1, 0.0, 0.0, 0.0])
                run = sequence[-1]
                if not answering[0]:
                    answering[1] = time.perf_counter()
                answering[0] += 1
                try:
                    await app(scope, receive, send)
                finally:
                    answering[0] -= 1
                    now = time.perf_counter()
                    run[2] = max(run[2], now)  # the run's last answer
                    run[3] = time.process_time()
                    run[4] += now - answering[1]  # busy since the last answer or start
                    answering[1] = now
                return
            await app(scope, receive, send)

        return wrapped

    async def main() -> None:
        config = RefStoreConfig(
            api_key=os.environ[KEY_ENV],
            retriever="bm25",
            read_limit_per_min=0,
            write_limit_per_min=0,
        )
        store, guard = await _open_store(config)
        try:
            async with serve_app(counting(build_app(store, guard))) as url:
                Path(port_file).write_text(url)
                await anyio.sleep_forever()
        finally:
            await store.close()

    anyio.run(main)


class Store:
    """A fresh reference store in a subprocess."""

    def __init__(self, workdir: Path) -> None:
        port_file = workdir / "store.url"
        port_file.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve-store", str(port_file)],
            env=os.environ | {KEY_ENV: "bench-scale-key-0123456789"},
        )
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit("the reference store did not start")
            time.sleep(0.05)
        self.url = port_file.read_text()

    def requests(self) -> int:
        import httpx

        return int(httpx.get(self.url + "/__requests").text)

    def sequence(self) -> list[Span]:
        """The requests answered so far, in order, as runs of one route: each its seconds
        and the store's CPU seconds since the previous run's last answer, and its busy
        seconds (the first run's seconds and CPU are its own end's, none)."""
        import httpx

        runs = httpx.get(self.url + "/__sequence").json()
        ends = [(end, cpu) for _, _, end, cpu, _ in runs]
        starts = [ends[0], *ends]
        return [
            Span(r, n, e - s, c - sc, busy)
            for (r, n, e, c, busy), (s, sc) in zip(runs, starts, strict=False)
        ]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


# -- the plain client -------------------------------------------------------------------


def fixture_lines(path: str) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as file:
        for line in file:
            if line.strip():
                yield json.loads(line)


class Batches:
    """The fixture's memories in import batches, its queries noted on the way."""

    def __init__(self, fixture: str) -> None:
        self.fixture = fixture
        self.queries: list[str] = []

    def __iter__(self) -> Iterator[list[dict[str, Any]]]:
        batch: list[dict[str, Any]] = []
        for entry in fixture_lines(self.fixture):
            if "memory" in entry:
                batch.append(entry["memory"] | {"client_id": NAMESPACE})
                if len(batch) == BATCH:
                    yield batch
                    batch = []
            elif "query" in entry:
                self.queries.append(entry["query"]["q"])
        if batch:
            yield batch


def marked_fixture(fixture: Path, out: Path) -> Path:
    """``fixture`` with each memory as benchd's zengram kind writes it into ``NAMESPACE``
    (its owned id, namespaced key or subject, owner mark and client id), the rest as is.

    The plain client given this file sends the very records benchd sends: the store then
    does the same work for both, and the ratio is the clients' own. Each record is made
    by the kind's own import-record builder, so the copy cannot drift from what it sends.
    """
    from benchd.kinds.zengram import ZengramConfig, ZengramStore
    from benchd.store.namespace import row_record
    from benchd.store.owned import owned_id

    kind = ZengramStore(ZengramConfig(url="http://127.0.0.1:9", namespace=NAMESPACE), None)
    with fixture.open(encoding="utf-8") as lines, out.open("w", encoding="utf-8") as sink:
        for line in lines:
            entry = json.loads(line) if line.strip() else None
            if entry is not None and "memory" in entry:
                memory = entry["memory"]
                fid = str(memory["id"])
                row = (owned_id(NAMESPACE, fid), fid, memory)
                record = kind._prepare(row_record(NAMESPACE, row))
                line = json.dumps({"memory": record}) + "\n"
            sink.write(line)
    return out


def search_params(q: str) -> dict[str, str | int]:
    return {"q": q, "limit": 10, "format": "index", "client_id": NAMESPACE, "read_only": "true"}


async def in_flight(items: Iterator[Any], work: Any) -> None:
    """``work`` on each of ``items``, IN_FLIGHT at a time (one worker each)."""
    import asyncio

    async def worker(n: int) -> None:
        for item in items:
            await work(n, item)

    await asyncio.gather(*(worker(n) for n in range(IN_FLIGHT)))


async def aiohttp_client(url: str, fixture: str, cleanup: str, phases: dict[str, float]) -> None:
    """The cycle's requests on one aiohttp session (its pool lets the workers run apart)."""
    import aiohttp

    headers = {"x-api-key": os.environ[KEY_ENV]}
    batches = Batches(fixture)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(url, headers=headers, timeout=timeout) as client:

        async def call(method: str, path: str, **kwargs: Any) -> Any:
            async with client.request(method, path, **kwargs) as answer:
                answer.raise_for_status()
                return await answer.json()

        start = time.perf_counter()
        await call("GET", "/health")

        async def send(_: int, batch: list[dict[str, Any]]) -> None:
            await call("POST", "/export/import", json={"data": batch, "operator_approved": True})

        await in_flight(iter(batches), send)
        phases["seed"] = time.perf_counter() - start
        start = time.perf_counter()
        ids: list[str] = []
        offset, more = 0, True
        while more:
            params = {"client_id": NAMESPACE, "limit": BATCH, "offset": offset}
            page = await call("GET", "/export", params=params)
            ids.extend(str(m["id"]) for m in page["memories"])
            offset += len(page["memories"])
            more = bool(page.get("has_more"))
        phases["verify"] = time.perf_counter() - start
        start = time.perf_counter()
        for q in batches.queries:
            answer = await call("GET", "/memory/search", params=search_params(q))
            [str(r["id"]) for r in answer["results"]]
        phases["serial"] = time.perf_counter() - start
        if cleanup != "never":
            start = time.perf_counter()

            async def delete(_: int, memory_id: str) -> None:
                async with client.delete(f"/memory/{memory_id}") as answer:
                    answer.raise_for_status()

            await in_flight(iter(ids), delete)
            phases["cleanup"] = time.perf_counter() - start


async def httpx_client(url: str, fixture: str, cleanup: str, phases: dict[str, float]) -> None:
    """The cycle's requests on httpx, one client per worker: a shared ``AsyncClient``
    serializes its workers on its pool's lock."""
    import httpx

    headers = {"x-api-key": os.environ[KEY_ENV]}
    batches = Batches(fixture)
    clients = [
        httpx.AsyncClient(base_url=url, headers=headers, timeout=600) for _ in range(IN_FLIGHT)
    ]
    client = clients[0]
    try:
        start = time.perf_counter()
        (await client.get("/health")).raise_for_status()

        async def send(n: int, batch: list[dict[str, Any]]) -> None:
            body = {"data": batch, "operator_approved": True}
            (await clients[n].post("/export/import", json=body)).raise_for_status()

        await in_flight(iter(batches), send)
        phases["seed"] = time.perf_counter() - start
        start = time.perf_counter()
        ids: list[str] = []
        offset, more = 0, True
        while more:
            params = {"client_id": NAMESPACE, "limit": BATCH, "offset": offset}
            page = (await client.get("/export", params=params)).json()
            ids.extend(str(m["id"]) for m in page["memories"])
            offset += len(page["memories"])
            more = bool(page.get("has_more"))
        phases["verify"] = time.perf_counter() - start
        start = time.perf_counter()
        for q in batches.queries:
            answer = (await client.get("/memory/search", params=search_params(q))).json()
            [str(r["id"]) for r in answer["results"]]
        phases["serial"] = time.perf_counter() - start
        if cleanup != "never":
            start = time.perf_counter()

            async def delete(n: int, memory_id: str) -> None:
                (await clients[n].delete(f"/memory/{memory_id}")).raise_for_status()

            await in_flight(iter(ids), delete)
            phases["cleanup"] = time.perf_counter() - start
    finally:
        for each in clients:
            await each.aclose()


def plain_client(url: str, fixture: str, cleanup: str) -> None:
    """The same API requests as a cycle, on aiohttp where this interpreter has it (else httpx,
    a client per worker); its phases and the library as JSON."""
    import asyncio
    import importlib.util

    phases: dict[str, float] = {}
    library = "aiohttp" if importlib.util.find_spec("aiohttp") else "httpx"
    run = aiohttp_client if library == "aiohttp" else httpx_client
    asyncio.run(run(url, fixture, cleanup, phases))
    print(json.dumps({"phases": phases, "library": library}))


# -- measuring --------------------------------------------------------------------------


def measured(argv: list[str], env: dict[str, str]) -> tuple[float, float, float, str]:
    """Run ``argv``; its wall seconds, CPU seconds, peak RSS (MiB) and stdout."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv[:3]} exited {proc.returncode}:\n{text[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, text


def write_config(workdir: Path, url: str, fixture: Path, cleanup: str) -> Path:
    from load_common import zengram_config  # here: not in the plain client's process

    return zengram_config(
        workdir / "benchd.toml",
        name="scale",
        url=url,
        fixture=fixture,
        key_env=KEY_ENV,
        namespace=NAMESPACE,
        cleanup=cleanup,
        probe_timeout_s=36000.0,
        target_timeout_s=600.0,
    )


def run_benchd(workdir: Path, store: Store, fixture: Path, cleanup: str) -> Run:
    config = write_config(workdir, store.url, fixture, cleanup)
    before = store.requests()
    argv = [sys.executable, "-m", "benchd", "once", "-c", str(config), "-f", "json"]
    argv.append("--allow-degraded")
    load = os.getloadavg()[0]
    wall, cpu, rss, out = measured(argv, os.environ | {KEY_ENV: "bench-scale-key-0123456789"})
    probe = json.loads(out)["probes"][0]
    phases = {k: float(v) for k, v in (probe.get("phases") or {}).items()}
    run = Run(wall, cpu, rss, store.requests() - before, phases, store.sequence())
    run.load = load
    return run


def run_plain(store: Store, fixture: Path, cleanup: str, python: str) -> Run:
    before = store.requests()
    argv = [python, __file__, "--plain", store.url, str(fixture), cleanup]
    load = os.getloadavg()[0]
    wall, cpu, rss, out = measured(argv, os.environ | {KEY_ENV: "bench-scale-key-0123456789"})
    said = json.loads(out)
    run = Run(wall, cpu, rss, store.requests() - before, said["phases"], store.sequence())
    run.load, run.library = load, said["library"]
    return run


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "-"


def rows_of(benchd: Run, plain: Run) -> list[tuple[str, float, float]]:
    """The figures compared, benchd's beside the plain client's."""
    rows = [
        ("wall (s)", benchd.wall_s, plain.wall_s),
        ("CPU (s)", benchd.cpu_s, plain.cpu_s),
        ("requests", float(benchd.requests), float(plain.requests)),
        ("CPU per request (ms)", benchd.cpu_ms_per_request, plain.cpu_ms_per_request),
        ("peak RSS (MiB)", benchd.rss_mib, plain.rss_mib),
    ]
    both = {"seed+verify": ("seed", "verify")} | {p: (p,) for p in ("serial", "cleanup")}
    for name, parts in both.items():  # benchd's seed phase includes its verify
        if any(p in benchd.phases or p in plain.phases for p in parts):
            b = sum(benchd.phases.get(p, 0.0) for p in parts)
            rows.append((f"  {name} (s)", b, sum(plain.phases.get(p, 0.0) for p in parts)))
    return rows


def report_pair(
    records: int, n: int, first: str, benchd: Run, plain: Run, store_times: bool = False
) -> None:
    print(f"\n== {records:,} records, {QUERIES} queries: pair {n} ({first} first) ==")
    print(f"{'':24}{'benchd once':>14}{'plain ' + plain.library:>16}{'ratio':>9}")
    for name, b, p in rows_of(benchd, plain):
        print(f"{name:24}{b:14.3f}{p:16.3f}{ratio(b, p):>9}")
    print(f"{'load average (1 min)':24}{benchd.load:14.2f}{plain.load:16.2f}")
    for who, run in (("benchd once", benchd), ("plain", plain)):
        print(f"  {who} requests in order: {sequence_text(run.sequence)}")
    if store_times:
        for who, run in (("benchd once", benchd), ("plain", plain)):
            print(f"  the store's time, {who}:")
            print(store_times_text(run.sequence))
    sys.stdout.flush()


def store_times_text(sequence: list[Span], most: int = 40) -> str:
    """Runs of many requests, each with its seconds, the store's CPU and busy seconds over
    them, and those per request; the rest summed (where the client keeps the store waiting
    and where the store keeps the client waiting)."""
    lines: list[str] = []
    rest = [0.0, 0.0, 0.0, 0.0]  # requests, seconds, CPU, busy
    for span in sequence:
        if span.n > 1 and len(lines) < most:
            lines.append(
                f"    {span.route} x{span.n}: {span.seconds:.2f} s, store CPU "
                f"{span.cpu_s:.2f} s, busy {span.busy_s:.2f} s "
                f"({1000 * span.cpu_s / span.n:.1f} / {1000 * span.busy_s / span.n:.1f} ms each)"
            )
        else:
            for at, value in enumerate((span.n, span.seconds, span.cpu_s, span.busy_s)):
                rest[at] += value
    lines.append(
        f"    other {rest[0]:.0f} requests: {rest[1]:.2f} s, store CPU {rest[2]:.2f} s, "
        f"busy {rest[3]:.2f} s"
    )
    return "\n".join(lines)


def spread(values: list[float]) -> str:
    """min/median/max."""
    picked = (min(values), statistics.median(values), max(values))
    return "/".join(f"{v:.2f}" if abs(v) < 100 else f"{v:.0f}" for v in picked)


def report_pairs(records: int, pairs: list[tuple[Run, Run]]) -> None:
    """Each figure's ratio over the pairs as min/median/max, and each side's own."""
    print(f"\n== {records:,} records: {len(pairs)} pair(s), min/median/max ==")
    print(f"{'':24}{'benchd once':>22}{'plain':>22}{'ratio':>20}")
    table = [rows_of(b, p) for b, p in pairs]
    for at, (name, _, _) in enumerate(table[0]):
        mine = [rows[at][1] for rows in table]
        theirs = [rows[at][2] for rows in table]
        ratios = [b / p for b, p in zip(mine, theirs, strict=True) if p > 0]
        shown = spread(ratios) if ratios else "-"
        print(f"{name:24}{spread(mine):>22}{spread(theirs):>22}{shown:>20}")
    loads = [r.load for pair in pairs for r in pair]
    print(f"{'load average (1 min)':24}{spread(loads):>22}")
    sys.stdout.flush()


def sequence_text(sequence: list[Span], most: int = 40) -> str:
    """Runs of one route as ``route xN (seconds)``, the first ``most`` of them."""
    runs = [f"{s.route} x{s.n} ({s.seconds:.1f}s)" if s.n > 1 else s.route for s in sequence]
    more = f", ... ({len(runs) - most} more runs)" if len(runs) > most else ""
    return ", ".join(runs[:most]) + more


def one_pair(
    workdir: Path, fixture: Path, args: argparse.Namespace, n: int, plain_fixture: Path
) -> tuple[Run, Run]:
    """benchd and the plain client (``plain_fixture``: what it imports), each on a fresh
    store; benchd first in odd pairs."""
    runs: dict[str, Run] = {}
    order = ("benchd", "plain") if n % 2 else ("plain", "benchd")
    for who in order:
        store = Store(workdir)
        try:
            if who == "benchd":
                runs[who] = run_benchd(workdir, store, fixture, args.cleanup)
            else:
                runs[who] = run_plain(store, plain_fixture, args.cleanup, args.plain_python)
        finally:
            store.stop()
    return runs["benchd"], runs["plain"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also 10^6 records")
    parser.add_argument("--huge", action="store_true", help="the same as --full")
    parser.add_argument("--quick", action="store_true", help="only 10^3 and 10^4 records")
    parser.add_argument("--cleanup", default="after", choices=["after", "never"])
    parser.add_argument("--sizes", help="comma-separated record counts instead")
    parser.add_argument("--pairs", type=int, default=3, help="pairs per size (alternated)")
    parser.add_argument(
        "--plain-python",
        default=os.environ.get("BENCH_PLAIN_PYTHON", sys.executable),
        help="the interpreter of the plain client (one with aiohttp; else httpx is used)",
    )
    parser.add_argument(
        "--store-times",
        action="store_true",
        help="also print each run of requests' store CPU and busy seconds (a diagnostic)",
    )
    parser.add_argument(
        "--plain-records",
        default="fixture",
        choices=["fixture", "benchd"],
        help="what the plain client imports: the fixture's memories as they are, or each "
        "as benchd writes it (owned id, namespaced key or subject, owner mark)",
    )
    parser.add_argument("--serve-store", help=argparse.SUPPRESS)
    parser.add_argument("--plain", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_store:
        serve_store(args.serve_store)
        return
    if args.plain:
        plain_client(*args.plain)
        return
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    if args.full or args.huge:
        sizes.append(1_000_000)
    if args.sizes:
        sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"cleanup = {args.cleanup!r}, plain records = {args.plain_records!r}; "
        "benchd's figures as ratios of the plain client's"
    )
    from load_common import compile_package  # here: not in the plain client's process

    print(compile_package())
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="benchd-scale-") as tmp:
        workdir = Path(tmp)
        for records in sizes:
            fixture = workdir / f"synth-{records}.jsonl"
            subprocess.run(
                [sys.executable, "-m", "benchd", "synth", "--memories", str(records),
                 "--queries", str(QUERIES), "--out", str(fixture)],
                check=True, stdout=subprocess.DEVNULL,
            )  # fmt: skip
            plain_fixture = fixture
            if args.plain_records == "benchd":
                plain_fixture = marked_fixture(fixture, workdir / f"marked-{records}.jsonl")
            pairs = []
            for n in range(1, max(1, args.pairs) + 1):
                benchd, plain = one_pair(workdir, fixture, args, n, plain_fixture)
                first = "benchd" if n % 2 else "plain"
                report_pair(records, n, first, benchd, plain, args.store_times)
                pairs.append((benchd, plain))
            report_pairs(records, pairs)


if __name__ == "__main__":
    main()
