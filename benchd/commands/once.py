"""``benchd once``: run one cycle of every (or the named) probe and report it.

Thresholds (``--fail-under``, ``--threshold`` and each probe's
``[probe.thresholds]``) are parsed and checked against the probes before any
cycle runs; a breach exits 1. ``--format`` picks the output: a table, the
JSON document, JUnit XML for CI, or the serial pass's ranked lists as a TREC
run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from benchd import __version__, redact
from benchd.budget import Plan, plan_budgets
from benchd.commands.collector import for_cycles
from benchd.config.load import Config, load_config, with_adopted_namespaces
from benchd.config.locate import locate_config
from benchd.config.thresholds import (
    Threshold,
    check_threshold,
    parse_fail_under,
    parse_threshold,
)
from benchd.errors import (
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_TARGET,
    EXIT_THRESHOLD,
    BenchdError,
    UsageError,
)
from benchd.fixtures.model import load_fixture
from benchd.kinds import register_kinds
from benchd.logging import get_logger
from benchd.probe import INTERNAL, ProbeRunner
from benchd.result import CycleResult
from benchd.store.target import Progress
from benchd.surfacers.table import TerminalProgress, render_many

__all__ = ["cli_thresholds", "exit_code", "register"]

log = get_logger("benchd.once")

FORMATS = ("table", "json", "junit", "trec")
# After its cycle, once hands the lease back for at most this long: a store that answers
# the hand-back with a long Retry-After is not waited out (the lease expires by itself).
HAND_BACK_S = 5.0
# A wait after the cycle at least this long is said on stderr.
SAY_WAIT_S = 0.5


def register(sub: Any) -> None:
    p = sub.add_parser(
        "once",
        help="run one cycle of each probe and print the scores",
        description=(
            "Run one cycle of each probe (seed, verify, query serially and under load, score) "
            "and print a table, JSON, JUnit XML or a TREC run. With no config (--config, "
            "$BENCHD_CONFIG or ./benchd.toml), runs the embedded default: the reference "
            "store in-process and the packaged smoke fixture. "
            "On a namespace another live benchd instance leases (a running daemon), it checks "
            "that instance's corpus is complete and of the same fixture, measures it read-only "
            "and writes and deletes nothing (else exit 3). "
            "Thresholds (--fail-under, --threshold, [probe.thresholds]) are checked before "
            "any cycle runs. Exit codes: 0 ok, 1 a threshold breached, 2 bad "
            "config/fixture/flags/threshold, 3 target unreachable, auth refused, cycle failed "
            "or timed out, or cycle degraded (seed incomplete, queries failed, load errors, "
            "rate limited) unless --allow-degraded, 4 a probe hit an internal error (a bug), "
            "5 the output could not be written (disk full); with several probes the most "
            "severe of 4, 3, 1, 0 wins."
        ),
    )
    p.add_argument(
        "--config",
        "-c",
        metavar="FILE",
        help="TOML config (default: $BENCHD_CONFIG, else ./benchd.toml, else embedded)",
    )
    p.add_argument(
        "--probe",
        "-p",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this probe (repeatable)",
    )
    p.add_argument(
        "--format",
        "-f",
        choices=FORMATS,
        default="table",
        help=(
            "table (default); json (docs/json.md); junit: JUnit XML, one test case per probe "
            "and threshold; trec: the serial pass's ranked lists as a TREC run (one probe)"
        ),
    )
    p.add_argument(
        "--fail-under",
        action="append",
        default=[],
        metavar="[PASS:]METRIC@K=VALUE",
        help="exit 1 if a mean is below VALUE, e.g. recall@10=0.8 or load:ndcg@10=0.7 (repeatable)",
    )
    p.add_argument(
        "--threshold",
        "-t",
        action="append",
        default=[],
        metavar="[PASS:]MEASURE<BOUND",
        help=(
            "exit 1 unless the condition holds, e.g. p99<0.2 (seconds), load:error_ratio<0.01, "
            "recall@10>=0.8; PASS is serial (default) or load (repeatable)"
        ),
    )
    p.add_argument(
        "--allow-degraded",
        action="store_true",
        help="exit 0 (or 1 on a threshold) for a degraded cycle instead of 3",
    )
    p.add_argument(
        "--adopt-namespace",
        action="append",
        default=[],
        metavar="NAMESPACE",
        help=(
            "seed into this namespace although it holds records benchd did not write, "
            "beside them and never deleting them (repeatable; applies to the probes "
            "using it at start, never to probes a reload adds)"
        ),
    )
    p.add_argument(
        "--force",
        action="store_true",
        help=(
            "take over a namespace another live benchd (even the daemon on this host) leases, "
            "and write it; without it, once measures such a namespace read-only or is refused"
        ),
    )
    p.set_defaults(handler=_handle)


def cli_thresholds(fail_under: Sequence[str], conditions: Sequence[str]) -> list[Threshold]:
    """Every threshold given on the command line, parsed and range-checked."""
    return [*(parse_fail_under(t) for t in fail_under), *(parse_threshold(t) for t in conditions)]


def check_cli_thresholds(config: Config, thresholds: Sequence[Threshold]) -> None:
    """Fail before any cycle if a probe cannot measure a command-line threshold."""
    for probe in config.probes:
        for t in thresholds:
            problem = check_threshold(
                t, ks=probe.k, load_mode=probe.load.mode, unranked=probe.target.common.unranked
            )
            if problem:
                flag = "--fail-under" if t.op == ">=" and t.family == "quality" else "--threshold"
                raise UsageError(f"{flag} {t.name}: probe {probe.name}: {problem}")


def _select(config: Config, names: Sequence[str], adopt: Sequence[str]) -> Config:
    probes = tuple(config.probe(n) for n in names) if names else config.probes
    if not probes:
        raise UsageError(f"{config.path}: no [[probe]] tables; add one (benchd init shows how)")
    selected = dataclasses.replace(config, probes=probes)
    return with_adopted_namespaces(selected, adopt) if adopt else selected


@asynccontextmanager
async def _config(path: str | None) -> AsyncIterator[Config]:
    if path:
        register_kinds()  # config decodes [probe.target] with the kinds handed to it
        yield load_config(path)
        return
    from benchd.commands.embedded import embedded_default

    async with embedded_default() as config:
        yield config


def _progress(probe: str) -> Progress | None:
    """The phase, seeding rate and ETA and 429 waits on stderr, when it is a terminal."""
    return TerminalProgress(probe, sys.stderr) if sys.stderr.isatty() else None


def budget_lines(plan: Plan, config_path: str) -> list[str]:
    """One short line per API key whose budget a daemon on this config would overrun.

    ``once`` runs one cycle: it says what that cycle sends and, in one clause, that
    the schedule does not fit; ``benchd validate`` prints the whole breakdown.
    """
    lines = []
    for key in plan.keys:
        if not key.warnings:
            continue
        reads = sum(c.total_reads for c in key.costs.values())
        writes = sum(c.total_writes for c in key.costs.values())
        over = [
            f"{need:.0f} {what}/min of {limit}"
            for need, what, limit in (
                (key.reads_per_min, "reads", key.budget.reads_per_min),
                (key.writes_per_min, "writes", key.budget.writes_per_min),
            )
            if limit is not None and need > limit
        ]
        schedule = f"; on its schedule it needs {' and '.join(over)}" if over else ""
        limits = ((reads, key.budget.reads_per_min), (writes, key.budget.writes_per_min))
        waits = any(limit is not None and sent > limit for sent, limit in limits)
        lines.append(
            f"benchd: budget: this cycle sends {reads} reads, {writes} writes with "
            f"{key.key}{' and waits on 429s' if waits else ''}{schedule} "
            f"(benchd validate -c {config_path}: details)"
        )
    return lines


async def run_probes(
    config: Config, thresholds: Sequence[Threshold] = (), *, force: bool = False
) -> list[CycleResult]:
    """One cycle per probe, sequentially, each with its own adapter.

    Each result carries its verdicts on the probe's thresholds and on
    ``thresholds`` (the command line's), judged by the probe runner. Beside
    a live lease (even the daemon's on this host) a probe measures
    read-only, or is refused; ``force`` takes the lease over (``--force``).
    """
    results = []
    fixtures = {p.name: load_fixture(p.fixture) for p in config.probes}
    plan = plan_budgets(config, {n: (len(f.memories), len(f.queries)) for n, f in fixtures.items()})
    for line in budget_lines(plan, config.path):
        print(line, file=sys.stderr)
    with for_cycles():  # the fixtures are loaded: frozen with the imports
        for probe in config.probes:
            runner = ProbeRunner(
                probe,
                fixture=fixtures[probe.name],
                read_rate=plan.read_rates.get(probe.name),
                write_rate=plan.write_rates.get(probe.name),
                instance=config.server.instance or None,
                role="once",  # beside a live daemon: measure, never write
                force_lease=force,
                thresholds=thresholds,
            )
            try:
                result = await runner.run_once(progress=_progress(probe.name))
                await _leave(runner, probe.timeout_s)
            finally:
                await runner.aclose()
            results.append(result)
            say_read_only(result)
    return results


async def _leave(runner: ProbeRunner, grace_s: float) -> None:
    """After the cycle, hand the lease back; with ``cleanup = "after"`` first delete what is
    left of the corpus and then the sentinel, so a ``once`` leaves nothing behind. Time
    spent here, after the cycle's own figures, is said on stderr."""
    started = time.monotonic()
    try:
        await runner.cleanup(grace_s, lease_grace_s=HAND_BACK_S)
    except BenchdError as exc:
        log.warning("cleanup failed", probe=runner.probe.name, error=str(exc))
        await runner.release_lease(HAND_BACK_S)
    _say_wait(runner.probe.name, "cleaning up and handing the lease back", started)


async def hand_back(runner: ProbeRunner, grace_s: float) -> None:
    """Hand the lease back within :data:`HAND_BACK_S` (an unreleased lease expires by
    itself), saying on stderr how long that took when it was noticeable."""
    started = time.monotonic()
    await runner.release_lease(min(grace_s, HAND_BACK_S))
    _say_wait(runner.probe.name, "handing the lease back", started)


def _say_wait(probe: str, what: str, started: float) -> None:
    waited = time.monotonic() - started
    if waited >= SAY_WAIT_S:
        print(f"benchd: probe {probe}: {waited:.1f} s after the cycle {what}", file=sys.stderr)


def say_read_only(result: CycleResult) -> None:
    """Tell the user a cycle measured a live daemon's corpus and wrote nothing."""
    holder = result.seed.read_only_beside if result.seed is not None else None
    if holder:
        print(
            f"benchd: probe {result.probe}: its namespace is leased by live {holder}; "
            "measured its corpus read-only (wrote and deleted nothing)",
            file=sys.stderr,
        )


def _print_json(results: Sequence[CycleResult]) -> None:
    from benchd.surfacers.status import result_to_json  # with its result book: JSON only

    probes = [result_to_json(r) for r in results]  # with the thresholds each result carries
    document = {"schema": 1, "benchd_version": __version__, "probes": probes}
    print(json.dumps(document, indent=2, sort_keys=False))


def _output(fmt: str, results: Sequence[CycleResult], allow_degraded: bool) -> None:
    if fmt == "json":
        _print_json(results)
    elif fmt == "junit":
        from benchd.surfacers.junit import render_junit

        print(redact.mask(render_junit(results, allow_degraded=allow_degraded)))
    elif fmt == "trec":
        from benchd.surfacers.trec_run import render_trec_run

        sys.stdout.write(render_trec_run(results[0]))
    else:
        print(render_many(results))


async def _handle(args: argparse.Namespace) -> int:
    extra = cli_thresholds(args.fail_under, args.threshold)
    source = locate_config(args.config)
    source.announce()
    async with _config(source.path) as config:
        config = _select(config, args.probe, args.adopt_namespace)
        check_cli_thresholds(config, extra)
        if args.format == "trec" and len(config.probes) != 1:
            names = ", ".join(p.name for p in config.probes)
            raise UsageError(
                f"--format trec writes one run; name one probe with --probe (probes: {names})"
            )
        results = await run_probes(config, extra, force=args.force)
    _output(args.format, results, args.allow_degraded)
    failed = [r for r in results if r.outcome in ("failed", "timeout")]
    degraded = [r for r in results if r.outcome == "degraded"]
    for r in failed:
        line = f"benchd: probe {r.probe} {r.outcome}: {r.error_message}"
        print(redact.text(line), file=sys.stderr)
    for r in degraded:
        reasons = ", ".join(r.degraded_reasons)
        note = " (allowed by --allow-degraded)" if args.allow_degraded else ""
        print(f"benchd: probe {r.probe} degraded: {reasons}{note}", file=sys.stderr)
    scored = [r for r in results if r.outcome in ("success", "degraded")]
    breaches = [(r.probe, v) for r in scored for v in r.thresholds if v.breached]
    for probe, v in breaches:
        print(f"benchd: threshold breached: probe {probe}: {v.describe()}", file=sys.stderr)
    for r in scored:  # a met threshold on a withheld percentile says so too
        for v in r.thresholds:
            if v.note and not v.breached:
                print(f"benchd: threshold met: probe {r.probe}: {v.describe()}", file=sys.stderr)
    return exit_code(results, breached=bool(breaches), allow_degraded=args.allow_degraded)


def exit_code(
    results: Sequence[CycleResult], *, breached: bool, allow_degraded: bool = False
) -> int:
    """The most severe of the probes' codes: 4 (a bug) > 3 (target) > 1 (threshold) > 0."""
    codes = [EXIT_THRESHOLD if breached else EXIT_OK]
    for r in results:
        if r.error_kind == INTERNAL:
            codes.append(EXIT_INTERNAL)
        elif r.outcome in ("failed", "timeout") or (r.outcome == "degraded" and not allow_degraded):
            codes.append(EXIT_TARGET)
    return max(codes)
