"""``benchd compare``: two runs (or several probes of one run) side by side, with significance.

Each side is one probe of a ``benchd once --format json`` document (or a
cycle run now with ``--config``). Pairs are compared on the query ids both
sides answered without error: per metric@k the two means, the delta, a
seeded bootstrap CI of the delta and a paired sign-flip p-value; and the
label-free ranking overlap (mean rank-biased overlap of each query's top k),
which says whether the two sides ranked with the same model at all.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchd.commands.baseline import read_result_json
from benchd.config.drift import KNOWN_METRICS, DriftSettings
from benchd.config.locate import locate_config
from benchd.drift.baseline import select_probe
from benchd.drift.tracker import Reference, Snapshot, compare, metric_keys
from benchd.errors import EXIT_OK, InputError, UsageError
from benchd.result import CycleResult

__all__ = ["Comparison", "Side", "compare_sides", "register", "render_markdown", "render_table"]

_MARKDOWN_METRICS = ("recall", "precision", "mrr")


@dataclass(frozen=True, slots=True)
class Side:
    """One probe's answers: query id -> metric values, plus what they depend on."""

    label: str  # "probe" or "file:probe"
    fixture_hash: str
    per_query: Mapping[str, Mapping[str, float]]
    rankings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    depth: int = 10


@dataclass(frozen=True, slots=True)
class KeyComparison:
    mean_a: float
    mean_b: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    significant: bool


@dataclass(frozen=True, slots=True)
class Comparison:
    a: Side
    b: Side
    n: int
    metrics: Mapping[str, KeyComparison]
    stale_reason: str | None = None
    overlap: float | None = None  # mean RBO of the top ``depth`` ids, 1 = same rankings
    model_changed: bool = False  # overlap fell by at least min_overlap_drop
    depth: int = 10


def register(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="compare two runs, or several probes of one run, with paired significance",
        description=(
            "Compare runs saved by `benchd once --format json`. With A.json and B.json, "
            "probes are paired by name (or --probe-a/--probe-b, or the only probe in each "
            "file); with one file (or --config), every probe is compared with the first. "
            "Per metric@k: both means over the queries both answered, the delta, its "
            "bootstrap CI and a paired sign-flip p-value. Exit codes: 0 ok, 2 bad input."
        ),
    )
    p.add_argument("files", nargs="*", metavar="RESULT.json", help="one or two result files")
    p.add_argument(
        "--config",
        "-c",
        metavar="FILE",
        help="run one cycle of every probe instead (with no file: $BENCHD_CONFIG, ./benchd.toml)",
    )
    p.add_argument("--probe-a", metavar="NAME", help="probe to take from the first file")
    p.add_argument("--probe-b", metavar="NAME", help="probe to take from the second file")
    p.add_argument("--format", "-f", choices=("table", "json", "markdown"), default="table")
    p.add_argument(
        "--metric",
        "-m",
        action="append",
        default=[],
        choices=KNOWN_METRICS,
        help="metric name to show (repeatable; default: all, or recall/precision/mrr in markdown)",
    )
    p.add_argument(
        "--k", type=int, metavar="K", help="markdown: the cut-off to show (default: max)"
    )
    p.add_argument("--alpha", type=float, default=0.01, help="significance level (default 0.01)")
    p.add_argument("--seed", type=int, default=0, help="seed of the resampling (default 0)")
    p.set_defaults(handler=_handle)


def _side_from_json(entry: Mapping[str, Any], label: str, source: str) -> Side:
    queries = entry.get("queries")
    if not isinstance(queries, list):
        raise InputError(f"{source}: probes[{label}].queries: expected a list")
    per_query: dict[str, Mapping[str, float]] = {}
    rankings: dict[str, tuple[str, ...]] = {}
    ks = [k for k in entry.get("ks") or () if isinstance(k, int) and not isinstance(k, bool)]
    depth = max(ks, default=10)
    for i, q in enumerate(queries):
        if not isinstance(q, Mapping) or not isinstance(q.get("metrics"), Mapping):
            raise InputError(f"{source}: probes[{label}].queries[{i}].metrics: expected an object")
        if not q.get("error"):
            per_query[str(q.get("id"))] = _numbers(q["metrics"])
            ranked = q.get("ranked_ids")
            if isinstance(ranked, list):
                rankings[str(q.get("id"))] = tuple(str(r) for r in ranked[:depth])
    return Side(label, str(entry.get("fixture_hash") or ""), per_query, rankings, depth)


