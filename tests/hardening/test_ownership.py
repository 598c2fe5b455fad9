"""Ownership: benchd refuses a namespace holding records it did not write, unless adopted.

The refusal is one clear line with exit 3 from ``benchd once``, a failed
cycle of kind ``ownership`` in ``benchd run``, and in every case the foreign
records are left exactly as they were.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from drill_support import ENV, KEY, probe_toml, value, write_config, write_tiny_fixture
from support import BenchdProcess

from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import import_ok, make_config

NAMESPACE = "drill-owned"  # probe_toml names the namespace drill-<probe name>
FOREIGN = [
    {"id": "foreign-1", "content": "Quarterly payroll runs on the last Friday.", "type": "fact"},
    {"id": "foreign-2", "content": "The VPN certificate renews every ninety days.", "type": "fact"},
]


@pytest.fixture
def store() -> Iterator[RefStoreThread]:
    with RefStoreThread(make_config(api_key=KEY, retriever="bm25")) as thread:
        with httpx.Client(base_url=thread.url, headers={"x-api-key": KEY}) as client:
            records = [{**r, "client_id": NAMESPACE} for r in FOREIGN]
            assert import_ok(client, records)["imported"] == 2
        yield thread


def namespace_records(store: RefStoreThread) -> dict[str, dict[str, Any]]:
    reply = httpx.get(
        store.url + "/export", params={"client_id": NAMESPACE}, headers={"x-api-key": KEY}
    )
    return {str(m["id"]): m for m in reply.json()["memories"]}


def foreign_part(records: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {i: r for i, r in records.items() if i.startswith("foreign-")}


@pytest.fixture
def config(tmp_path: Path, store: RefStoreThread) -> Path:
    fixture = write_tiny_fixture(tmp_path / "tiny.json")
    return write_config(tmp_path, probe_toml("owned", store.url, fixture, interval=0.2))


def once(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", "once", "--config", str(config), *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **ENV},
    )


def test_once_refuses_a_foreign_namespace_with_one_line_and_exit_3(
    store: RefStoreThread, config: Path
) -> None:
    before = namespace_records(store)
    proc = once(config)
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "namespace" in line]
    assert len(lines) == 1
    assert f"'{NAMESPACE}'" in lines[0]
    assert "did not write" in lines[0] and "--adopt-namespace" in lines[0]
    assert namespace_records(store) == before  # nothing written, nothing deleted


def test_run_counts_the_refusal_as_an_ownership_failure_and_leaves_records_alone(
    store: RefStoreThread, config: Path
) -> None:
    before = namespace_records(store)
    with BenchdProcess(["--config", str(config)], env=ENV) as benchd:
        cycles = benchd.wait_cycles("owned", 2)
        assert {(e["outcome"], e["error_kind"]) for e in cycles} == {("failed", "ownership")}
        errors = benchd.samples("benchd_cycle_errors_total")
        assert value(errors, probe="owned", kind="ownership") >= 2
        assert value(benchd.samples("benchd_up"), probe="owned") == 0.0
        assert benchd.stop() == 0
    assert namespace_records(store) == before


def test_adopt_namespace_seeds_beside_foreign_records_without_touching_them(
    store: RefStoreThread, config: Path
) -> None:
    before = foreign_part(namespace_records(store))
    with BenchdProcess(["--config", str(config), "--adopt-namespace"], env=ENV) as benchd:
        first = benchd.wait_cycles("owned", 2)
        assert [e["outcome"] for e in first[:2]] == ["success", "success"]
        assert benchd.stop() == 0
    after = namespace_records(store)
    assert foreign_part(after) == before
    assert f"benchd-sentinel-{NAMESPACE}" in after
    # Marked now: a later run needs no flag.
    assert once(config).returncode == 0
    assert foreign_part(namespace_records(store)) == before
