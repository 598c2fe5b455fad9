"""The lease judged as Kubernetes judges a Lease: by what this process saw, by its own clock.

A reader holds a lease expired only once it has seen the holder's record
unchanged for the holder's ttl, by its own monotonic clock (injected here):
no wall clock is compared across machines, no process table is read. The
holder stops writing once its own last heartbeat is older than the ttl less
a margin; a daemon finds its token in its state directory, a twin does not.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import memory_kind
import pytest

import benchd.store.lease as lease_module
from benchd.errors import OwnershipError
from benchd.kinds import build_target
from benchd.store.flow import NamespaceFlow
from benchd.store.lease import MARGIN, OBSERVED, Holder, LeaseHolder
from benchd.store.lease_token import held_token, let_go, state_dir, token_key
from benchd.store.owned import OWNER_KEY, sentinel_id

NS = "lease-ns"
TTL = 30.0
MEMORIES = [{"id": f"m{i}", "type": "fact", "content": f"fact number {i}"} for i in range(6)]


class Clocks:
    """This process's monotonic clock, and a wall clock per holder (hours apart)."""

    def __init__(self) -> None:
        self.mono = 1000.0
        self.wall_offset = 0.0

    def monotonic(self) -> float:
        return self.mono

    def wall(self) -> float:
        return 1_800_000_000.0 + self.mono + self.wall_offset


@pytest.fixture
def clocks(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clocks]:
    c = Clocks()
    monkeypatch.setattr(OBSERVED, "clock", c.monotonic)
    monkeypatch.setattr(lease_module.time, "time", c.wall)
    memory_kind.TENANTS.clear()
    memory_kind.CALLS.clear()
    yield c
    memory_kind.TENANTS.clear()
    OBSERVED.clear()


def holder(**changes: Any) -> Holder:
    base = {"instance": "pod-0", "pid": 1, "token": "aa", "heartbeat": 5.0, "ttl_s": TTL,
            "fixture_hash": "f"}  # fmt: skip
    return Holder(**{**base, **changes})


def daemon(token: str, instance: str = "pod-0") -> NamespaceFlow:
    flow = build_target("memory", memory_kind.MemorySettings(namespace=NS), None)
    assert isinstance(flow, NamespaceFlow)
    flow.lease = LeaseHolder(instance=instance, ttl_s=TTL, fixture_hash="f", token=token)
    return flow


def lease_now() -> dict[str, Any]:
    mark: dict[str, Any] = memory_kind.TENANTS[sentinel_id(NS)]["metadata"][OWNER_KEY]
    return mark


async def cycle(flow: NamespaceFlow) -> str:
    """One writing cycle's seed: "wrote", or the ownership error's first words."""
    try:
        await flow.seed(MEMORIES)
    except OwnershipError as exc:
        return "refused: " + str(exc)[:60]
    return "wrote"


def test_a_record_is_live_until_seen_unchanged_for_its_ttl(clocks: Clocks) -> None:
    first = holder()
    assert first.live()  # first seen now: live, whatever its heartbeat says
    clocks.mono += TTL - 0.001
    assert first.live()
    clocks.mono += 0.001
    assert not first.live()
    beat = holder(heartbeat=6.0)  # the holder heartbeated: a new record, seen anew
    assert beat.live()
    clocks.mono += TTL / 2
    assert beat.live() and not first.live()
    assert not holder(heartbeat=0.0, released=True).live()


@pytest.mark.parametrize("wall", [-3600.0, 0.0, 3600.0, 1e9])
def test_a_heartbeat_far_in_the_past_or_future_means_nothing_to_a_reader(
    clocks: Clocks, wall: float
) -> None:
    other = holder(heartbeat=clocks.wall() + wall)
    assert other.live()
    clocks.mono += TTL - 1
    assert other.live()
    clocks.mono += 1
    assert not other.live()
    assert "unchanged for 30s as seen here" in other.describe()


def test_a_holder_takes_its_own_or_an_expired_lease_and_no_other(clocks: Clocks) -> None:
    me = LeaseHolder(instance="pod-0", ttl_s=TTL, token="mine", role="once")
    other = holder(token="theirs")
    assert me.may_take(holder(token="mine"))
    assert not me.may_take(other)  # a fresh process: live
    assert LeaseHolder(instance="x", ttl_s=TTL, force=True).may_take(other)
    clocks.mono += TTL
    assert me.may_take(other)


def test_the_holder_stops_writing_at_its_ttl_less_the_margin(clocks: Clocks) -> None:
    me = LeaseHolder(instance="pod-0", ttl_s=TTL)
    assert not me.expiring()  # no heartbeat yet: nothing to judge
    me.renewed(me.beat())
    clocks.mono += (1 - MARGIN) * TTL
    assert not me.expiring()
    clocks.mono += 0.01
    assert me.expiring()


def test_a_heartbeat_is_a_new_record_even_when_the_wall_clock_steps_back(clocks: Clocks) -> None:
    me = LeaseHolder(instance="pod-0", ttl_s=TTL)
    first = me.mark(NS)["heartbeat"]
    clocks.wall_offset -= 3600  # NTP steps the clock back an hour
    assert me.mark(NS)["heartbeat"] > first
    assert me.mark(NS, released=True)["heartbeat"] == 0.0