def _numbers(metrics: Mapping[str, Any]) -> dict[str, float]:
    return {
        str(k): float(v)
        for k, v in metrics.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    }


def side_from_result(result: CycleResult) -> Side:
    """A side from a cycle run in-process."""
    answered = [q for q in result.queries if q.error is None]
    depth = max(result.ks, default=10)
    per_query = {q.id: dict(q.metrics) for q in answered}
    rankings = {q.id: tuple(q.ranked_ids[:depth]) for q in answered}
    return Side(result.probe, result.fixture_hash, per_query, rankings, depth)


def _probes(document: Mapping[str, Any], source: str) -> list[Mapping[str, Any]]:
    probes = document.get("probes")
    if not isinstance(probes, list) or not probes:
        raise InputError(f"{source}: no 'probes' list; expected `benchd once --format json` output")
    return [p for p in probes if isinstance(p, Mapping)]


def _pairs_of_two(args: argparse.Namespace) -> list[tuple[Side, Side]]:
    (path_a, doc_a), (path_b, doc_b) = ((f, read_result_json(f)) for f in args.files)
    probes_a, probes_b = _probes(doc_a, path_a), _probes(doc_b, path_b)
    if args.probe_a or args.probe_b or (len(probes_a) == 1 and len(probes_b) == 1):
        a = select_probe(doc_a, args.probe_a, path_a)
        b = select_probe(doc_b, args.probe_b or args.probe_a, path_b)
        return [(_side(a, path_a), _side(b, path_b))]
    names_b = {str(p.get("name")): p for p in probes_b}
    pairs = [
        (_side(p, path_a), _side(names_b[str(p.get("name"))], path_b))
        for p in probes_a
        if str(p.get("name")) in names_b
    ]
    if not pairs:
        raise UsageError(
            f"{path_a} and {path_b} have no probe name in common; "
            "pick the two with --probe-a NAME --probe-b NAME"
        )
    return pairs


def _side(entry: Mapping[str, Any], source: str) -> Side:
    name = str(entry.get("name", "?"))
    return _side_from_json(entry, f"{source}:{name}", source)


def _pairs_of_one(path: str) -> list[tuple[Side, Side]]:
    probes = _probes(read_result_json(path), path)
    sides = [_side_from_json(p, str(p.get("name", "?")), path) for p in probes]
    return _against_first(sides, path)


def _against_first(sides: Sequence[Side], source: str) -> list[tuple[Side, Side]]:
    if len(sides) < 2:
        raise UsageError(f"{source}: holds one probe; give a second result file to compare with")
    return [(sides[0], other) for other in sides[1:]]


def compare_sides(
    a: Side, b: Side, metrics: Sequence[str], *, alpha: float = 0.01, seed: int = 0
) -> Comparison:
    """Means, delta, CI and paired p-value per metric@k over the queries both sides have."""
    settings = DriftSettings(metrics=tuple(metrics), alpha=alpha, seed=seed)
    ref = Reference(
        samples={q: {k: [v] for k, v in m.items()} for q, m in a.per_query.items()},
        ranks={},
        rankings=a.rankings,
    )
    after = Snapshot(b.fixture_hash, b.per_query, {}, b.rankings)
    depth = min(a.depth, b.depth)
    hashes = a.fixture_hash and b.fixture_hash
    report = compare(
        ref, after, settings, kind="pinned", ref_hash=a.fixture_hash if hashes else None,
        depth=depth,
    )
    if report.stale:
        return Comparison(a, b, 0, {}, report.stale_reason)
    ids = sorted(set(a.per_query) & set(b.per_query))
    keys = metric_keys([a.per_query[q] for q in ids] + [b.per_query[q] for q in ids], metrics)
    out: dict[str, KeyComparison] = {}
    for key in keys:
        drift = report.metrics[key]
        mean_a = math.fsum(a.per_query[q][key] for q in ids) / len(ids)
        mean_b = math.fsum(b.per_query[q][key] for q in ids) / len(ids)
        out[key] = KeyComparison(
            mean_a,
            mean_b,
            drift.delta,
            drift.ci_low,
            drift.ci_high,
            drift.p_value_queries,
            drift.p_value_queries < alpha,
        )
    change = report.change
    return Comparison(
        a,
        b,
        len(ids),
        out,
        overlap=change.overlap if change is not None else None,
        model_changed=report.model_changed,
        depth=depth,
    )


