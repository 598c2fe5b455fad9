"""The zengram adapter against the reference store over loopback."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from answer_support import parse_answer, parse_answer_async

from benchd.config.secrets import Secret
from benchd.errors import (
    OwnershipError,
    TargetAuthError,
    TargetHTTPError,
    TargetProtocolError,
    TargetUnreachable,
)
from benchd.kinds.zengram import ZengramConfig, ZengramTarget, sentinel_id
from benchd.refstore.config import RefStoreConfig
from benchd.refstore.server import running_refstore
from benchd.refstore.testing import running_refstore_fixture
from benchd.store.owned import owned_id
from benchd.store.target import SearchQuery

pytestmark = pytest.mark.anyio

KEY = "test-key-0123456789"
MEMORIES = [
    {"id": "m-port", "type": "fact", "content": "The staging database listens on port 5544."},
    {"id": "m-deploy", "type": "fact", "content": "We deploy every Thursday at 14:00 UTC."},
    {"id": "m-cert", "type": "event", "content": "The payments outage was an expired TLS cert."},
]


store = running_refstore_fixture(api_key=KEY, retriever="bm25")


def target(url: str, key: str = KEY, **settings: Any) -> ZengramTarget:
    return ZengramTarget(ZengramConfig(url=url, **settings), Secret(key, "test"))


async def raw(url: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=url, headers={"x-api-key": KEY}) as client:
        return await client.request(method, path, **kwargs)


async def export_all(url: str, client_id: str) -> list[dict[str, Any]]:
    response = await raw(url, "GET", "/export", params={"client_id": client_id, "limit": 500})
    return list(response.json()["memories"])


async def test_seed_verifies_and_search_returns_fixture_ids(store: Any) -> None:
    t = target(store.url)
    try:
        report = await t.seed(MEMORIES)
        assert (report.requested, report.imported, report.errors) == (3, 3, 0)
        assert report.verified == 3 and report.missing == ()
        assert report.searchable_after_s is not None
        ranked = await t.search(SearchQuery(q="staging database port", limit=10))
        assert ranked[0] == "m-port"
        assert sentinel_id("benchd-eval") not in ranked
    finally:
        await t.aclose()


async def test_reseeding_an_unchanged_corpus_is_skipped_not_duplicated(store: Any) -> None:
    t = target(store.url, cleanup="never")
    try:
        await t.seed(MEMORIES)
        again = await t.seed(MEMORIES)
        assert (again.imported, again.skipped, again.unchanged) == (0, 0, 3)  # none sent
        records = await export_all(store.url, "benchd-eval")
        assert sorted(r["id"] for r in records) == sorted(
            [owned_id("benchd-eval", m["id"]) for m in MEMORIES] + [sentinel_id("benchd-eval")]
        )
    finally:
        await t.aclose()


async def test_every_record_is_forced_into_the_namespace(store: Any) -> None:
    t = target(store.url, namespace="benchd-ns")
    try:
        await t.seed([{**MEMORIES[0], "client_id": "someone-else"}])
        assert await export_all(store.url, "someone-else") == []
        listed = [r["id"] for r in await export_all(store.url, "benchd-ns")]
        assert listed.count(owned_id("benchd-ns", "m-port")) == 1
    finally:
        await t.aclose()


async def test_foreign_records_stay_byte_identical_across_cycles(store: Any) -> None:
    foreign = [
        {**m, "id": f"foreign-{m['id']}", "client_id": "production-team"} for m in MEMORIES
    ] + [{"id": "g1", "content": MEMORIES[1]["content"]}]  # identical content, client global
    await raw(
        store.url, "POST", "/export/import", json={"data": foreign, "operator_approved": True}
    )
    before = {c: await export_all(store.url, c) for c in ("production-team", "global")}
    t = target(store.url, cleanup="before")
    try:
        for _ in range(3):
            await t.seed(MEMORIES)
            await t.search(SearchQuery(q="deploy thursday", limit=10))
            await t.cleanup([m["id"] for m in MEMORIES])
    finally:
        await t.aclose()
    after = {c: await export_all(store.url, c) for c in ("production-team", "global")}
    assert json.dumps(after, sort_keys=True) == json.dumps(before, sort_keys=True)


async def test_foreign_namespace_is_refused_unless_adopted(store: Any) -> None:
    await raw(
        store.url,
        "POST",
        "/export/import",
        json={
            "data": [{"id": "theirs", "content": "x y z", "client_id": "taken"}],
            "operator_approved": True,
        },
    )
    t = target(store.url, namespace="taken")
    try:
        with pytest.raises(OwnershipError, match="did not write"):
            await t.seed(MEMORIES)
        assert [r["id"] for r in await export_all(store.url, "taken")] == ["theirs"]
    finally:
        await t.aclose()
    adopted = target(store.url, namespace="taken", adopt_namespace=True)
    try:
        assert (await adopted.seed(MEMORIES)).adopted is True
    finally:
        await adopted.aclose()


async def test_a_refused_key_is_an_auth_error_and_never_retried(store: Any) -> None:
    t = target(store.url, key="wrong-key-xxxxxxxx")
    try:
        with pytest.raises(TargetAuthError) as err:
            await t.seed(MEMORIES)
        assert "wrong-key" not in str(err.value)
        assert t.retries == 0
    finally:
        await t.aclose()


async def test_unreachable_store_names_the_url() -> None:
    t = target("http://127.0.0.1:9", max_retries=1, backoff_s=0.01)
    try:
        with pytest.raises(TargetUnreachable, match=r"http://127\.0\.0\.1:9.*is the store running"):
            await t.info()
    finally:
        await t.aclose()


async def test_store_assigned_ids_are_mapped_back_by_content(store: Any) -> None:
    t = target(store.url, keep_ids=False)
    try:
        report = await t.seed(MEMORIES)
        assert report.missing == ()
        ranked = await t.search(SearchQuery(q="expired TLS cert outage", limit=5))
        assert ranked[0] == "m-cert"
    finally:
        await t.aclose()


async def test_searching_read_only_leaves_access_counts_alone(store: Any) -> None:
    t = target(store.url)
    try:
        await t.seed(MEMORIES)
        for _ in range(3):
            await t.search(SearchQuery(q="deploy thursday", limit=5))
        records = await export_all(store.url, "benchd-eval")
        assert all(int(r.get("access_count", 0)) == 0 for r in records)
    finally:
        await t.aclose()


async def test_parse_accepts_index_and_full_payload_shapes(store: Any) -> None:
    t = target(store.url)
    try:
        await t.seed([{"id": "a", "content": "alpha"}, {"id": "b", "content": "beta"}])
    finally:
        await t.aclose()
    a, b = owned_id("benchd-eval", "a"), owned_id("benchd-eval", "b")
    body = {
        "results": [{"id": a, "effective_score": 1}, {"id": b, "content": "full"}],
        "retry": True,
        "expanded_query": "x",
    }
    assert await parse_answer_async(t, 200, {}, json.dumps(body).encode()) == ("a", "b")


def test_a_result_benchd_did_not_write_is_never_mapped_to_a_fixture_id() -> None:
    t = target("http://127.0.0.1:1")
    body = {"results": [{"id": "a"}, {"id": sentinel_id("benchd-eval")}, {"id": "!a"}]}
    ranked = parse_answer(t, 200, {}, json.dumps(body).encode())
    assert ranked == ("!a", "!!a")  # labelled foreign, the sentinel dropped


@pytest.mark.parametrize(
    "body", [b"not json", b'{"results": 3}', b'{"results": [{"score": 1}]}', b"[]"]
)
def test_malformed_search_answers_are_decode_errors(body: bytes) -> None:
    t = target("http://127.0.0.1:1")
    with pytest.raises(TargetProtocolError):
        parse_answer(t, 200, {}, body)


async def test_cleanup_before_reimports_fresh_copies_each_cycle(store: Any) -> None:
    t = target(store.url, cleanup="before")
    try:
        first = await t.seed(MEMORIES)
        second = await t.seed(MEMORIES)
        assert (first.imported, second.imported, second.skipped) == (3, 3, 0)
        ids = [r["id"] for r in await export_all(store.url, "benchd-eval")]
        assert sorted(ids) == sorted(
            [owned_id("benchd-eval", m["id"]) for m in MEMORIES] + [sentinel_id("benchd-eval")]
        )
    finally:
        await t.aclose()


async def test_an_unchanged_corpus_costs_no_writes_on_reseed() -> None:
    # Two writes a minute: the sentinel and one import. A re-seed that sent
    # anything would meet a 429 with a minute-long Retry-After.
    config = RefStoreConfig(
        api_key=KEY, retriever="bm25", read_limit_per_min=0, write_limit_per_min=2
    )
    async with running_refstore(config) as limited:
        t = target(limited.url, cleanup="never", max_retries=0)
        try:
            await t.seed(MEMORIES)
            again = await t.seed(MEMORIES)
            assert (again.imported, again.unchanged, again.errors) == (0, 3, 0)
            assert again.retries == 0
            changed = [{**MEMORIES[0], "content": "The staging database moved to port 6543."}]
            with pytest.raises(TargetHTTPError) as err:  # a changed record is written
                await t.seed(changed + MEMORIES[1:])
            assert err.value.kind == "rate_limited"
        finally:
            await t.aclose()


def test_the_plan_and_capabilities_are_made_once_per_settings() -> None:
    import dataclasses

    from benchd.kinds.zengram import ZengramStore

    config = ZengramConfig(url="http://127.0.0.1:9", namespace="benchd-once", cleanup="never")
    store = ZengramStore(config, None)
    assert store.plan is store.plan and store.capabilities is store.capabilities
    assert store.plan.cleanup == "never" and store.capabilities.owned_ids
    store.config = dataclasses.replace(config, cleanup="after", keep_ids=False)
    assert store.plan.cleanup == "after" and not store.capabilities.owned_ids
