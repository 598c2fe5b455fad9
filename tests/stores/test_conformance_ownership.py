"""Conformance, ownership part: what every writing kind must keep against its real server.

- **Another tenant's rows under benchd's very ids** (the ids benchd derives for
  its namespace, in a shared table or collection, in the tenant's own
  namespace): ``once`` fails with ``ownership`` and writes nothing, not even
  the sentinel; three cycles of ``run`` do the same; ``purge`` deletes nothing.
  The tenant's rows are compared byte for byte after each.
- **``once`` with ``cleanup = "after"``** leaves nothing of benchd's behind,
  the sentinel included.
- **Answers that lie**, made by a proxy of the store's own protocol (Chroma's
  HTTP API, forwarded to the real server): a listing page repeated forever
  ends at the second page as ``decode``; a delete answering
  ``{"deleted": -1000000}`` is counted by listing.

Which parts apply to which kind (docs/targets.md, guarantee table): the
tenant under benchd's ids runs on pgvector, Chroma, Milvus and Qdrant, the
kinds that read ids across namespaces (``Capabilities.holders``); zengram,
http and mcp cannot read an id outside their namespace (the Zengram API has
no read by id; an MCP server's tools take the namespace), so for them the
derived ids are the guard. The lying answers run where the protocol can be
proxied in the test process (Chroma's HTTP); pgvector, Milvus and Qdrant
speak binary protocols or run in process, and the flow's own bounds are
tested over a fake store in tests/store/test_flow_guarantees.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from kinds import (
    benchd,
    benchd_rows,
    config_text,
    env_for,
    once_json,
    require_client,
    shared_target,
    tenant_of,
)
from support import BenchdProcess

from benchd.embed.config import EmbedConfig
from benchd.errors import TargetProtocolError
from benchd.fixtures.model import load_fixture, packaged_fixture
from benchd.refstore.testing import started_refstore
from benchd.store.flow import NamespaceFlow
from benchd.store.owned import OwnedIds

pytestmark = pytest.mark.timeout(900)
KINDS = ("pgvector", "chroma", "milvus", "qdrant")


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return require_client(str(request.param))


@pytest.fixture
def server(kind: str, request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue({"pgvector": "postgres"}.get(kind, kind))


def smoke() -> list[dict[str, Any]]:
    return [dict(m) for m in load_fixture(packaged_fixture("smoke")).memories]


def where(kind: str, tenant: Any) -> str:
    return str(tenant.table if kind == "pgvector" else tenant.name)


def once_failed(config: Path, server: Any) -> dict[str, Any]:
    """``benchd once --format json`` expected to fail: its one probe's document."""
    proc = benchd("once", "--config", str(config), "--format", "json", server=server)
    assert proc.returncode == 3, proc.stderr[-3000:]
    probe: dict[str, Any] = json.loads(proc.stdout)["probes"][0]
    return probe


def test_rows_under_benchds_very_ids_stay_byte_identical_through_once_run_and_purge(
    kind: str, server: Any, tmp_path: Path
) -> None:
    ns = "benchd-conform-ids"
    memories = smoke()
    tenant = tenant_of(kind, server)
    tenant.create(memories, ids=dict(OwnedIds.of(ns, memories).store_of))
    before = tenant.snapshot()
    table = where(kind, tenant)
    config = tmp_path / "conform.toml"
    config.write_text(
        config_text(
            kind, server, ns, cache_dir=tmp_path, interval_s=1, **shared_target(kind, tenant)
        )
    )

    doc = once_failed(config, server)
    assert tenant.snapshot() == before
    assert benchd_rows(kind, server, ns, table) == 0  # no record, no sentinel
    assert doc["outcome"] == "failed" and doc["error"]["kind"] == "ownership", doc["error"]
    assert "never writes over" in doc["error"]["message"]

    with BenchdProcess(["--config", str(config)], env=env_for(server)) as daemon:
        cycles = daemon.wait_cycles(kind, 3, timeout=600)[:3]
        assert daemon.stop(timeout=120) == 0
    assert all(c["outcome"] == "failed" and "ownership" in c["errors"] for c in cycles), cycles
    assert tenant.snapshot() == before
    assert benchd_rows(kind, server, ns, table) == 0

    proc = benchd("purge", "--config", str(config), server=server)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "deleted 0 benchd record(s) and 0 sentinel(s)" in proc.stdout
    assert tenant.snapshot() == before


