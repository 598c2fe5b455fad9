"""Fault drills: ``benchd run`` against a ``benchd refstore`` subprocess that misbehaves.

Each drill switches a fault on (through the store's admin endpoint, or by
killing it), checks that the daemon keeps running and counts the failure by
kind in ``/metrics``, then lifts the fault and checks that recovery needs no
help. Every wait is on the daemon's own ``cycle`` log events, with a deadline.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from drill_support import (
    ENV,
    KEY,
    KEY_ENV,
    RefstoreProcess,
    free_port,
    open_fds,
    probe_toml,
    rss_bytes,
    value,
    write_config,
    write_tiny_fixture,
)
from support import BenchdProcess, Event

from benchd.config.load import load_config
from benchd.probe import ProbeRunner

MiB = 1024 * 1024
HANG_S = 60.0
"""How long to wait for a number of cycles or a recovery: a bound against a hang, not a
margin. These waits took up to 9.2 s of the 10-15 s they had (the first 25 cycles of the
fd and memory test, at load 6 on 2 cores), and a busier box takes longer."""


@pytest.fixture
def fixture_path(tmp_path: Path) -> Path:
    return write_tiny_fixture(tmp_path / "tiny.json")


@pytest.fixture
def store() -> Iterator[RefstoreProcess]:
    with RefstoreProcess(free_port()) as running:
        yield running


def cycle(probe: str, outcome: str | None = None, after: int = 0) -> Callable[[Event], bool]:
    """Predicate: a ``cycle`` event of ``probe`` numbered above ``after``, of ``outcome``."""

    def matches(e: Event) -> bool:
        return (
            e.get("event") == "cycle"
            and e.get("probe") == probe
            and int(e.get("cycle", 0)) > after
            and (outcome is None or e.get("outcome") == outcome)
        )

    return matches


def recovers(benchd: BenchdProcess, probe: str, after: int) -> Event:
    """Wait for a successful cycle past ``after``; benchd_up must then be 1."""
    ok = benchd.wait_for(cycle(probe, "success", after), timeout=HANG_S)
    assert value(benchd.samples("benchd_up"), probe=probe) == 1.0
    return ok


def assert_no_overlap(events: list[Event]) -> None:
    for earlier, later in itertools.pairwise(events):
        assert later["cycle"] == earlier["cycle"] + 1
        assert later["started_at"] >= earlier["finished_at"]


def start_daemon(tmp_path: Path, *probes: str) -> BenchdProcess:
    return BenchdProcess(["--config", str(write_config(tmp_path, *probes))], env=ENV)


def test_store_killed_and_restarted_mid_run_is_counted_then_recovered(
    tmp_path: Path, fixture_path: Path
) -> None:
    port = free_port()
    store = RefstoreProcess(port).start()
    try:
        with start_daemon(tmp_path, probe_toml("kill", store.url, fixture_path)) as benchd:
            benchd.wait_for(cycle("kill", "success"))
            store.kill()
            failed = benchd.wait_for(cycle("kill", "failed"))
            down = benchd.wait_for(
                lambda e: cycle("kill", "failed")(e) and e["error_kind"] == "connect"
            )
            assert "cannot connect" in down["error"]
            assert value(benchd.samples("benchd_up"), probe="kill") == 0.0
            errors = benchd.samples("benchd_cycle_errors_total")
            assert value(errors, probe="kill", kind="connect") >= 1
            assert value(benchd.samples("benchd_cycles_total"), outcome="failed") >= 1
            assert benchd.get("/healthz").status_code == 200

            store.start()  # same port, empty store: benchd re-marks and re-seeds it
            recovers(benchd, "kill", after=max(failed["cycle"], down["cycle"]))
            assert store.export_ids("drill-kill")  # the corpus is back
            assert benchd.stop() == 0
    finally:
        store.kill()


def test_twenty_percent_5xx_is_counted_per_request_and_absorbed_by_retries(
    tmp_path: Path, fixture_path: Path, store: RefstoreProcess
) -> None:
    store.set_faults(["error_rate=0.2@search"])
    bare = probe_toml("bare", store.url, fixture_path, retries=0)
    retried = probe_toml("retried", store.url, fixture_path, retries=8)
    with start_daemon(tmp_path, bare, retried) as benchd:
        benchd.wait_cycles("bare", 12, timeout=HANG_S)
        retried_cycles = benchd.wait_cycles("retried", 8, timeout=HANG_S)
        assert {e["outcome"] for e in retried_cycles} == {"success"}
        requests = benchd.samples("benchd_requests_total")
        assert value(requests, probe="bare", outcome="http_5xx") > 0
        assert value(requests, probe="bare", outcome="ok") > 0
        assert value(requests, probe="retried", outcome="http_5xx") == 0
        assert value(benchd.samples("benchd_errors_total"), probe="bare", kind="http_5xx") > 0
        assert value(benchd.samples("benchd_up"), probe="retried") == 1.0
        assert benchd.stop() == 0


def test_a_429_storm_fails_cycles_as_rate_limited_and_recovery_is_automatic(
    tmp_path: Path, fixture_path: Path, store: RefstoreProcess
) -> None:
    store.set_faults(["rate_limit=1.0"])  # every API call: 429 with Retry-After: 1
    with start_daemon(tmp_path, probe_toml("storm", store.url, fixture_path)) as benchd:
        failed = benchd.wait_for(cycle("storm", "failed"))
        assert failed["error_kind"] == "rate_limited"
        assert "HTTP 429" in failed["error"]
        assert value(benchd.samples("benchd_up"), probe="storm") == 0.0
        assert value(benchd.samples("benchd_cycle_errors_total"), kind="rate_limited") >= 1
        store.set_faults([])
        last = benchd.cycles("storm")[-1]["cycle"]
        recovers(benchd, "storm", after=last)
        assert benchd.stop() == 0


def test_stalls_longer_than_the_cycle_timeout_end_as_timeouts_without_overlap(
    tmp_path: Path, fixture_path: Path, store: RefstoreProcess
) -> None:
    store.set_faults(["stall=every:100s,for:99s@search"])
    whole = probe_toml("stall_cycle", store.url, fixture_path, timeout=1.2, request_timeout=30)
    request = probe_toml("stall_request", store.url, fixture_path, request_timeout=0.3, retries=0)
    with start_daemon(tmp_path, whole, request) as benchd:
        # two cycles cut at 1.2 s each; without the cycle's own deadline each would wait
        # for its 30 s request timeout, so 30 s still tells the two apart
        timeouts = benchd.wait_cycles("stall_cycle", 2, timeout=30)
        assert [e["outcome"] for e in timeouts[:2]] == ["timeout", "timeout"]
        assert_no_overlap(timeouts)
        failed = benchd.wait_for(cycle("stall_request", "failed"))
        assert failed["error_kind"] == "timeout"
        outcomes = benchd.samples("benchd_cycles_total")
        assert value(outcomes, probe="stall_cycle", outcome="timeout") >= 2
        assert value(benchd.samples("benchd_cycle_errors_total"), kind="timeout") >= 3
        store.set_faults([])
        for name in ("stall_cycle", "stall_request"):
            recovers(benchd, name, after=benchd.cycles(name)[-1]["cycle"])
        assert_no_overlap(benchd.cycles("stall_cycle"))
        assert benchd.stop() == 0


def test_malformed_bodies_are_decode_errors_per_request_and_per_cycle(
    tmp_path: Path, fixture_path: Path, store: RefstoreProcess
) -> None:
    store.set_faults(["malformed=0.5@search", "seed=5"])
    probe = probe_toml("mangled", store.url, fixture_path, retries=0)
    with start_daemon(tmp_path, probe) as benchd:
        benchd.wait_for(lambda e: cycle("mangled", "failed")(e) and e["error_kind"] == "decode")
        benchd.wait_cycles("mangled", 12, timeout=HANG_S)
        assert value(benchd.samples("benchd_requests_total"), outcome="decode") > 0
        assert value(benchd.samples("benchd_cycle_errors_total"), kind="decode") >= 1
        store.set_faults([])
        recovers(benchd, "mangled", after=benchd.cycles("mangled")[-1]["cycle"])
        assert benchd.stop() == 0


def test_slow_and_oversized_bodies_are_bounded(
    tmp_path: Path, fixture_path: Path, store: RefstoreProcess
) -> None:
    # A body dribbled out over 3 s: httpx's per-read timeout never fires, the
    # adapter's whole-request deadline (timeout_s) must.
    store.set_faults(["slow_body=3s@search"])
    slow = probe_toml("slow", store.url, fixture_path, request_timeout=0.5, retries=0)
    big = probe_toml("big", store.url, fixture_path, target_extra="max_response_bytes = 400")
    with start_daemon(tmp_path, slow, big) as benchd:
        dribbled = benchd.wait_for(cycle("slow", "failed"), timeout=HANG_S)
        # no read ever times out on a dribbled body: kind timeout is the deadline's
        assert dribbled["error_kind"] == "timeout"
        oversized = benchd.wait_for(cycle("big", "failed"))
        assert oversized["error_kind"] == "decode"
        assert "max_response_bytes = 400" in oversized["error"]
        assert value(benchd.samples("benchd_cycle_errors_total"), probe="big", kind="decode") >= 1
        assert benchd.stop() == 0


def test_connection_refused_fails_cycles_while_the_daemon_keeps_serving(
    tmp_path: Path, fixture_path: Path
) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    with start_daemon(tmp_path, probe_toml("refused", nowhere, fixture_path)) as benchd:
        cycles = benchd.wait_cycles("refused", 3)
        assert {(e["outcome"], e["error_kind"]) for e in cycles} == {("failed", "connect")}
        assert nowhere in cycles[0]["error"]
        assert value(benchd.samples("benchd_up"), probe="refused") == 0.0
        assert value(benchd.samples("benchd_cycles_total"), outcome="failed") >= 3
        assert benchd.get("/healthz").status_code == 200
        assert benchd.get("/readyz").status_code == 200  # it has completed (failed) cycles
        assert benchd.stop() == 0


FAULT_ROUNDS: list[list[str]] = [
    ["error_rate=0.5"],
    ["rate_limit=0.5"],
    ["malformed=0.5@search+export"],
    ["latency=uniform:1ms..5ms", "degraded=0.5@search"],
]


def _wait_more(benchd: BenchdProcess, probe: str, more: int) -> list[Event]:
    return benchd.wait_cycles(probe, len(benchd.cycles(probe)) + more, timeout=HANG_S)


def test_no_fd_or_memory_growth_across_faulty_cycles(
    tmp_path: Path, fixture_path: Path, store: RefstoreProcess
) -> None:
    probe = probe_toml("leak", store.url, fixture_path, interval=0.01, retries=1)
    with start_daemon(tmp_path, probe) as benchd:
        assert benchd.proc is not None
        pid = benchd.proc.pid
        benchd.wait_cycles("leak", 25, timeout=HANG_S)
        fds_before, rss_before = open_fds(pid), rss_bytes(pid)
        for faults in FAULT_ROUNDS:
            store.set_faults(faults)
            _wait_more(benchd, "leak", 15)
        store.set_faults([])
        _wait_more(benchd, "leak", 30)
        fds_after, rss_after = open_fds(pid), rss_bytes(pid)
        events = benchd.cycles("leak")
        # a fault that loses some queries leaves the cycle degraded (no error kind);
        # one that stops it is failed with the fault's kind
        kinds = {e.get("error_kind") for e in events if e["outcome"] == "failed"}
        assert kinds and kinds <= {"http_5xx", "rate_limited", "decode"}
        assert {e["outcome"] for e in events} <= {"success", "degraded", "failed"}
        assert events[-1]["outcome"] == "success"
        assert_no_overlap(events)
        assert fds_after <= fds_before + 4, (fds_before, fds_after)
        assert rss_after <= rss_before + 16 * MiB, (rss_before, rss_after)
        assert benchd.stop() == 0


@pytest.mark.anyio
async def test_no_task_or_socket_leak_when_cycles_fail_in_process(
    tmp_path: Path, fixture_path: Path, store: RefstoreProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    probe = probe_toml("tasks", store.url, fixture_path, timeout=1.0, request_timeout=0.3)
    runner = ProbeRunner(load_config(write_config(tmp_path, probe)).probes[0])
    try:
        for _ in range(2):  # warm: the second cycle re-seeds, filling the keep-alive pool
            await runner.run_once()
        tasks, fds = len(asyncio.all_tasks()), open_fds(os.getpid())
        outcomes = set()
        for faults in [*FAULT_ROUNDS, ["stall=every:10s,for:9s@search"], []]:
            await anyio.to_thread.run_sync(store.set_faults, faults)
            for _ in range(4):
                with anyio.fail_after(10):
                    outcomes.add((await runner.run_once()).outcome)
        assert {"failed", "timeout", "success"} <= outcomes
        assert len(asyncio.all_tasks()) == tasks
        assert open_fds(os.getpid()) <= fds + 2
    finally:
        await runner.aclose()
