"""A probe's long-lived state: its fixture, its adapter, its drift tracker.

:class:`ProbeRunner` is what ``benchd once`` and the scheduler drive: it runs
one cycle under the probe's timeout and returns the frozen result, finished
in this one place: the drift comparison and the threshold verdicts (the
probe's ``[probe.thresholds]`` and the command line's) attached. It never
raises: a store failure is an outcome, and so is a bug (any other exception
inside the cycle or the drift stage is outcome ``failed`` with error kind
``internal``, logged once with its traceback), so one probe's crash never
reaches the scheduler or another probe.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass

import anyio

from benchd.assemble import check_parts, load_parts
from benchd.budget import own_share, own_write_share
from benchd.config.load import ProbeConfig
from benchd.config.thresholds import Threshold
from benchd.cycle import ScoreMemo, run_cycle
from benchd.drift.tracker import DriftTracker
from benchd.errors import BenchdError
from benchd.fixtures.model import Fixture, load_fixture
from benchd.kinds import capabilities_of
from benchd.logging import get_logger
from benchd.result import CycleResult
from benchd.scoring.thresholds import evaluate_all
from benchd.store.lease import LeaseHolder, Role, default_instance, new_token
from benchd.store.lease_token import held_token, let_go, token_key
from benchd.store.target import ProbeTarget, Progress, WriteRate

__all__ = [
    "INTERNAL",
    "CleanupReport",
    "ProbeRunner",
    "build_parts",
    "check_parts",
    "log_internal",
]

INTERNAL = "internal"
"""The error kind of a cycle that an unexpected exception (a bug) ended."""

log = get_logger("benchd.probe")


@dataclass(frozen=True, slots=True)
class CleanupReport:
    """What a shutdown cleanup did: deleted records, and those left over in the namespace."""

    namespace: str
    deleted: int
    leftover: int
    timed_out: bool


def log_internal(stage: str, probe: str, exc: BaseException) -> None:
    """Log an unexpected exception once, with its traceback as a field (not a second line)."""
    log.error(
        "internal error",
        probe=probe,
        stage=stage,
        error=f"{type(exc).__name__}: {exc}",
        traceback="".join(traceback.format_exception(exc)),
    )


def build_parts(
    probe: ProbeConfig,
    *,
    lease: LeaseHolder | None = None,
    write_rate: WriteRate | None = None,
) -> tuple[DriftTracker, ProbeTarget]:
    """The probe's drift tracker (with its pinned baseline) and its adapter, holding
    ``lease`` and keeping its deletes within ``write_rate``.

    Built eagerly (:func:`benchd.assemble.load_parts`): a baseline or target that
    cannot be constructed is a startup, ``validate`` or reload error, never an
    exception inside a cycle.
    """
    baseline, target = load_parts(probe, lease=lease, write_rate=write_rate)
    owned_keys = target.capabilities.owned_keys
    return DriftTracker(probe.name, probe.drift, baseline, owned_keys=owned_keys), target


class ProbeRunner:
    """Runs cycles of one probe; owns its adapter and drift state."""

    def __init__(
        self,
        probe: ProbeConfig,
        *,
        fixture: Fixture | None = None,
        read_rate: float | None = None,
        write_rate: float | None = None,
        instance: str | None = None,
        read_only_beside_live: bool = False,
        thresholds: Sequence[Threshold] = (),
        role: Role | None = None,
        force_lease: bool = False,
    ) -> None:
        self.probe = probe
        # The probe's own thresholds, then the command line's (one per distinct name).
        unique = {t.name: t for t in (*probe.thresholds, *thresholds)}
        self.thresholds = tuple(unique.values())
        # This probe's share of its key's read budget (req/s): the plan's, when the
        # caller planned the whole config (daemon, once), else its budget alone.
        self.read_rate = read_rate if read_rate is not None else own_share(probe)
        self.fixture = fixture if fixture is not None else load_fixture(probe.fixture)
        self.cycles = 0
        # ... and of its write budget (req/s), which the flow's deletes are spaced to (a
        # daemon's reload may plan it anew: the target reads it as each cleanup begins).
        self.write_rate = write_rate if write_rate is not None else own_write_share(probe)
        self._token_key: str | None = None  # the state directory's token this runner holds
        role = role or ("once" if read_only_beside_live else "run")
        caps = capabilities_of(probe.target.kind, probe.target.settings)
        lease = None
        # without a lease, a one-shot command still holds back beside benchd's sentinel
        if caps.lease or (caps.writes and caps.lists and role in ("once", "baseline")):
            lease = self._holder(instance, role, force_lease)
        self.tracker, self.target = build_parts(probe, lease=lease, write_rate=self._write_share)
        self._closed = False
        self._scores = ScoreMemo()  # the last cycle's per-query scores

    def _write_share(self) -> float | None:
        return self.write_rate

    def _holder(self, instance: str | None, role: Role, force: bool) -> LeaseHolder:
        """This runner as a lease holder. A daemon promises a heartbeat every cycle (three
        missed ones make it stale) and keeps its token in the state directory, so that a
        restart takes its lease at once; a one-shot command holds the lease for its one
        cycle, under a token of its own process, so it never takes the daemon's."""
        name = instance or default_instance()
        probe = self.probe
        ttl = probe.timeout_s if role != "run" else 3 * probe.interval_s
        token = None
        if role == "run":
            target = probe.target
            key = token_key(name, target.kind, target.url or "", target.namespace or probe.name)
            token = held_token(key)
            self._token_key = key if token is not None else None
        return LeaseHolder(
            instance=name,
            ttl_s=ttl + probe.timeout_s,
            fixture_hash=self.fixture.content_hash,
            role=role,
            force=force,
            token=token or new_token(),
        )

    async def run_once(self, *, progress: Progress | None = None) -> CycleResult:
        """One cycle bounded by ``timeout_s``; a timeout is an outcome, not an exception."""
        result = await self._run(progress)
        return dataclasses.replace(result, thresholds=evaluate_all(self.thresholds, result))

    async def _run(self, progress: Progress | None) -> CycleResult:
        self.cycles += 1
        started = time.time()
        try:
            result = await run_cycle(
                self.probe,
                self.fixture,
                self.target,
                cycle=self.cycles,
                progress=progress,
                read_rate=self.read_rate,
                memo=self._scores,
            )
        except Exception as exc:  # a bug in the cycle or in user code: this probe fails alone
            log_internal("cycle", self.probe.name, exc)
            return self._failed(started, exc)
        try:
            drift = await self.tracker.aobserve(result)
        except Exception as exc:  # the drift stage must not cost the cycle's readings
            log_internal("drift", self.probe.name, exc)
            return dataclasses.replace(
                result,
                outcome="failed",
                errors={**result.errors, INTERNAL: 1},
                error_kind=INTERNAL,
                error_message=f"drift: internal error: {type(exc).__name__}: {exc}",
            )
        return dataclasses.replace(result, drift=drift)

    def _failed(self, started: float, exc: Exception) -> CycleResult:
        return CycleResult(
            probe=self.probe.name,
            target=self.probe.target.kind,
            corpus=self.fixture.name,
            cycle=self.cycles,
            started_at=started,
            finished_at=time.time(),
            outcome="failed",
            phases={},
            ks=self.probe.k,
            errors={INTERNAL: 1},
            error_kind=INTERNAL,
            error_message=f"internal error: {type(exc).__name__}: {exc} (a bug; the traceback "
            "is in the log)",
            fixture_hash=self.fixture.content_hash,
        )

    async def cleanup(
        self, grace_s: float = 30.0, *, lease_grace_s: float | None = None
    ) -> CleanupReport | None:
        """Run the configured ``after`` cleanup on shutdown, within ``grace_s``.

        Deletes what benchd wrote (as its namespace lists it now), then the
        sentinel once nothing else of benchd's is left. None when the probe
        does not clean up after itself; else what was deleted and what is
        left over (records benchd wrote and could not delete in time). The lease
        is then handed back within ``lease_grace_s`` (default ``grace_s``).
        """
        lease_s = grace_s if lease_grace_s is None else lease_grace_s
        if self.probe.target.cleanup != "after":
            await self.release_lease(lease_s)
            return None
        deleted = 0
        with anyio.CancelScope(shield=True), anyio.move_on_after(grace_s) as scope:
            deleted = await self.target.cleanup(self.fixture.memory_ids)
            deleted += await self.target.release()
        await self.release_lease(lease_s)
        return CleanupReport(
            namespace=self.probe.target.namespace or "",
            deleted=deleted,
            leftover=self.target.leftover_records,
            timed_out=scope.cancelled_caught,
        )

    async def release_lease(self, grace_s: float = 30.0) -> None:
        """Hand the namespace's lease back (shutdown, the end of once), so no one waits out
        its TTL; a lease this process does not hold is left as it is."""
        if not self.target.capabilities.lease:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(grace_s) as scope:
            try:
                if await self.target.release_lease():
                    log.info("lease released", probe=self.probe.name)
            except BenchdError as exc:
                log.warning("lease not released", probe=self.probe.name, error=str(exc))
        if scope.cancelled_caught:
            why = f"no answer within {grace_s:g} s; it stays live until its ttl_s"
            log.warning("lease not released", probe=self.probe.name, error=why)

    def cleanup_failed(self) -> CleanupReport:
        """The report of a cleanup the store refused: everything benchd holds is left over."""
        return CleanupReport(
            namespace=self.probe.target.namespace or "",
            deleted=0,
            leftover=self.target.leftover_records,
            timed_out=False,
        )

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            if self._token_key is not None:
                let_go(self._token_key)
            with anyio.CancelScope(shield=True):
                await self.target.aclose()
