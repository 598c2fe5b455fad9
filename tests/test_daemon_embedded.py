"""``Daemon`` embedded in a caller's event loop: ``started``, push surfacers, ``stop()``.

The daemon runs in-process beside the reference store (both on loopback);
the test waits on the daemon's ``started`` event and on a push surfacer's
event, never on a sleep.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import pytest

from benchd.config.load import load_config
from benchd.daemon import Daemon
from benchd.refstore.config import RefStoreConfig
from benchd.refstore.server import running_refstore
from benchd.result import CycleResult

pytestmark = pytest.mark.anyio
KEY = "embedded-daemon-key-31337"
BOUND_S = 120  # a bound against a hung test, never a timing assertion


class FirstCycle:
    """A push surfacer that keeps what it is handed and says when the first arrived."""

    def __init__(self) -> None:
        self.results: list[CycleResult] = []
        self.arrived = anyio.Event()

    def write(self, result: CycleResult) -> None:
        self.results.append(result)
        self.arrived.set()


def config_file(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "benchd.toml"
    path.write_text(
        f"""
[[probe]]
name = "embedded"
fixture = "packaged:smoke"
interval_s = 3600
jitter_s = 0.0

[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "EMBEDDED_KEY"
namespace = "benchd-embedded"
cleanup = "after"
searchable_timeout_s = 2.0
""",
        encoding="utf-8",
    )
    return path


async def test_started_is_set_once_serving_and_stop_runs_cleanup_and_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBEDDED_KEY", KEY)
    store_config = RefStoreConfig(
        api_key=KEY, retriever="bm25", read_limit_per_min=0, write_limit_per_min=0
    )
    sink = FirstCycle()
    async with running_refstore(store_config) as store:
        config = load_config(config_file(tmp_path, store.url))
        daemon = Daemon(config, listen="127.0.0.1:0", surfacers=[sink])
        with anyio.fail_after(BOUND_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(daemon.run)
                await daemon.started.wait()
                async with httpx.AsyncClient(base_url=daemon.url) as client:
                    assert (await client.get("/healthz")).status_code == 200
                    await sink.arrived.wait()  # the first cycle runs at once
                    metrics = (await client.get("/metrics")).text
                assert 'benchd_up{probe="embedded"} 1.0' in metrics
                daemon.stop()
            # run() has returned: the task group could exit. Shutdown ran the probe's
            # cleanup = "after": nothing of benchd's is left, the sentinel went last.
        async with httpx.AsyncClient(base_url=store.url, headers={"x-api-key": KEY}) as raw:
            listed = await raw.get("/export", params={"client_id": "benchd-embedded"})
    assert [r.outcome for r in sink.results] == ["success"]
    assert listed.json()["memories"] == []
