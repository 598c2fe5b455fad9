"""``benchd validate [-c FILE] [--check-secrets] [--check-store] FIXTURE...``: report every problem.

Each problem is printed on its own line (``FILE: JSON-PATH: what is wrong; how to
fix``, or ``FILE: key.path: ...`` for the config); each valid file gets a one-line
summary. Warnings (``FILE: JSON-PATH: warning: ...``, e.g. date words in a
query that no date anchors, or a config whose probes overrun an API key's
budget) are printed too but never fail a file. The exit code is 2 when any
file has a problem, 0 otherwise. A
directory stands for the fixture files in it. ``--config`` checks the config
(every problem, not just the first) and every fixture its probes name. API
keys are not needed: how each key is named is checked, not whether it is set,
unless ``--check-secrets`` asks for that too (as ``benchd run`` will). Plain
``validate`` contacts nothing; ``--check-store`` (opt-in, implies
``--check-secrets``) also asks each probe's store what a cycle's ``info``
phase asks and prints every problem it reports, one line each (an ``mcp``
probe: each tool or argument of its tool map the server does not offer).

``validate_paths`` is the reusable core.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchd.config.locate import locate_config
from benchd.errors import EXIT_INPUT, EXIT_OK, ConfigError, UsageError
from benchd.fixtures.model import FixtureCheck, check_fixture
from benchd.fixtures.reader import JSONL_SUFFIXES

if TYPE_CHECKING:
    from benchd.config.load import ProbeConfig

__all__ = ["check_paths", "expand_paths", "register", "validate_paths"]

_FIXTURE_SUFFIXES = (".json", *sorted(JSONL_SUFFIXES))


def register(sub: Any) -> None:
    """Add the ``validate`` subcommand to ``benchd``'s subparsers."""
    p = sub.add_parser(
        "validate",
        help="check fixture files and report every problem",
        description=(
            "Check a config and fixture files (JSON or JSON Lines) and print every problem, "
            "one per line, as FILE: PATH: what is wrong; how to fix. Exit 2 if any file "
            "has a problem, 0 if all are valid. A directory means the .json/.jsonl "
            "files in it. API keys need not be set unless --check-secrets is given: a "
            "config that validates without it can still fail to start for a missing key."
        ),
    )
    p.add_argument(
        "--config",
        "-c",
        metavar="FILE",
        help=(
            "also check this config (every problem) and every fixture its probes name; with "
            "no FIXTURE, the default is $BENCHD_CONFIG, else ./benchd.toml"
        ),
    )
    p.add_argument(
        "--check-secrets",
        action="store_true",
        help="also require every API key to be present (api_key_env set, api_key_file readable)",
    )
    p.add_argument(
        "--check-store",
        action="store_true",
        help="also contact each probe's store once (what a cycle's info phase asks) and report "
        "its problems, e.g. an mcp tool map naming a tool the server does not offer",
    )
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: one line per problem or valid file (default); json: a list of results",
    )
    p.add_argument("fixtures", nargs="*", metavar="FIXTURE", help="fixture file or directory")
    p.set_defaults(handler=run)


def expand_paths(paths: Iterable[str | Path]) -> list[Path | FixtureCheck]:
    """Paths to check: files as given, directories as their fixture files (sorted).

    A directory without fixture files becomes a ready-made failed check.
    """
    out: list[Path | FixtureCheck] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            out.append(path)
            continue
        found = sorted(p for p in path.iterdir() if p.suffix.lower() in _FIXTURE_SUFFIXES)
        if found:
            out.extend(found)
        else:
            problem = f"{path}: no .json or .jsonl files in this directory; name a fixture file"
            out.append(FixtureCheck(str(path), (problem,), 0, 0, 0))
    return out


def check_paths(paths: Iterable[str | Path]) -> list[FixtureCheck]:
    """Validate every fixture named (directories expanded), in order."""
    return [
        item if isinstance(item, FixtureCheck) else check_fixture(item)
        for item in expand_paths(paths)
    ]


_SHOWN: dict[str, str] = {}  # expanded fixture path -> "config: key (as written)"


def _shown(check: FixtureCheck) -> FixtureCheck:
    """``check`` with its path as the config wrote it, when ``${VAR}`` expanded it."""
    written = _SHOWN.get(str(check.path))
    if written is None:
        return check
    path = str(check.path)
    lines = tuple(written + p[len(path) :] if p.startswith(path) else p for p in check.problems)
    return dataclasses.replace(check, path=written, problems=lines)


