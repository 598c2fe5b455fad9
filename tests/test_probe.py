"""ProbeRunner: one cycle under its timeout, the drift stage after it, a clean close.

Against the reference store on loopback (reconfigured between cycles through
its admin endpoint) and, for the timeout, a server that accepts connections
and never answers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from anyio.abc import SocketAttribute, SocketStream

from benchd.config.load import ProbeConfig, TargetConfig
from benchd.config.secrets import Secret
from benchd.config.thresholds import parse_threshold
from benchd.drift.baseline import baseline_from_result, write_baseline
from benchd.errors import ConfigError
from benchd.fixtures.model import load_fixture, packaged_fixture
from benchd.kinds.zengram import ZengramConfig, sentinel_id
from benchd.probe import ProbeRunner
from benchd.refstore.server import RunningRefStore
from benchd.refstore.testing import running_refstore_fixture

pytestmark = pytest.mark.anyio
KEY = "probe-test-key-0042"
NAMESPACE = "benchd-probe-test"
BOUND_S = 120  # a bound against a hung test, never a timing assertion


def probe_for(url: str, *, timeout_s: float = 60.0, **target: Any) -> ProbeConfig:
    settings: dict[str, Any] = {"namespace": NAMESPACE, "max_retries": 0, **target}
    return ProbeConfig(
        name="p",
        fixture=packaged_fixture("smoke"),
        target=TargetConfig("zengram", ZengramConfig(url=url, **settings), Secret(KEY, "test")),
        k=(5, 10),
        timeout_s=timeout_s,
    )


store = running_refstore_fixture(api_key=KEY, retriever="bm25")


async def admin(store: RunningRefStore, **body: Any) -> None:
    async with httpx.AsyncClient(base_url=store.url, headers={"x-api-key": KEY}) as client:
        (await client.post("/admin/config", json=body)).raise_for_status()


async def listed_ids(store: RunningRefStore) -> list[str]:
    async with httpx.AsyncClient(base_url=store.url, headers={"x-api-key": KEY}) as client:
        reply = await client.get("/export", params={"client_id": NAMESPACE, "limit": 500})
        reply.raise_for_status()
        return [str(r["id"]) for r in reply.json()["memories"]]


async def with_runner(probe: ProbeConfig, body: Callable[[ProbeRunner], Any]) -> Any:
    runner = ProbeRunner(probe)
    try:
        with anyio.fail_after(BOUND_S):
            return await body(runner)
    finally:
        await runner.aclose()


async def test_each_run_is_one_numbered_cycle_and_drift_compares_it_with_the_last(
    store: RunningRefStore,
) -> None:
    async def two(runner: ProbeRunner) -> Any:
        return await runner.run_once(), await runner.run_once()

    first, second = await with_runner(probe_for(store.url), two)
    assert (first.outcome, second.outcome) == ("success", "success"), second.error_message
    assert (first.cycle, second.cycle) == (1, 2)
    # The drift stage ran on each result before it was returned.
    assert first.drift is not None and not first.drift.compared
    assert second.drift is not None
    assert (second.drift.baseline, second.drift.samples) == ("rolling", 1)
    assert second.drift.metrics and not second.drift.detected  # same store, same rankings
    assert all(m.delta == 0.0 for m in second.drift.metrics.values())


async def test_a_store_failure_is_a_failed_result_that_drift_neither_compares_nor_keeps(
    store: RunningRefStore,
) -> None:
    async def cycles(runner: ProbeRunner) -> Any:
        good = await runner.run_once()
        await admin(store, faults=["error_rate=1.0@export"])  # every listing answers 500
        broken = await runner.run_once()
        await admin(store, faults=[])
        await admin(store, pin=await listed_ids(store))  # the same top ids for every query
        worse = await runner.run_once()
        return good, broken, worse

    good, broken, worse = await with_runner(probe_for(store.url), cycles)
    assert good.outcome == "success", good.error_message
    assert (broken.outcome, broken.error_kind, broken.cycle) == ("failed", "http_5xx", 2)
    assert broken.drift is not None and not broken.drift.compared
    # Compared with the one successful cycle before it: the failed one was not kept.
    assert worse.outcome == "success", worse.error_message
    assert worse.drift is not None
    assert (worse.drift.baseline, worse.drift.samples) == ("rolling", 1)
    assert worse.drift.detected and worse.drift.transition == "onset"
    assert worse.aggregate["recall@10"] < good.aggregate["recall@10"]


async def _silent(stream: SocketStream) -> None:
    """Read the request, never answer; hold the connection until the client gives up."""
    async with stream:
        try:
            while await stream.receive():
                pass
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return


async def test_a_store_that_never_answers_is_a_timeout_result_not_an_exception() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, _silent)
        # The request timeout (10 s) is far beyond the cycle's: the cycle's own bound cuts.
        probe = probe_for(f"http://127.0.0.1:{port}", timeout_s=0.5)
        result = await with_runner(probe, lambda r: r.run_once())
        tg.cancel_scope.cancel()
    assert (result.outcome, result.error_kind) == ("timeout", "timeout")
    assert "still in phase 'info'" in (result.error_message or "")
    assert result.drift is not None and not result.drift.compared


async def test_a_pinned_baseline_is_loaded_at_construction_and_compared_first(
    store: RunningRefStore, tmp_path: Path
) -> None:
    first = await with_runner(probe_for(store.url), lambda r: r.run_once())
    assert first.outcome == "success", first.error_message
    pinned = tmp_path / "baseline.toml"
    write_baseline(baseline_from_result(first), pinned)
    probe = dataclasses.replace(probe_for(store.url), baseline=pinned)
    again = await with_runner(probe, lambda r: r.run_once())
    assert again.drift is not None and again.drift.baseline == "pinned"
    assert not again.drift.detected and not again.drift.stale


def test_a_missing_baseline_fails_construction_not_a_cycle(tmp_path: Path) -> None:
    probe = dataclasses.replace(probe_for("http://127.0.0.1:9"), baseline=tmp_path / "absent.toml")
    with pytest.raises(ConfigError, match=r"absent\.toml: baseline file not found"):
        ProbeRunner(probe)


async def test_shutdown_cleanup_deletes_the_corpus_only_when_the_policy_is_after(
    store: RunningRefStore,
) -> None:
    memories = load_fixture(packaged_fixture("smoke")).memories

    async def seed_then_cleanup(runner: ProbeRunner) -> Any:
        report = await runner.target.seed(memories)
        assert report.verified == len(memories)
        return await runner.cleanup()

    kept = await with_runner(probe_for(store.url, cleanup="never"), seed_then_cleanup)
    assert kept is None
    ids = await listed_ids(store)
    assert len(ids) == len(memories) + 1 and sentinel_id(NAMESPACE) in ids
    done = await with_runner(probe_for(store.url, cleanup="after"), seed_then_cleanup)
    assert (done.deleted, done.leftover, done.timed_out) == (len(memories) + 1, 0, False)
    assert await listed_ids(store) == []  # the sentinel goes last, once nothing else is left


async def test_aclose_is_idempotent_and_completes_inside_a_cancelled_scope(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = ProbeRunner(probe_for("http://127.0.0.1:9"))
    real = runner.target.aclose
    closes: list[str] = []

    async def counted() -> None:
        await real()
        # A pool with open connections awaits I/O while closing: cancelled here unless shielded.
        await anyio.lowlevel.checkpoint()
        closes.append("closed")

    monkeypatch.setattr(runner.target, "aclose", counted)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await runner.aclose()
    await runner.aclose()
    assert closes == ["closed"]


async def test_the_runner_judges_the_probes_and_the_command_lines_thresholds_once(
    store: RunningRefStore,
) -> None:
    """Verdicts are carried in the result: one per distinct threshold, a failed cycle breached."""
    own = (parse_threshold("recall@10>=0.0"), parse_threshold("p99<1000"))
    probe = dataclasses.replace(probe_for(store.url), thresholds=own)
    extra = (parse_threshold("recall@10>=0.0"), parse_threshold("load:p99<1"))  # one repeated
    runner = ProbeRunner(probe, thresholds=extra)
    try:
        with anyio.fail_after(BOUND_S):
            result = await runner.run_once()
    finally:
        await runner.aclose()
    assert result.outcome == "success"
    names = [v.threshold.name for v in result.thresholds]
    assert names == ["serial:recall@10>=0", "serial:p99<1000", "load:p99<1"]
    met, fast, load = result.thresholds
    assert not met.breached and met.value == result.aggregate["recall@10"]
    assert not fast.breached and fast.value == result.serial_latency.p99
    assert load.breached and load.value is None  # the probe runs no load pass


async def test_a_failed_cycle_carries_its_thresholds_breached(store: RunningRefStore) -> None:
    probe = probe_for(store.url)
    wrong_key = dataclasses.replace(probe.target, secret=Secret("not-the-key-0042", "test"))
    probe = dataclasses.replace(
        probe, target=wrong_key, thresholds=(parse_threshold("recall@10>=0.5"),)
    )
    runner = ProbeRunner(probe)
    try:
        with anyio.fail_after(BOUND_S):
            result = await runner.run_once()
    finally:
        await runner.aclose()
    assert (result.outcome, result.error_kind) == ("failed", "auth")
    (verdict,) = result.thresholds
    assert verdict.breached and verdict.value is None
