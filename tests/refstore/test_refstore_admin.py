"""The admin endpoint switches faults, embedder and retriever at run time."""

from __future__ import annotations

from typing import Any

import httpx

from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import import_ok, search_ids


def _hits(client: httpx.Client, smoke: dict[str, Any]) -> int:
    """How many smoke queries find an expected id in their top 5."""
    tenants = {m["id"]: m["client_id"] for m in smoke["memories"] if "client_id" in m}
    found = 0
    for query in smoke["queries"]:
        tenant = tenants.get(query["expected_ids"][0], "global")
        ids = search_ids(client, query["q"], limit=5, client_id=tenant)
        found += bool(set(ids) & set(query["expected_ids"]))
    return found


def test_admin_needs_the_key(store: RefStoreThread) -> None:
    reply = httpx.post(f"{store.url}/admin/config", json={"retriever": "bm25"})
    assert reply.status_code == 401


def test_admin_get_reports_the_current_settings(client: httpx.Client) -> None:
    body = client.get("/admin/config").json()
    assert body == {
        "faults": [],
        "model": "hash:1024",
        "query_model": "hash:1024",
        "retriever": "hybrid",
        "profile": "default",
        "clock": None,
        "pin": [],
    }


def test_switching_the_retriever_shows_in_health(
    store: RefStoreThread, client: httpx.Client
) -> None:
    assert client.post("/admin/config", json={"retriever": "tags"}).json()["retriever"] == "tags"
    assert httpx.get(f"{store.url}/health").json()["retriever"] == "tags"


def test_a_smaller_hash_embedder_re_embeds_and_lowers_recall(
    store: RefStoreThread, client: httpx.Client, smoke: dict[str, Any]
) -> None:
    import_ok(client, smoke["memories"])
    client.post("/admin/config", json={"retriever": "dense"})
    before = _hits(client, smoke)
    reply = client.post("/admin/config", json={"embedder": "hash:4"})
    assert reply.status_code == 200
    assert reply.json()["reembedded"] == len(smoke["memories"])
    assert httpx.get(f"{store.url}/health").json()["model"] == "hash:4"
    after = _hits(client, smoke)
    assert after < before
    client.post("/admin/config", json={"embedder": "hash:1024"})
    assert _hits(client, smoke) == before


def test_switching_the_query_embedder_alone_keeps_the_stored_vectors(
    store: RefStoreThread, client: httpx.Client, smoke: dict[str, Any]
) -> None:
    import_ok(client, smoke["memories"])
    client.post("/admin/config", json={"retriever": "dense"})
    before = _hits(client, smoke)
    # another model of the same size, without re-embedding: the stored vectors stay
    reply = client.post("/admin/config", json={"query_embedder": "openai:http://127.0.0.1:9/v1#x"})
    assert reply.status_code == 503  # an unreachable model changes nothing
    reply = client.post("/admin/config", json={"query_embedder": "hash:1024"})
    assert reply.status_code == 200 and "reembedded" not in reply.json()
    assert reply.json()["model"] == reply.json()["query_model"] == "hash:1024"
    assert _hits(client, smoke) == before
    # a different size cannot search the stored vectors: refused, naming the fix
    reply = client.post("/admin/config", json={"query_embedder": "hash:16"})
    assert reply.status_code == 400
    assert "1024-d" in reply.json()["error"] and "re-embed everything" in reply.json()["error"]
    health = httpx.get(f"{store.url}/health").json()
    assert health["model"] == health["query_model"] == "hash:1024"
    both = client.post("/admin/config", json={"embedder": "hash:8", "query_embedder": "hash:8"})
    assert both.status_code == 400


def test_bad_admin_requests_are_400_and_change_nothing(client: httpx.Client) -> None:
    bad = [
        {"retriever": "magic"},
        {"embedder": "word2vec"},
        {"embedder": 12},
        {"faults": "error_rate=1"},
        {"faults": ["error_rate=2"]},
        {"colour": "blue"},
        {"clock": "next tuesday"},
        {"clock": 1767225600},
        ["faults"],
        {"pin": "benchd-sentinel:ns"},
        {"pin": [1]},
    ]
    for body in bad:
        reply = client.post("/admin/config", json=body)
        assert reply.status_code == 400, body
        assert reply.json()["error"]
    assert client.get("/admin/config").json() == {
        "faults": [],
        "model": "hash:1024",
        "query_model": "hash:1024",
        "retriever": "hybrid",
        "profile": "default",
        "clock": None,
        "pin": [],
    }


def test_admin_is_exempt_from_faults_and_rate_limits(client: httpx.Client) -> None:
    client.post("/admin/config", json={"faults": ["error_rate=1", "rate_limit=1"]})
    assert client.get("/export").status_code in (429, 500)
    reply = client.post("/admin/config", json={"faults": []})
    assert reply.status_code == 200
    assert client.get("/export").status_code == 200


def test_a_pinned_id_is_ranked_first_within_its_tenant_only(client: httpx.Client) -> None:
    records = [
        {"id": "marker", "content": "a marker record nobody searches for", "client_id": "a"},
        {"id": "hit", "content": "the staging database port", "client_id": "a"},
        {"id": "other", "content": "the staging database port", "client_id": "b"},
    ]
    assert client.post("/export/import", json={"data": records, "operator_approved": True})
    assert client.post("/admin/config", json={"pin": ["marker"]}).json()["pin"] == ["marker"]

    def ids(client_id: str) -> list[str]:
        params = {"q": "staging database", "client_id": client_id, "format": "index"}
        return [r["id"] for r in client.get("/memory/search", params=params).json()["results"]]

    assert ids("a") == ["marker", "hit"]
    assert ids("b") == ["other"]  # a pin never crosses tenants
    client.post("/admin/config", json={"pin": []})
    assert ids("a")[0] == "hit"
