"""The python kind keeps the promises: batch hooks under the namespace flow (#22 item 3)."""

from __future__ import annotations

import copy
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from benchd.config.load import ProbeConfig, parse_config
from benchd.kinds import build_target
from benchd.probe import ProbeRunner
from benchd.store.owned import OWNER_KEY, owned_id, sentinel_id

pytestmark = pytest.mark.anyio

MODULE = "benchd_test_shared_store"
SOURCE = '''
import threading

STORE = {}  # one backing store for every probe: ids global, like a shared collection
LOCK = threading.Lock()
DELETED = []


class Shared:
    """A retriever with batch hooks that keeps its namespace apart in the shared store."""

    def __init__(self, namespace):
        self.namespace = namespace

    def write(self, batch):
        with LOCK:
            for record in batch:
                STORE[record["id"]] = {**record, "namespace": self.namespace}

    def list(self, cursor):
        with LOCK:
            mine = sorted(k for k, v in STORE.items() if v["namespace"] == self.namespace)
        start = int(cursor or 0)
        page = [dict(STORE[k]) for k in mine[start : start + 3]]
        more = start + 3 < len(mine)
        return [{k: v for k, v in r.items() if k != "namespace"} for r in page], (
            str(start + 3) if more else None
        )

    def delete(self, record_id):
        with LOCK:
            DELETED.append((self.namespace, record_id))
            return STORE.pop(record_id, None) is not None

    def search(self, q, k):
        words = set(q.lower().split())
        with LOCK:
            mine = [v for v in STORE.values() if v["namespace"] == self.namespace]
        mine.sort(key=lambda r: (-len(words & set(r["content"].lower().split())), r["id"]))
        return [r["id"] for r in mine[:k]]


class IndexOnly:
    def index(self, memories):
        self.memories = memories

    def search(self, q, k):
        return [m["id"] for m in self.memories[:k]]
'''

MEMORIES = [{"id": f"m{i}", "content": f"note {i} about subject{i}"} for i in range(5)]
FOREIGN = {  # another tenant of the shared store: the fixture's ids and texts
    m["id"]: {"id": m["id"], "content": m["content"], "namespace": "someone-else"}
    for m in MEMORIES
}


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    (tmp_path / f"{MODULE}.py").write_text(textwrap.dedent(SOURCE))
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module(MODULE)
    module.STORE.update(copy.deepcopy(FOREIGN))
    yield module
    sys.modules.pop(MODULE, None)


def probes(tmp_path: Path, *names: str, factory: str = "Shared", **target: Any) -> list[Any]:
    fixture = tmp_path / "f.json"
    queries = [{"q": "subject1", "expected_ids": ["m1"]}, {"q": "subject3", "expected_ids": ["m3"]}]
    fixture.write_text(__import__("json").dumps({"memories": MEMORIES, "queries": queries}))
    tables = [
        {
            "name": name,
            "fixture": str(fixture),
            "k": [1, 3],
            "target": {"kind": "python", "factory": f"{MODULE}:{factory}", **target},
        }
        for name in names
    ]
    return list(parse_config({"probe": tables}, file="t.toml", base=tmp_path).probes)


def foreign_of(module: Any) -> dict[str, Any]:
    return {k: v for k, v in module.STORE.items() if k in FOREIGN}


def test_a_python_probe_s_namespace_derives_from_its_name(tmp_path: Path, shared: Any) -> None:
    first, second = probes(tmp_path, "alpha", "beta")
    assert (first.target.namespace, second.target.namespace) == ("benchd-alpha", "benchd-beta")


