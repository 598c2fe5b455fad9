"""Ownership over a probe's life: shutdown leftovers, interrupted re-seeds, the sentinel's
result slot, and records left by an earlier benchd version.

Real reference stores on loopback (a thread, or ``benchd run`` as a process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from drill_support import ENV, KEY, TINY_MEMORIES, probe_toml, write_config, write_tiny_fixture
from support import BenchdProcess
from tenants_support import FOREIGN, benchds, export, owner_records, plant, snapshot

from benchd.config.load import load_config
from benchd.errors import ConfigError
from benchd.probe import CleanupReport, ProbeRunner
from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import make_config, refstore_fixture
from benchd.store.owned import legacy_sentinel_id, owned_id, sentinel_id
from benchd.surfacers.prometheus import BookCollector
from benchd.surfacers.result_book import ResultBook
from benchd.surfacers.status import status_document

NAMESPACE = "drill-owned"


store = refstore_fixture("store", api_key=KEY, retriever="bm25")


def _post(url: str, path: str, body: Any) -> Any:
    reply = httpx.post(url + path, json=body, headers={"x-api-key": KEY}, timeout=10)
    reply.raise_for_status()
    return reply.json()


def _probe(tmp_path: Path, url: str, extra: str = "", *, fixture: Path | None = None) -> Any:
    fixture = fixture or write_tiny_fixture(tmp_path / "tiny.json")
    os.environ.update(ENV)
    path = write_config(tmp_path, probe_toml("owned", url, fixture, target_extra=extra))
    return load_config(path).probes[0]


def _ours(url: str) -> list[str]:
    return sorted(str(r["id"]) for r in export(url, KEY, NAMESPACE) if r["active"] and benchds(r))


def test_the_sentinel_never_costs_a_result_slot_even_when_the_store_ranks_it_first(
    tmp_path: Path,
) -> None:
    with RefStoreThread(make_config(api_key=KEY, retriever="hybrid")) as store:
        _ranked_with_the_sentinel_pinned(store, tmp_path)


def _ranked_with_the_sentinel_pinned(store: RefStoreThread, tmp_path: Path) -> None:
    _post(store.url, "/admin/config", {"pin": [sentinel_id(NAMESPACE)]})
    probe = _probe(tmp_path, store.url)  # k = [1, 3]; dense search always fills k

    async def one() -> Any:
        runner = ProbeRunner(probe)
        try:
            await runner.run_once()  # seeds (and writes the sentinel)
            return await runner.run_once()
        finally:
            await runner.aclose()

    result = anyio.run(one)
    params = {"q": "harbor ferry pier", "client_id": NAMESPACE, "limit": 3, "format": "index"}
    reply = httpx.get(store.url + "/memory/search", params=params, headers={"x-api-key": KEY})
    assert reply.json()["results"][0]["id"] == sentinel_id(NAMESPACE)  # the store puts it first
    for query in result.queries:
        assert len(query.ranked_ids) == 3  # k results, none of them the sentinel
        assert not any(i.startswith("!") for i in query.ranked_ids)


def test_an_interrupted_cleanup_before_is_completed_by_the_next_cycle(
    store: RefStoreThread, tmp_path: Path
) -> None:
    plant(store.url, KEY)
    before = snapshot(store.url, KEY, NAMESPACE)
    probe = _probe(tmp_path, store.url, 'cleanup = "before"\nseed_concurrency = 1\n')

    async def interrupted() -> Any:
        first = ProbeRunner(probe)
        try:
            await first.run_once()
        finally:
            await first.aclose()
        _post(store.url, "/admin/config", {"faults": ["latency=fixed:150ms@delete"]})
        second = ProbeRunner(probe)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(second.run_once)
                # until the first delete of the corpus has landed (the heartbeat's own
                # delete-then-import of the sentinel, by a restart holding its token, is none)
                while len(set(_ours(store.url)) - {sentinel_id(NAMESPACE)}) == 6:
                    await anyio.sleep(0.01)  # polling the store, not synchronising
                tg.cancel_scope.cancel()  # what SIGTERM does to a running cycle
        finally:
            await second.aclose()
        # A delete the cancelled cycle had sent is still waiting out its 150 ms at the store
        # (the server finishes it whatever the client does): one sent now, with the same
        # fixed latency, is answered after it, so the next cycle does not race it.
        reply = httpx.delete(
            f"{store.url}/memory/not-a-record", headers={"x-api-key": KEY}, timeout=10
        )
        assert reply.status_code == 404
        half = len(_ours(store.url))
        _post(store.url, "/admin/config", {"faults": []})
        third = ProbeRunner(probe)
        try:
            return half, await third.run_once()
        finally:
            await third.aclose()

    half, result = anyio.run(interrupted)
    assert 0 < half < 7  # the corpus was left half-deleted
    assert result.outcome == "success" and result.seed.verified == len(TINY_MEMORIES)
    expected = {owned_id(NAMESPACE, m) for m, _ in TINY_MEMORIES} | {sentinel_id(NAMESPACE)}
    assert set(_ours(store.url)) == expected  # exactly one copy of each
    assert snapshot(store.url, KEY, NAMESPACE) == before


def test_records_of_an_earlier_version_are_migrated_only_where_its_sentinel_proves_them(
    store: RefStoreThread, tmp_path: Path
) -> None:
    ns, other = NAMESPACE, "drill-old-foreign"
    old = [
        {"id": mid, "content": text, "type": "fact", "client_id": ns}
        for mid, text in TINY_MEMORIES[:3]
    ]
    legacy = {
        "id": legacy_sentinel_id(ns),
        "type": "fact",
        "client_id": ns,
        "content": f"benchd sentinel: client_id {ns} is reserved for benchd's probe corpus",
    }
    theirs = [{"id": "their-note", "content": "unrelated", "client_id": other}]
    _post(store.url, "/export/import", {"data": [*old, legacy, *theirs], "operator_approved": True})
    untouched = json.dumps(export(store.url, KEY, other), sort_keys=True)
    probe = _probe(tmp_path, store.url, 'cleanup = "never"\n')

    async def one() -> Any:
        runner = ProbeRunner(probe)
        try:
            return await runner.run_once()
        finally:
            await runner.aclose()

    result = anyio.run(one)
    assert result.outcome == "success" and result.seed.verified == len(TINY_MEMORIES)
    active = {str(r["id"]) for r in export(store.url, KEY, ns) if r["active"]}
    expected = {owned_id(ns, m) for m, _ in TINY_MEMORIES} | {sentinel_id(ns)}
    assert active == expected  # bare ids and the old sentinel are gone
    assert json.dumps(export(store.url, KEY, other), sort_keys=True) == untouched


def test_bare_fixture_ids_without_the_old_sentinel_are_not_benchds(
    store: RefStoreThread, tmp_path: Path
) -> None:
    records = [{"id": TINY_MEMORIES[0][0], "content": "x", "client_id": NAMESPACE}]
    _post(store.url, "/export/import", {"data": records, "operator_approved": True})
    probe = _probe(tmp_path, store.url, 'cleanup = "after"\n')

    async def one() -> Any:
        runner = ProbeRunner(probe)
        try:
            result = await runner.run_once()
            await runner.cleanup()
            return result
        finally:
            await runner.aclose()

    result = anyio.run(one)
    assert (result.outcome, result.error_kind) == ("failed", "ownership")
    assert [r["id"] for r in export(store.url, KEY, NAMESPACE)] == [TINY_MEMORIES[0][0]]


def test_shutdown_cleanup_removes_everything_benchd_wrote_including_the_sentinel(
    store: RefStoreThread, tmp_path: Path
) -> None:
    plant(store.url, KEY)
    before = snapshot(store.url, KEY, NAMESPACE)
    probe = _probe(tmp_path, store.url, 'cleanup = "after"\n')

    async def one() -> CleanupReport | None:
        runner = ProbeRunner(probe)
        try:
            await runner.run_once()
            return await runner.cleanup(grace_s=30.0)
        finally:
            await runner.aclose()

    report = anyio.run(one)
    assert report is not None and (report.leftover, report.timed_out) == (0, False)
    assert report.deleted == 1  # the cycle deleted the corpus; shutdown the sentinel
    assert _ours(store.url) == []
    assert snapshot(store.url, KEY, NAMESPACE) == before


def test_a_shutdown_past_its_grace_logs_and_reports_what_it_left(
    store: RefStoreThread, tmp_path: Path
) -> None:
    memories = [
        {"id": f"n-{i}", "type": "fact", "content": f"note number {i} about topic {i * 7}"}
        for i in range(30)
    ]
    queries = [{"id": "q", "q": "note number 3", "expected_ids": ["n-3"]}]
    fixture = tmp_path / "thirty.json"
    fixture.write_text(json.dumps({"memories": memories, "queries": queries}))
    load = '[probe.load]\nmode = "open"\nrate = 5.0\nduration_s = 30.0\n'
    extra = 'cleanup = "after"\nseed_concurrency = 1\n'
    config = write_config(
        tmp_path,
        probe_toml("owned", store.url, fixture, interval=60.0, timeout=60.0, target_extra=extra)
        + load,
        server="shutdown_grace_s = 1.0\n",
    )
    with BenchdProcess(["--config", str(config)], env=ENV) as benchd:
        while len(_ours(store.url)) < 31:  # seeded; the load pass runs for 30 s
            anyio.run(anyio.sleep, 0.02)  # polling the store, not synchronising
        _post(store.url, "/admin/config", {"faults": ["latency=fixed:300ms@delete"]})
        assert benchd.stop(timeout=30) == 0
        event = benchd.wait_for(lambda e: e.get("event") == "cleanup incomplete")
    _post(store.url, "/admin/config", {"faults": []})
    left = len(_ours(store.url))
    assert left > 0
    assert (event["probe"], event["namespace"]) == ("owned", NAMESPACE)
    # what is still there (a delete in flight when the grace ran out may still land)
    assert left <= event["leftover_records"] <= left + 1
    assert "benchd purge" in event["fix"]


def test_leftovers_show_in_status_and_metrics() -> None:
    book = ResultBook()
    book.set_probes(["owned"])
    book.cleanup("owned", CleanupReport(NAMESPACE, 3, 17, True), 1_700_000_000.0)
    doc = status_document(book)
    assert doc["cleanup"]["owned"]["leftover_records"] == 17
    assert doc["cleanup"]["owned"]["namespace"] == NAMESPACE
    families = {f.name: f for f in BookCollector(book).collect()}
    sample = families["benchd_cleanup_leftover_records"].samples[0]
    assert (sample.labels, sample.value) == ({"probe": "owned"}, 17.0)


def test_foreign_tenants_hold_what_the_fixture_holds() -> None:
    """The hostile tenants really collide with the fixture (ids and texts), or the
    ownership tests would prove nothing."""
    texts = dict(TINY_MEMORIES)
    assert sum(r["id"] in texts for r in FOREIGN) == 4
    assert sum(r["content"] in texts.values() for r in FOREIGN) == 4


def test_two_probes_on_one_namespace_of_one_store_are_a_config_error(tmp_path: Path) -> None:
    fixture = write_tiny_fixture(tmp_path / "tiny.json")
    url = "http://127.0.0.1:9"
    one = probe_toml("a", url, fixture)
    two = probe_toml("b", url, fixture).replace('namespace = "drill-b"', 'namespace = "drill-a"')
    path = write_config(tmp_path, one, two)
    os.environ.update(ENV)
    with pytest.raises(ConfigError, match=r"probes 'a' and 'b' both use namespace 'drill-a'"):
        load_config(path)


def test_adopt_namespace_names_one_namespace_and_a_reload_never_inherits_it(
    store: RefStoreThread, tmp_path: Path
) -> None:
    """Adopted at start: only the named namespace; a probe a reload adds is refused."""
    fixture = write_tiny_fixture(tmp_path / "tiny.json")
    plant(store.url, KEY, NAMESPACE)
    theirs = "drill-tenant"
    tenant = [{**r, "id": "tenant-" + r["id"]} for r in owner_records(theirs)]  # ids are global
    _post(store.url, "/export/import", {"data": tenant, "operator_approved": True})
    tenant_before = json.dumps(export(store.url, KEY, theirs), sort_keys=True)
    first = probe_toml("owned", store.url, fixture, interval=0.2)
    config = write_config(tmp_path, first)
    args = ["--config", str(config), "--adopt-namespace", NAMESPACE]
    with BenchdProcess(args, env=ENV) as benchd:
        benchd.wait_cycles("owned", 1)
        adopted = benchd.wait_for(lambda e: e.get("event") == "namespace adopted")
        assert (adopted["namespace"], adopted["foreign_records"]) == (NAMESPACE, 2)
        config.write_text(
            config.read_text() + probe_toml("tenant", store.url, fixture, interval=0.2)
        )
        assert benchd.post("/-/reload").status_code == 200
        cycles = benchd.wait_cycles("tenant", 1)
        assert (cycles[0]["outcome"], cycles[0]["error_kind"]) == ("failed", "ownership")
        assert benchd.stop() == 0
    assert json.dumps(export(store.url, KEY, theirs), sort_keys=True) == tenant_before


def test_adopting_a_namespace_no_probe_uses_is_a_usage_error(tmp_path: Path) -> None:
    fixture = write_tiny_fixture(tmp_path / "tiny.json")
    config = write_config(tmp_path, probe_toml("owned", "http://127.0.0.1:9", fixture))
    proc = subprocess.run(
        [sys.executable, "-m", "benchd", "once", "-c", str(config), "--adopt-namespace", "nope"],
        capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **ENV},
    )  # fmt: skip
    assert proc.returncode == 2
    assert "--adopt-namespace nope: no probe" in proc.stderr and "Traceback" not in proc.stderr
