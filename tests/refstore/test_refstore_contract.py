"""The target API's contract, checked over loopback against the reference store."""

from __future__ import annotations

import re
from typing import Any

import httpx

from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import import_ok, make_config, search_ids, started_refstore


def _mem(id_: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"id": id_, "content": content, **extra}


# -- auth and envelope -----------------------------------------------------------


def test_health_needs_no_key_and_reports_model_and_retriever(store: RefStoreThread) -> None:
    reply = httpx.get(f"{store.url}/health")
    assert reply.status_code == 200
    body = reply.json()
    assert body["status"] == "ok"
    assert body["model"] == "hash:1024"
    assert body["retriever"] == "hybrid"


def test_missing_or_wrong_key_is_401_json(store: RefStoreThread) -> None:
    for headers in ({}, {"x-api-key": "wrong"}):
        reply = httpx.get(f"{store.url}/export", headers=headers)
        assert reply.status_code == 401
        assert "error" in reply.json()


def test_every_response_carries_a_request_id(store: RefStoreThread, client: httpx.Client) -> None:
    replies = [
        httpx.get(f"{store.url}/health"),
        httpx.get(f"{store.url}/export"),
        client.get("/memory/search"),
        client.get("/no/such/route"),
    ]
    assert all(reply.headers.get("x-request-id") for reply in replies)
    echoed = client.get("/export", headers={"x-request-id": "probe-42"})
    assert echoed.headers["x-request-id"] == "probe-42"
    too_long = client.get("/export", headers={"x-request-id": "x" * 500})
    assert len(too_long.headers["x-request-id"]) == 32  # replaced, not echoed


def test_unknown_route_is_404_json(client: httpx.Client) -> None:
    reply = client.get("/no/such/route")
    assert reply.status_code == 404
    assert "error" in reply.json()


# -- import ------------------------------------------------------------------------


def test_import_without_operator_approval_is_403(client: httpx.Client) -> None:
    reply = client.post("/export/import", json={"data": [_mem("a", "text")]})
    assert reply.status_code == 403
    assert "operator_approved" in reply.json()["error"]


def test_import_over_500_records_is_400_naming_the_count(client: httpx.Client) -> None:
    data = [_mem(f"m{i}", f"memory number {i}") for i in range(501)]
    reply = client.post("/export/import", json={"data": data, "operator_approved": True})
    assert reply.status_code == 400
    assert "501" in reply.json()["error"]


def test_import_counts_invalid_records_as_errors(client: httpx.Client) -> None:
    records = [
        _mem("ok", "a valid memory"),
        {"id": "no-content"},
        _mem("bad-type", "typed wrong", type="opinion"),
        _mem("bad-importance", "weighted wrong", importance="huge"),
        _mem("big-meta", "too much metadata", metadata={"blob": "x" * 20_000}),
        "not an object",
    ]
    assert import_ok(client, records) == {"imported": 1, "skipped": 0, "errors": 5}


def test_import_applies_defaults(client: httpx.Client) -> None:
    import_ok(client, [{"content": "a memory with nothing but content"}])
    memory = client.get("/export").json()["memories"][0]
    assert memory["type"] == "event"
    assert memory["client_id"] == "global"
    assert memory["importance"] == "medium"
    assert memory["created_at"].endswith("Z")
    assert memory["id"]  # a generated id


def test_same_content_tenant_and_type_is_skipped_even_under_another_id(
    client: httpx.Client,
) -> None:
    assert import_ok(client, [_mem("first", "the cache ttl is one day")])["imported"] == 1
    again = import_ok(client, [_mem("second", "the cache ttl is one day")])
    assert again == {"imported": 0, "skipped": 1, "errors": 0}
    other_tenant = import_ok(client, [_mem("third", "the cache ttl is one day", client_id="t2")])
    assert other_tenant["imported"] == 1


def test_same_id_with_new_content_overwrites_the_record(client: httpx.Client) -> None:
    import_ok(client, [_mem("port", "the staging database port is 5544")])
    import_ok(client, [_mem("port", "the staging database port is 6000")])
    memories = client.get("/export").json()["memories"]
    assert [m["content"] for m in memories] == ["the staging database port is 6000"]
    assert search_ids(client, "6000") == ["port"]