async def test_two_python_probes_on_one_shared_store_never_touch_each_other(
    tmp_path: Path, shared: Any
) -> None:
    """Concurrently, default settings, then shutdown: each keeps its own records only."""
    configs: list[ProbeConfig] = probes(tmp_path, "alpha", "beta")
    results: dict[str, Any] = {}

    async def run(probe: ProbeConfig) -> None:
        runner = ProbeRunner(probe)
        try:
            results[probe.name] = [await runner.run_once() for _ in range(3)]
            await runner.cleanup()
        finally:
            await runner.aclose()

    async with anyio.create_task_group() as tg:
        for probe in configs:
            tg.start_soon(run, probe)
    for name in ("alpha", "beta"):
        assert [r.outcome for r in results[name]] == ["success"] * 3, results[name][-1]
        seed = results[name][-1].seed
        assert (seed.verified, seed.missing) == (5, ())
        ns = f"benchd-{name}"
        held = {k for k, v in shared.STORE.items() if v["namespace"] == ns}
        assert held == {owned_id(ns, m["id"]) for m in MEMORIES} | {sentinel_id(ns)}
    assert foreign_of(shared) == FOREIGN
    assert shared.DELETED == []  # cleanup "never" (the default): nothing deleted


async def test_a_retrievers_delete_is_called_for_benchds_records_and_verified(
    tmp_path: Path, shared: Any
) -> None:
    (probe,) = probes(tmp_path, "alpha", cleanup="after")
    runner = ProbeRunner(probe)
    try:
        result = await runner.run_once()
        report = await runner.cleanup()
    finally:
        await runner.aclose()
    assert result.outcome == "success"
    ns = "benchd-alpha"
    expected = {owned_id(ns, m["id"]) for m in MEMORIES}
    # each cycle deletes its corpus after; shutdown deletes it again (none left) and the sentinel
    assert {i for n, i in shared.DELETED} == expected | {sentinel_id(ns)}
    assert all(n == ns for n, _ in shared.DELETED)
    assert report is not None and report.leftover == 0 and report.deleted == 1
    assert not any(v["namespace"] == ns for v in shared.STORE.values())  # verified: listed empty
    assert foreign_of(shared) == FOREIGN


async def test_the_lease_marks_the_sentinel_and_a_second_writer_is_refused(
    tmp_path: Path, shared: Any
) -> None:
    (probe,) = probes(tmp_path, "alpha")
    first, second = ProbeRunner(probe, instance="a"), ProbeRunner(probe, instance="b")
    try:
        assert (await first.run_once()).outcome == "success"
        refused = await second.run_once()
    finally:
        await first.aclose()
        await second.aclose()
    assert (refused.outcome, refused.error_kind) == ("failed", "ownership")
    mark = shared.STORE[sentinel_id("benchd-alpha")]["metadata"][OWNER_KEY]
    assert mark["instance"] == "a"


async def test_an_index_only_retriever_still_works_and_is_reported_unverified(
    tmp_path: Path, shared: Any
) -> None:
    (probe,) = probes(tmp_path, "old", factory="IndexOnly")
    runner = ProbeRunner(probe)
    with capture_logs() as logs:
        try:
            result = await runner.run_once()
        finally:
            await runner.aclose()
    assert result.outcome == "success"
    assert result.info is not None and any("not verified" in line for line in result.info.lacks)
    warnings = [e for e in logs if e["event"] == "python retriever unverified"]
    assert len(warnings) == 1 and "no listing" in warnings[0]["lacks"]


async def test_only_the_listing_a_keep_decision_reads_fingerprints_its_records(
    tmp_path: Path, shared: Any
) -> None:
    """The read-back that verifies a write leaves each record's ``kept`` None (nothing
    compares it); the next cycle's listing fingerprints them and keeps the corpus."""
    (probe,) = probes(tmp_path, "alpha")
    target = build_target("python", probe.target.settings, probe.target.secret)
    try:
        first = await target.seed(MEMORIES)  # written, then read back
        flow = await target.target()  # type: ignore[attr-defined]
        read_back = flow.namespace.fresh
        again = await target.seed(MEMORIES)  # the next cycle: its listing compares
        kept = flow.namespace.fresh
    finally:
        await target.aclose()
    corpus = [owned_id("benchd-alpha", m["id"]) for m in MEMORIES]
    assert (first.imported, first.verified) == (5, 5)
    assert [read_back.records[i].kept for i in corpus] == [None] * 5
    assert (again.imported, again.unchanged, again.verified) == (0, 5, 5)
    assert all(kept.records[i].kept is not None for i in corpus)
