"""Fields the real server keys across tenants, and the lease beside the daemon on its own host.

Against the reference store in its ``zengram-4.3`` profile over loopback:
facts upserted by ``key`` (else the content hash) and statuses by
``subject`` (else ``unknown``) into tables that ignore ``client_id``, no
``GET /memory/{id}``, and a listing cursor cut to milliseconds (DESIGN §2).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from drill_support import ENV, KEY, TINY_MEMORIES, TINY_QUERIES, probe_toml, write_config
from support import BenchdProcess
from tenants_support import export

from benchd.config.secrets import Secret
from benchd.errors import OwnershipError
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.refstore.records import content_hash
from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import make_config
from benchd.store.lease import LeaseHolder
from benchd.store.owned import OWNER_KEY, owned_id, sentinel_id

TEXT = dict(TINY_MEMORIES)
# What the fixture says about each memory besides its text: the fields the server keys.
SHAPES: dict[str, dict[str, str]] = {
    "mem-harbor": {"type": "fact", "key": "ferry-schedule"},
    "mem-quartz": {"type": "fact"},  # no key: the server would key it by its content hash
    "mem-violin": {"type": "status", "subject": "workshop"},
    "mem-glacier": {"type": "status"},  # no subject: the server would file it under 'unknown'
    "mem-bakery": {"type": "event"},
    "mem-orbit": {"type": "fact", "key": "satellite"},
}
# Another tenant's facts and statuses under exactly those keys and subjects.
FOREIGN = [
    {"content": "Ferries are cancelled in storms.", "type": "fact", "key": "ferry-schedule"},
    {"content": TEXT["mem-quartz"], "type": "fact"},  # the same text: the same content hash
    {"content": "The workshop is closed in August.", "type": "status", "subject": "workshop"},
    {"content": "Nobody knows yet.", "type": "status"},
    {"content": "The satellite was launched in 2019.", "type": "fact", "key": "satellite"},
]


@pytest.fixture
def store() -> Iterator[RefStoreThread]:
    config = make_config(api_key=KEY, retriever="bm25", profile="zengram-4.3", import_pacing=0.0)
    with RefStoreThread(config) as thread:
        yield thread


def _fixture(path: Path) -> Path:
    doc = {
        "memories": [
            {"id": mid, "content": text, "created_at": "2026-01-05T10:00:00.000123Z", **SHAPES[mid]}
            for mid, text in TINY_MEMORIES
        ],
        "queries": [{"id": qid, "q": q, "expected_ids": [mid]} for qid, q, mid in TINY_QUERIES],
    }
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _config(tmp_path: Path, url: str, *names: str, server: str = "", **kw: Any) -> Path:
    fixture = _fixture(tmp_path / "keyed.json")
    probes = [probe_toml(name, url, fixture, **kw) for name in names]
    return write_config(tmp_path, *probes, server=server)


def _get(url: str, path: str, **params: Any) -> Any:
    reply = httpx.get(url + path, params=params, headers={"x-api-key": KEY}, timeout=10)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _rows(url: str, kind: str, **params: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = _get(url, "/memory/query", type=kind, limit=500, **params)[
        "results"
    ]
    return rows


def _plant(url: str) -> None:
    records = [{**r, "client_id": "global"} for r in FOREIGN]
    reply = httpx.post(
        url + "/export/import",
        json={"data": records, "operator_approved": True},
        headers={"x-api-key": KEY},
        timeout=10,
    )
    assert reply.json() == {"imported": len(records), "skipped": 0, "errors": 0}, reply.text


def _foreign(url: str) -> str:
    """The other tenant's bytes: its memories, and every facts and statuses row not benchd's."""
    parts = {
        "memories": export(url, KEY, "global"),
        "facts": [r for r in _rows(url, "fact") if not r["key"].startswith("benchd")],
        "statuses": [r for r in _rows(url, "status") if not r["subject"].startswith("benchd")],
    }
    return json.dumps(parts, sort_keys=True)


def _benchd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", *args],
        capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **ENV},
    )  # fmt: skip


def test_the_store_profile_really_moves_rows_keyed_like_the_fixture(store: RefStoreThread) -> None:
    """The hazard the tests below guard against, shown on the store itself."""
    _plant(store.url)
    taken = [{"content": TEXT["mem-harbor"], "client_id": "other", **SHAPES["mem-harbor"]}]
    httpx.post(
        store.url + "/export/import",
        json={"data": taken, "operator_approved": True},
        headers={"x-api-key": KEY},
        timeout=10,
    ).raise_for_status()
    (row,) = _rows(store.url, "fact", key="ferry-schedule")
    assert (row["client_id"], row["value"]) == ("other", TEXT["mem-harbor"])


def test_foreign_facts_and_statuses_stay_byte_identical_through_once_run_sigterm_and_purge(
    store: RefStoreThread, tmp_path: Path
) -> None:
    _plant(store.url)
    before = _foreign(store.url)
    config = _config(tmp_path, store.url, "keyed", interval=0.2)
    once = _benchd("once", "--config", str(config))
    assert once.returncode == 0, once.stderr
    assert _foreign(store.url) == before
    with BenchdProcess(["--config", str(config)], env=ENV) as daemon:
        events = daemon.wait_cycles("keyed", 3)
        assert daemon.stop() == 0
    assert {e["outcome"] for e in events} == {"success"}
    assert _foreign(store.url) == before
    purge = _benchd("purge", "--config", str(config))
    assert purge.returncode == 0, purge.stderr
    assert _foreign(store.url) == before
    ns = "drill-keyed"
    keys = [owned_id(ns, k) for k in ("ferry-schedule", "mem-quartz", "satellite")]
    assert sorted(r["key"] for r in _rows(store.url, "fact", client_id=ns)) == sorted(
        [*keys, sentinel_id(ns)]
    )
    assert sorted(r["subject"] for r in _rows(store.url, "status", client_id=ns)) == sorted(
        [owned_id(ns, "workshop"), owned_id(ns, "mem-glacier")]
    )
    assert content_hash(TEXT["mem-quartz"]) in {r["key"] for r in _rows(store.url, "fact")}


def test_the_http_kind_described_as_zengram_namespaces_keys_too(
    store: RefStoreThread, tmp_path: Path
) -> None:
    """configs/http-zengram.toml, the worked example of the generic kind against Zengram."""
    _plant(store.url)
    before = _foreign(store.url)
    shipped = (Path(__file__).parents[2] / "configs" / "http-zengram.toml").read_text()
    toml = (
        shipped.replace('"http://127.0.0.1:8084"', f'"{store.url}"')
        .replace('"BRAIN_API_KEY"', '"DRILL_STORE_KEY"')
        .replace('"packaged:smoke"', f'"{_fixture(tmp_path / "keyed.json")}"')
        .replace('namespace = "benchd-eval"', 'namespace = "drill-http"')
    )
    config = tmp_path / "http.toml"
    config.write_text(toml, encoding="utf-8")
    once = _benchd("once", "--config", str(config))
    assert once.returncode == 0, once.stderr
    assert _foreign(store.url) == before
    keys = {r["key"] for r in _rows(store.url, "fact", client_id="drill-http")}
    assert keys and all(k.startswith("benchd:drill-http:") for k in keys)


def test_two_namespaces_sentinels_never_collide(store: RefStoreThread, tmp_path: Path) -> None:
    config = _config(tmp_path, store.url, "alpha", "beta")
    once = _benchd("once", "--config", str(config))
    assert once.returncode == 0, once.stderr
    rows = _rows(store.url, "fact", key="benchd-sentinel")
    assert sorted((r["key"], r["client_id"]) for r in rows) == [
        (sentinel_id("drill-alpha"), "drill-alpha"),
        (sentinel_id("drill-beta"), "drill-beta"),
    ]


class _Interleave(httpx.AsyncBaseTransport):
    """Lets two writers' lease steps interleave the worst way: both list an empty namespace,
    both write their sentinel, then both read the lease back."""

    def __init__(self, steps: dict[str, anyio.Event], me: str, other: str) -> None:
        self._real = httpx.AsyncHTTPTransport()
        self._steps, self._me, self._other = steps, me, other
        self._lists = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/export/import" and not self._steps[f"{self._me}-wrote"].is_set():
            await self._steps[f"{self._other}-listed"].wait()
            reply = await self._real.handle_async_request(request)
            self._steps[f"{self._me}-wrote"].set()
            return reply
        if request.url.path == "/export":
            self._lists += 1
            if self._lists == 2:  # the read-back: only once the other one wrote too
                await self._steps[f"{self._other}-wrote"].wait()
            reply = await self._real.handle_async_request(request)
            if self._lists == 1:
                self._steps[f"{self._me}-listed"].set()
            return reply
        return await self._real.handle_async_request(request)

    async def aclose(self) -> None:
        await self._real.aclose()


async def _race(url: str) -> dict[str, str]:
    steps = {f"{w}-{s}": anyio.Event() for w in "ab" for s in ("listed", "wrote")}
    memories = [{"id": mid, "content": TEXT[mid], **SHAPES[mid]} for mid in TEXT]
    outcomes: dict[str, str] = {}

    async def writer(me: str, other: str) -> None:
        target = ZengramTarget(
            ZengramConfig(url=url, namespace="drill-race", searchable_timeout_s=1.0),
            Secret(KEY, "test"),
            transport=_Interleave(steps, me, other),
        )
        target.lease = LeaseHolder(instance=f"pod-{me}", ttl_s=600.0)
        try:
            await target.seed(memories)
            outcomes[me] = "wrote"
        except OwnershipError as exc:
            outcomes[me] = "backed off" if "took the lease at the same time" in str(exc) else ""
        finally:
            await target.aclose()

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer, "a", "b")
            tg.start_soon(writer, "b", "a")
    return outcomes


def test_a_lease_race_without_get_memory_by_id_lets_one_writer_through(
    store: RefStoreThread,
) -> None:
    outcomes = anyio.run(_race, store.url)
    assert sorted(outcomes.values()) == ["backed off", "wrote"]
    winner = next(w for w, o in outcomes.items() if o == "wrote")
    (sentinel,) = [r for r in export(store.url, KEY, "drill-race") if r["id"].startswith("benchd-")]
    assert sentinel["metadata"][OWNER_KEY]["instance"] == f"pod-{winner}"


def _lease(url: str, namespace: str) -> dict[str, Any]:
    listed = export(url, KEY, namespace)
    (sentinel,) = [r for r in listed if r["id"] == sentinel_id(namespace) and r["active"]]
    lease: dict[str, Any] = sentinel["metadata"][OWNER_KEY]
    return lease


def _ours(url: str, namespace: str) -> str:
    return json.dumps([r for r in export(url, KEY, namespace) if r["active"]], sort_keys=True)


def test_beside_the_daemon_on_its_host_purge_exits_3_and_once_measures_read_only(
    store: RefStoreThread, tmp_path: Path
) -> None:
    """No ``instance`` in the config: both processes are the host name, as on one machine."""
    config = _config(tmp_path, store.url, "host", interval=600.0, target_extra='cleanup = "never"')
    ns = "drill-host"
    with BenchdProcess(["--config", str(config)], env=ENV) as daemon:
        assert daemon.wait_cycles("host", 1)[0]["outcome"] == "success"
        written = _ours(store.url, ns)
        purge = _benchd("purge", "--config", str(config))
        assert purge.returncode == 3
        assert "leased by live benchd instance" in purge.stderr and "--force" in purge.stderr
        assert _ours(store.url, ns) == written  # deleted nothing
        once = _benchd("once", "--config", str(config))
        assert once.returncode == 0, once.stderr
        assert "measured its corpus read-only" in once.stderr
        assert _ours(store.url, ns) == written  # the lease as the daemon wrote it
        pinned = _benchd("baseline", "save", "--config", str(config), "--out", str(tmp_path / "b"))
        assert pinned.returncode == 0, pinned.stderr
        assert "measured its corpus read-only" in pinned.stderr  # says what it measured
        assert _ours(store.url, ns) == written
        assert daemon.proc is not None and _lease(store.url, ns)["pid"] == daemon.proc.pid
        forced = _benchd("once", "--force", "--config", str(config))  # a deliberate takeover
        assert forced.returncode == 0, forced.stderr
        assert "read-only" not in forced.stderr
        taken = _lease(store.url, ns)
        assert (taken["role"], taken["released"]) == ("once", True)  # handed back at its end


def test_a_restarted_run_takes_its_own_lease_over_at_once(
    store: RefStoreThread, tmp_path: Path
) -> None:
    config = _config(tmp_path, store.url, "pod", interval=600.0, target_extra='cleanup = "never"')
    with BenchdProcess(["--config", str(config)], env=ENV) as first:
        first.wait_cycles("pod", 1)
        assert first.proc is not None
        first.proc.kill()  # no shutdown: its lease stays live
        first.proc.wait(timeout=10)
    killed = _lease(store.url, "drill-pod")
    assert killed["released"] is False
    with BenchdProcess(["--config", str(config)], env=ENV) as second:
        (cycle,) = second.wait_cycles("pod", 1)
        assert cycle["outcome"] == "success"
        assert second.proc is not None and _lease(store.url, "drill-pod")["pid"] == second.proc.pid
        assert second.stop() == 0


def test_sigterm_releases_the_lease_so_another_instance_takes_it_at_once(
    store: RefStoreThread, tmp_path: Path
) -> None:
    config = _config(tmp_path, store.url, "hand", interval=600.0, target_extra='cleanup = "never"')
    with BenchdProcess(["--config", str(config)], env=ENV) as daemon:
        daemon.wait_cycles("hand", 1)
        assert daemon.stop() == 0
    lease = _lease(store.url, "drill-hand")
    assert (lease["released"], lease["heartbeat"]) == (True, 0.0)
    other = tmp_path / "other"
    other.mkdir()
    config = _config(other, store.url, "hand", server='instance = "pod-elsewhere"\n')
    once = _benchd("once", "--config", str(config))
    assert once.returncode == 0, once.stderr
    assert "read-only" not in once.stderr


def test_a_corpus_kept_with_the_fixtures_own_keys_is_written_again_under_namespaced_ones(
    store: RefStoreThread, tmp_path: Path
) -> None:
    """A corpus an earlier version kept, keyed as the fixture says, stops sharing those keys.

    The import's dedup would skip a record whose content is unchanged, so the
    out-of-date copy is deleted first; a second ``once`` then writes nothing.
    """
    config = _config(tmp_path, store.url, "keyed", target_extra='cleanup = "never"')
    ns = "drill-keyed"
    assert _benchd("once", "--config", str(config)).returncode == 0
    mine = [m for m in export(store.url, KEY, ns) if m["active"] and m["type"] != "event"]
    mine = [m for m in mine if (m.get("metadata") or {}).get(OWNER_KEY, {}).get("fixture_id")]
    assert len(mine) == 5  # two keyed facts, one unkeyed, two statuses
    for memory in mine:  # as the earlier version wrote them: the fixture's key and subject
        fid = memory["metadata"][OWNER_KEY]["fixture_id"]
        httpx.delete(
            f"{store.url}/memory/{memory['id']}", headers={"x-api-key": KEY}, timeout=10
        ).raise_for_status()
        old = {k: v for k, v in memory.items() if k not in ("key", "subject")}
        old.update({k: v for k, v in SHAPES[fid].items() if k in ("key", "subject")})
        reply = httpx.post(
            store.url + "/export/import",
            json={"data": [old], "operator_approved": True},
            headers={"x-api-key": KEY},
            timeout=10,
        )
        assert reply.json()["imported"] == 1, reply.text
    bare = [r for r in _rows(store.url, "fact") if r["key"] == "ferry-schedule"]
    assert [r["client_id"] for r in bare] == [ns]  # the global row is benchd's, as it was then

    once = _benchd("once", "--config", str(config))
    assert once.returncode == 0, once.stderr
    now = [m for m in export(store.url, KEY, ns) if m["active"] and m["type"] != "event"]
    by_fixture = {
        m["metadata"][OWNER_KEY]["fixture_id"]: m
        for m in now
        if (m.get("metadata") or {}).get(OWNER_KEY, {}).get("fixture_id")
    }
    assert set(by_fixture) == {m["metadata"][OWNER_KEY]["fixture_id"] for m in mine}
    for fid, memory in by_fixture.items():
        wanted = {"key": owned_id(ns, SHAPES[fid].get("key", fid))}
        if SHAPES[fid]["type"] == "status":
            wanted = {"subject": owned_id(ns, SHAPES[fid].get("subject", fid))}
        assert {k: memory[k] for k in wanted} == wanted, memory

    def corpus() -> str:  # benchd's records (the sentinel carries the lease: it is rewritten)
        return json.dumps(
            [m for m in export(store.url, KEY, ns) if not m["id"].startswith("benchd-sentinel")],
            sort_keys=True,
        )

    kept = corpus()
    again = _benchd("once", "--config", str(config))
    assert again.returncode == 0, again.stderr
    assert corpus() == kept  # nothing deleted or written again