def test_soft_deleted_record_no_longer_blocks_dedup(client: httpx.Client) -> None:
    import_ok(client, [_mem("x", "backups run nightly")])
    assert client.delete("/memory/x").json()["deleted"] is True
    assert import_ok(client, [_mem("x", "backups run nightly")])["imported"] == 1
    assert search_ids(client, "backups nightly") == ["x"]


# -- search --------------------------------------------------------------------------


def test_search_without_q_is_400(client: httpx.Client) -> None:
    reply = client.get("/memory/search")
    assert reply.status_code == 400
    assert "q" in reply.json()["error"]


def test_search_limit_is_capped_at_100(client: httpx.Client) -> None:
    import_ok(client, [_mem(f"m{i}", f"widget fact number {i}") for i in range(150)])
    reply = client.get("/memory/search", params={"q": "widget fact", "limit": 500})
    assert reply.status_code == 200
    assert reply.json()["count"] == 100


def test_search_is_scoped_by_client_id_and_type(client: httpx.Client) -> None:
    import_ok(
        client,
        [
            _mem("a", "database port 5432", client_id="acme", type="fact"),
            _mem("b", "database port 5433", client_id="globex", type="fact"),
            _mem("c", "database port moved", client_id="acme", type="event"),
        ],
    )
    assert set(search_ids(client, "database port")) == {"a", "b", "c"}
    assert set(search_ids(client, "database port", client_id="acme")) == {"a", "c"}
    assert search_ids(client, "database port", client_id="acme", type="fact") == ["a"]


def test_search_formats_have_the_target_shapes(client: httpx.Client) -> None:
    import_ok(client, [_mem("a", "line one about queues\nline two", importance="high")])
    shapes = {}
    for fmt in ("index", "compact", "full", "default"):
        reply = client.get("/memory/search", params={"q": "queues", "format": fmt})
        body = reply.json()
        assert body["query"] == "queues" and body["count"] == 1
        shapes[fmt] = body["results"][0]
    assert set(shapes["index"]) == {
        "id", "effective_score", "type", "summary", "importance", "client_id", "created_at"
    }  # fmt: skip
    assert shapes["index"]["summary"] == "line one about queues"
    assert {"score", "content", "source_agent"} <= set(shapes["compact"])
    assert shapes["default"]["text"] == "line one about queues\nline two"
    assert "access_count" in shapes["default"]
    assert "retrieval_sources" in shapes["full"]


def test_search_bumps_access_count_unless_read_only(client: httpx.Client) -> None:
    import_ok(client, [_mem("a", "rabbitmq is the job queue")])

    def count() -> int:
        return int(client.get("/export").json()["memories"][0]["access_count"])

    client.get("/memory/search", params={"q": "rabbitmq", "read_only": "true"})
    client.get("/memory/search", params={"q": "rabbitmq", "track_access": "false"})
    assert count() == 0
    client.get("/memory/search", params={"q": "rabbitmq"})
    client.get("/memory/search", params={"q": "rabbitmq"})
    assert count() == 2


def test_access_count_boosts_later_ranking(client: httpx.Client) -> None:
    words = {"a": "thursday", "b": "friday"}
    import_ok(client, [_mem(k, f"deploy on {w}") for k, w in words.items()])
    loser = search_ids(client, "deploy")[-1]
    for _ in range(3):  # tracked searches that return only the loser
        reply = client.get("/memory/search", params={"q": words[loser], "limit": 1})
        assert [hit["id"] for hit in reply.json()["results"]] == [loser]
    assert search_ids(client, "deploy")[0] == loser


def test_importance_weights_order_equal_matches(client: httpx.Client) -> None:
    import_ok(
        client,
        [
            _mem("low", "the pager rotation", importance="low"),
            _mem("critical", "the pager  rotation", importance="critical"),
            _mem("medium", "the pager rotation.", importance="medium"),
            _mem("high", "the  pager rotation", importance="high"),
        ],
    )
    assert search_ids(client, "pager rotation") == ["critical", "high", "medium", "low"]