@pytest.mark.anyio
@pytest.mark.parametrize("skew", [3600.0, -3600.0])
async def test_of_two_daemons_an_hour_apart_exactly_one_writes_and_none_steals(
    clocks: Clocks, skew: float
) -> None:
    """Both daemons cycle every 10 s (ttl 30 s) for 10 minutes, the second's wall clock an
    hour ahead or behind: the first keeps writing, the second is refused every cycle."""
    first, second = daemon("first"), daemon("second", instance="pod-0")
    assert await cycle(first) == "wrote"
    outcomes = []
    for _ in range(60):
        clocks.wall_offset = skew
        calls = len(memory_kind.CALLS)
        outcomes.append(await cycle(second))
        assert len(memory_kind.CALLS) == calls  # refused before writing anything
        clocks.mono += 5
        clocks.wall_offset = 0.0
        assert await cycle(first) == "wrote"
        assert lease_now()["token"] == "first"
        clocks.mono += 5
    assert all(o.startswith("refused: ") for o in outcomes), outcomes[:3]
    # the first stops (killed: no hand-back): the second takes it after the ttl it watched
    clocks.wall_offset = skew
    assert (await cycle(second)).startswith("refused: ")
    clocks.mono += TTL
    assert await cycle(second) == "wrote"
    assert lease_now()["token"] == "second"


@pytest.mark.anyio
async def test_a_holder_that_stalls_past_its_ttl_less_the_margin_writes_no_more(
    clocks: Clocks,
) -> None:
    flow = daemon("first")
    store = flow.store
    write = store.write
    batches = 0

    async def slow(batch: Any) -> Any:
        nonlocal batches
        batches += 1
        clocks.mono += TTL  # this batch took the whole lease
        return await write(batch)

    store.write = slow  # type: ignore[method-assign]
    with pytest.raises(OwnershipError, match="last heartbeat is older than its lease"):
        await flow.seed(MEMORIES)
    assert batches < 3  # of 3 batches, none sent after the stall was seen
    store.write = write  # type: ignore[method-assign]
    assert await cycle(flow) == "wrote"  # its next cycle heartbeats again


def test_a_token_is_kept_0600_in_the_state_directory_and_found_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCHD_STATE_DIR", str(tmp_path / "state"))
    key = token_key("pod-0", "http", "http://store", NS)
    token = held_token(key)
    assert token is not None and held_token(key) == token  # shared in one process
    (path,) = (tmp_path / "state" / "leases").iterdir()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text().strip() == token
    let_go(key)
    let_go(key)
    assert held_token(key) == token  # a restart finds it
    let_go(key)
    other = token_key("pod-0", "http", "http://store", "other-ns")
    assert held_token(other) not in (None, token)
    let_go(other)
    monkeypatch.setenv("BENCHD_STATE_DIR", str(tmp_path / "twin"))  # another container
    twin = token_key("pod-0", "http", "http://store", NS)
    assert twin != key and held_token(twin) not in (None, token)
    let_go(twin)
    assert state_dir() == tmp_path / "twin"


def test_a_token_another_process_holds_is_not_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCHD_STATE_DIR", str(tmp_path))
    key = token_key("pod-0", "http", "http://store", NS)
    holder_script = (
        "import sys\n"
        "from benchd.store.lease_token import held_token\n"
        f"print(held_token({key!r}), flush=True)\n"
        "sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", holder_script],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=os.environ.copy(),
    ) as proc:  # fmt: skip
        assert proc.stdout is not None and proc.stdin is not None
        theirs = proc.stdout.readline().strip()
        assert len(theirs) == 16
        assert held_token(key) is None  # a second daemon beside the first: no token of it
        proc.stdin.close()
        proc.wait(timeout=30)
    assert held_token(key) == theirs  # the first stopped: its restart's token
    let_go(key)


def test_an_unwritable_state_directory_gives_no_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("BENCHD_STATE_DIR", str(blocked / "state"))
    assert held_token(token_key("a", "b", "c", "d")) is None


def test_a_read_only_home_keeps_the_token_in_the_temp_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A container with a read-only root file system: the token goes to the temp directory
    (a pod's emptyDir, kept across container restarts)."""
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.delenv("BENCHD_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(blocked))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    key = token_key("pod-0", "zengram", "http://store", NS)
    token = held_token(key)
    assert token is not None
    (kept,) = (tmp_path / "tmp" / f"benchd-state-{os.getuid()}" / "leases").iterdir()
    assert kept.read_text().strip() == token
    let_go(key)
    assert held_token(key) == token
    let_go(key)


@pytest.mark.parametrize("wrap", [dict, MappingProxyType])
def test_a_lease_is_read_from_any_mapping_and_never_from_a_mark_without_one(wrap: Any) -> None:
    mark = {"namespace": "ns", "instance": "h", "pid": "12", "token": "t", "heartbeat": 3,
            "ttl_s": 60, "fixture_hash": "x", "role": "once", "released": True}  # fmt: skip
    assert lease_module.holder_of(wrap(mark)) == lease_module.Holder(
        "h", 12, "t", 3.0, 60.0, "x", "once", True
    )
    assert lease_module.holder_of(wrap({"namespace": "ns", "fixture_id": "f1"})) is None
    assert lease_module.holder_of(wrap({**mark, "pid": "not a pid"})) is None
    for not_a_mark in (None, "instance", ["instance"], 7):
        assert lease_module.holder_of(not_a_mark) is None