def _stars(p: float, alpha: float) -> str:
    return "**" if p < alpha else "*" if p < 0.05 else ""


def render_table(comparisons: Sequence[Comparison], alpha: float) -> str:
    """Plain text: one block per pair, one row per metric@k."""
    blocks = []
    for c in comparisons:
        head = f"{c.a.label}  vs  {c.b.label}  ({c.n} paired queries)"
        if c.stale_reason:
            blocks.append(f"{head}\n  not compared: {c.stale_reason}")
            continue
        rows = [f"{'metric':<14}{'A':>8}{'B':>8}{'delta':>9}   {'95% CI of delta':<19}{'p':>9}"]
        for key, m in c.metrics.items():
            ci = f"[{m.ci_low:+.4f}, {m.ci_high:+.4f}]"
            rows.append(
                f"{key:<14}{m.mean_a:>8.4f}{m.mean_b:>8.4f}{m.delta:>+9.4f}   {ci:<19}"
                f"{m.p_value:>9.4f} {_stars(m.p_value, alpha)}"
            )
        if c.overlap is not None:
            verdict = "  (rankings changed: a different model or index?)" if c.model_changed else ""
            rows.append(f"ranking overlap (RBO@{c.depth})  {c.overlap:.4f}{verdict}")
        blocks.append("\n".join([head, *rows]))
    legend = f"** p < {alpha:g}, * p < 0.05 (paired sign-flip test; CI: bootstrap)"
    return "\n\n".join([*blocks, legend])


def _pick_k(comparisons: Sequence[Comparison], k: int | None) -> int:
    cuts = {
        int(key.partition("@")[2])
        for c in comparisons
        for key in c.metrics
        if key.partition("@")[2].isdigit()
    }
    if k is None:
        if not cuts:
            raise InputError("the runs share no metric@k to compare")
        return max(cuts)
    if k not in cuts:
        raise UsageError(f"--k {k}: the runs have k = {', '.join(map(str, sorted(cuts)))}")
    return k


def _cell(value: float, comparison: KeyComparison | None, alpha: float) -> str:
    if comparison is None:
        return f"{value:.4f}"
    stars = _stars(comparison.p_value, alpha)
    return f"{value:.4f} ({comparison.delta:+.4f}, p={comparison.p_value:.3g}{stars})"


def render_markdown(
    comparisons: Sequence[Comparison], metrics: Sequence[str], k: int | None, alpha: float
) -> str:
    """``| Retriever | mean_recall@k | … |`` tables; each later row shows its delta vs the first.

    Pairs that share their first side (one file, several probes) make one table.
    """
    groups: dict[str, list[Comparison]] = {}
    notes = []
    for c in comparisons:
        if c.stale_reason:
            notes.append(f"{c.a.label} vs {c.b.label}: not compared: {c.stale_reason}")
        else:
            groups.setdefault(c.a.label, []).append(c)
    tables = [_markdown_group(group, metrics, k, alpha) for group in groups.values()]
    return "\n\n".join([*tables, *notes])


