"""``benchd once``: run one cycle of every (or the named) probe and report it."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from benchd import __version__
from benchd.budget import plan_budgets
from benchd.config.load import Config, load_config, with_adopted_namespaces
from benchd.errors import EXIT_OK, EXIT_TARGET, EXIT_THRESHOLD, UsageError
from benchd.fixtures.model import load_fixture
from benchd.probe import ProbeRunner
from benchd.result import CycleResult
from benchd.surfacers.status import result_to_json
from benchd.surfacers.table import TerminalProgress, render_many
from benchd.targets.base import Progress

__all__ = ["parse_threshold", "register"]

_THRESHOLD = re.compile(r"^([a-z_]+)(?:@(\d+))?=([0-9]*\.?[0-9]+)$")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "once",
        help="run one cycle of each probe and print the scores",
        description=(
            "Run one cycle of each probe (seed, verify, query serially and under load, score) "
            "and print a table or JSON. With no --config, runs the embedded default: the "
            "reference store in-process and the packaged smoke fixture. Exit codes: 0 ok, "
            "1 a --fail-under threshold breached, 2 bad config/fixture/flags, "
            "3 target unreachable, auth refused, cycle failed or timed out, or cycle "
            "degraded (seed incomplete, queries failed, load errors, rate limited) "
            "unless --allow-degraded."
        ),
    )
    p.add_argument("--config", "-c", metavar="FILE", help="TOML config (default: embedded)")
    p.add_argument(
        "--probe",
        "-p",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this probe (repeatable)",
    )
    p.add_argument("--format", "-f", choices=("table", "json"), default="table")
    p.add_argument(
        "--fail-under",
        action="append",
        default=[],
        metavar="METRIC@K=VALUE",
        help="exit 1 if an aggregate is below VALUE, e.g. recall@10=0.8 (repeatable)",
    )
    p.add_argument(
        "--allow-degraded",
        action="store_true",
        help="exit 0 (or 1 on a threshold) for a degraded cycle instead of 3",
    )
    p.add_argument(
        "--adopt-namespace",
        action="store_true",
        help="seed into a namespace that holds records benchd did not write",
    )
    p.set_defaults(handler=_handle)


def parse_threshold(text: str) -> tuple[str, float]:
    """``recall@10=0.8`` -> ("recall@10", 0.8); a bad spec is a UsageError."""
    m = _THRESHOLD.match(text.strip())
    if m is None:
        raise UsageError(
            f"--fail-under {text!r}: expected METRIC@K=VALUE such as recall@10=0.8 or rr=0.5"
        )
    name, k, value = m.groups()
    key = f"{name}@{k}" if k else name
    return key, float(value)


def _select(config: Config, names: Sequence[str], adopt: bool) -> Config:
    probes = tuple(config.probe(n) for n in names) if names else config.probes
    if not probes:
        raise UsageError(f"{config.path}: no [[probe]] tables; nothing to run")
    selected = dataclasses.replace(config, probes=probes)
    return with_adopted_namespaces(selected) if adopt else selected


@asynccontextmanager
async def _config(path: str | None) -> AsyncIterator[Config]:
    if path:
        yield load_config(path)
        return
    from benchd.commands.embedded import embedded_default

    async with embedded_default() as config:
        yield config


def _progress(probe: str) -> Progress | None:
    """The phase, seeding rate and ETA and 429 waits on stderr, when it is a terminal."""
    return TerminalProgress(probe, sys.stderr) if sys.stderr.isatty() else None


async def run_probes(config: Config) -> list[CycleResult]:
    """One cycle per probe, sequentially, each with its own adapter."""
    results = []
    fixtures = {p.name: load_fixture(p.fixture) for p in config.probes}
    plan = plan_budgets(config, {n: (len(f.memories), len(f.queries)) for n, f in fixtures.items()})
    for warning in plan.warnings:
        print(f"benchd: warning: {warning}", file=sys.stderr)
    for probe in config.probes:
        runner = ProbeRunner(
            probe, fixture=fixtures[probe.name], read_rate=plan.read_rates.get(probe.name)
        )
        try:
            results.append(await runner.run_once(progress=_progress(probe.name)))
        finally:
            await runner.aclose()
    return results


def _breaches(results: Sequence[CycleResult], thresholds: Sequence[tuple[str, float]]) -> list[str]:
    out = []
    for r in results:
        for key, floor in thresholds:
            value = r.aggregate.get(key)
            if value is None:
                raise UsageError(
                    f"--fail-under {key}: no such aggregate for probe {r.probe} "
                    f"(metrics: {', '.join(sorted(r.aggregate)) or 'none'})"
                )
            if value < floor:
                out.append(f"probe {r.probe}: {key} = {value:.4f} is below {floor:g}")
    return out


async def _handle(args: argparse.Namespace) -> int:
    thresholds = [parse_threshold(t) for t in args.fail_under]
    async with _config(args.config) as config:
        config = _select(config, args.probe, args.adopt_namespace)
        results = await run_probes(config)
    if args.format == "json":
        doc = {
            "schema": 1,
            "benchd_version": __version__,
            "probes": [result_to_json(r) for r in results],
        }
        print(json.dumps(doc, indent=2, sort_keys=False))
    else:
        print(render_many(results))
    failed = [r for r in results if r.outcome in ("failed", "timeout")]
    degraded = [r for r in results if r.outcome == "degraded"]
    for r in failed:
        print(f"benchd: probe {r.probe} {r.outcome}: {r.error_message}", file=sys.stderr)
    for r in degraded:
        reasons = ", ".join(r.degraded_reasons)
        note = " (allowed by --allow-degraded)" if args.allow_degraded else ""
        print(f"benchd: probe {r.probe} degraded: {reasons}{note}", file=sys.stderr)
    if failed or (degraded and not args.allow_degraded):
        return EXIT_TARGET
    breaches = [] if failed else _breaches(results, thresholds)
    for line in breaches:
        print(f"benchd: threshold breached: {line}", file=sys.stderr)
    return EXIT_THRESHOLD if breaches else EXIT_OK
