"""The log surfacer: one structlog event per finished cycle, and drift episodes.

The event is named ``cycle`` and carries the probe, the outcome, the
duration, the headline measures for every cut-off, latency percentiles (with
their sample counts; a percentile with too few samples is left out), the
reasons of a degraded cycle and, when the cycle failed or timed out, the
error kind and message. It is ``info`` on success and ``warning`` otherwise,
so a log-based alert needs no parsing of values.

When the drift stage says a cycle starts or ends an episode, one more event
follows on ``benchd.drift``: ``drift_onset`` (warning) / ``drift_recovered``
(info), and ``model_change_onset`` (warning) / ``model_change_recovered``.
"""

from __future__ import annotations

from typing import Any

from benchd.drift_outcome import DriftOutcome
from benchd.logging import get_logger
from benchd.result import CycleResult, LatencySummary

__all__ = ["HEADLINE_MEASURES", "LogSurfacer", "cycle_event", "drift_events", "log_cycle"]

# The measures worth a glance in a log line, per cut-off; the rest is in /api/status.
HEADLINE_MEASURES = ("hit", "recall", "ndcg", "mrr")


def log_cycle(result: CycleResult, logger: Any = None) -> None:
    """Emit the ``cycle`` event for ``result`` (on ``benchd.cycle`` unless ``logger`` is given)."""
    log = logger if logger is not None else get_logger("benchd.cycle")
    emit = log.info if result.ok else log.warning
    emit("cycle", **cycle_event(result))
    drift_log = logger if logger is not None else get_logger("benchd.drift")
    for level, name, fields in drift_events(result):
        getattr(drift_log, level)(name, **fields)


def drift_events(result: CycleResult) -> list[tuple[str, str, dict[str, Any]]]:
    """``(level, event, fields)`` of the drift and model-change episodes this cycle opens/ends."""
    drift = result.drift
    if drift is None:
        return []
    events: list[tuple[str, str, dict[str, Any]]] = []
    base = {"probe": result.probe, "baseline": drift.baseline, "cycle": result.cycle}
    if drift.transition == "onset":
        events.append(("warning", "drift_onset", {**base, **_onset_fields(drift)}))
    elif drift.transition == "recovered":
        events.append(("info", "drift_recovered", base))
    change = drift.change
    if drift.model_transition == "onset" and (change is not None or drift.canary_changed):
        fields = {
            **base,
            "overlap": round(change.overlap, 6) if change is not None else None,
            "overlap_delta": round(change.overlap_delta, 6) if change is not None else None,
            "overlap_p_value": change.overlap_p_value if change is not None else None,
            "canary_changed": drift.canary_changed,
            "model": drift.model,
            "baseline_model": drift.baseline_model,
        }
        events.append(("warning", "model_change_onset", fields))
    elif drift.model_transition == "recovered":
        events.append(("info", "model_change_recovered", base))
    return events


def _onset_fields(drift: DriftOutcome) -> dict[str, Any]:
    hits = {k: m for k, m in drift.metrics.items() if m.detected}
    worst = min(hits, key=lambda k: hits[k].delta)
    return {
        "metrics": list(hits),  # in the configured metric order, k rising
        "worst_metric": worst,
        "delta": round(hits[worst].delta, 6),
        "p_value": hits[worst].p_value,
        "p_value_queries": hits[worst].p_value_queries,
        "noise": drift.noise,
        "regressed_queries": len(drift.regressed),
        "model_changed": drift.model_changed,
        "overlap": round(drift.change.overlap, 6) if drift.change is not None else None,
        "model": drift.model,
        "baseline_model": drift.baseline_model,
    }


class LogSurfacer:
    """The :class:`~benchd.surfacers.base.Surfacer` that logs each cycle as one event."""

    def __init__(self, logger: Any = None) -> None:
        self._logger = logger

    def write(self, result: CycleResult) -> None:
        log_cycle(result, self._logger)


def cycle_event(result: CycleResult) -> dict[str, Any]:
    """The key/value pairs of the ``cycle`` event, flat so log queries stay simple."""
    event: dict[str, Any] = {
        "probe": result.probe,
        "cycle": result.cycle,
        "outcome": result.outcome,
        "duration_s": round(result.duration_s, 4),
        "started_at": round(result.started_at, 6),
        "finished_at": round(result.finished_at, 6),
        "target": result.target,
        "corpus": result.corpus,
    }
    for k in result.ks:
        for name in HEADLINE_MEASURES:
            value = result.aggregate.get(f"{name}@{k}")
            if value is not None:
                event[f"{name}@{k}"] = round(value, 4)
    event.update(_latency_fields("serial", result.serial_latency))
    if result.load is not None:
        load = result.load
        event["load_mode"] = load.mode
        event["achieved_rate"] = round(load.achieved_rate, 2)
        event["late"], event["dropped"] = load.late, load.dropped
        event.update(_latency_fields("service", load.service))
        if load.corrected is not None:
            event.update(_latency_fields("corrected", load.corrected))
    if result.seed is not None:
        event["seed_imported"], event["seed_skipped"] = result.seed.imported, result.seed.skipped
        event["seed_unchanged"] = result.seed.unchanged
    if result.errors:
        event["errors"] = dict(result.errors)
    if result.degraded_reasons:
        event["degraded_reasons"] = list(result.degraded_reasons)
    if result.load is not None and result.load.rate_limited:
        event["load_rate_limited"] = True
        event["load_paused_s"] = round(result.load.paused_s, 3)
    if result.outcome in ("failed", "timeout"):
        event["error_kind"] = result.error_kind
        event["error"] = result.error_message
    return event


def _latency_fields(prefix: str, summary: LatencySummary) -> dict[str, float | int]:
    """``<prefix>_p50_s``/``_p99_s`` where there are samples enough, and the sample count."""
    if summary.count == 0:
        return {}
    out: dict[str, float | int] = {f"{prefix}_samples": summary.count}
    for name in ("p50", "p99"):
        value = summary.published(name)
        if value is not None:
            out[f"{prefix}_{name}_s"] = round(value, 6)
    return out
