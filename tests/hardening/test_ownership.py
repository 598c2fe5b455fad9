"""Ownership: benchd writes, moves and deletes only what it can show is its own (DESIGN §2a).

Ids are global in the store (the reference store models the real server:
an import upserts by id and rewrites ``client_id``; a DELETE deletes
whoever holds the id), and the foreign tenants of :mod:`tenants_support`
hold the fixture's ids, its contents, and both, in ``global`` and in
another ``client_id``. Whatever benchd does — every cleanup mode, store
ids kept or assigned, a namespace refused or adopted, three cycles, then
shutdown — those tenants stay byte-identical.

The full matrix runs in-process (probe runners over loopback HTTP against
a reference store thread: a few seconds); ``benchd once`` and ``benchd
run`` as real processes cover the command paths and SIGTERM at each stage.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from drill_support import ENV, KEY, TINY_MEMORIES, probe_toml, write_config, write_tiny_fixture
from support import BenchdProcess
from tenants_support import benchds, export, owner_records, plant, snapshot

from benchd.config.load import load_config
from benchd.probe import ProbeRunner
from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import refstore_fixture
from benchd.store.owned import owned_id, sentinel_id

NAMESPACE = "drill-owned"  # probe_toml names the namespace drill-<probe name>
FIXTURE_IDS = sorted(mid for mid, _ in TINY_MEMORIES)


store = refstore_fixture("store", api_key=KEY, retriever="bm25")


def config_for(tmp_path: Path, url: str, extra: str = "", interval: float = 0.2) -> Path:
    fixture = write_tiny_fixture(tmp_path / "tiny.json")
    return write_config(
        tmp_path, probe_toml("owned", url, fixture, interval=interval, target_extra=extra)
    )


def ours(url: str) -> list[str]:
    return sorted(str(r["id"]) for r in export(url, KEY, NAMESPACE) if r["active"] and benchds(r))


def once(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", "once", "--config", str(config), *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **ENV},
    )


# -- the matrix, in-process ------------------------------------------------------------


@pytest.mark.parametrize("cleanup", ["before", "after", "never"])
@pytest.mark.parametrize("keep_ids", [True, False], ids=["keep_ids", "store_ids"])
@pytest.mark.parametrize("namespace", ["empty", "refused", "adopted"])
def test_foreign_tenants_stay_byte_identical_through_cycles_and_shutdown(
    store: RefStoreThread, tmp_path: Path, cleanup: str, keep_ids: bool, namespace: str
) -> None:
    plant(store.url, KEY, NAMESPACE if namespace != "empty" else None)
    before = snapshot(store.url, KEY, NAMESPACE)
    extra = f'cleanup = "{cleanup}"\nkeep_ids = {str(keep_ids).lower()}\n'
    if namespace == "adopted":
        extra += "adopt_namespace = true\n"
    os.environ.update(ENV)
    probe = load_config(config_for(tmp_path, store.url, extra)).probes[0]

    async def cycles() -> list[object]:
        runner = ProbeRunner(probe)
        try:
            results = [await runner.run_once() for _ in range(3)]
            await runner.cleanup()  # what SIGTERM runs
        finally:
            await runner.aclose()
        return results

    results = anyio.run(cycles)
    assert snapshot(store.url, KEY, NAMESPACE) == before
    outcomes = {(r.outcome, r.error_kind) for r in results}  # type: ignore[attr-defined]
    if namespace == "refused":
        assert outcomes == {("failed", "ownership")}
        assert ours(store.url) == []  # refused: not even a sentinel
        return
    # An adopted namespace's owner holds the ferry text: benchd's copy is skipped (below).
    assert outcomes == {("degraded" if namespace == "adopted" else "success", None)}
    last = results[-1]
    if namespace == "adopted":
        assert last.degraded_reasons == ("seed_incomplete",)  # type: ignore[attr-defined]
    seed = last.seed  # type: ignore[attr-defined]
    # The owner's record with the ferry text makes the store skip benchd's copy
    # (same text, tenant and type): reported missing, and never claimed as benchd's.
    missing = ("mem-harbor",) if namespace == "adopted" else ()
    assert seed.missing == missing
    by_query = {q.id: q for q in last.queries}  # type: ignore[attr-defined]
    if namespace == "adopted":
        assert by_query["q-ferry"].ranked_ids[0] == "!own-ferry"  # non-relevant, never mapped
        assert by_query["q-ferry"].metrics["hit@1"] == 0.0
    assert all(by_query[q].metrics["hit@1"] == 1.0 for q in ("q-quartz", "q-violin", "q-orbit"))
    left = ours(store.url)
    if cleanup == "after":
        assert left == []  # the cycles deleted the corpus; shutdown the sentinel
    else:
        assert len(left) == 7 - len(missing)  # the corpus and the sentinel
    if keep_ids:
        expected = {owned_id(NAMESPACE, i) for i in FIXTURE_IDS} | {sentinel_id(NAMESPACE)}
        assert set(left) <= expected


def test_a_result_benchd_did_not_write_scores_as_non_relevant_even_with_a_fixture_id(
    store: RefStoreThread, tmp_path: Path
) -> None:
    """A record carrying a bare fixture id in benchd's (adopted) namespace is not benchd's."""
    records = [{"id": "mem-quartz", "content": TINY_MEMORIES[1][1], "client_id": NAMESPACE}]
    httpx.post(
        store.url + "/export/import",
        json={"data": records, "operator_approved": True},
        headers={"x-api-key": KEY},
    ).raise_for_status()
    os.environ.update(ENV)
    probe = load_config(
        config_for(tmp_path, store.url, 'adopt_namespace = true\ncleanup = "before"\n')
    ).probes[0]

    async def one() -> object:
        runner = ProbeRunner(probe)
        try:
            return await runner.run_once()
        finally:
            await runner.aclose()

    result = anyio.run(one)
    quartz = next(q for q in result.queries if q.id == "q-quartz")  # type: ignore[attr-defined]
    # The owner's copy (same text, another type, so the store kept both) is "!mem-quartz".
    assert set(quartz.ranked_ids[:2]) == {"!mem-quartz", "mem-quartz"}
    assert quartz.ranked_ids.count("mem-quartz") == 1
    assert [r["id"] for r in export(store.url, KEY, NAMESPACE) if r["id"] == "mem-quartz"]


# -- the commands, as real processes -------------------------------------------------


def test_three_once_runs_leave_foreign_tenants_byte_identical(
    store: RefStoreThread, tmp_path: Path
) -> None:
    plant(store.url, KEY)
    before = snapshot(store.url, KEY, NAMESPACE)
    config = config_for(tmp_path, store.url, 'cleanup = "after"\n')
    for _ in range(3):
        proc = once(config)
        assert proc.returncode == 0, proc.stderr
    assert snapshot(store.url, KEY, NAMESPACE) == before


def test_once_refuses_a_foreign_namespace_with_one_line_and_exit_3(
    store: RefStoreThread, tmp_path: Path
) -> None:
    plant(store.url, KEY, NAMESPACE)
    before = snapshot(store.url, KEY, NAMESPACE)
    proc = once(config_for(tmp_path, store.url, 'cleanup = "after"\n'))
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "namespace" in line]
    assert len(lines) == 1
    assert f"'{NAMESPACE}'" in lines[0]
    assert "did not write" in lines[0] and "adopt_namespace" in lines[0]
    assert snapshot(store.url, KEY, NAMESPACE) == before
    assert ours(store.url) == []


def _set(url: str, **admin: object) -> None:
    httpx.post(url + "/admin/config", json=admin, headers={"x-api-key": KEY}).raise_for_status()


def _wait(predicate: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)  # polling another process's store, not synchronising


@pytest.mark.parametrize(
    "moment", ["before-first-cycle", "during-seeding", "during-load", "after-refusal"]
)
def test_sigterm_at_any_moment_of_run_leaves_foreign_tenants_byte_identical(
    store: RefStoreThread, tmp_path: Path, moment: str
) -> None:
    """``cleanup = "after"``: shutdown deletes only what this process wrote and listed."""
    plant(store.url, KEY, NAMESPACE if moment == "after-refusal" else None)
    before = snapshot(store.url, KEY, NAMESPACE)
    load = '[probe.load]\nmode = "open"\nrate = 20.0\nduration_s = 30.0\n'
    config = config_for(tmp_path, store.url, 'cleanup = "after"\n', interval=60.0)
    config.write_text(config.read_text() + load)
    if moment == "before-first-cycle":
        _set(store.url, faults=["latency=fixed:1s@export"])
    if moment == "during-seeding":
        _set(store.url, faults=["latency=fixed:300ms@import"])
    with BenchdProcess(["--config", str(config)], env=ENV) as benchd:
        if moment == "during-seeding":
            _wait(lambda: sentinel_id(NAMESPACE) in ours(store.url))
        elif moment == "during-load":
            _wait(lambda: len(ours(store.url)) == 7)
        elif moment == "after-refusal":
            benchd.wait_cycles("owned", 1)
        assert benchd.stop() == 0
    _set(store.url, faults=[])
    assert snapshot(store.url, KEY, NAMESPACE) == before
    if moment == "after-refusal":
        assert [r["id"] for r in export(store.url, KEY, NAMESPACE)] == [
            r["id"] for r in owner_records(NAMESPACE)
        ]
    else:
        assert ours(store.url) == []  # its own records went, the sentinel last


def test_adopt_namespace_seeds_beside_foreign_records_without_touching_them(
    store: RefStoreThread, tmp_path: Path
) -> None:
    plant(store.url, KEY, NAMESPACE)
    before = snapshot(store.url, KEY, NAMESPACE)
    config = config_for(tmp_path, store.url)
    args = ["--config", str(config), "--adopt-namespace", NAMESPACE]
    with BenchdProcess(args, env=ENV) as benchd:
        first = benchd.wait_cycles("owned", 2)
        # degraded: the owner holds the ferry text, so the store skipped benchd's copy
        assert [e["outcome"] for e in first[:2]] == ["degraded", "degraded"]
        assert benchd.stop() == 0
    assert snapshot(store.url, KEY, NAMESPACE) == before
    assert sentinel_id(NAMESPACE) in ours(store.url)
    # Marked now: a later run needs no flag (it is degraded, not refused: the ferry text).
    proc = once(config)
    assert "did not write" not in proc.stderr
    assert "degraded: seed_incomplete" in proc.stderr
    assert snapshot(store.url, KEY, NAMESPACE) == before
