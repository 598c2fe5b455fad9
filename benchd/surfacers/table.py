"""Human-readable rendering of cycle results for the terminal (``benchd once``).

The per-query table follows the target API's own eval script — one row per
query with hit/recall/reciprocal-rank at each k, then an AGGREGATE line —
and adds P@k, nDCG@k and MAP@k, seeding counts and latency.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TextIO

from benchd import redact
from benchd.result import MIN_SAMPLES, CycleResult, LatencySummary

__all__ = ["TerminalProgress", "render_cycle", "render_progress"]

_ROW_METRICS = ("hit", "recall", "mrr")
_ROW_NAMES = {"hit": "hit", "recall": "rec", "mrr": "rr"}
_AGG_METRICS = ("hit", "recall", "recall_all", "precision", "mrr", "ndcg", "map")
_SET_METRICS = ("hit", "recall", "precision")  # a set is scored whole: no cut-off
_FLOORS = MIN_SAMPLES


def _fmt(value: float | None) -> str:
    return "  -  " if value is None else f"{value:5.3f}"


def _ms(value: float) -> str:
    return f"{value * 1000:.1f}ms"


def _latency_line(label: str, s: LatencySummary) -> str:
    """``n=`` samples, then each percentile, ``-`` where too few samples (MIN_SAMPLES)."""
    cells = []
    for name in ("p50", "p90", "p95", "p99", "max"):
        value = s.published(name)
        cells.append(f"{name}={'-' if value is None else _ms(value)}")
    line = f"  {label:<10} n={s.count} " + " ".join(cells)
    withheld = s.withheld()
    if withheld and s.count:
        floor = min(need for name, need in _FLOORS.items() if name in withheld)
        line += f"  (- needs >= {floor} samples)"
    return line


def _row_keys(result: CycleResult) -> list[tuple[str, str]]:
    """(column head, metric key) of a query row: each k of a ranking, or a set's whole."""
    if result.unranked:
        return [(m, m) for m in _SET_METRICS]
    return [(f"{_ROW_NAMES[m]}@{k}", f"{m}@{k}") for k in result.ks for m in _ROW_METRICS]


def _query_rows(result: CycleResult) -> list[str]:
    keys = _row_keys(result)
    width, cell = 44, max(7, *(len(c) for c, _ in keys))
    lines = [f"  {'query':<{width}} " + " ".join(f"{c:>{cell}}" for c, _ in keys)]
    for q in result.queries:
        text = q.q if len(q.q) <= width else q.q[: width - 1] + "…"
        if q.error:
            lines.append(f"  {text:<{width}} error: {q.error}")
            continue
        vals = [q.metrics.get(key) for _, key in keys]
        lines.append(f"  {text:<{width}} " + " ".join(f"{_fmt(v):>{cell}}" for v in vals))
    agg = [result.aggregate.get(key) for _, key in keys]
    lines.append(f"  {'AGGREGATE':<{width}} " + " ".join(f"{_fmt(v):>{cell}}" for v in agg))
    return lines


def _set_block(result: CycleResult) -> list[str]:
    """A set-scored probe's means and CIs: one row per set measure, and why ranks are absent."""
    lines = [f"  {'metric':<10}  whole answer"]
    for m in ("hit", "recall", "recall_all", "precision"):
        lo, hi = result.ci.get(m, (None, None))
        ci = f" [{lo:.2f},{hi:.2f}]" if lo is not None and hi is not None else ""
        lines.append(f"  {m:<10}  {_fmt(result.aggregate.get(m))}{ci}")
    lines.append(f"  (no rank measures: {result.unranked})")
    return lines


def _aggregate_block(result: CycleResult) -> list[str]:
    """Mean and CI of each measure at each k, in columns that never run together."""
    rows: list[list[str]] = []
    for m in _AGG_METRICS:
        cells = []
        for k in result.ks:
            key = f"{m}@{k}"
            lo, hi = result.ci.get(key, (None, None))
            ci = f"[{lo:.2f},{hi:.2f}]" if lo is not None and hi is not None else ""
            cells.append(f"{_fmt(result.aggregate.get(key))} {ci}".rstrip())
        rows.append(cells)
    heads = [f"@{k}" for k in result.ks]
    widths = [max(len(heads[i]), *(len(r[i]) for r in rows)) for i in range(len(heads))]
    name_width = max(len("metric"), *(len(m) for m in _AGG_METRICS))

    def line(name: str, cells: list[str]) -> str:
        body = "  ".join(f"{c:<{w}}" for c, w in zip(cells, widths, strict=True))
        return f"  {name:<{name_width}}  {body}".rstrip()

    return [line("metric", heads)] + [line(m, r) for m, r in zip(_AGG_METRICS, rows, strict=True)]


def _header(result: CycleResult) -> list[str]:
    model = redact.label(result.info.model) if result.info and result.info.model else "unknown"
    lines = [
        f"probe {result.probe}  target={result.target} corpus={result.corpus} model={model}  "
        f"outcome={result.outcome}  {result.duration_s:.2f}s"
    ]
    if result.error_message:
        lines.append(f"  error ({result.error_kind}): {redact.text(result.error_message)}")
    if result.degraded_reasons:
        lines.append(f"  degraded: {', '.join(result.degraded_reasons)}")
    if result.seed is not None:
        s = result.seed
        searchable = "-" if s.searchable_after_s is None else f"{s.searchable_after_s:.3f}s"
        lines.append(
            f"  seed: requested={s.requested} imported={s.imported} skipped={s.skipped} "
            f"unchanged={s.unchanged} errors={s.errors} verified={s.verified} "
            f"missing={len(s.missing)} retries={s.retries} searchable_after={searchable}"
        )
    return lines


