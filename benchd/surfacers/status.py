"""The status surfacer: cycle results as JSON for ``/api/status`` and ``benchd once``.

:func:`result_to_json` turns one :class:`CycleResult` into a document with a
stable schema (``docs/json.md``); :func:`status_document` wraps the latest one
of every probe with its recent history, its state (up / degraded / failing,
with the reason) and when its next cycle is due. Every time is given twice:
unix seconds and ISO-8601 UTC (``*_at`` and ``*_at_iso``). Both documents are
JSON-safe (no NaN, no tuples, string keys) and never carry a secret:
registered secrets are masked and URLs lose their credentials and query strings.
"""

from __future__ import annotations

import math
import numbers
import platform
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from benchd import __version__
from benchd.redact import public_url, text
from benchd.result import (
    CycleResult,
    EmbedCanary,
    LatencySummary,
    LoadResult,
    QueryResult,
    SeedReport,
)
from benchd.surfacers.changes import change_list, drift_reason, quality_verdict
from benchd.surfacers.result_book import BookSnapshot, CycleSummary, ProbeState, ResultBook

if TYPE_CHECKING:  # a type only: surfacers read the scheduler's view, never drive it
    from benchd.schedule import Schedule

__all__ = [
    "HEALTH_WORDS",
    "SCHEMA_VERSION",
    "clean",
    "iso_time",
    "probe_common",
    "probe_detail",
    "probe_health",
    "probe_state",
    "result_to_json",
    "status_document",
    "status_head",
    "status_tail",
]

SCHEMA_VERSION = 1

HEALTH_WORDS: Mapping[str, str] = {
    "healthy": "healthy",
    "quality-dropped": "quality dropped",
    "rankings-changed": "rankings changed",
    "partial": "partial readings",
    "not-measuring": "not measuring",
    "waiting": "waiting",
}
"""A probe's health for a person, key -> words; no word is a cycle outcome's name
(``success``, ``degraded``, ``failed``, ``timeout``), so the badge never reads as one."""


def iso_time(seconds: float | None) -> str | None:
    """Unix seconds as ISO-8601 UTC with milliseconds (``2026-12-01T10:00:00.123Z``)."""
    if seconds is None or not math.isfinite(seconds):
        return None
    stamp = datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def result_to_json(result: CycleResult, *, queries: bool = True) -> dict[str, Any]:
    """One cycle as a JSON-safe dict with the stable schema documented in docs/json.md."""
    return _clean(_result(result, queries=queries))


def _result(result: CycleResult, *, queries: bool = True) -> dict[str, Any]:
    """The raw document; :func:`_clean` makes it JSON-safe once, however deeply nested."""
    document = {
        "name": result.probe,
        "outcome": result.outcome,
        "degraded_reasons": list(result.degraded_reasons),
        "target": result.target,
        "corpus": result.corpus,
        "cycle": result.cycle,
        "started_at": result.started_at,
        "started_at_iso": iso_time(result.started_at),
        "finished_at": result.finished_at,
        "finished_at_iso": iso_time(result.finished_at),
        "duration_s": result.duration_s,
        "phases": dict(result.phases),
        "phase_wait_s": dict(result.phase_wait_s),
        "model": result.info.model if result.info is not None else None,
        "target_info": _target_info(result),
        "ks": list(result.ks),
        "fixture_hash": result.fixture_hash,
        "seed": _seed(result.seed) if result.seed is not None else None,
        "aggregate": _measures(result.aggregate, result),
        "unranked": result.unranked,
        "by_category": {c: dict(m) for c, m in result.by_category.items()},
        "ci": {key: [lo, hi] for key, (lo, hi) in result.ci.items()},
        "relevant": {
            "found": {str(k): n for k, n in result.relevant_found.items()},
            "expected": result.relevant_expected,
        },
        "queries": [_query(q) for q in result.queries],
        "latency": _latency(result),
        "load": _load(result.load, result) if result.load is not None else None,
        "errors": dict(result.errors),
        "retries": result.retries,
        "retry_wait_s": result.retry_wait_s,
        "short_answers": dict(result.short_answers),
        "error": _error(result),
        "drift": _drift(result),
        "thresholds": [  # judged once by the probe runner; read here
            {"name": v.threshold.name, "value": v.value, "breached": v.breached}
            | ({"note": v.note} if v.note else {})
            for v in result.thresholds
        ],
    }
    if not queries:
        del document["queries"]
    return document


