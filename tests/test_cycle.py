"""The probe cycle end to end against the reference store over loopback."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from benchd import cycle as cycle_module
from benchd.config.budget import BudgetSettings
from benchd.config.load import ProbeConfig, TargetConfig
from benchd.config.secrets import Secret
from benchd.fixtures.model import load_fixture, packaged_fixture
from benchd.kinds.zengram import ZengramConfig
from benchd.load import LoadProfile
from benchd.probe import ProbeRunner
from benchd.refstore.config import RefStoreConfig
from benchd.refstore.server import running_refstore

pytestmark = pytest.mark.anyio
KEY = "cycle-test-key-42"


def probe_for(
    url: str,
    *,
    load: LoadProfile | None = None,
    timeout_s: float = 60.0,
    key: str = KEY,
    **target: Any,
) -> ProbeConfig:
    return ProbeConfig(
        name="t",
        fixture=packaged_fixture("smoke"),
        target=TargetConfig("zengram", ZengramConfig(url=url, **target), Secret(key, "test")),
        k=(5, 10),
        timeout_s=timeout_s,
        load=load or LoadProfile(),
        # These stores run without rate limits: a budget that never binds.
        budget=BudgetSettings(reads_per_min=60_000, writes_per_min=60_000),
    )


@pytest.fixture
async def store_url() -> AsyncIterator[str]:
    config = RefStoreConfig(
        api_key=KEY, retriever="bm25", read_limit_per_min=0, write_limit_per_min=0
    )
    async with running_refstore(config) as store:
        yield store.url


async def run(probe: ProbeConfig) -> Any:
    runner = ProbeRunner(probe)
    try:
        return await runner.run_once()
    finally:
        await runner.aclose()


async def test_a_cycle_scores_every_labeled_query(store_url: str) -> None:
    result = await run(probe_for(store_url))
    fixture = load_fixture(packaged_fixture("smoke"))
    assert result.outcome == "success", result.error_message
    assert len(result.queries) == len(fixture.queries)
    assert result.seed.imported == len(fixture.memories)
    assert result.seed.missing == ()
    for key in (
        "hit@5",
        "recall@10",
        "recall_all@10",
        "precision@5",
        "mrr@10",
        "ndcg@10",
        "map@10",
        "rr",
        "ap",
        "r_precision",
    ):
        assert 0.0 <= result.aggregate[key] <= 1.0
        lo, hi = result.ci[key]
        assert lo <= result.aggregate[key] <= hi
    assert result.aggregate["recall@10"] > 0.3  # bm25 on a lexical fixture finds things
    assert result.relevant_expected == sum(len(q.expected_ids) for q in fixture.queries)
    assert 0 < result.relevant_found[10] <= result.relevant_expected
    assert result.serial_latency.count == len(fixture.queries)
    assert set(result.by_category) == {q.category for q in fixture.queries if q.category}
    assert result.info.model


async def test_quality_is_also_scored_under_closed_loop_load(store_url: str) -> None:
    load = LoadProfile(mode="closed", concurrency=4, duration_s=1.0)
    result = await run(probe_for(store_url, load=load))
    assert result.outcome == "success", result.error_message
    assert result.load is not None
    assert result.load.requests.get("ok", 0) > 0
    assert result.load.service.count == result.load.requests["ok"]
    assert result.load.aggregate["recall@10"] == pytest.approx(
        result.aggregate["recall@10"], abs=0.25
    )


async def test_unreachable_store_is_a_failed_cycle_not_an_exception() -> None:
    result = await run(probe_for("http://127.0.0.1:9", max_retries=0))
    assert result.outcome == "failed"
    assert result.error_kind == "connect"
    assert "127.0.0.1:9" in (result.error_message or "")


async def test_refused_key_is_an_auth_failure(store_url: str) -> None:
    result = await run(probe_for(store_url, key="not-the-key-000"))
    assert (result.outcome, result.error_kind) == ("failed", "auth")
    assert "not-the-key" not in (result.error_message or "")


async def test_a_stalled_store_times_the_cycle_out() -> None:
    config = RefStoreConfig(
        api_key=KEY,
        retriever="bm25",
        read_limit_per_min=0,
        write_limit_per_min=0,
        faults=("latency=fixed:2s@search",),
    )
    async with running_refstore(config) as store:
        result = await run(
            probe_for(store.url, timeout_s=1.0, verify=False, searchable_timeout_s=0.1)
        )
    # 16 searches of 2 s each would take 32 s: ending as a timeout in 'serial' is
    # the cycle's own 1 s deadline at work (no wall-clock margin needed).
    assert (result.outcome, result.error_kind) == ("timeout", "timeout")
    # The message names the phase the cycle was in (the 2 s searches stall it).
    assert "timeout_s=1: still in phase 'serial' after" in (result.error_message or "")
    assert result.phases["serial"] > 0 and result.seed is not None


async def test_retried_searches_are_counted_not_hidden() -> None:
    config = RefStoreConfig(
        api_key=KEY,
        retriever="bm25",
        read_limit_per_min=0,
        write_limit_per_min=0,
        faults=("error_rate=0.4@search", "seed=7"),
    )
    async with running_refstore(config) as store:
        result = await run(
            probe_for(store.url, backoff_s=0.001, max_retries=5, searchable_timeout_s=2.0)
        )
    assert result.outcome == "success", result.error_message
    assert result.retries > 0


class Recorder:
    """A CycleProgress that writes down what the cycle told it."""

    def __init__(self) -> None:
        self.phases: list[str] = []
        self.counts: list[tuple[int, int]] = []
        self.waits: list[tuple[str, float, str]] = []

    def __call__(self, done: int, total: int) -> None:
        self.counts.append((done, total))

    def phase(self, name: str) -> None:
        self.phases.append(name)

    def waiting(self, seconds: float, reason: str) -> None:
        self.waits.append((self.phases[-1], seconds, reason))


async def test_progress_hears_every_phase_the_seeding_counts_and_each_429_wait() -> None:
    config = RefStoreConfig(
        api_key=KEY,
        retriever="bm25",
        read_limit_per_min=0,
        write_limit_per_min=0,
        faults=("rate_limit=0.3@search", "seed=3"),  # 429 with Retry-After: 1
    )
    load = LoadProfile(mode="closed", concurrency=2, requests=6, max_rate_limited_ratio=1.0)
    progress = Recorder()
    async with running_refstore(config) as store:
        runner = ProbeRunner(probe_for(store.url, load=load, cleanup="after", max_retries=5))
        try:
            result = await runner.run_once(progress=progress)
        finally:
            await runner.aclose()
    assert progress.phases == [
        "info", "seed", "verify", "searchable", "serial", "load", "cleanup",
    ]  # fmt: skip
    assert (36, 36) in progress.counts  # seeded and verified
    assert progress.counts[-16:] == [(i, 16) for i in range(1, 17)]  # the serial pass
    assert progress.waits, "the fault plan answers 429 to about a third of the searches"
    assert {reason for _, _, reason in progress.waits} <= {
        "429 Retry-After", "429 Retry-After (load pass paused)",
    }  # fmt: skip
    assert all(seconds == 1.0 for _, seconds, _ in progress.waits)
    assert result.outcome in ("success", "degraded"), result.error_message


async def test_failed_queries_and_load_errors_make_the_cycle_degraded_not_successful() -> None:
    config = RefStoreConfig(
        api_key=KEY,
        retriever="bm25",
        read_limit_per_min=0,
        write_limit_per_min=0,
        faults=("error_rate=0.5@search", "seed=11"),  # half the searches answer 500
    )
    load = LoadProfile(mode="closed", concurrency=2, requests=40, max_error_ratio=0.05)
    async with running_refstore(config) as store:
        result = await run(
            probe_for(store.url, load=load, max_retries=0, verify=False, searchable_timeout_s=0)
        )
    assert result.outcome == "degraded", result.error_message
    assert result.degraded_reasons == ("queries_failed", "load_errors")
    assert result.load is not None and result.load.requests.get("http_5xx", 0) > 2
    failed = [q for q in result.queries if q.error is not None]
    assert failed and len(failed) < len(result.queries)
    assert result.aggregate  # what was answered is still scored
    assert not result.ok


async def test_a_probe_run_alone_is_paced_to_its_own_budget(store_url: str) -> None:
    probe = dataclasses.replace(
        probe_for(store_url, load=LoadProfile(mode="closed", concurrency=4, duration_s=1.0)),
        budget=BudgetSettings(reads_per_min=120, writes_per_min=60_000),
    )
    runner = ProbeRunner(probe)  # no plan: its budget alone, 120/min = 2 req/s
    try:
        assert runner.read_rate == 2.0
        result = await runner.run_once()
    finally:
        await runner.aclose()
    assert result.load is not None and result.load.max_rate == 2.0
    assert 1 <= result.load.sent <= 2 * 2  # at most twice what 2 req/s admits in 1 s


async def test_a_store_without_limits_is_not_paced_while_a_zengram_default_is(
    store_url: str,
) -> None:
    """``unlimited = true``: the load pass runs as fast as the store answers (> 2 req/s)."""
    load = LoadProfile(mode="closed", concurrency=4, requests=40)
    base = probe_for(store_url, load=load, verify=False, searchable_timeout_s=0)
    unlimited = dataclasses.replace(base, budget=BudgetSettings(unlimited=True))
    control = dataclasses.replace(base, budget=BudgetSettings())  # the kind's 120/min
    assert ProbeRunner(control).read_rate == 2.0  # built only to read its share
    runner = ProbeRunner(unlimited)
    try:
        assert runner.read_rate is None
        result = await runner.run_once()
    finally:
        await runner.aclose()
    assert result.outcome == "success", result.error_message
    assert result.load is not None and result.load.max_rate is None
    assert result.load.requests == {"ok": 40}
    assert result.load.achieved_rate > 2.0  # what a 120/min budget would have held it to


async def test_a_timeout_says_how_long_the_cycle_waited_on_429s() -> None:
    config = RefStoreConfig(
        api_key=KEY,
        retriever="bm25",
        read_limit_per_min=0,
        write_limit_per_min=0,
        faults=("rate_limit=1.0@search",),  # every search: 429, Retry-After: 1
    )
    async with running_refstore(config) as store:
        result = await run(
            probe_for(
                store.url, timeout_s=2.5, max_retries=10, verify=False, searchable_timeout_s=0
            )
        )
    assert result.outcome == "timeout"
    message = result.error_message or ""
    assert "still in phase 'serial'" in message
    waited = float(message.rsplit("; ", 1)[1].split(" s of the cycle went waiting on 429")[0])
    assert waited >= 1.0  # at least one whole Retry-After was slept before the timeout


async def test_a_fixture_file_changed_after_loading_fails_the_cycle_and_writes_nothing_new(
    store_url: str, tmp_path: Any
) -> None:
    """A streamed (JSON Lines) fixture is read again to be written: a memory changed since
    the probe loaded it fails the seed with one line, and is never sent."""
    import json

    import httpx

    path = tmp_path / "corpus.jsonl"
    memories = [{"id": f"m{i}", "content": f"note {i} about ferries and tides"} for i in range(40)]
    lines = [json.dumps({"memory": m}) for m in memories]
    lines.append(json.dumps({"query": {"q": "ferries", "expected_ids": ["m1"]}}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    probe = dataclasses.replace(probe_for(store_url, seed_batch=5, cleanup="before"), fixture=path)
    runner = ProbeRunner(probe)  # loads the fixture
    try:
        lines[22] = json.dumps({"memory": {"id": "m22", "content": "a text loaded by nobody"}})
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        result = await runner.run_once()
    finally:
        await runner.aclose()
    assert result.outcome == "failed"
    assert result.error_kind == "fixture_changed"
    message = result.error_message or ""
    assert "\n" not in message
    assert message.startswith(f"seed: {path}: the fixture changed since it was loaded: line 23")
    async with httpx.AsyncClient() as client:  # the store serves on this event loop
        answer = await client.get(
            store_url + "/export",
            params={"client_id": "benchd-eval", "active_only": "false", "limit": 5000},
            headers={"x-api-key": KEY},
        )
    listed = answer.json()["memories"]
    loaded = {m["content"] for m in memories}
    written = [r for r in listed if not str(r["id"]).startswith("benchd-sentinel")]
    assert written, "the batches before the changed line were written"
    assert all(r["content"] in loaded for r in written)
    assert all(str(r["id"]).startswith("benchd:benchd-eval:m") for r in written)


async def test_a_probe_at_rest_reuses_its_scores_and_they_equal_fresh_ones(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    scored: list[str] = []
    real = cycle_module.query_metrics
    monkeypatch.setattr(
        cycle_module, "query_metrics", lambda r, rel, ks: scored.append("x") or real(r, rel, ks)
    )
    runner = ProbeRunner(probe_for(store_url))
    fixture = runner.fixture
    try:
        for n in range(3):
            scored.clear()
            result = await runner.run_once()
            assert result.outcome == "success", result.error_message
            answers = [cycle_module.SerialAnswer(q.ranked_ids, q.latency_s) for q in result.queries]
            fresh = cycle_module._quality(fixture.queries, answers, (5, 10))
            assert [q.metrics for q in result.queries] == list(fresh.per_query)
            assert result.aggregate == fresh.aggregate
            assert result.ci == fresh.ci
            assert result.by_category == fresh.by_category
            assert result.relevant_found == fresh.found
            # the first cycle scores every query; later ones, same rankings, none
            assert len(scored) == (len(fixture.queries) if n == 0 else 0) + len(fixture.queries)
    finally:
        await runner.aclose()


def test_a_changed_ranking_or_other_cut_offs_are_scored_afresh() -> None:
    queries = load_fixture(packaged_fixture("smoke")).queries
    answers = [cycle_module.SerialAnswer(tuple(q.expected_ids), 0.01) for q in queries]
    moved = [cycle_module.SerialAnswer(("nope", *queries[0].expected_ids), 0.01), *answers[1:]]
    memo = cycle_module.ScoreMemo()
    first = cycle_module._quality(queries, answers, (5, 10), memo=memo)
    assert first.per_query[0] is not None
    first.per_query[0]["ap"] = -1.0  # a result's copy: the memo keeps its own
    for used, ks in ((moved, (5, 10)), (answers, (3,)), (answers, (5, 10)), (moved, (5, 10))):
        got = cycle_module._quality(queries, used, ks, memo=memo)
        fresh = cycle_module._quality(queries, used, ks)
        assert got.per_query == fresh.per_query
        assert got.aggregate == fresh.aggregate
        assert got.ci == fresh.ci
