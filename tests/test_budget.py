"""Budget planning: per API key, shared by its probes and replicas, warned about with numbers."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest
from support import BenchdProcess

from benchd.budget import Budget, budget_of, cycle_cost, own_share, own_write_share, plan_budgets
from benchd.config.budget import BudgetSettings
from benchd.config.load import Config, ProbeConfig, TargetConfig, parse_config
from benchd.config.secrets import Secret
from benchd.errors import ConfigError
from benchd.fixtures.model import packaged_fixture
from benchd.kinds.zengram import ZengramConfig
from benchd.load import LoadProfile

REPO = Path(__file__).resolve().parents[1]
SMOKE = (36, 16)  # memories, queries of the packaged smoke fixture


def probe(name: str, key: str = "k-1", **target: object) -> ProbeConfig:
    settings = ZengramConfig(url="http://127.0.0.1:8084", namespace=f"benchd-{name}", **target)  # type: ignore[arg-type]
    return ProbeConfig(
        name=name,
        fixture=packaged_fixture("smoke"),
        target=TargetConfig("zengram", settings, Secret(key, "api_key_env KEY")),
        interval_s=300.0,
    )


def config(*probes: ProbeConfig) -> Config:
    return Config(path="test.toml", server=None, probes=probes)  # type: ignore[arg-type]


def test_cleanup_modes_cost_what_they_send() -> None:
    p = probe("a", cleanup="before")
    # a steady-state zengram cycle re-writes its lease: the sentinel deleted + re-imported
    assert cycle_cost(p, *SMOKE, read_rate=2.0).writes == {"sentinel": 2, "import": 1, "delete": 36}
    never = probe("a", cleanup="never")
    assert cycle_cost(never, *SMOKE, read_rate=2.0).total_writes == 2
    assert cycle_cost(never, *SMOKE, read_rate=2.0, first=True).writes == {
        "sentinel": 1, "import": 1, "delete": 0,
    }  # fmt: skip
    reads = cycle_cost(never, *SMOKE, read_rate=2.0).reads
    assert reads == {"export": 2, "searchable": 1, "serial": 16, "load": 0, "lease": 1}


def test_a_large_kept_corpus_reads_its_lease_in_one_request() -> None:
    never = probe("a", cleanup="never")
    reads = cycle_cost(never, 100_000, 100, read_rate=2.0).reads
    assert (reads["export"], reads["lease"]) == (2 * 201, 1)  # not a 201-page listing


def test_a_load_pass_costs_its_share_of_the_read_budget() -> None:
    closed = dataclasses.replace(
        probe("a"), load=LoadProfile(mode="closed", concurrency=4, duration_s=15.0)
    )
    assert cycle_cost(closed, *SMOKE, read_rate=2.0).reads["load"] == 30  # 120/min over 15 s


def test_probes_sharing_a_key_and_replicas_split_its_read_budget() -> None:
    budget = BudgetSettings(reads_per_min=120, writes_per_min=60, replicas=3)
    a, b = (dataclasses.replace(probe(n, cleanup="never"), budget=budget) for n in ("a", "b"))
    other = probe("c", key="k-2")
    plan = plan_budgets(config(a, b, other), dict.fromkeys(("a", "b", "c"), SMOKE))
    assert plan.read_rates["a"] == plan.read_rates["b"] == 120 / 60 / 6
    assert plan.read_rates["c"] == 2.0  # another key: a budget of its own
    assert len(plan.keys) == 2 and plan.warnings == ()


def test_deletes_are_spaced_to_each_probes_share_of_the_write_budget() -> None:
    budget = BudgetSettings(reads_per_min=120, writes_per_min=60, replicas=3)
    a, b = (dataclasses.replace(probe(n, cleanup="after"), budget=budget) for n in ("a", "b"))
    other = probe("c", key="k-2")
    unlimited = dataclasses.replace(probe("u", key="k-3"), budget=BudgetSettings(unlimited=True))
    sizes = dict.fromkeys(("a", "b", "c", "u"), SMOKE)
    plan = plan_budgets(config(a, b, other, unlimited), sizes)
    assert plan.write_rates == {"a": 60 / 60 / 6, "b": 60 / 60 / 6, "c": 1.0}  # u: not spaced
    assert own_write_share(other) == 1.0  # the kind's default, 60 writes a minute, alone
    assert own_write_share(unlimited) is None


def test_a_cycle_that_cannot_finish_within_its_timeout_is_named() -> None:
    big = dataclasses.replace(probe("big", cleanup="before"), timeout_s=60.0)
    plan = plan_budgets(config(big), {"big": (600, 16)})  # 600 deletes + 2 imports + 2 lease writes
    assert any(
        "one cycle of probe 'big' sends up to 604 writes" in w and "timeout_s = 60" in w
        for w in plan.warnings
    )


def test_daemon_start_up_logs_the_budget_warning(tmp_path: Path) -> None:
    path = tmp_path / "benchd.toml"
    path.write_text(
        "".join(
            f"""
