"""``benchd baseline save|show``: pin a probe's quality before a change, and read it back."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchd.config.drift import DEFAULT_METRICS
from benchd.config.locate import locate_config
from benchd.drift.baseline import (
    Baseline,
    baseline_from_results,
    baseline_header,
    load_baseline,
    save_baseline,
    write_baseline,
)
from benchd.errors import EXIT_OK, InputError, RunFileError, UsageError

if TYPE_CHECKING:
    from benchd.probe import ProbeRunner

__all__ = ["baseline_to_json", "read_result_json", "register", "render_baseline"]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "baseline",
        help="pin a probe's per-query quality to a TOML file, or show one",
        description=(
            "Pin a probe's per-query metric values, the ranks of its expected ids, the "
            "fixture's content hash and the store's model label, so that later cycles are "
            'compared with it (set `baseline = "FILE"` in the probe\'s config).'
        ),
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    save = actions.add_parser(
        "save",
        help="write a baseline from `benchd once --format json` output or a fresh cycle",
        description=(
            "Write a baseline from RESULT.json (the output of `benchd once --format json`), "
            "or run cycles of a configured probe with --config: with --repeats N, N cycles, "
            "so the baseline carries the store's own cycle-to-cycle noise. Exit codes: "
            "0 written, 2 bad input, 3 a cycle of the probe failed."
        ),
    )
    source = save.add_mutually_exclusive_group()
    source.add_argument("--from", dest="source", metavar="RESULT.json", help="a saved result")
    source.add_argument(
        "--config",
        "-c",
        metavar="FILE",
        help="run cycles of this config (default: $BENCHD_CONFIG, else ./benchd.toml)",
    )
    save.add_argument("--probe", "-p", metavar="NAME", help="the probe to pin (default: the only)")
    save.add_argument("--out", "-o", required=True, metavar="FILE", help="baseline TOML to write")
    save.add_argument(
        "--repeats",
        "-n",
        type=_repeats,
        default=1,
        metavar="N",
        help="with --config: cycles to pin, so the baseline measures noise (default 1; 5 is good)",
    )
    save.add_argument(
        "--force",
        action="store_true",
        help="with --config: take over a namespace another live benchd leases (else read-only)",
    )
    save.set_defaults(handler=_save)
    show = actions.add_parser("show", help="print a baseline", description="Print a baseline.")
    show.add_argument("file", metavar="FILE")
    show.add_argument("--format", "-f", choices=("table", "json"), default="table")
    show.set_defaults(handler=_show)


def read_result_json(path: str) -> dict[str, Any]:
    """Load a ``benchd once --format json`` document; a bad file is a one-line error."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise InputError(
            f"{path}: no such file; write it with `benchd once --format json`"
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from exc
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunFileError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from exc
    if not isinstance(document, dict):
        raise InputError(f"{path}: expected a JSON object with a 'probes' list")
    return document


def _repeats(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"--repeats {text!r}: expected a number of cycles 1-1000")
    return value


async def _save(args: argparse.Namespace) -> int:
    if args.source:
        if args.repeats != 1:
            raise UsageError("--repeats needs --config: a saved result holds one cycle")
        baseline = save_baseline(
            read_result_json(args.source), args.probe, args.out, source=args.source
        )
    else:
        found = locate_config(args.config)
        path = found.required("baseline save", "--from RESULT.json")
        found.announce()
        baseline = await _pin_live(path, args.probe, args.repeats, force=args.force)
        write_baseline(baseline, args.out)
    print(
        f"benchd: pinned probe {baseline.probe} ({len(baseline.queries)} queries, "
        f"{baseline.repeats} cycle{'s' if baseline.repeats != 1 else ''}, "
        f"model {baseline.model or 'unknown'}{_canary_words(baseline)}) to {args.out}"
    )
    return EXIT_OK