def _drift(result: CycleResult) -> dict[str, Any] | None:
    """The drift outcome, each regressed query with its text and expected ids beside its id."""
    if result.drift is None:
        return None
    document = result.drift.as_json()
    by_id = {q.id: q for q in result.queries}
    for regressed in document["regressed_queries"]:
        query = by_id.get(regressed["id"])
        regressed["q"] = query.q if query is not None else None
        regressed["expected_ids"] = list(query.expected_ids) if query is not None else []
    return document


def status_document(
    book: ResultBook,
    schedules: Mapping[str, Schedule] | None = None,
    *,
    probes: Collection[str] | None = None,
    queries: bool = True,
) -> dict[str, Any]:
    """The ``/api/status`` body: every configured probe's state, last result and history.

    ``probes`` keeps only those probes (``?probe=NAME``); ``queries=False``
    leaves the per-query detail out of each last result (``?queries=false``).
    """
    snap = book.snapshot()
    schedules = schedules or {}
    names = [n for n in snap.probes if probes is None or n in probes]
    return _clean(
        {
            **status_head(snap, configured=book.configured()),
            "probes": {
                name: _probe(snap, name, schedules.get(name), queries=queries) for name in names
            },
            **status_tail(snap),
        }
    )


def status_head(snap: BookSnapshot, *, configured: bool) -> dict[str, Any]:
    """The status document's keys before ``probes`` (raw: :func:`clean` makes it JSON-safe)."""
    return {
        "schema": SCHEMA_VERSION,
        "version": __version__,
        "python": platform.python_version(),
        "ready": configured and not snap.pending,
        "pending": list(snap.pending),
        "config": {
            "last_reload_successful": snap.reload_successful,
            "last_reload_success_at": snap.reload_success_at,
            "last_reload_success_at_iso": iso_time(snap.reload_success_at),
            "last_reload_error": snap.reload_error,
            "reload_times": list(snap.reload_times),
        },
    }


def status_tail(snap: BookSnapshot) -> dict[str, Any]:
    """The status document's keys after ``probes``: shutdown cleanups (raw)."""
    return {
        "cleanup": {
            name: {
                "namespace": c.namespace,
                "deleted": c.deleted,
                "leftover_records": c.leftover,
                "at": iso_time(c.at),
            }
            for name, c in sorted(snap.cleanups.items())
        },
    }


def probe_state(state: ProbeState | None, schedule: Schedule | None = None) -> tuple[str, str]:
    """A probe's state for a person (``up``, ``degraded``, ``failing``, ``pending``) and why.

    ``failing``: the last cycle failed or timed out (the reason is its error);
    ``degraded``: it completed but with degraded readings or detected drift;
    ``pending``: no cycle has completed yet.
    """
    if state is None:
        running = schedule is not None and schedule.running
        return "pending", "first cycle running" if running else "waiting for the first cycle"
    last = state.latest
    if last.outcome in ("failed", "timeout"):
        kind = last.error_kind or last.outcome
        message = text(last.error_message or "no message")
        streak = _failure_streak(state)
        tail = f" ({streak} cycles in a row)" if streak > 1 else ""
        return "failing", f"{kind}: {message}{tail}"
    reasons = list(last.degraded_reasons)
    drift = last.drift
    if drift is not None and drift.detected:
        reasons.append(drift_reason(drift, state.drift_onset_at))
    if drift is not None and drift.change is not None and drift.change.model_changed:
        reasons.append(f"rankings changed (overlap {drift.change.overlap:.2f}): model change?")
    reasons.extend(_canary_reason(last))
    if last.outcome != "success" or reasons:
        return "degraded", "; ".join(reasons) or f"outcome {last.outcome}"
    return "up", "last cycle succeeded"


def _canary_reason(result: CycleResult) -> list[str]:
    """The embedding canary's reason, when its vectors fell below the pinned threshold."""
    canary = result.info.canary if result.info is not None else None
    if canary is None or not canary.changed:
        return []
    seen = f"{canary.similarity:.6f} < {canary.threshold:.6f}"
    detail = f", {canary.detail}" if canary.detail else ""
    return [f"embedding canary: similarity {seen}{detail}: the embedding model changed"]


