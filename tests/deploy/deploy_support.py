"""Shared helpers for the deploy/ tests: paths, external tools, YAML, the catalogue."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

__all__ = [
    "DEPLOY",
    "DOCS",
    "PROMETHEUS_DIR",
    "ROOT",
    "alert_rules",
    "catalogue_metrics",
    "load_yaml",
    "metric_names",
    "require_tool",
    "rule_groups",
]

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCS = ROOT / "docs"
PROMETHEUS_DIR = DEPLOY / "prometheus"

# PromQL identifiers that are metric names: benchd's own and recorded series
# (level:metric:operations). Function names never contain "benchd_" or ":".
_BENCHD_NAME = re.compile(r"\b(?:[a-z_]+:)?benchd_[a-z0-9_]+(?::[a-z0-9_]+)?\b")
_CATALOGUE_ROW = re.compile(r"^\|\s*`(benchd_[a-z0-9_]+)`\s*\|\s*([a-z]+)", re.MULTILINE)
_HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


def require_tool(name: str) -> str:
    """The path of an executable from Debian's ``prometheus`` package.

    Missing in CI (``CI=true``) is a failure, since CI installs it; elsewhere
    the test is skipped with the install command.
    """
    path = shutil.which(name) or (
        f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").is_file() else None
    )
    if path is None:
        hint = "apt-get install --no-install-recommends prometheus"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is missing in CI: {hint} (scripts/test.sh does it)")
        pytest.skip(f"{name} is not installed ({hint})")
    return path


def load_yaml(path: Path) -> Any:
    """Parse one YAML document."""
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def rule_groups(path: Path) -> list[dict[str, Any]]:
    """The ``groups`` of a Prometheus rule file."""
    groups: list[dict[str, Any]] = load_yaml(path)["groups"]
    return groups


def alert_rules(path: Path = PROMETHEUS_DIR / "alerts.yml") -> list[dict[str, Any]]:
    """Every alerting rule of a rule file, in file order."""
    return [rule for group in rule_groups(path) for rule in group["rules"] if "alert" in rule]


def metric_names(expr: str) -> set[str]:
    """benchd metric names and recorded series named in a PromQL expression."""
    return set(_BENCHD_NAME.findall(expr))


def catalogue_metrics() -> set[str]:
    """Every series name docs/metrics.md documents, with a histogram's suffixed series."""
    rows = _CATALOGUE_ROW.findall((DOCS / "metrics.md").read_text(encoding="utf-8"))
    names = {name for name, _ in rows}
    histograms = [name for name, kind in rows if kind == "histogram"]
    return names | {h + suffix for h in histograms for suffix in _HISTOGRAM_SUFFIXES}