[[probe]]
name = "{name}"
fixture = "packaged:smoke"
interval_s = 30.0
[probe.target]
kind = "zengram"
url = "http://127.0.0.1:9"
api_key_env = "BUDGET_KEY"
namespace = "benchd-{name}"
cleanup = "before"
max_retries = 0
"""
            for name in ("alpha", "beta")
        ),
        encoding="utf-8",
    )
    env = {"BUDGET_KEY": "budget-daemon-key-77"}
    with BenchdProcess(["--config", str(path)], env=env) as benchd:
        event = benchd.wait_for(lambda e: e.get("event") == "budget")
    assert event.get("level", event.get("log_level")) == "warning", event
    assert "156.0 writes/min of writes_per_min = 60" in event["warning"]
    assert "budget-daemon-key-77" not in "\n".join(benchd.lines)


def test_three_replicas_cleaning_up_every_cycle_overspend_one_window() -> None:
    budget = BudgetSettings(replicas=3)
    a = dataclasses.replace(probe("a", cleanup="before"), budget=budget)
    (warning,) = plan_budgets(config(a), {"a": SMOKE}).warnings
    assert "one cycle of probe 'a' sends up to 117 writes against writes_per_min = 60" in warning


def test_an_open_rate_above_the_read_share_is_named() -> None:
    fast = dataclasses.replace(
        probe("a", cleanup="never"), load=LoadProfile(mode="open", rate=20.0, duration_s=10.0)
    )
    (warning,) = plan_budgets(config(fast), {"a": SMOKE}).warnings
    assert "load.rate = 20/s, above its share of the read budget (2.00/s)" in warning


def _no_warnings(cfg: Config) -> tuple[str, ...]:
    from benchd.fixtures.model import load_fixture

    sizes = {}
    for p in cfg.probes:
        fixture = load_fixture(p.fixture)
        sizes[p.name] = (len(fixture.memories), len(fixture.queries))
    return plan_budgets(cfg, sizes).warnings


def test_the_starter_config_fits_the_real_servers_budgets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchd.commands.init import render_starter
    from benchd.config.load import load_config

    monkeypatch.setenv("BRAIN_API_KEY", "starter-key-1234")
    path = tmp_path / "benchd.toml"
    path.write_text(render_starter(), encoding="utf-8")
    cfg = load_config(path)
    assert cfg.probes[0].target.settings.cleanup == "never"
    assert _no_warnings(cfg) == ()


def test_the_systemd_config_fits_the_real_servers_budgets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchd.config.load import load_config

    monkeypatch.setenv("BENCHD_TARGET_URL", "http://127.0.0.1:8084")
    monkeypatch.setenv("BENCHD_NAMESPACE", "benchd-unit")
    (tmp_path / "api-key").write_text("unit-test-key\n", encoding="utf-8")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    cfg = load_config(REPO / "deploy" / "systemd" / "benchd.toml")
    assert _no_warnings(cfg) == ()


def busy(p: ProbeConfig) -> ProbeConfig:
    """``p`` on a schedule far past the Zengram API's 120 reads a minute."""
    load = LoadProfile(mode="closed", concurrency=4, duration_s=60.0)
    return dataclasses.replace(p, interval_s=60.0, load=load)


