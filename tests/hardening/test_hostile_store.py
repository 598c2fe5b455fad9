"""A hostile store over loopback: every answer is bounded, classified and kept to one probe.

The hostile proxy (``tests/hostile_store.py``) forwards to a real reference
store and breaks one route per mode. Each test drives the zengram adapter
through the serial path (the retrying client) and, for searches, through the
load pass's sender, and checks the error kind, the message, and a memory
bound: ``tracemalloc``'s peak for this process while the answer is read
(large answers are decoded in the worker process, which is not traced).
The daemon test runs ``benchd run`` with a healthy probe beside the hostile
ones and bounds the daemon's RSS.
"""

from __future__ import annotations

import tempfile
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from drill_support import (
    KEY,
    RefstoreProcess,
    free_port,
    probe_toml,
    rss_bytes,
    value,
    write_config,
    write_tiny_fixture,
)
from hostile_store import Hostile, HostileThread, running_hostile
from support import BenchdProcess

from benchd.config.drift import DriftSettings
from benchd.config.load import ProbeConfig, TargetConfig
from benchd.config.secrets import Secret
from benchd.cycle import run_cycle
from benchd.errors import TargetError, TargetRateLimited
from benchd.fixtures.model import load_fixture
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.probe import ProbeRunner
from benchd.refstore import RefStoreConfig, running_refstore
from benchd.store.target import SearchQuery

pytestmark = pytest.mark.anyio

MIB = 1 << 20
MEMORIES = [
    {"id": "m1", "content": "The harbor ferry leaves pier nine at seven."},
    {"id": "m2", "content": "Quartz crystals glow under ultraviolet lamps."},
]
QUERY = SearchQuery(q="harbor ferry", limit=10)


@pytest.fixture
async def hostile() -> AsyncIterator[Hostile]:
    config = RefStoreConfig(
        api_key=KEY, retriever="bm25", read_limit_per_min=0, write_limit_per_min=0
    )
    async with running_refstore(config) as store, running_hostile(store.url) as proxy:
        yield proxy


def target_for(hostile: Hostile, mode: str, **extra: Any) -> ZengramTarget:
    settings: dict[str, Any] = {"max_retries": 0, "searchable_timeout_s": 0.2, "cleanup": "never"}
    settings.update(extra)
    config = ZengramConfig(url=hostile.mode_url(mode), namespace=f"ns-{mode}", **settings)
    return ZengramTarget(config, Secret(KEY))


@contextmanager
def peak_bytes() -> Iterator[list[int]]:
    """Yield a one-item list that holds tracemalloc's peak for the block afterwards."""
    peak = [0]
    tracemalloc.start()
    try:
        yield peak
    finally:
        peak[0] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


async def error_of(call: Callable[[], Awaitable[Any]]) -> TargetError:
    with pytest.raises(TargetError) as caught:
        await call()
    message = str(caught.value)
    assert message and "\n" not in message and KEY not in message
    return caught.value


async def load_error(target: ZengramTarget) -> TargetError:
    """The error the load pass's sender meets for one search."""
    sender = target.load_sender([QUERY], concurrency=1, timeout_s=10)
    async with sender as fire:
        return await error_of(lambda: fire(0))


# -- depth -------------------------------------------------------------------------


@pytest.mark.parametrize("route", ["health", "export", "search"])
async def test_json_nested_1000_deep_is_a_decode_error_on_every_route(
    hostile: Hostile, route: str
) -> None:
    t = target_for(hostile, f"deep-{route}")
    steps: dict[str, Callable[[], Awaitable[Any]]] = {
        "health": t.info,
        "export": lambda: t.seed(MEMORIES),
        "search": lambda: t.search(QUERY),
    }
    try:
        err = await error_of(steps[route])
        assert err.kind == "decode" and "deeper than 64 levels" in str(err)
        if route == "search":
            assert (await load_error(t)).kind == "decode"
    finally:
        await t.aclose()
    assert hostile.hits[f"deep-{route}"] >= 1


# -- size --------------------------------------------------------------------------


async def test_a_declared_gigabyte_is_refused_before_its_body_is_read(hostile: Hostile) -> None:
    t = target_for(hostile, "huge")
    try:
        with peak_bytes() as peak:
            serial = await error_of(lambda: t.search(QUERY))
            load = await load_error(t)
    finally:
        await t.aclose()
    for err in (serial, load):
        assert err.kind == "decode"
        assert "1073741824 bytes (declared)" in str(err)
    assert peak[0] < 8 * MIB  # 64 KiB were sent after the headers; nothing near 1 GiB is held