def _markdown_group(
    group: Sequence[Comparison], metrics: Sequence[str], k: int | None, alpha: float
) -> str:
    cut = _pick_k(group, k)
    keys = [f"{m}@{cut}" for m in metrics if all(f"{m}@{cut}" in c.metrics for c in group)]
    header = ["Retriever", *(_column(key) for key in keys)]
    first = group[0]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        _row(first.a.label, [first.metrics[k].mean_a for k in keys], [None] * len(keys)),
    ]
    for c in group:
        means = [c.metrics[k].mean_b for k in keys]
        lines.append(_row(c.b.label, means, [c.metrics[k] for k in keys], alpha))
    lines += [
        "",
        f"Rows after the first: mean (delta vs {first.a.label}, paired sign-flip p-value "
        f"over {first.n} queries); ** p < {alpha:g}, * p < 0.05.",
    ]
    return "\n".join(lines)


def _column(key: str) -> str:
    name, _, cut = key.partition("@")
    return f"MRR@{cut}" if name == "mrr" else f"mean_{key}"


def _row(
    label: str,
    values: Sequence[float],
    comparisons: Sequence[KeyComparison | None],
    alpha: float = 0.01,
) -> str:
    cells = [_cell(v, c, alpha) for v, c in zip(values, comparisons, strict=True)]
    return "| " + " | ".join([label, *cells]) + " |"


def comparisons_to_json(comparisons: Sequence[Comparison], alpha: float) -> dict[str, Any]:
    """Plain JSON data: one entry per pair."""
    return {
        "alpha": alpha,
        "pairs": [
            {
                "a": c.a.label,
                "b": c.b.label,
                "n": c.n,
                "stale_reason": c.stale_reason,
                "ranking_overlap": c.overlap,
                "overlap_depth": c.depth,
                "model_changed": c.model_changed,
                "metrics": {
                    key: {
                        "a": m.mean_a,
                        "b": m.mean_b,
                        "delta": m.delta,
                        "ci_low": m.ci_low,
                        "ci_high": m.ci_high,
                        "p_value": m.p_value,
                        "significant": m.significant,
                    }
                    for key, m in c.metrics.items()
                },
            }
            for c in comparisons
        ],
    }


async def _pairs(args: argparse.Namespace) -> list[tuple[Side, Side]]:
    if args.config:
        if args.files:
            raise UsageError("give result files or --config, not both")
        return await _pairs_of_config(args.config)
    if len(args.files) == 1:
        return _pairs_of_one(args.files[0])
    if len(args.files) == 2:
        return _pairs_of_two(args)
    if args.files:
        raise UsageError("compare needs one or two RESULT.json files (or --config FILE)")
    found = locate_config(None)
    path = found.required("compare", "one or two RESULT.json files")
    found.announce()
    return await _pairs_of_config(path)


async def _pairs_of_config(path: str) -> list[tuple[Side, Side]]:
    from benchd.commands.once import run_probes
    from benchd.config.load import load_config
    from benchd.kinds import register_kinds

    register_kinds()  # config decodes [probe.target] with the kinds handed to it
    results = await run_probes(load_config(path))
    failed = [r for r in results if not r.ok]
    if failed:
        from benchd.errors import TargetError

        r = failed[0]
        raise TargetError(f"probe {r.probe}: cycle {r.outcome}: {r.error_message}")
    return _against_first([side_from_result(r) for r in results], path)


async def _handle(args: argparse.Namespace) -> int:
    if not 0.0 < args.alpha < 1.0:
        raise UsageError(f"--alpha {args.alpha}: expected a level between 0 and 1")
    markdown = args.format == "markdown"
    metrics = tuple(args.metric) or (_MARKDOWN_METRICS if markdown else KNOWN_METRICS)
    comparisons = [
        compare_sides(a, b, metrics, alpha=args.alpha, seed=args.seed)
        for a, b in await _pairs(args)
    ]
    if args.format == "json":
        print(json.dumps(comparisons_to_json(comparisons, args.alpha), indent=2))
    elif markdown:
        print(render_markdown(comparisons, metrics, args.k, args.alpha))
    else:
        print(render_table(comparisons, args.alpha))
    return EXIT_OK