def test_rate_limits_answer_429_with_retry_after() -> None:
    config = make_config(read_limit_per_min=2, write_limit_per_min=1)
    with (
        RefStoreThread(config) as running,
        httpx.Client(base_url=running.url, headers={"x-api-key": running.api_key}) as http,
    ):
        assert [http.get("/export").status_code for _ in range(3)] == [200, 200, 429]
        limited = http.get("/export")
        assert int(limited.headers["retry-after"]) >= 1
        assert "error" in limited.json()
        assert http.delete("/memory/none").status_code == 404
        assert http.delete("/memory/none").status_code == 429
        assert httpx.get(f"{running.url}/health").status_code == 200


# -- export and delete ---------------------------------------------------------------


def test_export_pages_with_has_more_and_content_hash(client: httpx.Client) -> None:
    import_ok(client, [_mem(f"m{i}", f"memory {i}", client_id="t") for i in range(5)])
    import_ok(client, [_mem("other", "another tenant", client_id="u")])
    first = client.get("/export", params={"client_id": "t", "limit": 2}).json()
    assert [m["id"] for m in first["memories"]] == ["m0", "m1"]
    assert first["total"] == 5 and first["has_more"] is True
    last = client.get("/export", params={"client_id": "t", "limit": 2, "offset": 4}).json()
    assert [m["id"] for m in last["memories"]] == ["m4"] and last["has_more"] is False
    assert all(len(m["content_hash"]) == 16 for m in first["memories"])
    assert {"exported_at", "filters"} <= set(first)


def test_export_hides_deleted_records_unless_active_only_false(client: httpx.Client) -> None:
    import_ok(client, [_mem("keep", "kept memory"), _mem("gone", "deleted memory")])
    client.delete("/memory/gone")
    assert [m["id"] for m in client.get("/export").json()["memories"]] == ["keep"]
    everything = client.get("/export", params={"active_only": "false"}).json()["memories"]
    assert {m["id"]: m["active"] for m in everything} == {"keep": True, "gone": False}


def test_delete_is_soft_repeatable_and_404_for_unknown(client: httpx.Client) -> None:
    import_ok(client, [_mem("a", "the release train leaves at noon")])
    first = client.delete("/memory/a")
    assert first.status_code == 200 and first.json()["deleted"] is True
    again = client.delete("/memory/a")
    assert again.status_code == 200 and again.json()["already_inactive"] is True
    assert "message" in again.json()
    assert client.delete("/memory/nope").status_code == 404
    assert search_ids(client, "release train") == []


def test_get_one_memory_reads_a_record_in_its_namespace_only(client: httpx.Client) -> None:
    import_ok(client, [_mem("a", "the vault listens on 8200", client_id="ns-a")])
    found = client.get("/memory/a", params={"client_id": "ns-a"})
    assert found.status_code == 200
    body = found.json()
    assert (body["id"], body["content"], body["active"]) == ("a", "the vault listens on 8200", True)
    assert "content_hash" in body
    assert client.get("/memory/a", params={"client_id": "ns-b"}).status_code == 404
    assert client.get("/memory/unknown").json() == {"error": "Memory not found"}


# -- bad input -------------------------------------------------------------------------


def test_bad_input_is_400_json_and_the_store_keeps_serving(client: httpx.Client) -> None:
    bad = [
        client.post(
            "/export/import", content=b"{not json", headers={"content-type": "application/json"}
        ),
        client.post("/export/import", json=[1, 2]),
        client.post("/export/import", json={"data": "nope", "operator_approved": True}),
        client.get("/memory/search", params={"q": "x" * 5000}),
        client.get("/memory/search", params={"q": "x", "limit": "ten"}),
        client.get("/memory/search", params={"q": "x", "limit": "0"}),
        client.get("/memory/search", params={"q": "x", "format": "xml"}),
        client.get("/memory/search", params={"q": "x", "reference_date": "tomorrow"}),
        client.get("/memory/search", params={"q": "x", "read_only": "maybe"}),
        client.get("/export", params={"offset": "-1"}),
    ]
    assert [reply.status_code for reply in bad] == [400] * len(bad)
    assert all(reply.json()["error"] for reply in bad)
    assert import_ok(client, [_mem("a", "still serving")])["imported"] == 1


