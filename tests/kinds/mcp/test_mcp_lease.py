"""One writer per namespace on the mcp kind, and deletes verified a set per listing.

server-memory lists names only, so the lease lives in a record named by its
holder (benchd.kinds.mcp.lease). Against the real server (npm): a second
instance on a live daemon's memory file fails with kind ``ownership`` and
writes nothing, over stdio and through the HTTP bridge; ``once`` beside it
measures read-only; a restarted daemon (its token in its state directory)
takes its lease over at once; a lease seen unchanged for its ttl is taken
over; a stopped one hands it back.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_servers import server_memory_over_http
from structlog.testing import capture_logs
from support import BenchdProcess
from test_mcp_kind import SERVER_MEMORY_TOOLS, probe_toml, server_memory_stdio

from benchd.config.load import load_config
from benchd.errors import TargetProtocolError
from benchd.kinds.mcp.deletes import VerifiedDeletes
from benchd.kinds.mcp.lease import (
    is_lease_name,
    lease_name,
    lease_prefix,
    legacy_lease_prefix,
    parse_lease,
    shown,
)
from benchd.probe import ProbeRunner
from benchd.store.lease import OBSERVED, Holder
from benchd.store.owned import sentinel_id

NS = "benchd-eval"
PREFIX = lease_prefix(NS)


@asynccontextmanager
async def runner(
    target: str, tmp_path: Path, name: str, instance: str, **kw: Any
) -> AsyncIterator[ProbeRunner]:
    path = tmp_path / f"{name}.toml"
    path.write_text(probe_toml(target, SERVER_MEMORY_TOOLS, extra="interval_s = 600"))
    (probe,) = load_config(path).probes
    r = ProbeRunner(probe, instance=instance, **kw)
    try:
        yield r
    finally:
        await r.aclose()


def names(memory: Path) -> list[str]:
    return [json.loads(line)["name"] for line in memory.read_text().splitlines() if line.strip()]


def leases(memory: Path) -> list[Holder]:
    found = [parse_lease(NS, n) for n in names(memory) if n.startswith(PREFIX)]
    return [h for h in found if h is not None]


@pytest.mark.anyio
async def test_a_second_instance_on_a_live_daemons_memory_file_is_refused_or_reads_only(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "benchd.jsonl"
    stdio = server_memory_stdio(memory, 'namespace_by = "server"\ncleanup = "before"')
    async with runner(stdio, tmp_path, "daemon", "pod-0") as daemon:
        first = await daemon.run_once()
        assert first.outcome == "success", first.error_message
        (held,) = leases(memory)
        assert (held.instance, held.role) == ("pod-0", "run") and held.live()
        before = memory.read_bytes()

        async with runner(stdio, tmp_path, "other", "pod-1") as other:
            refused = await other.run_once()
        assert (refused.outcome, refused.error_kind) == ("failed", "ownership")
        assert "leased by benchd instance 'pod-0'" in (refused.error_message or "")
        assert memory.read_bytes() == before

        with server_memory_over_http(memory) as url:  # another server process, over HTTP
            bridged = f'transport = "http"\nurl = "{url}"\nnamespace_by = "server"'
            async with runner(bridged, tmp_path, "bridged", "pod-2") as other:
                refused = await other.run_once()
        assert (refused.outcome, refused.error_kind) == ("failed", "ownership")
        assert memory.read_bytes() == before

        async with runner(stdio, tmp_path, "once", "ci", read_only_beside_live=True) as once:
            measured = await once.run_once()
            await once.release_lease()  # the end of once: it holds nothing to hand back
        assert measured.outcome == "success", measured.error_message
        assert measured.seed is not None and "pod-0" in (measured.seed.read_only_beside or "")
        assert dict(measured.aggregate) == dict(first.aggregate)
        assert memory.read_bytes() == before

        second = await daemon.run_once()  # the holder heartbeats: a new record, the old gone
        assert second.outcome == "success", second.error_message
        (beat,) = leases(memory)
        assert beat.token == held.token and beat.heartbeat >= held.heartbeat
        await daemon.release_lease()
    assert leases(memory) == []  # handed back on stop
    assert sentinel_id(NS) in names(memory)


def test_benchd_once_beside_a_running_daemon_measures_read_only_and_the_stop_hands_back(
    tmp_path: Path,
) -> None:
    """The commands as an operator runs them: ``benchd run`` holds the memory file's lease,
    ``benchd once`` beside it (its own server process on the same file) writes nothing,
    and SIGTERM deletes the daemon's lease record (the sentinel stays)."""
    memory = tmp_path / "benchd.jsonl"
    daemon = tmp_path / "daemon.toml"
    stdio = server_memory_stdio(memory, 'namespace_by = "server"\ncleanup = "before"')
    daemon.write_text('[server]\ninstance = "pod-0"\n' + probe_toml(
        stdio, SERVER_MEMORY_TOOLS, extra="interval_s = 600"))  # fmt: skip
    once = tmp_path / "once.toml"
    once.write_text('[server]\ninstance = "ci"\n' + probe_toml(
        server_memory_stdio(memory, 'namespace_by = "server"\ncleanup = "after"'),
        SERVER_MEMORY_TOOLS))  # fmt: skip
    with BenchdProcess(["--config", str(daemon)]) as benchd:
        (cycle,) = benchd.wait_cycles("mcp", 1, timeout=300)
        assert cycle["outcome"] == "success", cycle
        before = memory.read_bytes()
        proc = subprocess.run(
            [sys.executable, "-m", "benchd", "once", "-c", str(once)],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert "leased by live benchd instance 'pod-0'" in proc.stderr
        assert "read-only (wrote and deleted nothing)" in proc.stderr
        assert memory.read_bytes() == before
        assert benchd.stop() == 0
    assert leases(memory) == [] and sentinel_id(NS) in names(memory)


def test_a_second_daemon_on_the_same_host_and_config_is_refused_and_a_killed_ones_restart_is_not(
    tmp_path: Path,
) -> None:
    """Two ``benchd run`` with one config on one host (the same instance name: the host
    name): the second is not the first's restart while the first runs, so it fails with kind
    ``ownership`` and writes nothing. Once the first is killed (its lease still live), the
    next start takes the lease over on its first cycle, deleting the dead one's record."""
    memory = tmp_path / "benchd.jsonl"
    config = tmp_path / "daemon.toml"
    config.write_text(probe_toml(
        server_memory_stdio(memory, 'namespace_by = "server"\ncleanup = "before"'),
        SERVER_MEMORY_TOOLS, extra="interval_s = 600"))  # fmt: skip
    with BenchdProcess(["--config", str(config)]) as first:
        (cycle,) = first.wait_cycles("mcp", 1, timeout=300)
        assert cycle["outcome"] == "success", cycle
        (held,) = leases(memory)
        before = memory.read_bytes()
        with BenchdProcess(["--config", str(config)]) as second:
            (refused,) = second.wait_cycles("mcp", 1, timeout=300)
            assert (refused["outcome"], refused["error_kind"]) == ("failed", "ownership")
            assert f"pid {held.pid}" in refused["error"]
            assert second.stop() == 0
        assert memory.read_bytes() == before
        proc = subprocess.run(  # once, same config and host: measures, writes nothing
            [sys.executable, "-m", "benchd", "once", "-c", str(config)],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert "read-only (wrote and deleted nothing)" in proc.stderr
        assert memory.read_bytes() == before
        proc = subprocess.run(  # purge, same config and host: refused, deletes nothing
            [sys.executable, "-m", "benchd", "purge", "-c", str(config)],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert proc.returncode == 3 and "--force" in proc.stderr, proc.stdout + proc.stderr
        assert memory.read_bytes() == before
        assert first.proc is not None
        first.proc.kill()  # no hand-back: its lease stays live
        first.proc.wait()
    assert leases(memory) == [held] and held.live()
    with BenchdProcess(["--config", str(config)]) as restarted:
        (cycle,) = restarted.wait_cycles("mcp", 1, timeout=300)
        assert cycle["outcome"] == "success", cycle
        (now,) = leases(memory)
        assert now.instance == held.instance and now.pid != held.pid
        assert restarted.stop() == 0
    assert leases(memory) == []


@pytest.mark.anyio
async def test_a_hand_back_cut_by_the_grace_says_the_lease_is_left_and_a_later_one_removes_it(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "benchd.jsonl"
    async with runner(server_memory_stdio(memory), tmp_path, "a", "pod-0") as r:
        assert (await r.run_once()).outcome == "success"
        with capture_logs() as logs:
            await r.release_lease(0.0)  # the grace already spent: nothing is sent
        (held,) = leases(memory)
        assert held.live()
        (said,) = [e for e in logs if e["event"] == "lease not released"]
        assert "stays live until its ttl_s" in said["error"]
        await r.release_lease()
    assert leases(memory) == []


@pytest.mark.anyio
async def test_a_restart_takes_its_own_lease_at_once_and_a_dead_one_after_its_ttl_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart finds its token in the state directory and takes its lease at once; a
    lease whose holder died is taken only once this process has seen its record unchanged
    for its ttl (by this process's clock, injected), whatever its heartbeat says."""
    monkeypatch.setenv("BENCHD_STATE_DIR", str(tmp_path / "state"))
    clock = [1000.0]
    monkeypatch.setattr(OBSERVED, "clock", lambda: clock[0])
    memory = tmp_path / "benchd.jsonl"
    stdio = server_memory_stdio(memory)
    async with runner(stdio, tmp_path, "a", "pod-0") as first:
        assert (await first.run_once()).outcome == "success"
    (old,) = leases(memory)
    async with runner(stdio, tmp_path, "b", "pod-0") as restarted:
        result = await restarted.run_once()
    assert result.outcome == "success", result.error_message
    (new,) = leases(memory)
    assert new.instance == "pod-0" and new.token == old.token and new.heartbeat > old.heartbeat

    # its holder died (its heartbeat an hour old by this clock: no matter)
    monkeypatch.setenv("BENCHD_STATE_DIR", str(tmp_path / "another-container"))
    async with runner(stdio, tmp_path, "c", "pod-1") as other:
        refused = await other.run_once()  # first seen now: live
        assert (refused.outcome, refused.error_kind) == ("failed", "ownership")
        clock[0] += new.ttl_s - 1
        assert (await other.run_once()).error_kind == "ownership"
        assert leases(memory) == [new]
        clock[0] += 1  # unchanged for its ttl, as this process saw it
        taken = await other.run_once()
    assert taken.outcome == "success", taken.error_message
    (now,) = leases(memory)
    assert now.instance == "pod-1" and now.token != new.token


@pytest.mark.anyio
async def test_a_cleanup_deletes_the_corpus_as_one_set_verified_by_one_listing(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "benchd.jsonl"
    stdio = server_memory_stdio(memory, 'namespace_by = "server"\ncleanup = "after"')
    async with runner(stdio, tmp_path, "a", "pod-0") as r:
        deletes = r.target.store.deletes  # type: ignore[attr-defined]
        result = await r.run_once()  # its cleanup phase deletes the 36 records
        assert result.outcome == "success", result.error_message
        assert (deletes.sets, deletes.listings) == (1, 1)
        (lease,) = [n for n in names(memory) if n.startswith(PREFIX)]
        assert sorted(names(memory)) == sorted([sentinel_id(NS), lease])
        report = await r.cleanup()  # on stop: the sentinel, its lease record with it
    assert report is not None and report.deleted == 1 and report.leftover == 0
    assert (deletes.sets, deletes.listings) == (2, 2)
    assert names(memory) == []


@pytest.mark.anyio
@pytest.mark.parametrize("rival_backs_off", [False, True])
async def test_of_two_writers_at_once_one_that_lists_the_other_deletes_its_own_and_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rival_backs_off: bool
) -> None:
    """Another instance's lease record lands right after this one's (unseen by the listing
    before): this one lists, sees it, deletes its own and fails, writing no corpus — also
    when the other backs off at the same moment, leaving no lease to read back."""
    memory = tmp_path / "benchd.jsonl"
    rival = {
        "namespace": NS, "token": "rival", "heartbeat": time.time(), "ttl_s": 600.0,
        "role": "run", "pid": 7, "fixture_hash": "", "instance": "pod-1",
    }  # fmt: skip
    async with runner(server_memory_stdio(memory), tmp_path, "a", "pod-0") as r:
        tools = r.target.store.tools  # type: ignore[attr-defined]
        write, delete = tools.write, tools.delete

        async def and_the_rivals(records: Sequence[dict[str, Any]]) -> int:
            sent: int = await write(records)
            if any(str(record["id"]).startswith(PREFIX) for record in records):
                theirs = {"id": lease_name(NS, rival), "content": "", "namespace": NS}
                await write([{**theirs, "memory": {}}])
            return sent

        async def the_rival_too(ids: Sequence[str]) -> None:
            await delete(ids)
            if any(i.startswith(PREFIX) for i in ids):  # this one's own: the rival saw it
                await delete([lease_name(NS, rival)])

        monkeypatch.setattr(tools, "write", and_the_rivals)
        if rival_backs_off:
            monkeypatch.setattr(tools, "delete", the_rival_too)
        result = await r.run_once()
    assert (result.outcome, result.error_kind) == ("failed", "ownership")
    assert "instance 'pod-1'" in (result.error_message or "")
    assert "took the lease at the same time" in (result.error_message or "")
    left = [h.instance for h in leases(memory)]
    assert left == ([] if rival_backs_off else ["pod-1"])  # its own deleted
    assert not [n for n in names(memory) if n.startswith("benchd:")]  # no corpus written


def legacy_lease_name(mark: dict[str, Any]) -> str:
    """A lease record's name as the previous version wrote it (the whole fixture hash)."""
    fields = [str(mark["token"]), str(round(mark["heartbeat"] * 1000)), f"{mark['ttl_s']:g}",
              mark["role"], str(mark["pid"]), mark["fixture_hash"], mark["instance"]]  # fmt: skip
    return legacy_lease_prefix(NS) + ":".join(fields)


def entity_line(name: str) -> str:
    """An entity as server-memory keeps it in its memory file."""
    record = {"type": "entity", "name": name, "entityType": "benchd", "observations": ["lease"]}
    return json.dumps(record) + "\n"


@pytest.mark.anyio
async def test_a_live_lease_record_of_the_previous_version_is_honoured_and_then_taken_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon killed before the upgrade left its old-format (~180-character) lease record,
    live: another instance is refused and writes nothing; once seen unchanged for its ttl,
    its restart takes the lease over and deletes the old record, leaving one lease record,
    in the new format."""
    monkeypatch.setenv("BENCHD_STATE_DIR", str(tmp_path / "state"))
    clock = [1000.0]
    monkeypatch.setattr(OBSERVED, "clock", lambda: clock[0])
    memory = tmp_path / "benchd.jsonl"
    stdio = server_memory_stdio(memory, 'namespace_by = "server"\ncleanup = "before"')
    old = {
        "token": "0123456789abcdef", "heartbeat": time.time(), "ttl_s": 3600.0, "role": "run",
        "pid": 4242, "fixture_hash": "ab" * 32, "instance": "pod-0",
    }  # fmt: skip
    memory.write_text(entity_line(sentinel_id(NS)) + entity_line(legacy_lease_name(old)))
    before = memory.read_bytes()
    async with runner(stdio, tmp_path, "other", "pod-1") as other:
        refused = await other.run_once()
    assert (refused.outcome, refused.error_kind) == ("failed", "ownership")
    assert "instance 'pod-0'" in (refused.error_message or "")
    assert memory.read_bytes() == before
    async with runner(stdio, tmp_path, "restarted", "pod-0") as restarted:
        # the previous version kept no token: its restart waits the record out too
        assert (await restarted.run_once()).error_kind == "ownership"
        clock[0] += old["ttl_s"]
        result = await restarted.run_once()
        assert result.outcome == "success", result.error_message
        (now,) = [n for n in names(memory) if is_lease_name(NS, n)]
        assert now.startswith(PREFIX) and len(now) < 100
        await restarted.release_lease()
    assert not [n for n in names(memory) if is_lease_name(NS, n)]


def test_purge_refuses_unexpired_leases_and_forced_deletes_both_forms_with_the_sentinel(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "shared.jsonl"
    dead = {
        "token": "0123456789abcdef", "heartbeat": time.time() - 7200, "ttl_s": 60.0,
        "role": "run", "pid": 4242, "fixture_hash": "ab" * 32, "instance": "pod-0",
    }  # fmt: skip
    alice = entity_line("alice")
    memory.write_text(
        entity_line(sentinel_id(NS)) + entity_line(legacy_lease_name(dead)) + alice
        + entity_line(lease_name(NS, {**dead, "namespace": NS, "instance": "pod-1"}))
    )  # fmt: skip
    config = tmp_path / "benchd.toml"
    config.write_text(probe_toml(server_memory_stdio(memory, "adopt_namespace = true"),
                                 SERVER_MEMORY_TOOLS))  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "benchd", "purge", "-c", str(config)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    # a fresh process has seen no lease expire: live to it, whatever its heartbeat says
    assert proc.returncode != 0 and "leased by live benchd instance" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "benchd", "purge", "-c", str(config), "--force"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 sentinel(s); left 1 record(s) benchd did not write" in proc.stdout
    left = [json.loads(line) for line in memory.read_text().splitlines() if line.strip()]
    assert left == [json.loads(alice)]


def holder(token: str, heartbeat: float, ttl_s: float = 60.0) -> Holder:
    return Holder(instance="i", pid=1, token=token, heartbeat=heartbeat, ttl_s=ttl_s,
                  fixture_hash="f")  # fmt: skip


def test_a_lease_name_reads_back_as_the_holder_it_was_written_for() -> None:
    mark = {
        "namespace": NS, "token": "ab12", "heartbeat": 1700000000.123, "ttl_s": 1830.0,
        "role": "once", "pid": 42, "fixture_hash": "c0ffee", "instance": "pod:0/a b",
    }  # fmt: skip
    back = parse_lease(NS, lease_name(NS, mark))
    assert back == Holder(instance="pod:0/a b", pid=42, token="ab12", heartbeat=1700000000.123,
                          ttl_s=1830.0, fixture_hash="c0ffee", role="once")  # fmt: skip
    assert parse_lease(NS, sentinel_id(NS)) is None
    assert parse_lease("other", lease_name(NS, mark)) is None
    # the fixture hash shortened to 16 hex digits still names the same corpus, no other
    full = {**mark, "fixture_hash": "c0ffee" * 10 + "abcd"}
    short = parse_lease(NS, lease_name(NS, full))
    assert short is not None and short.same_fixture(full["fixture_hash"])
    assert not short.same_fixture("f" + full["fixture_hash"][1:])
    # a lease record the previous version wrote reads back as the same holder
    legacy = {**full, "instance": "pod-0", "heartbeat": 1700000000.5}
    was = parse_lease(NS, legacy_lease_name(legacy))
    assert was == Holder(instance="pod-0", pid=42, token="ab12", heartbeat=1700000000.5,
                         ttl_s=1830.0, fixture_hash=full["fixture_hash"], role="once")  # fmt: skip
    assert is_lease_name(NS, legacy_lease_name(legacy)) and is_lease_name(NS, lease_name(NS, mark))
    assert parse_lease(NS, lease_prefix(NS) + "a:b") is None  # too few fields: not a lease


def test_another_live_lease_is_shown_before_ones_own_and_the_earliest_of_them_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [50.0]
    monkeypatch.setattr(OBSERVED, "clock", lambda: clock[0])
    now = 10_000.0
    dead = holder("z", now - 999)
    assert shown([dead], None) == dead and dead.live()  # first seen: live
    clock[0] += dead.ttl_s  # unchanged for its ttl as this process saw it
    mine, early, late = holder("m", now), holder("x", now - 5), holder("y", now - 1)
    assert shown([mine, late, early, dead], "m") == early
    assert shown([mine, dead], "m") == mine
    assert shown([dead], None) == dead and not dead.live()
    assert shown([], "m") is None


@pytest.mark.anyio
async def test_deletes_in_flight_go_as_one_set_and_a_record_still_listed_fails_every_caller() -> (
    None
):
    held = {f"r{i}" for i in range(10)} | {"stuck"}
    sent: list[list[str]] = []

    async def send(ids: Sequence[str]) -> None:
        sent.append(list(ids))
        held.difference_update(i for i in ids if i != "stuck")

    async def listed() -> set[str]:
        return set(held)

    deletes = VerifiedDeletes(send, listed, lambda ids: f"still listed: {ids}", batch_size=4)
    failures: list[str] = []

    async def one(ids: list[str]) -> None:
        try:
            await deletes.delete(ids)
        except TargetProtocolError as exc:
            failures.append(str(exc))

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(one, [f"r{i}"])
    assert sent == [["r0", "r1", "r2", "r3"], ["r4", "r5", "r6", "r7"]]
    assert deletes.listings == 2 and not failures
    async with anyio.create_task_group() as tg:
        tg.start_soon(one, ["r8"])
        tg.start_soon(one, ["stuck", "r9"])
    assert sent[-1] == ["r8", "stuck", "r9"] and deletes.listings == 3
    assert failures == ["still listed: ['stuck']"] * 2