def test_once_with_cleanup_after_leaves_nothing_of_benchds_not_even_the_sentinel(
    kind: str, server: Any, tmp_path: Path
) -> None:
    ns = "benchd-conform-after"
    tenant = tenant_of(kind, server)
    tenant.create(smoke())  # the tenant's own ids, beside benchd's
    before = tenant.snapshot()
    config = tmp_path / "after.toml"
    config.write_text(
        config_text(
            kind, server, ns, cache_dir=tmp_path, cleanup="after", **shared_target(kind, tenant)
        )
    )
    assert once_json(config, server)["outcome"] == "success"
    assert benchd_rows(kind, server, ns, where(kind, tenant)) == 0
    assert tenant.snapshot() == before


def test_zengram_once_with_cleanup_after_leaves_no_sentinel(tmp_path: Path) -> None:
    """The same part on the reference store's Zengram API (``kind = "zengram"``)."""
    key, ns = "conform-key-0123456789", "benchd-conform-after"
    with started_refstore(
        api_key=key, retriever="bm25", read_limit_per_min=0, write_limit_per_min=0
    ) as store:
        config = tmp_path / "zengram.toml"
        config.write_text(f"""
[[probe]]
name = "zengram"
fixture = "packaged:smoke"
k = [10]
[probe.target]
kind = "zengram"
url = "{store.url}"
api_key_env = "CONFORM_KEY"
namespace = "{ns}"
cleanup = "after"
[probe.budget]
unlimited = true
""")
        os.environ["CONFORM_KEY"] = key
        assert once_json(config, None)["outcome"] == "success"
        with httpx.Client(base_url=store.url, headers={"x-api-key": key}) as client:
            page = client.get("/export", params={"client_id": ns, "limit": 1000}).json()
        active = [r["id"] for r in page["memories"] if r.get("active", True) is not False]
        assert active == []


# -- answers that lie, from a proxy of Chroma's own API -----------------------------------


class ChromaLies(httpx.AsyncBaseTransport):
    """Forwards to the real Chroma server; ``repeat`` sends every listing to offset 0 (a
    server ignoring its offset), ``counts`` answers every delete ``{"deleted": -1000000}``
    after carrying it out."""

    def __init__(self, lie: str) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.lie = lie
        self.listings = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if self.lie == "repeat" and path.endswith("/get"):
            body = json.loads(request.content)
            if "offset" in body:
                self.listings += 1
                if self.listings > 50:  # the old flow read 20,001 pages: stop here
                    return httpx.Response(500, json={"error": "the test stopped the paging"})
                body["offset"] = 0
                headers = [(k, v) for k, v in request.headers.items() if k != "content-length"]
                request = httpx.Request(request.method, request.url, headers=headers, json=body)
        answer = await self.inner.handle_async_request(request)
        if self.lie == "counts" and path.endswith("/delete"):
            await answer.aread()
            await answer.aclose()
            return httpx.Response(200, json={"deleted": -1_000_000})
        return answer

    async def aclose(self) -> None:
        await self.inner.aclose()


def lying_chroma(url: str, ns: str, tmp: Path, lie: str) -> tuple[NamespaceFlow, ChromaLies]:
    from benchd.kinds.chroma import ChromaConfig, ChromaStore

    proxy = ChromaLies(lie)
    embed = EmbedConfig(model="hash:64", cache_dir=str(tmp))
    config = ChromaConfig(url=url, namespace=ns, embed=embed)
    store = ChromaStore(config, None, transport=proxy)
    store.page_size = 10  # the 36-record corpus over four pages
    return NamespaceFlow(store), proxy


@pytest.mark.anyio
async def test_chroma_listing_a_page_forever_ends_at_the_second_page(
    chroma: Any, tmp_path: Path
) -> None:
    flow, proxy = lying_chroma(chroma.url, "benchd-conform-repeat", tmp_path, "repeat")
    try:
        with pytest.raises(TargetProtocolError, match="brings no record not listed before") as e:
            await flow.seed(smoke())  # the verify's listing repeats its first page
        assert e.value.kind == "decode"
        # the verify's two pages (and one of the first listing where the collection exists)
        assert 2 <= proxy.listings <= 3
    finally:
        await flow.aclose()


@pytest.mark.anyio
async def test_chroma_absurd_delete_counts_are_counted_by_listing(
    chroma: Any, tmp_path: Path
) -> None:
    memories = smoke()
    flow, _ = lying_chroma(chroma.url, "benchd-conform-counts", tmp_path, "counts")
    try:
        await flow.seed(memories)
        assert await flow.cleanup([str(m["id"]) for m in memories]) == len(memories)
        await flow.seed(memories)
        purged = await flow.purge(memories, force=False)
        assert (purged.records, purged.sentinels, purged.foreign, purged.kept) == (
            len(memories), 1, 0, 0,
        )  # fmt: skip
        assert await flow.export_namespace() == {}
    finally:
        await flow.aclose()