_DATE_WORDS = re.compile(r"\bin (may|june)\b", re.IGNORECASE)


def _smoke_hits(
    client: httpx.Client, smoke: dict[str, Any], queries: list[dict[str, Any]], **params: Any
) -> list[int]:
    """1 per query that finds an expected id, searched as the tenant its memory belongs to."""
    tenants = {m["id"]: m["client_id"] for m in smoke["memories"] if "client_id" in m}
    hits = []
    for query in queries:
        tenant = tenants.get(query["expected_ids"][0], "global")
        ids = search_ids(client, query["q"], limit=query.get("k", 5), client_id=tenant, **params)
        hits.append(int(bool(set(ids) & set(query["expected_ids"]))))
    return hits


def test_the_smoke_fixture_loads_and_every_query_without_date_words_hits(
    client: httpx.Client, smoke: dict[str, Any]
) -> None:
    imported = {"imported": len(smoke["memories"]), "skipped": 0, "errors": 0}
    assert import_ok(client, smoke["memories"]) == imported
    plain = [q for q in smoke["queries"] if not _DATE_WORDS.search(q["q"])]
    assert len(plain) == 10
    assert _smoke_hits(client, smoke, plain) == [1] * len(plain)


def test_smoke_date_word_queries_score_0_without_dates_and_1_with_them(
    smoke: dict[str, Any],
) -> None:
    """As against the real server: "in May" filters created_at, which the fixture never gives."""
    dated = [q for q in smoke["queries"] if _DATE_WORDS.search(q["q"])]
    assert len(dated) == 2
    with started_refstore() as store, _client(store) as client:
        import_ok(client, smoke["memories"])  # created_at = now (December): not May, not June
        assert _smoke_hits(client, smoke, dated, reference_date="2026-07-01") == [0, 0]
    with started_refstore() as store, _client(store) as client:
        memories = [dict(m) for m in smoke["memories"]]
        for memory in memories:
            month = re.search(r"-(2026-\d\d)-", memory["id"])
            if month:  # event-outage-2026-05-dns happened in May 2026
                memory["created_at"] = f"{month.group(1)}-12T09:00:00Z"
        import_ok(client, memories)
        assert _smoke_hits(client, smoke, dated, reference_date="2026-07-01") == [1, 1]
        assert _smoke_hits(client, smoke, dated, reference_date="2027-07-01") == [0, 0]  # a year on


def _client(store: RefStoreThread) -> httpx.Client:
    return httpx.Client(base_url=store.url, headers={"x-api-key": store.api_key})


def test_tags_retriever_scores_key_subject_entities_and_tags(client: httpx.Client) -> None:
    client.post("/admin/config", json={"retriever": "tags"})
    import_ok(
        client,
        [
            _mem("k", "listens on 5544", key="staging-db-port"),
            _mem("s", "healthy, p95 180ms", subject="billing-service", type="status"),
            _mem("t", "weekly on thursdays", tags=["deploy", "cadence"]),
            _mem("e", "owns the pager", entities=[{"name": "oncall", "type": "team"}]),
        ],
    )
    assert search_ids(client, "staging port") == ["k"]
    assert search_ids(client, "billing service health") == ["s"]
    assert search_ids(client, "deploy cadence") == ["t"]
    assert search_ids(client, "who is oncall") == ["e"]
    assert search_ids(client, "listens 5544") == []  # content is not a tag


def test_export_filters_by_type(client: httpx.Client) -> None:
    import_ok(client, [_mem("f", "a fact", type="fact"), _mem("d", "a decision", type="decision")])
    memories = client.get("/export", params={"type": "decision"}).json()["memories"]
    assert [m["id"] for m in memories] == ["d"]
