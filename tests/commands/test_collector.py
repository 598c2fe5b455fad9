"""The collector's settings while a command runs cycles: applied by once and run, undone after,
and a daemon's reloads never add to what start-up froze."""

from __future__ import annotations

import gc
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from support import BenchdProcess

from benchd.cli import main
from benchd.commands.collector import YOUNG_THRESHOLD, for_cycles
from benchd.probe import ProbeRunner
from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import refstore_fixture

KEY = "collector-key-97531"

# Loaded by the daemon's interpreter before benchd: every gc.freeze and gc.unfreeze
# is said on stderr as a JSON event, with the frozen count and the thresholds.
SITECUSTOMIZE = """
import gc, json, sys

def _said(name, call):
    def wrapped():
        before = gc.get_freeze_count()
        call()
        event = {"event": "gc." + name, "before": before, "after": gc.get_freeze_count()}
        print(json.dumps(event), file=sys.stderr, flush=True)
    return wrapped

gc.freeze = _said("freeze", gc.freeze)
gc.unfreeze = _said("unfreeze", gc.unfreeze)
"""


store = refstore_fixture("store", scope="module", api_key=KEY, retriever="bm25")


def config(tmp_path: Path, url: str, interval_s: float = 3600.0) -> Path:
    path = tmp_path / "benchd.toml"
    path.write_text(f"""
[[probe]]
name = "gc"
fixture = "packaged:smoke"
interval_s = {interval_s}
[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "GC_KEY"
namespace = "benchd-gc"
max_retries = 0
""")
    return path


def reloads(daemon: BenchdProcess) -> int:
    return sum(1 for e in list(daemon.events) if e.get("event") == "reloaded")


def test_within_the_threshold_is_raised_and_what_lived_is_frozen() -> None:
    before = (gc.get_threshold(), gc.get_freeze_count())
    alive = [object() for _ in range(3)]  # untracked, but their list is tracked
    with for_cycles():
        assert gc.get_threshold()[0] >= YOUNG_THRESHOLD
        assert gc.get_threshold()[1:] == before[0][1:]
        assert gc.get_freeze_count() > before[1]
        assert not any(o is alive for o in gc.get_objects())  # in no collected generation
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
    assert any(o is alive for o in gc.get_objects())


def test_a_freeze_made_before_entry_is_neither_added_to_nor_released() -> None:
    host = [object()]  # tracked: frozen by the host below
    gc.freeze()
    try:
        later = [object()]  # made after the host's freeze: must stay collectable
        threshold = gc.get_threshold()
        with for_cycles():
            assert gc.get_threshold()[0] >= YOUNG_THRESHOLD
            assert any(o is later for o in gc.get_objects())
        assert gc.get_threshold() == threshold
        assert gc.get_freeze_count() > 0
        assert not any(o is host for o in gc.get_objects())  # still frozen
    finally:
        gc.unfreeze()


def test_once_keeps_a_freeze_its_host_process_made(
    store: RefStoreThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GC_KEY", KEY)
    host = [object()]
    gc.freeze()
    try:
        assert main(["once", "--config", str(config(tmp_path, store.url)), "-f", "json"]) == 0
        assert not any(o is host for o in gc.get_objects())
    finally:
        gc.unfreeze()
    assert any(o is host for o in gc.get_objects())


def test_once_runs_its_cycles_with_the_settings_and_undoes_them(
    store: RefStoreThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GC_KEY", KEY)
    seen: list[tuple[int, int]] = []
    run_once = ProbeRunner.run_once

    async def watched(self: Any, **kwargs: Any) -> Any:
        seen.append((gc.get_threshold()[0], gc.get_freeze_count()))
        return await run_once(self, **kwargs)

    monkeypatch.setattr(ProbeRunner, "run_once", watched)
    before = (gc.get_threshold(), gc.get_freeze_count())
    assert main(["once", "--config", str(config(tmp_path, store.url)), "-f", "json"]) == 0
    ((threshold, frozen),) = seen
    assert threshold >= YOUNG_THRESHOLD
    assert frozen > before[1]
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


def test_a_reloading_daemon_freezes_once_and_its_frozen_set_does_not_grow(
    store: RefStoreThread, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    env = {"GC_KEY": KEY, "PYTHONPATH": path}
    with BenchdProcess(["--config", str(config(tmp_path, store.url))], env=env) as daemon:
        frozen = daemon.wait_for(lambda e: e.get("event") == "gc.freeze")
        assert frozen["after"] > frozen["before"]
        daemon.wait_cycles("gc", 1)
        for n in (1, 2, 3):  # a changed probe: its fixture loaded and its runner built anew
            config(tmp_path, store.url, interval_s=3600.0 + n)
            daemon.signal(signal.SIGHUP)
            daemon.wait_for(lambda _, n=n: reloads(daemon) == n)
        assert daemon.stop() == 0
    events = [e for e in daemon.events if str(e.get("event", "")).startswith("gc.")]
    assert [e["event"] for e in events] == ["gc.freeze", "gc.unfreeze"], json.dumps(events)
    # after three reloads: no more than start-up froze (what of it was dropped, refcounting freed)
    assert events[1]["before"] <= frozen["after"]
    assert events[1]["after"] == 0