async def _pin_live(
    config_path: str, probe: str | None, repeats: int = 1, *, force: bool = False
) -> Baseline:
    """Run ``repeats`` cycles of ``probe`` and freeze them, with their noise."""
    from benchd.commands.once import hand_back, say_read_only
    from benchd.config.load import load_config
    from benchd.errors import TargetError
    from benchd.kinds import register_kinds
    from benchd.probe import ProbeRunner

    register_kinds()  # config decodes [probe.target] with the kinds handed to it
    config = load_config(config_path)
    names = [p.name for p in config.probes]
    if probe is None and len(names) != 1:
        raise UsageError(f"{config_path}: holds probes {', '.join(names)}; pick one with --probe")
    # The baseline being replaced (possibly not written yet) plays no part in pinning.
    chosen = dataclasses.replace(config.probe(probe or names[0]), baseline=None)
    runner = ProbeRunner(  # never takes over a live lease unless forced
        chosen, instance=config.server.instance or None, role="baseline", force_lease=force
    )
    _arm_canary(runner)
    results = []
    try:
        for _ in range(repeats):
            result = await runner.run_once()
            if result.outcome != "success":
                raise TargetError(
                    f"probe {result.probe}: cycle {result.cycle} of {repeats} {result.outcome}: "
                    f"{result.error_message}; nothing was pinned"
                )
            results.append(result)
        if results:
            say_read_only(results[0])
        await hand_back(runner, chosen.timeout_s)
    finally:
        await runner.aclose()
    return baseline_from_results(results)


def _arm_canary(runner: ProbeRunner) -> None:
    """Each repeat reads the embedding canary: its texts, else the corpus's first queries."""
    from benchd.kinds.vectors import stage_of

    stage = stage_of(runner.target)
    if stage is not None and stage.config.canary_on:
        stage.arm_canary(stage.config.canary([q.q for q in runner.fixture.queries]))


def baseline_to_json(baseline: Baseline) -> dict[str, Any]:
    """The whole baseline as plain JSON data (ids not returned have rank null)."""
    return {
        **baseline_header(baseline),
        "canary": _canary_json(baseline),
        "aggregate": dict(baseline.aggregate),
        "queries": [
            {
                "id": q.id,
                "expected_ids": list(q.expected_ids),
                "ranks": dict(q.ranks),
                "metrics": dict(q.metrics),
                "ranked_ids": list(q.ranked_ids),
                "samples": {k: list(v) for k, v in q.samples.items()},
                "overlap": list(q.overlap),
            }
            for q in baseline.queries.values()
        ],
    }


def _canary_words(baseline: Baseline) -> str:
    canary = baseline.canary
    if canary is None:
        return ""
    return (
        f", embedding canary of {len(canary.texts)} texts: lowest similarity "
        f"{canary.similarity:.6f}, threshold {canary.threshold:.6f}"
    )


def _canary_json(baseline: Baseline) -> dict[str, Any] | None:
    canary = baseline.canary
    if canary is None:
        return None
    return {
        "texts": list(canary.texts),
        "width": len(canary.vectors[0]),
        "similarity": canary.similarity,
        "threshold": canary.threshold,
    }


def _sort_key(key: str) -> tuple[int, int, str]:
    name, _, cut = key.partition("@")
    order = DEFAULT_METRICS.index(name) if name in DEFAULT_METRICS else len(DEFAULT_METRICS)
    return order, int(cut) if cut.isdigit() else 0, key


def render_baseline(baseline: Baseline) -> str:
    """A short human-readable summary: what the baseline depends on, then its aggregates."""
    missed = sum(1 for q in baseline.queries.values() if any(r is None for r in q.ranks.values()))
    lines = [
        f"probe           {baseline.probe}",
        f"corpus          {baseline.corpus or '-'}",
        f"model           {baseline.model or 'unknown'}",
        f"fixture hash    {baseline.fixture_hash}",
        f"created at      {baseline.created_at}",
        f"benchd version  {baseline.benchd_version}",
        f"queries         {len(baseline.queries)} ({missed} with an expected id not returned)",
        f"repeats         {baseline.repeats} ({_noise_line(baseline)})",
    ]
    if baseline.canary is not None:
        lines.append(f"canary          {_canary_words(baseline).removeprefix(', ')}")
    if baseline.aggregate:
        width = max(len(k) for k in baseline.aggregate)
        lines.append("")
        lines += [
            f"{key:<{width}}  {baseline.aggregate[key]:.4f}"
            for key in sorted(baseline.aggregate, key=_sort_key)
        ]
    return "\n".join(lines)


def _noise_line(baseline: Baseline) -> str:
    if baseline.repeats < 2:
        return "one cycle: no noise measured"
    moved = sum(
        1
        for q in baseline.queries.values()
        if any(max(v) - min(v) > 1e-9 for v in q.samples.values())
        or any(o < 1.0 for o in q.overlap)
    )
    return f"{moved} queries moved between repeats" if moved else "stable: no query moved"


def _show(args: argparse.Namespace) -> int:
    baseline = load_baseline(args.file)
    if args.format == "json":
        print(json.dumps(baseline_to_json(baseline), indent=2))
    else:
        print(render_baseline(baseline))
    return EXIT_OK