async def test_600000_ids_past_the_cap_are_refused_and_within_it_cut_to_the_limit(
    hostile: Hostile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # spill files go to a directory of this test's own: another process's spill in the
    # shared /tmp must not count as this test's leftover
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    capped = target_for(hostile, "many")  # 8 MiB default cap, the answer is ~12 MB
    raised = target_for(hostile, "many", max_response_bytes=16 * MIB)
    try:
        err = await error_of(lambda: capped.search(QUERY))
        assert err.kind == "decode" and "exceeds max_response_bytes = 8388608" in str(err)
        with peak_bytes() as peak:
            ranked = await raised.search(QUERY)
            sender = raised.load_sender([QUERY], concurrency=1, timeout_s=60)
            async with sender as fire:
                loaded = await fire(0)
    finally:
        await capped.aclose()
        await raised.aclose()
    assert ranked == loaded == tuple(f"!n{i}" for i in range(10))  # not benchd's: labelled
    # The body went to a temporary file as it arrived, and the worker decoded it there:
    # benchd never held the 12 MB body whole, nor the 600,000 decoded results. (The
    # hostile proxy runs in this process too, and its 12 MB send buffer is in the peak.)
    assert peak[0] < 20 * MIB
    assert not list(tmp_path.glob("benchd-answer-*"))  # and it is gone


async def test_an_export_that_pages_forever_stops_at_the_listing_limit(hostile: Hostile) -> None:
    t = target_for(hostile, "forever")
    try:
        with peak_bytes() as peak:
            err = await error_of(lambda: t.seed(MEMORIES))
    finally:
        await t.aclose()
    assert err.kind == "decode" and "lists more than 20000 records" in str(err)
    assert hostile.pages <= 20_000 // 500 + 2
    assert peak[0] < 96 * MIB


# -- counts ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "problem"),
    [
        ("negative", "imported = -2000000 is impossible for a request of"),
        ("e30", "skipped is 1e+30, expected an integer count"),
    ],
)
async def test_impossible_import_counts_are_decode_errors(
    hostile: Hostile, mode: str, problem: str
) -> None:
    t = target_for(hostile, mode)
    try:
        err = await error_of(lambda: t.seed(MEMORIES))
    finally:
        await t.aclose()
    assert err.kind == "decode" and problem in str(err)


# -- Retry-After ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "lowest", "highest"),
    [
        ("ra-date", 0.0, 1.0),  # an HTTP date one second ahead (whole seconds)
        ("ra-1.5", 1.5, 1.5),
        ("ra-nan", 3600.0, 3600.0),  # "wait", for how long unknown: the ceiling, never at once
        ("ra--1", 0.0, 0.0),
        ("ra-1e12", 3600.0, 3600.0),
    ],
)
async def test_retry_after_is_parsed_clamped_and_its_wait_counted(
    hostile: Hostile, mode: str, lowest: float, highest: float
) -> None:
    t = target_for(hostile, mode, max_retries=1, max_retry_after_s=0.01)
    try:
        serial = await error_of(lambda: t.search(QUERY))
        load = await load_error(t)
    finally:
        await t.aclose()
    for err in (serial, load):
        assert isinstance(err, TargetRateLimited) and err.kind == "rate_limited"
        assert err.retry_after_s is not None and lowest <= err.retry_after_s <= highest
    assert t.retries == 1  # one retry, after waiting min(Retry-After, max_retry_after_s)
    first_wait = min(lowest, 0.01) if lowest == highest else None
    if first_wait is not None:
        assert t.retry_wait_s == pytest.approx(first_wait)
    else:
        assert 0.0 <= t.retry_wait_s <= 0.01


# -- redirects -----------------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 307])
async def test_a_redirect_is_its_own_kind_and_the_key_never_follows_it(
    hostile: Hostile, status: int
) -> None:
    t = target_for(hostile, f"r{status}", max_retries=3)
    try:
        errors = [await error_of(t.info), await error_of(lambda: t.search(QUERY))]
        errors.append(await load_error(t))
    finally:
        await t.aclose()
    for err in errors:
        assert err.kind == "redirect" and f"HTTP {status} redirect" in str(err)
        assert f"to http://127.0.0.1:{hostile.recorder.port};" in str(err)
        assert "secret-in-location" not in str(err)
    assert t.retries == 0
    assert hostile.recorder.seen == []  # never followed: nothing, key or not, reached it


# -- latency -------------------------------------------------------------------------