def test_a_store_without_limits_gets_no_warning_and_no_pacing_while_zengram_still_does() -> None:
    control = busy(probe("z", key="k-1"))
    unlimited = dataclasses.replace(
        busy(probe("u", key="k-2")), budget=BudgetSettings(unlimited=True)
    )
    plan = plan_budgets(config(control, unlimited), {"z": SMOKE, "u": SMOKE})
    assert [key.probes for key in plan.keys] == [("z",)]  # only the limited key is planned
    assert plan.warnings and all("probes z;" in w for w in plan.warnings)
    assert "reads_per_min = 120" in " ".join(plan.warnings)  # the kind's default, unsaid
    assert plan.read_rates == {"z": 2.0}  # u is absent: its load pass is not paced
    assert own_share(unlimited) is None and own_share(control) == 2.0
    assert budget_of(unlimited) is None


def parsed(target: dict[str, object], **probe_keys: object) -> ProbeConfig:
    doc = {"probe": [{"name": "p", "fixture": "packaged:smoke", "target": target, **probe_keys}]}
    (one,) = parse_config(doc, file="t.toml", base=REPO, secrets=False).probes
    return one


def test_each_kind_declares_its_default_budget() -> None:
    assert budget_of(probe("z")) == Budget(reads_per_min=120, writes_per_min=60, replicas=1)
    shipped = tomllib.loads((REPO / "configs" / "http-zengram.toml").read_text())
    (http_probe,) = shipped["probe"]
    assert http_probe["budget"] == {"reads_per_min": 120, "writes_per_min": 60}  # explicit
    http = parsed(http_probe["target"])  # the same store, the kind's default budget
    assert budget_of(http) == budget_of(probe("z"))  # http keeps today's
    python = {"kind": "python", "factory": "benchd.examples.retrievers:bm25"}
    assert budget_of(parsed(python)) is None  # python: none
    declared = parsed(python, budget={"reads_per_min": 600, "replicas": 2})
    assert budget_of(declared) == Budget(reads_per_min=600, writes_per_min=None, replicas=2)
    assert budget_of(parsed(http_probe["target"], budget={"unlimited": True})) is None


def test_unlimited_beside_declared_limits_is_a_config_error(tmp_path: Path) -> None:
    doc = {
        "probe": [
            {
                "name": "p",
                "fixture": "packaged:smoke",
                "target": {"kind": "python", "factory": "benchd.examples.retrievers:bm25"},
                "budget": {"unlimited": True, "reads_per_min": 120},
            }
        ]
    }
    with pytest.raises(ConfigError) as caught:
        parse_config(doc, file="t.toml", base=tmp_path)
    (problem,) = caught.value.problems
    assert problem.startswith("t.toml: probe[0].budget: unlimited = true says the store")


def test_unlimited_beside_limits_on_one_key_is_a_config_error() -> None:
    limited = probe("a", key="k-1")
    unlimited = dataclasses.replace(probe("b", key="k-1"), budget=BudgetSettings(unlimited=True))
    with pytest.raises(ConfigError) as caught:
        plan_budgets(config(limited, unlimited), {"a": SMOKE, "b": SMOKE})
    (problem,) = caught.value.problems
    assert "probe 'b' has [probe.budget] unlimited = true but probe 'a'" in problem
    assert "reads_per_min = 120, writes_per_min = 60, replicas = 1" in problem
    both = dataclasses.replace(limited, budget=BudgetSettings(unlimited=True))
    assert plan_budgets(config(both, unlimited), {"a": SMOKE, "b": SMOKE}).keys == ()
