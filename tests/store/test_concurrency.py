"""run_bounded: a fixed pool of workers over a stream of items."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from benchd.errors import TargetError
from benchd.store.concurrency import run_bounded

pytestmark = pytest.mark.anyio


async def test_at_most_limit_items_are_drawn_from_the_stream_before_one_finishes() -> None:
    """The stream is read lazily: never more items in hand than workers, whatever its length."""
    drawn = 0
    finished = 0
    most_in_hand = 0
    gate = anyio.Event()

    def stream() -> Iterator[int]:
        nonlocal drawn
        for i in range(100_000):
            drawn += 1
            yield i

    async def fn(_: int) -> None:
        nonlocal finished, most_in_hand
        most_in_hand = max(most_in_hand, drawn - finished)
        if finished == 0:
            await gate.wait()
        finished += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: run_bounded(stream(), fn, limit=4))
        await anyio.wait_all_tasks_blocked()
        assert drawn == 4  # four workers, each holding one item; nothing else read
        gate.set()
    assert finished == 100_000
    assert most_in_hand <= 4


async def test_every_item_runs_once_and_concurrency_never_exceeds_the_limit() -> None:
    seen: list[int] = []
    running = 0
    peak = 0

    async def fn(i: int) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0)
        seen.append(i)
        running -= 1

    await run_bounded(range(1000), fn, limit=7)
    assert sorted(seen) == list(range(1000))
    assert peak == 7


async def test_the_first_target_error_stops_the_pool_and_is_raised_as_itself() -> None:
    started: list[int] = []

    async def fn(i: int) -> None:
        started.append(i)
        if i == 3:
            raise TargetError("boom")
        await anyio.sleep(0)

    with pytest.raises(TargetError, match="boom"):
        await run_bounded(range(10_000), fn, limit=2)
    assert len(started) < 10  # stopped at once, not after the whole stream


async def test_a_limit_below_one_still_runs_everything() -> None:
    seen: list[int] = []

    async def fn(i: int) -> None:
        seen.append(i)

    await run_bounded([1, 2, 3], fn, limit=0)
    assert seen == [1, 2, 3]


async def test_a_limit_far_above_the_item_count_starts_one_worker_per_item() -> None:
    """The config fuzzer's seed_concurrency = 2**53 spawned tasks until the process held 21 GB."""
    seen: list[int] = []

    async def fn(i: int) -> None:
        seen.append(i)
        await anyio.sleep(0)

    with anyio.fail_after(30):  # a bound against the old hang, not a margin
        await run_bounded(range(5), fn, limit=2**53)
    assert sorted(seen) == list(range(5))
