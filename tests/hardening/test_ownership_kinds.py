"""The ownership matrix for the ``http`` and ``python`` kinds, on the same foreign tenants.

Both kinds run under the one namespace flow, so what holds for ``zengram``
(tests/hardening/test_ownership.py) holds for them: the foreign tenants of
:mod:`tenants_support` (the fixture's ids and texts, in ``global``, in
another tenant, and an owner's records) stay byte-identical through
``once``, ``run`` stopped by SIGTERM during seeding, and ``purge``. The
python probe's retriever (:mod:`refstore_retriever`) is plain glue over the
same store: whatever keeps the tenants safe comes from benchd, not from it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from drill_support import ENV, KEY, KEY_ENV, write_tiny_fixture
from support import BenchdProcess
from tenants_support import benchds, export, plant, snapshot

from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import refstore_fixture
from benchd.store.owned import sentinel_id

NAMESPACE = "drill-owned"
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RUN_ENV = {**ENV, "PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)}  # noqa: E501


store = refstore_fixture("store", api_key=KEY, retriever="bm25")


def _http(url: str, fixture: Path, cleanup: str) -> str:
    shipped = (REPO / "configs" / "http-zengram.toml").read_text()
    return (
        shipped.replace('"http://127.0.0.1:8084"', f'"{url}"')
        .replace('"BRAIN_API_KEY"', f'"{KEY_ENV}"')
        .replace('"packaged:smoke"', f'"{fixture}"')
        .replace('namespace = "benchd-eval"', f'namespace = "{NAMESPACE}"\nmax_retries = 3')
        .replace('cleanup = "before"', f'cleanup = "{cleanup}"\nsearchable_timeout_s = 1.0')
    )


def _python(url: str, fixture: Path, cleanup: str) -> str:
    return f"""
[[probe]]
name = "owned"
fixture = "{fixture}"
k = [1, 3]
interval_s = 60.0
timeout_s = 20.0

[probe.target]
kind = "python"
factory = "refstore_retriever:make"
options = {{ url = "{url}", key_env = "{KEY_ENV}" }}
namespace = "{NAMESPACE}"
cleanup = "{cleanup}"
searchable_timeout_s = 1.0
"""


def config_for(tmp_path: Path, kind: str, url: str, cleanup: str) -> Path:
    fixture = write_tiny_fixture(tmp_path / "tiny.json")
    text = (_http if kind == "http" else _python)(url, fixture, cleanup)
    path = tmp_path / "benchd.toml"
    path.write_text("[server]\nhistory = 5\n" + text, encoding="utf-8")
    return path


def benchd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **RUN_ENV},
    )


def ours(url: str) -> list[str]:
    return sorted(str(r["id"]) for r in export(url, KEY, NAMESPACE) if r["active"] and benchds(r))


KINDS = ["http", "python"]


@pytest.mark.parametrize("kind", KINDS)
def test_once_three_times_then_purge_leave_foreign_tenants_byte_identical(
    store: RefStoreThread, tmp_path: Path, kind: str
) -> None:
    plant(store.url, KEY)
    before = snapshot(store.url, KEY, NAMESPACE)
    config = config_for(tmp_path, kind, store.url, "never")
    for _ in range(3):
        proc = benchd("once", "--config", str(config))
        assert proc.returncode == 0, proc.stderr
    assert snapshot(store.url, KEY, NAMESPACE) == before
    assert sentinel_id(NAMESPACE) in ours(store.url)
    proc = benchd("purge", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    assert "deleted 6 benchd record(s) and 1 sentinel(s)" in proc.stdout
    assert ours(store.url) == []
    assert snapshot(store.url, KEY, NAMESPACE) == before


@pytest.mark.parametrize("kind", KINDS)
def test_once_refuses_a_namespace_benchd_did_not_write(
    store: RefStoreThread, tmp_path: Path, kind: str
) -> None:
    plant(store.url, KEY, NAMESPACE)
    before = snapshot(store.url, KEY, NAMESPACE)
    proc = benchd("once", "--config", str(config_for(tmp_path, kind, store.url, "after")))
    assert proc.returncode == 3, proc.stderr
    assert "did not write" in proc.stderr
    assert snapshot(store.url, KEY, NAMESPACE) == before and ours(store.url) == []


def _wait(predicate: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)  # polling another process's store, not synchronising


@pytest.mark.parametrize("kind", KINDS)
def test_sigterm_during_seeding_leaves_foreign_tenants_byte_identical(
    store: RefStoreThread, tmp_path: Path, kind: str
) -> None:
    plant(store.url, KEY)
    before = snapshot(store.url, KEY, NAMESPACE)
    config = config_for(tmp_path, kind, store.url, "after")
    admin = {"x-api-key": KEY}
    faults = {"faults": ["latency=fixed:300ms@import"]}
    httpx.post(store.url + "/admin/config", json=faults, headers=admin).raise_for_status()
    with BenchdProcess(["--config", str(config)], env=RUN_ENV) as run:
        _wait(lambda: sentinel_id(NAMESPACE) in ours(store.url))
        assert run.stop() == 0
    httpx.post(store.url + "/admin/config", json={"faults": []}, headers=admin).raise_for_status()
    assert snapshot(store.url, KEY, NAMESPACE) == before
    assert ours(store.url) == []  # its own records went, the sentinel last
