"""``benchd run`` as a real process: endpoints, scheduling, reload and shutdown."""

from __future__ import annotations

import itertools
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support import BenchdProcess

from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import make_config, refstore_fixture

KEY = "daemon-test-key-987654"
ENV = {"DAEMON_KEY": KEY}


store = refstore_fixture("store", scope="module", api_key=KEY, retriever="bm25")


@pytest.fixture(scope="module")
def stalled_store() -> Iterator[RefStoreThread]:
    config = make_config(api_key=KEY, retriever="bm25", faults=("latency=fixed:5s@search",))
    with RefStoreThread(config) as thread:
        yield thread


def probe_toml(
    name: str,
    url: str,
    *,
    interval: float = 0.5,
    timeout: float = 20.0,
    cleanup: str = "before",
    extra: str = "",
) -> str:
    return f"""
[[probe]]
name = "{name}"
fixture = "packaged:smoke"
k = [5, 10]
interval_s = {interval}
timeout_s = {timeout}
jitter_s = 0.0
{extra}
[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "DAEMON_KEY"
namespace = "benchd-{name}"
cleanup = "{cleanup}"
searchable_timeout_s = 2.0
"""


def write(tmp_path: Path, *probes: str) -> Path:
    path = tmp_path / "benchd.toml"
    path.write_text("[server]\nhistory = 5\n" + "".join(probes))
    return path


def export_ids(store: RefStoreThread, client_id: str) -> list[str]:
    response = httpx.get(
        store.url + "/export", params={"client_id": client_id}, headers={"x-api-key": KEY}
    )
    return [m["id"] for m in response.json()["memories"]]


def test_endpoints_serve_metrics_status_and_readiness(
    store: RefStoreThread, tmp_path: Path
) -> None:
    config = write(tmp_path, probe_toml("alpha", store.url, interval=30.0))
    with BenchdProcess(["--config", str(config)], env=ENV) as benchd:
        assert benchd.get("/healthz").status_code == 200
        benchd.wait_cycles("alpha", 1)
        assert benchd.get("/readyz").status_code == 200
        landing = benchd.get("/").text
        for link in ("metrics", "api/status", "healthz", "readyz"):
            assert f'href="{link}"' in landing
        assert [v for _, v in benchd.samples("benchd_up")] == [1.0]
        recall = [
            v
            for labels, v in benchd.samples("benchd_quality")
            if labels["metric"] == "recall" and labels["k"] == "10" and labels["pass"] == "serial"
        ]
        assert recall and 0.0 < recall[0] <= 1.0
        status = benchd.get("/api/status").json()
        assert status["probes"]["alpha"]["last"]["outcome"] == "success"
        assert KEY not in benchd.get("/metrics").text + benchd.get("/api/status").text
        assert benchd.stop() == 0
    assert KEY not in "".join(benchd.lines)


def test_a_hanging_probe_never_delays_another(
    store: RefStoreThread, stalled_store: RefStoreThread, tmp_path: Path
) -> None:
    config = write(
        tmp_path,
        probe_toml("fast", store.url, interval=0.3),
        probe_toml("stuck", stalled_store.url, interval=0.3, timeout=8.0),
    )
    with BenchdProcess(["--config", str(config)], env=ENV) as benchd:
        benchd.wait_cycles("fast", 3, timeout=20)
        # fast finished three cycles while stuck still hangs in its first (8 s timeout)
        assert benchd.cycles("stuck") == []
        stuck = benchd.wait_cycles("stuck", 1, timeout=20)[0]
        assert stuck["outcome"] == "timeout"
        outcomes = {
            (lbl["probe"], lbl["outcome"]): v for lbl, v in benchd.samples("benchd_cycles_total")
        }
        assert outcomes[("stuck", "timeout")] >= 1
        assert outcomes[("fast", "success")] >= 3
        assert benchd.stop() == 0


def test_cycles_of_one_probe_never_overlap(store: RefStoreThread, tmp_path: Path) -> None:
    # interval far below the cycle's own duration: cycles must run back to back.
    config = write(tmp_path, probe_toml("busy", store.url, interval=0.01))
    with BenchdProcess(["--config", str(config)], env=ENV) as benchd:
        cycles = benchd.wait_cycles("busy", 3, timeout=30)
        assert [c["cycle"] for c in cycles[:3]] == [1, 2, 3]
        for earlier, later in itertools.pairwise(cycles):
            assert later["started_at"] >= earlier["finished_at"]
        assert benchd.stop() == 0


def test_reload_applies_a_good_config_and_keeps_the_old_on_a_bad_one(
    store: RefStoreThread, tmp_path: Path
) -> None:
    config = write(tmp_path, probe_toml("one", store.url, interval=30.0))
    with BenchdProcess(["--config", str(config)], env=ENV) as benchd:
        benchd.wait_cycles("one", 1)
        config.write_text(config.read_text() + "\nbogus = 1\n")
        benchd.signal(signal.SIGHUP)
        benchd.wait_for(lambda e: e.get("event") == "reload failed")
        assert benchd.samples("benchd_config_last_reload_successful")[0][1] == 0.0
        assert {lbl["probe"] for lbl, _ in benchd.samples("benchd_up")} == {"one"}

        write(tmp_path, probe_toml("two", store.url, interval=30.0))
        response = benchd.post("/-/reload")
        assert response.status_code == 200, response.text
        assert benchd.samples("benchd_config_last_reload_successful")[0][1] == 1.0
        benchd.wait_cycles("two", 1)
        assert {lbl["probe"] for lbl, _ in benchd.samples("benchd_up")} == {"two"}
        assert benchd.stop() == 0


def test_sigterm_stops_cleanly_and_runs_cleanup_after(
    store: RefStoreThread, tmp_path: Path
) -> None:
    config = write(tmp_path, probe_toml("tidy", store.url, interval=30.0, cleanup="after"))
    with BenchdProcess(["--config", str(config)], env=ENV) as benchd:
        benchd.wait_cycles("tidy", 1)
        assert benchd.stop() == 0
    remaining = export_ids(store, "benchd-tidy")
    assert remaining == []  # the corpus, then the sentinel: nothing left behind


def test_a_bad_config_at_startup_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[server]\nlisten = 'nowhere'\n")
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "benchd", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2
    assert "server.listen" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.anyio
async def test_a_probe_that_cannot_be_built_closes_the_runners_built_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed start or reload leaks no connection pools of the probes already built."""
    from benchd import daemon as daemon_module
    from benchd.config.load import load_config
    from benchd.daemon import Daemon
    from benchd.errors import FixtureError
    from benchd.probe import ProbeRunner

    built: list[ProbeRunner] = []

    class Recording(ProbeRunner):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            built.append(self)

    monkeypatch.setattr(daemon_module, "ProbeRunner", Recording)
    monkeypatch.setenv("DAEMON_KEY", KEY)
    bad = tmp_path / "bad.json"
    config = write(
        tmp_path,
        probe_toml("good", "http://127.0.0.1:9"),
        probe_toml("bad", "http://127.0.0.1:9").replace("packaged:smoke", str(bad)),
    )
    bad.write_text("{ not json", encoding="utf-8")
    probes = load_config(config).probes
    with pytest.raises(FixtureError):
        await Daemon._prepare(probes)
    assert [r.probe.name for r in built] == ["good"]
    assert built[0]._closed
