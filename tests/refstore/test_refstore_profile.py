"""``--profile zengram-4.3``: the reference store behaves as the real server was measured to.

Each behaviour of DESIGN §2 "More of the real server" that a reading depends
on is asserted here against a real store over loopback: paced imports that
finish after the client gave up, the millisecond export cursor (which loses
records dated below the millisecond), no ``GET /memory/{id}``, facts and
statuses upserted by key and subject across tenants, repeated DELETE,
``/health`` without a model label, confidence decay on the store's settable
clock, and the ``rank_swap`` fault (ranking noise).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from benchd.refstore.records import content_hash
from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import import_ok, search_ids, started_refstore

PROFILE = "zengram-4.3"


@pytest.fixture
def real() -> Iterator[RefStoreThread]:
    """A zengram-4.3 store with its import pause scaled to a tenth (10 ms per 10 records)."""
    with started_refstore(profile=PROFILE, import_pacing=0.1) as store:
        yield store


def _client(store: RefStoreThread, **kwargs: Any) -> httpx.Client:
    return httpx.Client(base_url=store.url, headers={"x-api-key": store.api_key}, **kwargs)


def _listed(client: httpx.Client, limit: int, **params: Any) -> list[str]:
    ids: list[str] = []
    offset = 0
    while True:
        body = client.get("/export", params={"limit": limit, "offset": offset, **params}).json()
        ids.extend(m["id"] for m in body["memories"])
        offset += len(body["memories"])
        if not body["memories"] or not body["has_more"]:
            return ids


def test_the_command_serves_the_profile_without_a_model_label_in_health() -> None:
    env = {**os.environ, "PROFILE_TEST_KEY": "profile-test-key"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchd", "refstore", "--listen", "127.0.0.1:0",
         "--api-key-env", "PROFILE_TEST_KEY", "--profile", PROFILE,
         "--import-pacing", "0", "--clock", "2026-03-01T00:00:00Z"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        health = httpx.get(f"{url}/health").json()
        assert set(health) == {"status", "service", "timestamp"}
        assert health["timestamp"].startswith("2026-03-01T")
        admin = httpx.get(f"{url}/admin/config", headers={"x-api-key": "profile-test-key"}).json()
        assert admin["profile"] == PROFILE
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    assert proc.returncode == 0


def test_default_profile_health_keeps_its_model_label(store: RefStoreThread) -> None:
    assert httpx.get(f"{store.url}/health").json()["model"] == "hash:1024"


def test_a_paced_import_finishes_server_side_after_the_client_timed_out() -> None:
    """50 records pause 4 times (4 × 250 ms at pacing 2.5): a 0.2 s client gives up first."""
    records = [{"id": f"p{i}", "content": f"paced record number {i} of fifty"} for i in range(50)]
    with started_refstore(profile=PROFILE, import_pacing=2.5) as store:
        with _client(store, timeout=0.2) as impatient, pytest.raises(httpx.ReadTimeout):
            impatient.post("/export/import", json={"data": records, "operator_approved": True})
        with _client(store) as client:
            deadline = time.monotonic() + 30  # a bound on a busy box, not a timing assertion
            while len(_listed(client, 100)) < 50:
                assert time.monotonic() < deadline, "the server did not finish the import"
                time.sleep(0.05)  # polling another thread's progress
            assert sorted(_listed(client, 100)) == sorted(r["id"] for r in records)
            again = import_ok(client, records)
            assert again == {"imported": 0, "skipped": 50, "errors": 0}  # a blind retry's reading


def test_a_paced_import_counts_like_an_unpaced_one(real: RefStoreThread) -> None:
    records = [{"id": f"r{i}", "content": f"record {i}"} for i in range(25)]
    records.append({"id": "dup", "content": "record 3"})
    records.append({"id": "bad"})
    with _client(real) as client:
        assert import_ok(client, records) == {"imported": 25, "skipped": 1, "errors": 1}


def _shared_ms_records() -> list[dict[str, Any]]:
    """12 records a second apart, except r4, r5 and r6, which share one millisecond."""
    base = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
    records = []
    for i in range(12):
        moment = base + timedelta(seconds=min(i, 4) if 4 <= i <= 6 else i)
        stamp = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        records.append({"id": f"r{i}", "content": f"boundary record {i}", "created_at": stamp})
    return records


def _sub_ms_records() -> list[dict[str, Any]]:
    """12 records a second apart, except r4..r7: one millisecond, dated to the microsecond."""
    base = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
    records = []
    for i in range(12):
        moment = base + (
            timedelta(seconds=4, microseconds=100 * (i - 3))
            if 4 <= i <= 7
            else timedelta(seconds=i)
        )
        stamp = moment.isoformat(timespec="microseconds").replace("+00:00", "Z")
        records.append({"id": f"r{i}", "content": f"boundary record {i}", "created_at": stamp})
    return records


def test_export_lists_every_record_sharing_one_millisecond(real: RefStoreThread) -> None:
    """The cursor's id breaks a tie in the boundary millisecond: nothing is lost."""
    with _client(real) as client:
        import_ok(client, _shared_ms_records())
        listed = _listed(client, 5)
        assert listed == [f"r{i}" for i in (11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)]  # newest first


