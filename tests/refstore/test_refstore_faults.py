"""Fault specs parse as documented, and each fault shows over loopback."""

from __future__ import annotations

import json
import random
import time

import httpx
import pytest

from benchd.refstore.faults import (
    FaultInjector,
    FaultSpecError,
    Latency,
    parse_duration,
    parse_faults,
)
from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import import_ok, make_config


def _set_faults(client: httpx.Client, *specs: str) -> None:
    reply = client.post("/admin/config", json={"faults": list(specs)})
    assert reply.status_code == 200, reply.text
    assert reply.json()["faults"] == list(specs)


# -- parsing --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"), [("20ms", 0.02), ("1.5s", 1.5), ("0ms", 0.0), ("250ms", 0.25)]
)
def test_durations_take_ms_or_s(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "spec",
    [
        "latency",
        "latency=fixed:20",
        "latency=uniform:50ms..5ms",
        "latency=lognormal:median=200ms,p99=20ms",
        "latency=gamma:1ms",
        "error_rate=1.5",
        "error_rate=lots",
        "stall=every:1s,for:2s",
        "stall=often",
        "degraded=0.1@upload",
        "explode=1",
        "auth_lockout=0",
        "seed=-1",
    ],
)
def test_bad_fault_specs_are_refused_with_the_spec_quoted(spec: str) -> None:
    with pytest.raises(FaultSpecError) as caught:
        parse_faults([spec])
    assert spec.split("=")[0] in str(caught.value)


def test_lognormal_latency_has_the_given_median_and_p99() -> None:
    plan = parse_faults(["latency=lognormal:median=20ms,p99=200ms"])
    latency = plan.faults["latency"].value
    assert isinstance(latency, Latency)
    rng = random.Random(1)
    samples = sorted(latency.sample(rng) for _ in range(20_000))
    assert samples[10_000] == pytest.approx(0.020, rel=0.05)
    assert samples[19_800] == pytest.approx(0.200, rel=0.10)


def test_stall_windows_open_at_the_start_of_each_period() -> None:
    now = [100.0]
    injector = FaultInjector(parse_faults(["stall=every:10s,for:2s"]), clock=lambda: now[0])
    assert injector.delay("search") == pytest.approx(2.0)
    now[0] = 101.5
    assert injector.delay("search") == pytest.approx(0.5)
    now[0] = 105.0
    assert injector.delay("search") == 0.0
    now[0] = 110.25
    assert injector.delay("search") == pytest.approx(1.75)


def test_route_scoped_faults_apply_only_to_their_routes() -> None:
    injector = FaultInjector(parse_faults(["error_rate=1@search+delete"]))
    assert injector.roll("error_rate", "search") and injector.roll("error_rate", "delete")
    assert not injector.roll("error_rate", "import")


def test_seeded_fault_plans_roll_the_same_dice() -> None:
    def rolls() -> list[bool]:
        injector = FaultInjector(parse_faults(["seed=7", "error_rate=0.5"]))
        return [injector.roll("error_rate", "search") for _ in range(64)]

    assert rolls() == rolls()
    assert 10 < sum(rolls()) < 54


# -- over loopback -----------------------------------------------------------------------


def test_error_rate_answers_500_json(client: httpx.Client) -> None:
    _set_faults(client, "error_rate=1")
    reply = client.get("/memory/search", params={"q": "anything"})
    assert reply.status_code == 500
    assert "injected" in reply.json()["error"]


def test_forced_rate_limit_answers_429_with_retry_after(client: httpx.Client) -> None:
    _set_faults(client, "rate_limit=1")
    reply = client.get("/export")
    assert reply.status_code == 429
    assert reply.headers["retry-after"] == "1"


def test_degraded_answers_503_with_retrieval_degraded_on_search_only(
    client: httpx.Client,
) -> None:
    _set_faults(client, "degraded=1")
    reply = client.get("/memory/search", params={"q": "anything"})
    assert reply.status_code == 503
    assert reply.json()["retrieval"]["degraded"] is True
    assert client.get("/export").status_code == 200


def test_fixed_latency_delays_every_api_request_but_not_health(
    store: RefStoreThread, client: httpx.Client
) -> None:
    _set_faults(client, "latency=fixed:150ms")
    start = time.perf_counter()
    assert client.get("/export").status_code == 200
    assert time.perf_counter() - start >= 0.15
    # /health is exempt: with a 60 s delay on every API request, a health check
    # that answers before a 20 s client timeout cannot have been delayed.
    _set_faults(client, "latency=fixed:60s")
    assert httpx.get(f"{store.url}/health", timeout=20).status_code == 200


def test_a_stall_window_holds_requests_until_it_closes(client: httpx.Client) -> None:
    """The window opens as the plan is set; a request inside it returns once it closes."""
    opened = time.monotonic()  # before the store's window opens (its clock, in this process)
    _set_faults(client, "stall=every:60s,for:300ms")
    assert client.get("/export").status_code == 200
    # From before the window opened, not from the request: a request that reaches the
    # store late in the window (a busy box) is held for less, and the window still closes
    # 300 ms after it opened.
    assert time.monotonic() - opened >= 0.3


def test_slow_body_dribbles_the_response(client: httpx.Client) -> None:
    import_ok(client, [{"id": f"m{i}", "content": f"memory {i}"} for i in range(20)])
    _set_faults(client, "slow_body=300ms@export")
    start = time.perf_counter()
    reply = client.get("/export")
    assert time.perf_counter() - start >= 0.25
    assert reply.json()["total"] == 20  # intact, just slow


def test_malformed_cuts_2xx_bodies_into_invalid_json(client: httpx.Client) -> None:
    _set_faults(client, "malformed=1")
    reply = client.get("/export")
    assert reply.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(reply.content)


def test_faults_given_at_start_are_active_and_reported_by_health() -> None:
    with RefStoreThread(make_config(faults=("error_rate=1@import",))) as running:
        assert httpx.get(f"{running.url}/health").json()["faults"] == ["error_rate=1@import"]
        http = httpx.Client(base_url=running.url, headers={"x-api-key": running.api_key})
        body = {"data": [{"content": "x"}], "operator_approved": True}
        assert http.post("/export/import", json=body).status_code == 500
        assert http.get("/export").status_code == 200
        http.close()


def test_clearing_faults_restores_normal_answers(client: httpx.Client) -> None:
    _set_faults(client, "error_rate=1")
    _set_faults(client)
    assert client.get("/export").status_code == 200


def test_auth_lockout_locks_an_ip_out_even_for_the_valid_key(
    store: RefStoreThread, client: httpx.Client
) -> None:
    _set_faults(client, "auth_lockout=3")
    bad = [httpx.get(f"{store.url}/export", headers={"x-api-key": "wrong"}) for _ in range(3)]
    assert [reply.status_code for reply in bad] == [401, 401, 401]
    locked = client.get("/export")
    assert locked.status_code == 429
    assert "retry-after" not in locked.headers
    _set_faults(client)  # admin still works from the locked IP and lifts the lockout
    assert client.get("/export").status_code == 200


def test_without_auth_lockout_bad_keys_never_lock_anyone_out(
    store: RefStoreThread, client: httpx.Client
) -> None:
    for _ in range(12):
        httpx.get(f"{store.url}/export", headers={"x-api-key": "wrong"})
    assert client.get("/export").status_code == 200
