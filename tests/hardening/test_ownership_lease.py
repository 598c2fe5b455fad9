"""One writer per namespace: the lease in the sentinel, read-only measuring beside a live
daemon, and replicas in their own namespaces that never move each other's records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from drill_support import ENV, KEY, TINY_MEMORIES, probe_toml, write_config, write_tiny_fixture
from support import BenchdProcess
from tenants_support import export, plant, snapshot

from benchd.config.load import load_config
from benchd.probe import ProbeRunner
from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import refstore_fixture
from benchd.store.lease import OBSERVED
from benchd.store.owned import OWNER_KEY, owned_id, sentinel_id

NAMESPACE = "drill-owned"


store = refstore_fixture("store", api_key=KEY, retriever="bm25")


def _config(tmp_path: Path, url: str, *, instance: str, extra: str = "", **kw: Any) -> Path:
    fixture = write_tiny_fixture(tmp_path / "tiny.json")
    directory = tmp_path / instance
    directory.mkdir(exist_ok=True)
    return write_config(
        directory,
        probe_toml("owned", url, fixture, target_extra=extra, **kw),
        server=f'instance = "{instance}"\n',
    )


def _cycle(config: Path, *, release: bool = False, **runner: Any) -> Any:
    """One cycle in this process; ``release``: then hand the lease back, as a daemon's stop."""
    os.environ.update(ENV)
    loaded = load_config(config)

    async def one() -> Any:
        r = ProbeRunner(loaded.probes[0], instance=loaded.server.instance, **runner)
        try:
            result = await r.run_once()
            if release:
                await r.release_lease()
            return result
        finally:
            await r.aclose()

    return anyio.run(one)


def _lease(url: str) -> dict[str, Any]:
    sentinel = next(r for r in export(url, KEY, NAMESPACE) if r["id"] == sentinel_id(NAMESPACE))
    lease: dict[str, Any] = sentinel["metadata"][OWNER_KEY]
    return lease


def test_a_second_instance_is_refused_naming_the_holder_and_writes_nothing(
    store: RefStoreThread, tmp_path: Path
) -> None:
    first = _cycle(_config(tmp_path, store.url, instance="pod-0", interval=60.0))
    assert first.outcome == "success"
    before = json.dumps(export(store.url, KEY, NAMESPACE), sort_keys=True)
    second = _cycle(_config(tmp_path, store.url, instance="pod-1"))
    assert (second.outcome, second.error_kind) == ("failed", "ownership")
    assert "leased by benchd instance 'pod-0'" in second.error_message
    assert json.dumps(export(store.url, KEY, NAMESPACE), sort_keys=True) == before