def probe_health(state: ProbeState | None) -> str:
    """The key of :data:`HEALTH_WORDS` that says how the probe is doing.

    ``not-measuring``: the last cycle failed or timed out; ``quality-dropped``:
    drift was detected; ``rankings-changed``: the rankings moved (a model
    change?) while quality held; ``partial``: the cycle ran but measured less
    than it should (a ``degraded`` outcome); ``waiting``: no cycle yet.
    """
    if state is None:
        return "waiting"
    last = state.latest
    drift = last.drift
    if last.outcome in ("failed", "timeout"):
        return "not-measuring"
    if drift is not None and drift.detected:
        return "quality-dropped"
    if drift is not None and drift.model_changed:
        return "rankings-changed"
    if last.outcome != "success":
        return "partial"
    return "healthy"


def _failure_streak(state: ProbeState) -> int:
    streak = 0
    for summary in reversed(state.history):
        if summary.outcome not in ("failed", "timeout"):
            break
        streak += 1
    return streak


def _probe(
    snap: BookSnapshot, name: str, schedule: Schedule | None, *, queries: bool
) -> dict[str, Any]:
    detail = probe_detail(snap.states.get(name), queries=queries)
    return {**probe_common(snap, name, schedule), **detail}


def probe_common(snap: BookSnapshot, name: str, schedule: Schedule | None) -> dict[str, Any]:
    """A probe's entry up to its last result: its state, schedule and interval (raw)."""
    state: ProbeState | None = snap.states.get(name)
    label, reason = probe_state(state, schedule)
    due = schedule.next_due_at if schedule is not None else None
    return {
        "state": label,
        "health": probe_health(state),
        "reason": reason,
        "running": schedule.running if schedule is not None else False,
        "next_cycle_at": due,
        "next_cycle_at_iso": iso_time(due),
        "interval_s": snap.intervals.get(name),
    }


def probe_detail(state: ProbeState | None, *, queries: bool) -> dict[str, Any]:
    """A probe's entry after :func:`probe_common`: read from ``state`` alone (raw)."""
    if state is None:
        return {"last": None, "history": [], "cycles": {}, "cycles_total": 0}
    return {
        **_changes(state),
        "model": state.model,
        "last_success_at": state.last_success_at,
        "last_success_at_iso": iso_time(state.last_success_at),
        "cycles": dict(state.cycles),
        "cycles_total": sum(state.cycles.values()),
        "last": _result(state.latest, queries=queries),
        "history": [_summary(s) for s in reversed(state.history)],  # newest first
    }


def _changes(state: ProbeState) -> dict[str, Any]:
    """When each open change began, what changed (one entry each) and the last cycle's
    quality verdict beside its outcome."""
    last = state.latest
    drift = last.drift
    return {
        "drift_onset_at": state.drift_onset_at,
        "drift_onset_at_iso": iso_time(state.drift_onset_at),
        "model_change_onset_at": state.model_change_onset_at,
        "model_change_onset_at_iso": iso_time(state.model_change_onset_at),
        "changes": change_list(
            drift, onset=state.drift_onset_at, model_onset=state.model_change_onset_at
        ),
        "quality": quality_verdict(
            last.outcome,
            drifted=drift is not None and drift.detected,
            model_changed=drift is not None and drift.model_changed,
            compared=drift is not None and drift.compared,
        ),
        "short_answers": dict(last.short_answers),
    }


def _measures(means: Mapping[str, float], result: CycleResult) -> dict[str, float | None]:
    """The means; a store answering sets has every rank measure null (``unranked`` says why)."""
    return {**means, **dict.fromkeys(result.omitted)}


def _summary(summary: CycleSummary) -> dict[str, Any]:
    return {
        "cycle": summary.cycle,
        "outcome": summary.outcome,
        "started_at": summary.started_at,
        "started_at_iso": iso_time(summary.started_at),
        "finished_at": summary.finished_at,
        "duration_s": summary.duration_s,
        "error_kind": summary.error_kind,
        "degraded_reasons": list(summary.degraded_reasons),
        "aggregate": dict(summary.aggregate),
        "latency_p50_s": summary.latency_p50_s,
        "latency_p99_s": summary.latency_p99_s,
        "requests": summary.requests,
        "errors": summary.errors,
        "model": summary.model,
        "drifted": summary.drifted,
        "model_changed": summary.model_changed,
        "compared": summary.compared,
        "quality": quality_verdict(
            summary.outcome,
            drifted=summary.drifted,
            model_changed=summary.model_changed,
            compared=summary.compared,
        ),
        "short_answers": summary.short_answers,
    }


