"""Hand-built CycleResults for surfacer tests: pure data, no probing."""

from __future__ import annotations

from collections.abc import Sequence

from benchd.drift_outcome import DriftOutcome
from benchd.result import (
    CycleOutcome,
    CycleResult,
    LatencySummary,
    LoadResult,
    QueryResult,
    SeedReport,
    TargetInfo,
)

MEASURES = ("hit", "recall", "recall_all", "precision", "mrr", "ndcg", "map")
UNCUT = ("rr", "ap", "r_precision")


def summary(samples: Sequence[float]) -> LatencySummary:
    """Nearest-rank percentiles: good enough for test data (the real ones come from scoring)."""
    if not samples:
        return LatencySummary.empty()
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return LatencySummary(
        count=len(ordered),
        p50=pick(0.5),
        p90=pick(0.9),
        p95=pick(0.95),
        p99=pick(0.99),
        max=ordered[-1],
        mean=sum(ordered) / len(ordered),
    )


def means(ks: Sequence[int], base: float) -> dict[str, float]:
    """A full aggregate mapping with distinct, valid (0-1) values."""
    out = {
        f"{m}@{k}": round(base + 0.01 * i + 0.001 * k, 6)
        for i, m in enumerate(MEASURES)
        for k in ks
    }
    out.update({m: round(base + 0.02 * i, 6) for i, m in enumerate(UNCUT)})
    return out


def load_result(samples: Sequence[float], *, open_loop: bool = True) -> LoadResult:
    corrected = tuple(s + 0.002 for s in samples) if open_loop else ()
    return LoadResult(
        mode="open" if open_loop else "closed",
        duration_s=2.0,
        requests={"ok": len(samples), "http_5xx": 2, "timeout": 1},
        service=summary(samples),
        corrected=summary(corrected) if open_loop else None,
        service_samples=tuple(samples),
        corrected_samples=corrected,
        achieved_rate=len(samples) / 2.0,
        target_rate=(len(samples) + 3) / 2.0 if open_loop else None,
        late=3 if open_loop else 0,
        dropped=1 if open_loop else 0,
        aggregate=means((5, 10), 0.4),
    )


def make_result(
    probe: str = "alpha",
    *,
    cycle: int = 1,
    outcome: CycleOutcome = "success",
    ks: tuple[int, ...] = (5, 10),
    categories: Sequence[str] = ("fact", "temporal"),
    load: bool = True,
    open_loop: bool = True,
    latencies: Sequence[float] = (0.004, 0.02, 0.3),
    model: str = "hash-256",
    endpoint: str = "http://127.0.0.1:8080",
    drift: DriftOutcome | None = None,
    error_kind: str | None = None,
    error_message: str | None = None,
    started_at: float = 1_700_000_000.0,
    reasons: tuple[str, ...] = (),
) -> CycleResult:
    """One probe cycle; every number is derived from the arguments so tests can recompute it."""
    queries = tuple(
        QueryResult(
            id=f"q{i}",
            q=f"what about topic {i}?",
            category=categories[i % len(categories)] if categories else None,
            expected_ids=(f"m{i}", f"m{i + 1}"),
            ranked_ids=(f"m{i}", "x", f"m{i + 1}"),
            metrics=means(ks, 0.5),
            latency_s=latency,
            error=None,
        )
        for i, latency in enumerate(latencies)
    )
    failed = outcome != "success"
    return CycleResult(
        probe=probe,
        target="zengram",
        corpus="smoke",
        cycle=cycle,
        started_at=started_at,
        finished_at=started_at + 3.5,
        outcome=outcome,
        phases={"seed": 1.0, "verify": 0.5, "serial": 1.0, "load": 2.0},
        ks=ks,
        info=TargetInfo(kind="zengram", endpoint=endpoint, model=model, version="4.3"),
        seed=SeedReport(
            requested=34,
            imported=28,
            skipped=4,  # sent, deduplicated by the store
            unchanged=2,  # not sent: stored unchanged
            errors=0,
            verified=33,
            missing=("m7",),
            retries=1,
            duration_s=1.0,
            searchable_after_s=0.25,
        ),
        queries=() if failed else queries,
        aggregate={} if failed else means(ks, 0.5),
        by_category={} if failed else {c: means(ks, 0.6) for c in categories},
        ci={} if failed else {f"recall@{k}": (0.4, 0.7) for k in ks},
        relevant_found={} if failed else {k: 2 * len(latencies) - 1 for k in ks},
        relevant_expected=0 if failed else 2 * len(latencies),
        serial_latency=summary(latencies),
        load=load_result(latencies, open_loop=open_loop) if load and not failed else None,
        errors={"http_5xx": 2, "timeout": 1} if load and not failed else {},
        error_kind=error_kind,
        error_message=error_message,
        degraded_reasons=reasons,
        drift=drift,
    )


def promtool_path() -> str:
    """promtool's path; skip without it locally, but fail in CI (CI installs it)."""
    import os
    import shutil

    import pytest

    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing: apt-get install prometheus (CI must run this test)")
        pytest.skip("promtool not installed (apt-get install prometheus)")
    return path