def validate_paths(paths: Iterable[str | Path]) -> tuple[list[str], list[str]]:
    """Validate fixtures; return (every problem line, one ok line per valid file)."""
    problems: list[str] = []
    ok_lines: list[str] = []
    for check in check_paths(paths):
        if check.ok:
            ok_lines.append(check.summary())
        else:
            problems.extend(check.problems)
    return problems, ok_lines


def _as_json(check: FixtureCheck) -> dict[str, Any]:
    return {
        "path": check.path,
        "ok": check.ok,
        "memories": check.memories,
        "queries": check.queries,
        "categories": check.categories,
        "problems": list(check.problems),
        "warnings": list(check.warnings),
    }


def config_fixtures(path: str | Path, *, check_secrets: bool = False) -> tuple[list[Path], str]:
    """The distinct fixtures a config's probes name, and the config's ok line.

    A fixture whose path came from ``${VAR}`` is recorded in :data:`_SHOWN`
    under the key and the path as written, which its problems show instead
    of the expanded path.

    Raises :class:`~benchd.errors.ConfigError` (with every problem) if the config is bad.
    """
    from benchd.config.load import load_config  # the config stack only when asked for
    from benchd.kinds import register_kinds

    register_kinds()  # config decodes [probe.target] with the kinds handed to it
    config = load_config(path, secrets=check_secrets)
    problems = config_parts(config.probes)  # what building the runners would reject
    if problems:
        raise ConfigError(problems)
    fixtures = list(dict.fromkeys(probe.fixture for probe in config.probes))
    for i, probe in enumerate(config.probes):
        if probe.fixture_source:
            written = f"{config.path}: probe[{i}].fixture ({probe.fixture_source})"
            _SHOWN[str(probe.fixture)] = written
    count = len(config.probes)
    return fixtures, f"{config.path}: ok ({count} probe{'' if count == 1 else 's'})"


def budget_warnings(
    path: str | Path, checks: Iterable[FixtureCheck], *, check_secrets: bool = False
) -> list[str]:
    """What the config's probes cost each API key's budget, where it does not fit.

    Probes whose fixture has problems are left out (their size is unknown).
    When a key is missing (and not required), probes at one store are taken
    to share one key.
    """
    from benchd.budget import plan_budgets
    from benchd.config.load import load_config
    from benchd.errors import ConfigError
    from benchd.kinds import register_kinds

    register_kinds()
    try:  # with the keys when they are there: probes that share one share its budget
        config = load_config(path)
    except ConfigError:
        if check_secrets:
            raise
        config = load_config(path, secrets=False)
    by_path = {str(c.path): c for c in checks if c.ok}
    sizes = {
        p.name: (by_path[str(p.fixture)].memories, by_path[str(p.fixture)].queries)
        for p in config.probes
        if str(p.fixture) in by_path
    }
    return [f"warning: {w}" for w in plan_budgets(config, sizes).warnings]


def guarantee_warnings(path: str | Path) -> list[str]:
    """One line per probe that lacks a guarantee benchd keeps for a namespace (its kind's
    declared capabilities), saying which."""
    from benchd.config.load import load_config
    from benchd.kinds import capabilities_of

    lines = []
    for probe in load_config(path, secrets=False).probes:
        caps = capabilities_of(probe.target.kind, probe.target.settings)
        who = f"warning: probe {probe.name!r} (kind {probe.target.kind})"
        if caps.decided_by:
            lines.append(f"{who}: its guarantees depend on {caps.decided_by}")
        elif caps.lacks():
            lines.append(f"{who} lacks: " + "; ".join(caps.lacks()))
    return lines


def unset_key_warnings(path: str | Path) -> list[str]:
    """Without ``--check-secrets``: one line per probe whose key variable is not set now,
    which ``run`` and ``once`` would refuse (``--check-secrets`` makes it a problem)."""
    import os

    from benchd.config.kinds import target_kinds
    from benchd.config.load import load_config

    lines = []
    for probe in load_config(path, secrets=False).probes:
        common = target_kinds()[probe.target.kind].common(probe.target.settings)
        env = common.api_key_env
        if env and not os.environ.get(env):
            lines.append(
                f"warning: probe {probe.name!r}: {env} ({common.secret_kind}) is not set; "
                "run and once refuse to start without it (--check-secrets checks it)"
            )
    return lines