def test_export_loses_records_dated_below_the_millisecond_at_a_page_boundary(
    real: RefStoreThread,
) -> None:
    with _client(real) as client:
        import_ok(client, _sub_ms_records())
        # page 1 ends at r7 (4.000400 s); the cursor, cut to 4.000 s, skips r6, r5 and r4
        assert _listed(client, 5) == ["r11", "r10", "r9", "r8", "r7", "r3", "r2", "r1", "r0"]
        assert client.get("/export", params={"limit": 5}).json()["total"] == 12
        # pages of 4 end on whole seconds: another page size lists them all
        assert sorted(_listed(client, 4)) == sorted(f"r{i}" for i in range(12))


def test_default_profile_pages_by_offset_and_loses_nothing(client: httpx.Client) -> None:
    import_ok(client, _sub_ms_records())
    assert sorted(_listed(client, 5)) == sorted(f"r{i}" for i in range(12))


def test_get_one_memory_is_scoped_by_client_id_in_the_default_profile(
    client: httpx.Client,
) -> None:
    import_ok(client, [{"id": "a", "content": "tenant a's note", "client_id": "ns-a"}])
    assert client.get("/memory/a", params={"client_id": "ns-a"}).json()["client_id"] == "ns-a"
    assert client.get("/memory/a", params={"client_id": "ns-b"}).status_code == 404
    assert client.get("/memory/nope").status_code == 404
    client.delete("/memory/a")
    assert client.get("/memory/a").json()["active"] is False


def test_the_real_server_has_no_get_memory_by_id(real: RefStoreThread) -> None:
    with _client(real) as client:
        import_ok(client, [{"id": "a", "content": "tenant a's note", "client_id": "ns-a"}])
        for path in ("/memory/a", "/memory/nope"):
            reply = client.get(path, params={"client_id": "ns-a"})
            assert reply.status_code == 404
            assert reply.headers["content-type"].startswith("text/html")
            assert f"<pre>Cannot GET {path}</pre>" in reply.text


def _query(client: httpx.Client, **params: Any) -> list[dict[str, Any]]:
    reply = client.get("/memory/query", params=params)
    assert reply.status_code == 200, reply.text
    rows: list[dict[str, Any]] = reply.json()["results"]
    return rows


def test_a_fact_upserts_the_facts_row_of_its_key_across_tenants(real: RefStoreThread) -> None:
    with _client(real) as client:
        import_ok(client, [{"content": "Rent is due on the 1st.", "type": "fact",
                            "key": "rent", "client_id": "tenant-a"}])  # fmt: skip
        import_ok(client, [{"content": "Rent moved to the 5th.", "type": "fact",
                            "key": "rent", "client_id": "tenant-b"}])  # fmt: skip
        assert _query(client, type="fact", client_id="tenant-a") == []  # moved, not copied
        (row,) = _query(client, type="fact", client_id="tenant-b")
        assert (row["key"], row["value"]) == ("rent", "Rent moved to the 5th.")
        # both memories stay, each in its own tenant: only the structured row moved
        assert len(_listed(client, 100, client_id="tenant-a")) == 1


def test_keyless_facts_share_the_content_hash_and_subjectless_statuses_unknown(
    real: RefStoreThread,
) -> None:
    with _client(real) as client:
        import_ok(client, [
            {"content": "The ferry leaves at 7.", "type": "fact", "client_id": "tenant-a"},
            {"content": "Build is green.", "type": "status", "client_id": "tenant-a"},
            {"content": "The ferry leaves at 7.", "type": "fact", "client_id": "tenant-b"},
            {"content": "Deploy is paused.", "type": "status", "client_id": "tenant-b"},
        ])  # fmt: skip
        (fact,) = _query(client, type="facts")
        assert (fact["key"], fact["client_id"]) == (
            content_hash("The ferry leaves at 7."),
            "tenant-b",
        )
        (status,) = _query(client, type="status")
        assert (status["subject"], status["status"], status["client_id"]) == (
            "unknown",
            "Deploy is paused.",
            "tenant-b",
        )