async def test_a_429_wait_is_counted_never_timed(hostile: Hostile, tmp_path: Path) -> None:
    fixture = load_fixture(write_tiny_fixture(tmp_path / "tiny.json"))
    settings = ZengramConfig(
        url=hostile.mode_url("ra-once"),
        namespace="ns-once",
        cleanup="never",
        searchable_timeout_s=10.0,
        max_retries=2,
        max_retry_after_s=2.0,
    )
    probe = ProbeConfig(
        name="once",
        fixture=tmp_path / "tiny.json",
        k=(1, 3),
        target=TargetConfig("zengram", settings, Secret(KEY)),
    )
    target = ZengramTarget(settings, Secret(KEY))
    try:
        result = await run_cycle(probe, fixture, target)
    finally:
        await target.aclose()
    assert result.outcome == "success", result.error_message
    n = len(fixture.queries)
    # each query met one 429 with Retry-After: 2 and was retried once after 2 s ...
    assert result.retries == n and result.retry_wait_s == pytest.approx(2.0 * n)
    assert result.serial_latency.count == n
    # ... and its latency is the answering attempt alone, never the 2 s benchd waited
    assert result.serial_latency.max < 2.0


# -- the daemon --------------------------------------------------------------------

HOSTILE_KINDS = {
    "deep-health": "decode",
    "deep-search": "decode",
    "huge": "decode",
    "forever": "decode",
    "negative": "decode",
    "ra-nan": "rate_limited",
    "r307": "redirect",
}


def _failed(probe: str, kind: str) -> Callable[[dict[str, Any]], bool]:
    """A failed cycle of ``probe`` with error kind ``kind``.

    Waiting for that kind (not the first failure) keeps a transient timeout on
    an overloaded CI box from failing the test; the kind itself is still exact.
    """

    def match(e: dict[str, Any]) -> bool:
        return (
            e.get("event") == "cycle"
            and e.get("probe") == probe
            and e.get("outcome") == "failed"
            and e.get("error_kind") == kind
        )

    return match


def _healthy_after(cycle: int) -> Callable[[dict[str, Any]], bool]:
    def match(e: dict[str, Any]) -> bool:
        return (
            e.get("event") == "cycle"
            and e.get("probe") == "healthy"
            and e.get("outcome") == "success"
            and e.get("cycle", 0) > cycle
        )

    return match


def test_the_daemon_outlives_a_hostile_store_and_a_healthy_probe_keeps_scoring(
    tmp_path: Path,
) -> None:
    fixture = write_tiny_fixture(tmp_path / "tiny.json")
    extra = 'cleanup = "never"'
    with RefstoreProcess(free_port()) as store, HostileThread(store.url) as hostile:
        probes = [probe_toml("healthy", store.url, fixture, interval=0.5, target_extra=extra)]
        probes += [
            probe_toml(
                mode,
                hostile.mode_url(mode),
                fixture,
                interval=1.0,
                timeout=20.0,
                request_timeout=10.0,
                retries=1,
                target_extra=extra,
            )
            for mode in HOSTILE_KINDS
        ]
        config = write_config(tmp_path, *probes)
        with BenchdProcess(["--config", str(config)], env={"DRILL_STORE_KEY": KEY}) as benchd:
            for mode, kind in HOSTILE_KINDS.items():
                benchd.wait_for(_failed(mode, kind), timeout=120)
                kinds = {e.get("error_kind") for e in benchd.cycles(mode)}
                assert kinds <= {kind, "timeout"}, (mode, kinds)
            seen = max(e.get("cycle", 0) for e in benchd.cycles("healthy"))
            benchd.wait_for(_healthy_after(seen), timeout=60)  # still scoring after all that
            assert benchd.proc is not None and benchd.proc.poll() is None
            samples = benchd.samples("benchd_up")
            assert value(samples, probe="healthy") == 1.0
            for mode in HOSTILE_KINDS:
                assert value(samples, probe=mode) == 0.0
            assert rss_bytes(benchd.proc.pid) < 400 * MIB
    assert hostile.recorder.seen == []


# -- extreme scores through the drift stage ----------------------------------------------


async def test_scores_at_the_edge_of_a_double_never_fail_a_later_cycle(
    hostile: Hostile, tmp_path: Path
) -> None:
    """Every cycle succeeds: such scores are read as absent, so drift's sums never overflow."""
    settings = ZengramConfig(
        url=hostile.mode_url("huge-score"), namespace="ns-huge", max_retries=0, cleanup="never"
    )
    fixture = write_tiny_fixture(tmp_path / "tiny.json")
    probe = ProbeConfig(
        name="huge",
        fixture=fixture,
        k=(1, 3),
        interval_s=1.0,
        target=TargetConfig("zengram", settings, Secret(KEY)),
        drift=DriftSettings(rolling_window=2, n_permutations=200, n_bootstrap=100),
    )
    runner = ProbeRunner(probe)
    try:
        results = [await runner.run_once() for _ in range(4)]
    finally:
        await runner.aclose()
    assert [r.outcome for r in results] == ["success"] * 4, [r.error_message for r in results]
    assert hostile.hits.get("huge-score", 0) == 0  # forwarded, rewritten: not a canned answer
    assert all(r.drift is not None for r in results[2:])  # the rolling window was in use
