"""The namespace flow (targets/flow.py), driven through the zengram target.

Against the reference store on loopback; what the store receives is read off
its in-process import and export calls (the requests still cross HTTP):
batch sizes and how many batches are in flight, the progress the flow
reports, what verify lists, and which records an unchanged corpus re-sends.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest

from benchd.config.secrets import Secret
from benchd.kinds.zengram import ZengramConfig, ZengramTarget, sentinel_id
from benchd.refstore.server import RunningRefStore
from benchd.refstore.testing import running_refstore_fixture

pytestmark = pytest.mark.anyio

KEY = "seeding-test-key-0042"
NS = "benchd-seeding"
BOUND_S = 60  # a bound against a hung test, never a timing assertion
MEMORIES = [
    {"id": f"m{i}", "type": "fact", "content": f"Seeding record {i} about topic{i} and subject{i}."}
    for i in range(7)
]


@dataclass
class Seen:
    """What the store was asked to import and list, request by request."""

    imports: list[list[dict[str, Any]]] = field(default_factory=list)  # corpus batches
    sentinels: int = 0  # imports carrying the sentinel record
    listings: int = 0  # GET /export pages served
    in_flight: int = 0
    max_in_flight: int = 0
    hold_until: int = 1  # a corpus import waits until this many are in flight (or all arrived)
    expected: int = 0  # corpus imports expected in all; 0 = do not hold

    def contents(self) -> list[str]:
        return sorted(str(r["content"]) for batch in self.imports for r in batch)


store = running_refstore_fixture(api_key=KEY, retriever="bm25")


@pytest.fixture
def seen(store: RunningRefStore, monkeypatch: pytest.MonkeyPatch) -> Iterator[Seen]:
    record = Seen()
    real_import, real_export = store.store.import_records, store.store.export

    async def import_records(data: list[Any]) -> dict[str, int]:
        if any(isinstance(r, dict) and r.get("id") == sentinel_id(NS) for r in data):
            record.sentinels += 1
            return await real_import(data)
        record.imports.append(data)
        record.in_flight += 1
        record.max_in_flight = max(record.max_in_flight, record.in_flight)
        try:
            while (
                record.expected
                and record.in_flight < record.hold_until
                and len(record.imports) < record.expected
            ):
                await anyio.sleep(0.005)  # polling the test's own counter, not a timing bound
            if record.expected:
                # Held a moment more, so a flow that ignores its limit shows a third in flight.
                # (Only a broken flow is sensitive to this wait; a correct one passes anyway.)
                await anyio.sleep(0.1)
            return await real_import(data)
        finally:
            record.in_flight -= 1

    def export(query: Any) -> dict[str, Any]:
        record.listings += 1
        answer: dict[str, Any] = real_export(query)
        return answer

    monkeypatch.setattr(store.store, "import_records", import_records)
    monkeypatch.setattr(store.store, "export", export)
    yield record


def target(store: RunningRefStore, **settings: Any) -> ZengramTarget:
    config = ZengramConfig(url=store.url, namespace=NS, max_retries=0, **settings)
    return ZengramTarget(config, Secret(KEY, "test"))


class Recorder:
    """A progress sink that also hears phases (a CycleProgress)."""

    def __init__(self) -> None:
        self.counts: list[tuple[int, int]] = []
        self.phases: list[str] = []

    def __call__(self, done: int, total: int) -> None:
        self.counts.append((done, total))

    def phase(self, name: str) -> None:
        self.phases.append(name)

    def waiting(self, seconds: float, reason: str) -> None:
        raise AssertionError(f"no store in these tests asks benchd to wait ({reason})")


async def seeded(t: ZengramTarget, memories: list[dict[str, Any]], **kw: Any) -> Any:
    try:
        with anyio.fail_after(BOUND_S):
            return await t.seed(memories, **kw)
    finally:
        await t.aclose()


async def test_records_go_out_in_batches_of_seed_batch_and_the_counts_add_up(
    store: RunningRefStore, seen: Seen
) -> None:
    report = await seeded(target(store, seed_batch=3), MEMORIES)
    assert sorted(len(b) for b in seen.imports) == [1, 3, 3]
    assert seen.contents() == sorted(m["content"] for m in MEMORIES)  # each record once
    assert seen.sentinels == 1  # the namespace was marked, once, in its own request
    assert (report.requested, report.imported, report.skipped, report.errors) == (7, 7, 0, 0)
    assert (report.verified, report.missing) == (7, ())


async def test_batches_run_concurrently_but_never_more_than_seed_concurrency(
    store: RunningRefStore, seen: Seen
) -> None:
    # Each import is held until two are in flight: a flow that sent one at a
    # time would never release it (and hit the bound); one that ignored the
    # limit would have a third in flight while they are held.
    seen.hold_until, seen.expected = 2, len(MEMORIES)
    report = await seeded(target(store, seed_batch=1, seed_concurrency=2), MEMORIES)
    assert len(seen.imports) == len(MEMORIES)
    assert seen.max_in_flight == 2
    assert report.imported == len(MEMORIES)


async def test_progress_counts_each_batch_once_up_to_the_total_then_verify_and_searchable(
    store: RunningRefStore, seen: Seen
) -> None:
    progress = Recorder()
    await seeded(target(store, seed_batch=3, seed_concurrency=1), MEMORIES, progress=progress)
    assert progress.counts == [(3, 7), (6, 7), (7, 7), (7, 7)]  # the seed's, then verify's
    assert progress.phases == ["verify", "searchable"]


class PollRecorder(Recorder):
    """A Recorder that also hears each time-to-searchable poll (a PollProgress)."""

    def __init__(self) -> None:
        super().__init__()
        self.polls: list[tuple[str, int, float]] = []

    def polling(self, polls: int, elapsed_s: float, limit_s: float) -> None:
        self.polls.append((self.phases[-1], polls, limit_s))


async def test_searchable_reports_each_poll_with_its_bound(
    store: RunningRefStore, seen: Seen
) -> None:
    progress = PollRecorder()
    await seeded(target(store, searchable_timeout_s=7.0), MEMORIES, progress=progress)
    assert progress.polls  # the refstore indexes at once: the first poll finds it
    assert [n for _, n, _ in progress.polls] == list(range(1, len(progress.polls) + 1))
    assert {(phase, limit) for phase, _, limit in progress.polls} == {("searchable", 7.0)}


async def test_progress_counts_only_what_is_sent(store: RunningRefStore, seen: Seen) -> None:
    await seeded(target(store, cleanup="never"), MEMORIES)
    changed = [{**MEMORIES[0], "content": "Seeding record 0, rewritten."}, *MEMORIES[1:]]
    progress = Recorder()
    await seeded(target(store, cleanup="never"), changed, progress=progress)
    assert progress.counts == [(1, 1), (7, 7)]  # one record sent; all seven verified


async def test_verify_names_a_record_the_store_did_not_keep(
    store: RunningRefStore, seen: Seen
) -> None:
    rejected = {"id": "m-empty", "type": "fact", "content": ""}  # the store counts an error
    report = await seeded(target(store), [rejected, *MEMORIES])
    assert (report.imported, report.errors) == (7, 1)
    assert (report.verified, report.missing) == (7, ("m-empty",))


async def test_time_to_searchable_is_measured_on_a_record_the_store_kept(
    store: RunningRefStore, seen: Seen
) -> None:
    # The last memory is rejected (an unknown type): polling for it would run
    # the whole searchable_timeout_s (far past this test's bound) and learn nothing.
    rejected = {"id": "m-bogus", "type": "bogus", "content": "A record the store refuses."}
    report = await seeded(target(store, searchable_timeout_s=600.0), [*MEMORIES, rejected])
    assert report.missing == ("m-bogus",)
    assert report.searchable_after_s is not None


async def test_verify_lists_the_namespace_after_the_import_unless_turned_off(
    store: RunningRefStore, seen: Seen
) -> None:
    await seeded(target(store), MEMORIES)
    checked = seen.listings
    seen.listings = 0
    await seeded(target(store, verify=False, cleanup="never"), MEMORIES)
    assert (checked, seen.listings) == (2, 1)  # before + after the import; before only


async def test_an_unchanged_corpus_is_not_sent_again(store: RunningRefStore, seen: Seen) -> None:
    await seeded(target(store, cleanup="never"), MEMORIES)
    seen.imports.clear()
    again = await seeded(target(store, cleanup="never"), MEMORIES)
    assert seen.imports == [] and seen.sentinels == 1  # no import request at all
    assert (again.imported, again.skipped, again.unchanged, again.errors) == (0, 0, 7, 0)
    assert (again.verified, again.missing) == (7, ())


async def test_only_changed_or_vanished_records_are_sent_again(
    store: RunningRefStore, seen: Seen
) -> None:
    await seeded(target(store, cleanup="never"), MEMORIES)
    listed = await _listed(store)
    vanished = next(sid for sid, rec in listed.items() if rec["content"] == MEMORIES[2]["content"])
    async with httpx.AsyncClient(base_url=store.url, headers={"x-api-key": KEY}) as client:
        (await client.delete(f"/memory/{vanished}")).raise_for_status()  # behind benchd's back
    seen.imports.clear()
    changed = [
        {**MEMORIES[0], "content": "Seeding record 0, rewritten."},
        {**MEMORIES[1], "type": "event"},  # same text, another type: the store would not skip
        *MEMORIES[2:],
    ]
    report = await seeded(target(store, cleanup="never"), changed)
    assert seen.contents() == sorted(
        ["Seeding record 0, rewritten.", MEMORIES[1]["content"], MEMORIES[2]["content"]]
    )
    assert (report.imported, report.skipped, report.unchanged, report.errors) == (3, 0, 4, 0)
    assert report.missing == ()


async def test_cleanup_before_sends_the_whole_corpus_every_time(
    store: RunningRefStore, seen: Seen
) -> None:
    await seeded(target(store, cleanup="before"), MEMORIES)
    seen.imports.clear()
    again = await seeded(target(store, cleanup="before"), MEMORIES)
    assert seen.contents() == sorted(m["content"] for m in MEMORIES)
    assert (again.imported, again.skipped) == (7, 0)
    assert len(await _listed(store)) == len(MEMORIES) + 1  # fresh copies, old ones deleted


async def _listed(store: RunningRefStore) -> dict[str, dict[str, Any]]:
    async with httpx.AsyncClient(base_url=store.url, headers={"x-api-key": KEY}) as client:
        reply = await client.get("/export", params={"client_id": NS, "limit": 500})
        reply.raise_for_status()
        return {str(r["id"]): r for r in reply.json()["memories"]}
