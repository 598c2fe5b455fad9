"""``benchd once`` says in one short line when a key's budget does not fit the schedule."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from benchd.budget import plan_budgets
from benchd.commands.once import budget_lines
from benchd.config.load import Config, parse_config

CONFIG = """
[[probe]]
name = "staging"
fixture = "packaged:smoke"
interval_s = {interval}

[probe.target]
kind = "zengram"
url = "http://127.0.0.1:8084"
api_key_env = "BENCHD_BUDGET_KEY"
namespace = "benchd-eval"
cleanup = "never"

[probe.budget]
reads_per_min = {reads}
writes_per_min = 60
"""


def _config(interval: float, reads: int) -> Config:
    data = tomllib.loads(CONFIG.format(interval=interval, reads=reads))
    return parse_config(data, file="benchd.toml", base=Path("."))


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHD_BUDGET_KEY", "budget-key-0001")


def test_an_overrun_schedule_is_one_short_line() -> None:
    config = _config(interval=10.0, reads=120)  # 60 queries a minute... six times over
    plan = plan_budgets(config, {"staging": (36, 60)})
    assert plan.warnings  # what validate and the daemon print in full
    (line,) = budget_lines(plan, "benchd.toml")
    assert line.startswith("benchd: budget: this cycle sends ")
    assert "reads/min of 120" in line and "benchd validate -c benchd.toml" in line
    assert "\n" not in line and len(line) <= 250
    assert len(line) < min(len(w) for w in plan.warnings)


def test_a_cycle_above_one_window_says_it_waits() -> None:
    plan = plan_budgets(_config(interval=300.0, reads=30), {"staging": (36, 60)})
    (line,) = budget_lines(plan, "benchd.toml")
    assert "and waits on 429s" in line


def test_a_schedule_that_fits_prints_nothing() -> None:
    plan = plan_budgets(_config(interval=300.0, reads=120), {"staging": (36, 16)})
    assert plan.warnings == () and budget_lines(plan, "benchd.toml") == []
