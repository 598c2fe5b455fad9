"""Assembling a probe from its config: the parts that can fail to build, its pinned
baseline and its store adapter.

Apart from :mod:`benchd.probe` so that ``benchd validate`` checks exactly what
``once``, ``run`` and a reload build, without importing the cycle, the load
engine or numpy (``validate`` should answer at once).
"""

from __future__ import annotations

from collections.abc import Sequence

from benchd.config.load import ProbeConfig
from benchd.drift.baseline import Baseline, load_baseline
from benchd.errors import InputError
from benchd.kinds import ProbeTarget, build_target
from benchd.kinds.vectors import stage_of
from benchd.store.lease import LeaseHolder
from benchd.store.target import WriteRate

__all__ = ["check_parts", "load_parts"]


def load_parts(
    probe: ProbeConfig,
    *,
    lease: LeaseHolder | None = None,
    write_rate: WriteRate | None = None,
) -> tuple[Baseline | None, ProbeTarget]:
    """The probe's pinned baseline (None without one) and its adapter (holding ``lease``,
    its deletes within ``write_rate``), built eagerly.

    A baseline or target that cannot be constructed is a startup, ``validate``
    or reload error, never an exception inside a cycle.
    """
    baseline = load_baseline(probe.baseline) if probe.baseline else None
    target = build_target(
        probe.target.kind,
        probe.target.settings,
        probe.target.secret,
        lease=lease,
        write_rate=write_rate,
    )
    _arm_canary(baseline, target)
    return baseline, target


def _arm_canary(baseline: Baseline | None, target: ProbeTarget) -> None:
    """A client-side embedder's canary compares with the vectors the baseline pinned."""
    canary = baseline.canary if baseline is not None else None
    stage = stage_of(target) if canary is not None else None
    if canary is not None and stage is not None and stage.config.canary_on:
        stage.arm_canary(canary.texts, canary.vectors, canary.threshold)


async def check_parts(probes: Sequence[ProbeConfig]) -> list[str]:
    """Every problem building these probes' baselines and adapters would raise (one line each).

    What ``benchd validate --config`` runs beside the fixture checks, so that a
    config it accepts starts in ``once``, ``run`` and a reload alike.
    """
    problems: list[str] = []
    for probe in probes:
        try:
            _, target = load_parts(probe)
        except InputError as exc:
            problems.extend(getattr(exc, "problems", None) or (str(exc),))
            continue
        await target.aclose()
    return problems