def test_deleting_a_fact_memory_leaves_its_facts_row(real: RefStoreThread) -> None:
    with _client(real) as client:
        import_ok(client, [{"id": "f1", "content": "Gate code is 1234.", "type": "fact",
                            "key": "gate", "client_id": "tenant-a"}])  # fmt: skip
        assert client.delete("/memory/f1").json()["deleted"] is True
        assert [r["key"] for r in _query(client, type="fact", key="gat")] == ["gate"]


def test_structured_queries_need_the_real_servers_profile(client: httpx.Client) -> None:
    reply = client.get("/memory/query", params={"type": "fact"})
    assert reply.status_code == 400 and "Structured queries" in reply.json()["error"]


def test_a_repeated_delete_says_already_inactive_with_a_message_and_no_deleted(
    real: RefStoreThread,
) -> None:
    with _client(real) as client:
        import_ok(client, [{"id": "gone", "content": "deleted twice"}])
        assert client.delete("/memory/gone").json()["deleted"] is True
        again = client.delete("/memory/gone")
        assert again.status_code == 200
        body = again.json()
        assert body["already_inactive"] is True and body["message"] and "deleted" not in body


def _confidence(client: httpx.Client, q: str) -> dict[str, float]:
    reply = client.get("/memory/search", params={"q": q, "format": "full", "read_only": "true"})
    return {hit["id"]: hit["confidence"] for hit in reply.json()["results"]}


def test_fact_and_status_confidence_decays_098_per_day_on_the_store_clock(
    real: RefStoreThread,
) -> None:
    with _client(real) as client:
        client.post("/admin/config", json={"clock": "2026-06-11T00:00:00Z"})
        day1 = "2026-06-01T00:00:00Z"
        import_ok(
            client,
            [
                {"id": "f", "type": "fact", "content": "vault port is 8200", "created_at": day1},
                {"id": "s", "type": "status", "content": "vault port healthy", "created_at": day1},
                {"id": "e", "type": "event", "content": "vault port changed", "created_at": day1},
            ],
        )
        ten_days = _confidence(client, "vault port")
        assert ten_days["f"] == pytest.approx(0.98**10, rel=1e-3)
        assert ten_days["s"] == pytest.approx(0.98**10, rel=1e-3)
        assert ten_days["e"] == 1.0  # events and decisions do not decay
        client.post("/admin/config", json={"clock": "2026-07-11T00:00:00Z"})
        assert _confidence(client, "vault port")["f"] == pytest.approx(0.98**40, rel=1e-3)


def test_default_profile_does_not_decay(client: httpx.Client) -> None:
    old = {"id": "f", "type": "fact", "content": "old fact", "created_at": "2020-01-01"}
    import_ok(client, [old])
    assert _confidence(client, "old fact")["f"] == 1.0


def test_the_clock_fills_created_at_and_anchors_date_words(client: httpx.Client) -> None:
    client.post("/admin/config", json={"clock": "2026-02-10T12:00:00Z"})
    import_ok(client, [{"id": "n", "content": "a note about the billing export"}])
    created = client.get("/memory/n").json()["created_at"]
    assert created.startswith("2026-02-10T12:00")
    assert search_ids(client, "billing export today") == ["n"]
    client.post("/admin/config", json={"clock": "2026-03-10T12:00:00Z"})
    assert search_ids(client, "billing export today") == []
    assert search_ids(client, "billing export in February") == ["n"]
    reset = client.post("/admin/config", json={"clock": None}).json()
    assert reset["clock"] is None


def _ranked(client: httpx.Client) -> list[str]:
    return search_ids(client, "deploy pipeline notes", limit=10)


def test_rank_swap_swaps_one_adjacent_pair_with_its_seeded_probability(
    client: httpx.Client,
) -> None:
    records = [{"id": f"d{i}", "content": f"deploy pipeline notes {'x ' * i}"} for i in range(8)]
    import_ok(client, records)
    clean = _ranked(client)
    assert len(clean) == 8
    client.post("/admin/config", json={"faults": ["rank_swap=1@search", "seed=7"]})
    for _ in range(5):
        swapped = _ranked(client)
        moved = [i for i, (a, b) in enumerate(zip(clean, swapped, strict=True)) if a != b]
        assert len(moved) == 2 and moved[1] == moved[0] + 1
        assert swapped[moved[0]] == clean[moved[1]]
    counts = []
    for spec in ("rank_swap=0.1", "rank_swap=0.3"):
        client.post("/admin/config", json={"faults": [spec, "seed=11"]})
        counts.append(sum(_ranked(client) != clean for _ in range(200)))
    assert 5 <= counts[0] < counts[1] <= 100  # ~20 and ~60 of 200, seeded: reproducible
