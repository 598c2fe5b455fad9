"""The reference store with ranking noise (its ``rank_swap`` fault): measured, and no false page.

Real parts: the reference store on loopback swapping one adjacent pair of
results in 30% of searches (seeded dice), a 50-query synthetic fixture, and
benchd's own ProbeRunner driving 31 cycles with the rolling window, as the
daemon does. The noise must be seen (``noise = "measured"``, rankings whose
overlap moves) and no cycle may be flagged as drift or as a model change —
the simulation in ``test_noise_sim.py`` puts the same rule through 1,000
cycles.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchd.commands.synth import write_synth
from benchd.config.load import load_config
from benchd.fixtures.synth import SynthSpec
from benchd.probe import ProbeRunner
from benchd.refstore.testing import started_refstore

CONFIG = """
[[probe]]
name = "noisy"
fixture = "synth.json"
k = [5, 10]
timeout_s = 120

[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "BENCHD_NOISY_KEY"
namespace = "benchd-noisy"
cleanup = "never"

[probe.load]
mode = "serial"

[probe.drift]
n_permutations = 2000
n_bootstrap = 200
"""


@pytest.mark.anyio
@pytest.mark.timeout(600)
async def test_a_store_with_rank_swap_noise_is_measured_and_never_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_synth(SynthSpec(memories=250, queries=50, seed=3), tmp_path / "synth.json")
    faults = ("rank_swap=0.3@search", "seed=7")
    with started_refstore(retriever="dense", faults=faults) as store:
        monkeypatch.setenv("BENCHD_NOISY_KEY", store.api_key)
        (tmp_path / "benchd.toml").write_text(CONFIG.format(url=store.url))
        probe = load_config(tmp_path / "benchd.toml").probes[0]
        runner = ProbeRunner(probe)
        try:
            results = [await runner.run_once() for _ in range(31)]
        finally:
            await runner.aclose()
    assert all(r.outcome == "success" for r in results), [r.error_message for r in results]
    outcomes = [r.drift for r in results[1:] if r.drift is not None]
    assert len(outcomes) == 30 and all(o.baseline == "rolling" for o in outcomes)
    assert {o.noise for o in outcomes[2:]} == {"measured"}
    overlaps = [o.change.overlap for o in outcomes if o.change is not None]
    assert min(overlaps) < 1.0  # the swaps are visible in the rankings
    assert not any(o.detected for o in outcomes), [o.metrics for o in outcomes if o.detected]
    assert not any(o.model_changed for o in outcomes)