def test_a_restart_takes_its_lease_over_at_once_with_the_token_of_its_state_directory(
    store: RefStoreThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCHD_STATE_DIR", str(tmp_path / "state"))
    config = _config(tmp_path, store.url, instance="pod-0", interval=60.0)
    assert _cycle(config).outcome == "success"
    first = _lease(store.url)
    assert _cycle(config).outcome == "success"  # a new process: the same token, from the file
    lease = _lease(store.url)
    assert lease["instance"] == "pod-0" and lease["token"] == first["token"]
    assert lease["heartbeat"] > first["heartbeat"]
    monkeypatch.setenv("BENCHD_STATE_DIR", str(tmp_path / "twin"))  # another container
    assert _cycle(config).error_kind == "ownership"


def test_a_stale_lease_is_taken_over_once_seen_unchanged_for_its_ttl(
    store: RefStoreThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(OBSERVED, "clock", lambda: clock[0])
    assert _cycle(_config(tmp_path, store.url, instance="pod-0")).outcome == "success"
    sentinel = next(
        r for r in export(store.url, KEY, NAMESPACE) if r["id"] == sentinel_id(NAMESPACE)
    )
    mark = {**sentinel["metadata"][OWNER_KEY], "heartbeat": time.time() - 3600, "ttl_s": 60}
    stale = {
        "id": sentinel["id"], "type": "fact", "client_id": NAMESPACE,
        "content": sentinel["content"] + " (stale)", "metadata": {OWNER_KEY: mark},
    }  # fmt: skip
    httpx.post(
        store.url + "/export/import",
        json={"data": [stale], "operator_approved": True},
        headers={"x-api-key": KEY},
    ).raise_for_status()
    other = _config(tmp_path, store.url, instance="pod-1")
    # an hour-old heartbeat by this clock means nothing: first seen now, it is live
    assert _cycle(other).error_kind == "ownership"
    clock[0] += 59
    assert _cycle(other).error_kind == "ownership"
    clock[0] += 1
    taken = _cycle(other)
    assert taken.outcome == "success", taken.error_message
    assert _lease(store.url)["instance"] == "pod-1"


def test_once_beside_a_live_daemon_measures_read_only_and_writes_nothing(
    store: RefStoreThread, tmp_path: Path
) -> None:
    plant(store.url, KEY)
    daemon_config = _config(
        tmp_path, store.url, instance="pod-0", interval=600.0, extra='cleanup = "before"\n'
    )
    once_config = _config(tmp_path, store.url, instance="ci", extra='cleanup = "after"\n')
    with BenchdProcess(["--config", str(daemon_config)], env=ENV) as benchd:
        assert benchd.wait_cycles("owned", 1)[0]["outcome"] == "success"
        before = json.dumps(export(store.url, KEY, NAMESPACE), sort_keys=True)
        foreign = snapshot(store.url, KEY, NAMESPACE)
        proc = _once(once_config)
        assert proc.returncode == 0, proc.stderr
        assert "leased by live benchd instance 'pod-0'" in proc.stderr
        assert "read-only (wrote and deleted nothing)" in proc.stderr
        assert json.dumps(export(store.url, KEY, NAMESPACE), sort_keys=True) == before
        assert snapshot(store.url, KEY, NAMESPACE) == foreign
        assert "AGGREGATE" in proc.stdout  # it did measure
        assert benchd.stop() == 0


def test_once_beside_a_live_daemon_with_another_corpus_refuses_in_one_line(
    store: RefStoreThread, tmp_path: Path
) -> None:
    daemon_config = _config(tmp_path, store.url, instance="pod-0", interval=600.0)
    assert _cycle(daemon_config).outcome == "success"  # a live lease (600 s interval)
    other = tmp_path / "other.json"
    doc = json.loads((tmp_path / "tiny.json").read_text())
    doc["memories"][0]["content"] += " Changed."
    other.write_text(json.dumps(doc))
    once_config = _config(tmp_path, store.url, instance="ci")
    once_config.write_text(once_config.read_text().replace(str(tmp_path / "tiny.json"), str(other)))
    before = json.dumps(export(store.url, KEY, NAMESPACE), sort_keys=True)
    proc = _once(once_config)
    assert proc.returncode == 3
    lines = [line for line in proc.stderr.splitlines() if "leased by" in line]
    assert len(lines) == 1 and "another corpus" in lines[0], proc.stderr
    assert json.dumps(export(store.url, KEY, NAMESPACE), sort_keys=True) == before


def _once(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", "once", "--config", str(config)],
        capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **ENV},
    )  # fmt: skip


def test_two_replicas_in_two_namespaces_never_move_each_others_records(
    store: RefStoreThread, tmp_path: Path
) -> None:
    """Same fixture, two namespaces, concurrently: each export holds exactly its own."""
    plant(store.url, KEY)
    foreign = snapshot(store.url, KEY, NAMESPACE)
    fixture = write_tiny_fixture(tmp_path / "tiny.json")
    configs = []
    for replica in ("a", "b"):
        directory = tmp_path / replica
        directory.mkdir()
        toml = probe_toml(  # never: a stable corpus, so any record that moved would show
            f"replica-{replica}", store.url, fixture, interval=0.1, target_extra='cleanup = "never"'
        )
        configs.append(write_config(directory, toml, server=f'instance = "pod-{replica}"\n'))
    with (
        BenchdProcess(["--config", str(configs[0])], env=ENV) as a,
        BenchdProcess(["--config", str(configs[1])], env=ENV) as b,
    ):
        cycles = {"a": a.wait_cycles("replica-a", 4), "b": b.wait_cycles("replica-b", 4)}
        assert a.stop() == 0 and b.stop() == 0
    for replica, events in cycles.items():
        ns = f"drill-replica-{replica}"
        ids = sorted(str(r["id"]) for r in export(store.url, KEY, ns) if r["active"])
        assert ids == sorted([owned_id(ns, m) for m, _ in TINY_MEMORIES] + [sentinel_id(ns)])
        assert {e["outcome"] for e in events} == {"success"}  # every cycle verified all six
        assert {e["hit@1"] for e in events} == {1.0}  # scores as it does alone
    assert snapshot(store.url, KEY, NAMESPACE) == foreign


def _purge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", "purge", *args],
        capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **ENV},
    )  # fmt: skip


def test_purge_empties_the_namespace_of_benchds_records_only_sentinel_last(
    store: RefStoreThread, tmp_path: Path
) -> None:
    plant(store.url, KEY, NAMESPACE)  # an owner's records in the namespace, adopted below
    foreign = snapshot(store.url, KEY, NAMESPACE)
    config = _config(
        tmp_path, store.url, instance="pod-0", extra='cleanup = "never"\nadopt_namespace = true\n'
    )
    # the owner holds the ferry text; the lease is handed back as a stopped daemon does (a
    # live one, even of this instance name, refuses purge: see test_ownership_keys)
    assert _cycle(config, release=True).outcome == "degraded"
    proc = _purge("--config", str(config))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (
        f"probe owned: namespace {NAMESPACE!r}: deleted 5 benchd record(s) and 1 sentinel(s); "
        "left 2 record(s) benchd did not write"
    )
    assert [
        r for r in export(store.url, KEY, NAMESPACE) if r["active"] and "benchd" in r["id"]
    ] == []
    assert snapshot(store.url, KEY, NAMESPACE) == foreign


def test_purge_of_a_live_leased_namespace_is_refused_unless_forced(
    store: RefStoreThread, tmp_path: Path
) -> None:
    assert _cycle(_config(tmp_path, store.url, instance="pod-0", interval=600.0)).outcome
    args = ["--namespace", NAMESPACE, "--url", store.url, "--api-key-env", "DRILL_STORE_KEY"]
    refused = _purge(*args)
    assert refused.returncode == 3
    assert "leased by live benchd instance 'pod-0'" in refused.stderr
    assert "--force" in refused.stderr and "Traceback" not in refused.stderr
    assert len([r for r in export(store.url, KEY, NAMESPACE) if r["active"]]) == 7
    forced = _purge(*args, "--force")
    assert forced.returncode == 0, forced.stderr
    assert "deleted 6 benchd record(s) and 1 sentinel(s)" in forced.stdout
    assert [r for r in export(store.url, KEY, NAMESPACE) if r["active"]] == []
