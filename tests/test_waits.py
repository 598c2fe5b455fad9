"""Waits on a store's 429s are reported as the wall time actually spent (DESIGN §4, #20 item 4).

Concurrent waits overlap and count once; a wait counts as it passes, never
when its 429 arrives, so a pause the pass never sat out counts nothing.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest
from loopback_target import LoopbackTarget, httpx_fire, serve_target

from benchd.config.secrets import Secret
from benchd.errors import TargetError
from benchd.hooks import WaitClock, waits_reported_to
from benchd.load import LoadProfile, run_load
from benchd.refstore.config import RefStoreConfig
from benchd.refstore.server import running_refstore
from benchd.targets.zengram import ZengramConfig, ZengramTarget

pytestmark = pytest.mark.anyio
KEY = "test-key-waits-0123456789"


@pytest.fixture
async def target() -> AsyncIterator[LoopbackTarget]:
    async with serve_target(LoopbackTarget()) as served:
        yield served


def _ignore(seconds: float, reason: str) -> None:
    """A progress listener that shows nothing."""


def test_the_wait_clock_counts_overlapping_windows_once_and_only_what_has_passed() -> None:
    clock = WaitClock()
    for _ in range(4):  # four requests waiting the same 30 s
        clock.open(100.0, 130.0)
    late = clock.open(140.0, 200.0)  # a pause announced for 60 s ...
    assert clock.total(now=110.0) == 10.0  # ... nothing of it yet, 10 s of the four
    assert clock.total(now=150.0) == 40.0
    WaitClock.cut(late, 145.0)  # ... that ended after 5 s
    assert clock.total(now=500.0) == 35.0


async def test_a_load_pass_stopped_early_reports_the_pause_it_actually_took(
    target: LoopbackTarget,
) -> None:
    """A 30 s Retry-After outlasts a 1 s pass: it stops, having paused only until then."""
    target.statuses = {0: 429}
    target.retry_after = b"30"
    profile = LoadProfile(mode="closed", concurrency=1, duration_s=1.0, max_rate_limited_ratio=1.0)
    clock = WaitClock()
    started = time.monotonic()
    with waits_reported_to(_ignore, clock):
        async with httpx.AsyncClient(base_url=target.base_url) as client:
            run = await run_load(httpx_fire(client), 2, profile)
    elapsed = time.monotonic() - started
    assert run.rate_limited
    assert 0.0 <= run.paused_s <= elapsed  # was 30.0: the whole Retry-After, on arrival
    assert clock.total() <= elapsed


async def test_concurrent_retries_on_429_count_their_wall_time_once() -> None:
    """Four imports at a time against a spent write budget: their waits overlap."""
    config = RefStoreConfig(api_key=KEY, read_limit_per_min=0, write_limit_per_min=1)
    async with running_refstore(config) as store:
        t = ZengramTarget(
            ZengramConfig(
                url=store.url,
                seed_batch=1,
                seed_concurrency=4,
                max_retries=2,
                max_retry_after_s=0.2,
                verify=False,
                searchable_timeout_s=0.0,
            ),
            Secret(KEY, "test"),
        )
        clock = WaitClock()
        memories = [{"id": f"m{i}", "content": f"note {i}"} for i in range(8)]
        started = time.monotonic()
        try:
            with waits_reported_to(_ignore, clock), anyio.fail_after(60):
                await t.seed(memories)
        except TargetError:
            pass  # the budget stays spent: the seed gives up, which is not the point here
        finally:
            elapsed = time.monotonic() - started
            await t.aclose()
    assert t.retries >= 1
    assert 0.0 < clock.total() <= elapsed  # summed per request, they came to more