def _target_info(result: CycleResult) -> dict[str, Any] | None:
    info = result.info
    if info is None:
        return None
    return {
        "kind": info.kind,
        "endpoint": public_url(info.endpoint),
        "model": info.model,
        "version": info.version,
        "healthy": info.healthy,
        "lacks": list(info.lacks),  # guarantees this probe lacks (docs/targets.md)
        "canary": _canary_json(info.canary),
    }


def _canary_json(canary: EmbedCanary | None) -> dict[str, Any] | None:
    """The embedding canary's reading (its vectors stay in the baseline file)."""
    if canary is None:
        return None
    return {
        "texts": len(canary.texts),
        "similarity": canary.similarity,
        "threshold": canary.threshold,
        "changed": canary.changed,
        "error": canary.error,
        "detail": canary.detail,
    }


def _seed(seed: SeedReport) -> dict[str, Any]:
    return {
        "requested": seed.requested,
        "imported": seed.imported,
        "skipped": seed.skipped,
        "unchanged": seed.unchanged,
        "errors": seed.errors,
        "verified": seed.verified,
        "missing": list(seed.missing),
        "retries": seed.retries,
        "duration_s": seed.duration_s,
        "searchable_after_s": seed.searchable_after_s,
        "adopted": seed.adopted,
    }


def _query(q: QueryResult) -> dict[str, Any]:
    return {
        "id": q.id,
        "q": q.q,
        "category": q.category,
        "expected_ids": list(q.expected_ids),
        "ranked_ids": list(q.ranked_ids),
        "metrics": dict(q.metrics),
        "latency_s": q.latency_s,
        "error": q.error,
    }


def _percentiles(summary: LatencySummary | None) -> dict[str, Any] | None:
    if summary is None:
        return None
    return {
        "p50": summary.published("p50"),
        "p90": summary.published("p90"),
        "p95": summary.published("p95"),
        "p99": summary.published("p99"),
        "max": summary.published("max"),
        "mean": summary.published("mean"),
        "count": summary.count,
        "withheld": summary.withheld(),  # percentile -> why it is null
    }


def _latency(result: CycleResult) -> dict[str, Any]:
    """``service``/``corrected`` describe the load pass when there is one, else the serial pass."""
    load = result.load
    return {
        "service": _percentiles(load.service if load is not None else result.serial_latency),
        "corrected": _percentiles(load.corrected) if load is not None else None,
        "serial": _percentiles(result.serial_latency),
    }


def _load(load: LoadResult, result: CycleResult) -> dict[str, Any]:
    return {
        "mode": load.mode,
        "duration_s": load.duration_s,
        "achieved_rate": load.achieved_rate,
        "target_rate": load.target_rate,
        "late": load.late,
        "dropped": load.dropped,
        "rate_limited": load.rate_limited,
        "paused_s": load.paused_s,
        "max_rate": load.max_rate,
        "requests": dict(load.requests),
        "aggregate": _measures(load.aggregate, result),
    }


def _error(result: CycleResult) -> dict[str, Any] | None:
    if result.error_kind is None and result.error_message is None:
        return None
    return {"kind": result.error_kind, "message": result.error_message}


def clean(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` JSON-safe and secret-free (what every status document goes through)."""
    return _clean(document)


def _clean(document: dict[str, Any]) -> dict[str, Any]:
    """JSON-safe and secret-free: the last step before a document leaves benchd."""
    safe: dict[str, Any] = _json_safe(document)
    return safe


def _json_safe(value: Any) -> Any:
    """Plain JSON types only: non-finite floats become null, every string (keys too) masked."""
    kind = type(value)  # exact-type fast paths first: documents hold ~10^5 leaves
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is str:
        return text(value)
    if kind is int or kind is bool or value is None:
        return value
    if kind is dict or isinstance(value, Mapping):
        return {text(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_json_safe(v) for v in value]
    if isinstance(value, bool | numbers.Integral):  # IntEnum, numpy integers
        return value if isinstance(value, bool) else int(value)
    if isinstance(value, numbers.Real):  # numpy floating
        return _json_safe(float(value))
    return _json_safe(str(value))