def _config_check(args: argparse.Namespace) -> tuple[list[Path], list[str], str]:
    """The config's fixtures, its problems (every one) and its ok line."""
    from benchd.errors import ConfigError

    check_store = getattr(args, "check_store", False)
    try:
        fixtures, ok_line = config_fixtures(
            args.config, check_secrets=args.check_secrets or check_store
        )
        if check_store:
            problems = store_problems(args.config)
            if problems:
                return fixtures, problems, ""
    except ConfigError as exc:
        return [], list(exc.problems), ""
    return fixtures, [], ok_line


def store_problems(path: str | Path) -> list[str]:
    """What each probe's store says is wrong when asked what a cycle's ``info`` asks.

    One line per problem, ``FILE: probe NAME: what``: a store error (it cannot
    be reached, refuses the key) is one line; an error that carries several
    problems (an mcp tool map's mismatches) gives each its own line. These
    lines are the command's output (stdout), so the warnings a cycle's
    ``info`` phase logs about the same problems are not logged here: each
    problem is printed once.
    """
    import anyio

    from benchd.config.load import load_config
    from benchd.errors import TargetError
    from benchd.kinds import build_target
    from benchd.logging import configure_logging

    config = load_config(path)
    configure_logging("error")

    async def ask() -> list[str]:
        lines: list[str] = []
        for probe in config.probes:
            target = build_target(probe.target.kind, probe.target.settings, probe.target.secret)
            try:
                await target.info()
            except TargetError as exc:
                found = getattr(exc, "problems", None) or (str(exc),)
                lines.extend(f"{config.path}: probe {probe.name}: {line}" for line in found)
            finally:
                await target.aclose()
        return lines

    return anyio.run(ask)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def config_parts(probes: Sequence[ProbeConfig]) -> list[str]:
    """Baselines and adapters checked as ``once``, ``run`` and a reload build them."""
    import anyio

    from benchd.parts import check_parts  # not benchd.probe: no cycle, no numpy

    return anyio.run(check_parts, probes)


def run(args: argparse.Namespace) -> int:
    """Print the results for ``args.fixtures`` (and ``--config``); 2 if any problem, else 0."""
    paths: list[str | Path] = list(args.fixtures)
    config_problems: list[str] = []
    if args.config is None and not paths:  # nothing named: the config a run would find
        found = locate_config(None)
        if found.path is not None:
            found.announce()
            args.config = found.path
    if args.config is not None:
        fixtures, config_problems, config_ok = _config_check(args)
        paths = [*fixtures, *paths]
        if args.format == "text":
            print("\n".join(config_problems) or config_ok)
    elif not paths:
        raise UsageError(
            "validate: name at least one FIXTURE or --config FILE, or set $BENCHD_CONFIG or "
            "run where ./benchd.toml is (see benchd validate --help)"
        )
    checks = [_shown(c) for c in check_paths(paths)]
    if args.config is not None and not config_problems:
        warnings = budget_warnings(args.config, checks, check_secrets=args.check_secrets)
        unset = [] if args.check_secrets else unset_key_warnings(args.config)
        for line in [*warnings, *guarantee_warnings(args.config), *unset]:
            print(line, file=sys.stderr if args.format == "json" else sys.stdout)
    if args.format == "json":
        entries = [_as_json(c) for c in checks]
        if args.config is not None:
            entries.insert(0, _config_json(args.config, config_problems))
        print(json.dumps(entries, indent=2, ensure_ascii=False))
    else:
        for check in checks:
            for warning in check.warnings:
                print(warning)
            print("\n".join(check.problems) if check.problems else check.summary())
    failed = [c for c in checks if not c.ok]
    files = len(checks) + (args.config is not None)
    bad_files = len(failed) + bool(config_problems)
    if not bad_files:
        return EXIT_OK
    count = sum(len(c.problems) for c in failed) + len(config_problems)
    print(
        f"benchd validate: {_plural(count, 'problem')} in {bad_files} of {_plural(files, 'file')}",
        file=sys.stderr,
    )
    return EXIT_INPUT


def _config_json(path: str, problems: list[str]) -> dict[str, Any]:
    return {"path": str(path), "kind": "config", "ok": not problems, "problems": problems}