def _short_lines(result: CycleResult) -> list[str]:
    """Searches that answered fewer results than a full answer holds: they lower recall."""
    short = {p: n for p, n in sorted(result.short_answers.items()) if n}
    if not short:
        return []
    counts = ", ".join(f"{n} of the {p} pass" for p, n in short.items())
    recall = _headline_recall(result)
    lowered = f"; recall above ({recall}) counts them as misses" if recall else ""
    return [f"short answers: {counts} answered fewer results than asked{lowered}"]


def _headline_recall(result: CycleResult) -> str:
    if result.unranked:
        value = result.aggregate.get("recall")
        return "" if value is None else f"recall {value:.3f}"
    k = max(result.ks, default=0)
    value = result.aggregate.get(f"recall@{k}")
    return "" if value is None else f"recall@{k} {value:.3f}"


def _load_lines(result: CycleResult) -> list[str]:
    lines = ["latency (serial):", _latency_line("service", result.serial_latency)]
    load = result.load
    if load is None:
        return lines
    rate = f"{load.achieved_rate:.1f} req/s"
    if load.target_rate:
        rate += f" (target {load.target_rate:.1f})"
    requests = " ".join(f"{k}={v}" for k, v in sorted(load.requests.items()))
    lines += [
        f"load ({load.mode}, {load.duration_s:.1f}s): {rate}  {requests}  "
        f"late={load.late} dropped={load.dropped}",
    ]
    if load.max_rate is not None or load.paused_s or load.rate_limited:
        cap = "-" if load.max_rate is None else f"{load.max_rate:.2f} req/s"
        stopped = "  stopped early: rate_limited" if load.rate_limited else ""
        lines.append(f"  paced to {cap}  paused on 429s {load.paused_s:.1f}s{stopped}")
    lines.append(_latency_line("service", load.service))
    if load.corrected is not None:
        lines.append(_latency_line("corrected", load.corrected))
    if load.aggregate:
        keys = (
            list(_SET_METRICS)
            if result.unranked
            else [f"{m}@{k}" for k in result.ks for m in ("recall", "ndcg")]
        )
        parts = [f"{key}={load.aggregate.get(key, 0.0):.3f}" for key in keys]
        lines.append("  quality under load: " + " ".join(parts))
    return lines


def render_cycle(result: CycleResult) -> str:
    """The full terminal report for one cycle."""
    lines = _header(result)
    if result.queries:
        lines += _query_rows(result)
        lines.append("")
        lines += _set_block(result) if result.unranked else _aggregate_block(result)
        lines += _short_lines(result)
        lines += _load_lines(result)
    if result.errors:
        lines.append("errors: " + " ".join(f"{k}={v}" for k, v in sorted(result.errors.items())))
    if result.retries:
        lines.append(
            f"retries: {result.retries} request(s), {result.retry_wait_s:.2f}s waited "
            "(not in any latency)"
        )
    return "\n".join(lines)


# What a phase's counts count (the seed's and verify's are records).
_UNITS = {"serial": "queries"}


def render_progress(
    label: str, done: int, total: int, *, elapsed_s: float | None = None, unit: str = "records"
) -> str:
    """``\\rLABEL: done/total (pct%)``, with rate and ETA once ``elapsed_s`` is known."""
    pct = 100.0 * done / total if total else 100.0
    line = f"\r{label}: {done}/{total} ({pct:5.1f}%)"
    if elapsed_s is not None and elapsed_s > 0 and done > 0:
        rate = done / elapsed_s
        line += f" {rate:.1f} {unit}/s"
        if done < total:
            line += f", ETA {(total - done) / rate:.0f} s"
    return line


def render_many(results: Sequence[CycleResult]) -> str:
    """Every result's table, secrets masked (an error may quote a store that echoed the key)."""
    return redact.mask("\n\n".join(render_cycle(r) for r in results))


class TerminalProgress:
    """A cycle's progress on a terminal: the phase, seeding rate and ETA, waits on 429s.

    Implements :class:`benchd.progress.CycleProgress`. Each phase starts a
    line (``probe: seed``); seeding counts rewrite that line in place; a wait
    on a 429 gets a line of its own saying for how long.
    """

    def __init__(
        self, probe: str, stream: TextIO, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._probe = probe
        self._stream = stream
        self._clock = clock
        self._phase = ""
        self._since = clock()
        self._open = False  # a line without its newline yet

    def phase(self, name: str) -> None:
        self._phase, self._since = name, self._clock()
        self._line(f"{self._probe}: {name}")

    def __call__(self, done: int, total: int) -> None:
        label = f"{self._probe}: {self._phase or 'seed'}"
        unit = _UNITS.get(self._phase, "records")
        elapsed = self._clock() - self._since
        text = render_progress(label, done, total, elapsed_s=elapsed, unit=unit)
        self._stream.write(text)
        self._open = done < total
        if not self._open:
            self._stream.write("\n")
        self._stream.flush()

    def polling(self, polls: int, elapsed_s: float, limit_s: float) -> None:
        """A bounded wait's polls, rewritten in place (time-to-searchable)."""
        self._stream.write(
            f"\r{self._probe}: {self._phase}: poll {polls}, {elapsed_s:.1f} s "
            f"(gives up at {limit_s:g} s)"
        )
        self._open = True
        self._stream.flush()

    def waiting(self, seconds: float, reason: str) -> None:
        self._line(f"{self._probe}: {self._phase}: waiting {seconds:.1f} s on {reason}")

    def _line(self, text: str) -> None:
        if self._open:
            self._stream.write("\n")
        self._stream.write(text + "\n")
        self._open = False
        self._stream.flush()
