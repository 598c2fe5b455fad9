"""The generic http target: against the reference store and a mem0-style stand-in, over loopback."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from answer_support import parse_answer
from hypothesis import given, settings
from hypothesis import strategies as st
from mem0_standin import Mem0Standin

from benchd.config.load import ProbeConfig, TargetConfig, load_config, parse_config
from benchd.config.secrets import Secret
from benchd.cycle import run_cycle
from benchd.errors import (
    ConfigError,
    OwnershipError,
    TargetAuthError,
    TargetError,
    TargetHTTPError,
    TargetProtocolError,
)
from benchd.fixtures.model import load_fixture, packaged_fixture
from benchd.kinds import build_target
from benchd.kinds.http.records import sentinel_id
from benchd.kinds.http.target import HttpTarget
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.load import LoadProfile
from benchd.refstore.server import RunningRefStore, running_refstore, serve_app
from benchd.refstore.testing import make_config
from benchd.store.owned import owned_id
from benchd.store.target import SearchQuery

pytestmark = pytest.mark.anyio

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
MEMORIES = [
    {"id": "m-port", "type": "fact", "content": "The staging database listens on port 5544."},
    {"id": "m-deploy", "type": "fact", "content": "We deploy every Thursday at 14:00 UTC."},
    {"id": "m-cert", "type": "event", "content": "The payments outage was an expired TLS cert."},
    {"id": "m-oncall", "type": "fact", "content": "The on-call rotation changes every Monday."},
    {"id": "m-backup", "type": "fact", "content": "Nightly backups are kept for 35 days."},
]

OWN = {m["id"]: owned_id("benchd-eval", m["id"]) for m in MEMORIES}


@pytest.fixture
async def store() -> AsyncIterator[RunningRefStore]:
    async with running_refstore(make_config(retriever="bm25")) as running:
        yield running


def example(name: str, monkeypatch: pytest.MonkeyPatch, key_env: str, key: str) -> TargetConfig:
    """The shipped example config's target, loaded the way benchd loads it."""
    monkeypatch.setenv(key_env, key)
    return load_config(CONFIGS / name).probes[0].target


def via_http(
    store: RunningRefStore,
    monkeypatch: pytest.MonkeyPatch,
    *,
    key: str | None = None,
    **changes: Any,
) -> HttpTarget:
    """configs/http-zengram.toml pointed at ``store`` (``changes`` replace top-level keys)."""
    target = example("http-zengram.toml", monkeypatch, "BRAIN_API_KEY", key or store.api_key)
    settings = dataclasses.replace(target.settings, url=store.url, **changes)
    built = build_target("http", settings, target.secret)
    assert isinstance(built, HttpTarget)
    return built


async def rankings(target: Any, queries: list[SearchQuery], memories: Any) -> list[Any]:
    try:
        await target.seed(memories)
        return [await target.search(q) for q in queries]
    finally:
        await target.aclose()


async def export_ids(store: RunningRefStore, client_id: str) -> list[str]:
    async with httpx.AsyncClient(base_url=store.url, headers={"x-api-key": store.api_key}) as c:
        reply = await c.get("/export", params={"client_id": client_id, "limit": 1000})
    return sorted(str(r["id"]) for r in reply.json()["memories"])


async def import_raw(store: RunningRefStore, records: list[dict[str, Any]]) -> None:
    async with httpx.AsyncClient(base_url=store.url, headers={"x-api-key": store.api_key}) as c:
        reply = await c.post("/export/import", json={"data": records, "operator_approved": True})
    assert reply.status_code == 200, reply.text


async def test_reference_store_ranks_the_same_through_http_as_through_zengram(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fixture = load_fixture(packaged_fixture("smoke"))
    queries = [
        SearchQuery(q.q, 10, q.reference_date or fixture.reference_date) for q in fixture.queries
    ]
    config = make_config(retriever="hybrid", embedder="hash:1024")
    async with running_refstore(config) as a, running_refstore(config) as b:
        through_http = await rankings(via_http(a, monkeypatch), queries, fixture.memories)
        zengram = ZengramTarget(ZengramConfig(url=b.url), Secret(config.api_key, "test"))
        through_zengram = await rankings(zengram, queries, fixture.memories)
    assert through_http == through_zengram
    assert sum(1 for r in through_http if r) == len(queries)  # every query found something
    # the shipped example reads the store's scores too: drift's score shift sees them
    assert [r.scores for r in through_http] == [r.scores for r in through_zengram]
    assert all(r.scores and all(isinstance(s, float) for s in r.scores) for r in through_http)


async def test_seed_goes_in_batches_and_is_verified_through_export(
    store: RunningRefStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = via_http(store, monkeypatch)
    seed = dataclasses.replace(t.config.seed, batch_size=2, concurrency=1)
    t = via_http(store, monkeypatch, seed=seed)
    steps: list[tuple[int, int]] = []
    try:
        report = await t.seed(MEMORIES, progress=lambda done, total: steps.append((done, total)))
    finally:
        await t.aclose()
    assert steps == [(2, 5), (4, 5), (5, 5), (5, 5)]  # the seed's batches, then verify's
    assert (report.imported, report.skipped, report.errors) == (5, 0, 0)
    assert (report.verified, report.missing) == (5, ())
    expected = sorted([OWN[m["id"]] for m in MEMORIES] + [sentinel_id("benchd-eval")])
    assert await export_ids(store, "benchd-eval") == expected


@pytest.mark.parametrize(
    "pages",
    [{"has_more": "has_more"}, {"has_more": None, "total": "total"}, {"has_more": None}],
    ids=["has_more", "total", "short-page"],
)
async def test_export_pages_through_the_namespace(
    store: RunningRefStore, monkeypatch: pytest.MonkeyPatch, pages: dict[str, Any]
) -> None:
    t = via_http(store, monkeypatch)
    export = dataclasses.replace(t.config.export, page_size=2, **pages)
    t = via_http(store, monkeypatch, export=export)
    try:
        report = await t.seed(MEMORIES)
        listed = await t.export_namespace()
    finally:
        await t.aclose()
    assert report.verified == 5
    assert sorted(listed) == sorted([OWN[m["id"]] for m in MEMORIES] + [sentinel_id("benchd-eval")])


async def test_info_reads_the_model_label_from_the_health_endpoint(
    store: RunningRefStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = via_http(store, monkeypatch)
    try:
        info = await t.info()
    finally:
        await t.aclose()
    assert (info.kind, info.endpoint, info.model) == ("http", store.url, store.store.embedder.spec)


async def test_a_record_the_store_did_not_keep_is_reported_missing(
    store: RunningRefStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    duplicate = {**MEMORIES[0], "id": "m-port-again"}  # same content+type: the store skips it
    t = via_http(store, monkeypatch)
    try:
        report = await t.seed([*MEMORIES, duplicate])
    finally:
        await t.aclose()
    assert (report.skipped, report.verified, report.missing) == (1, 5, ("m-port-again",))


async def test_cleanup_touches_only_what_benchd_seeded(
    store: RunningRefStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    foreign = [{**m, "id": f"theirs-{m['id']}", "client_id": "production"} for m in MEMORIES]
    await import_raw(store, foreign)
    t = via_http(store, monkeypatch, cleanup="before")
    try:
        await t.seed(MEMORIES)
        # someone else's record lands in benchd's namespace between cycles
        await import_raw(
            store, [{"id": "stray", "content": "unrelated", "client_id": "benchd-eval"}]
        )
        second = await t.seed(MEMORIES)
        assert (second.imported, second.skipped) == (5, 0)  # earlier copies were deleted first
        assert await t.cleanup([m["id"] for m in MEMORIES]) == 5
    finally:
        await t.aclose()
    assert await export_ids(store, "benchd-eval") == sorted(["stray", sentinel_id("benchd-eval")])
    assert await export_ids(store, "production") == sorted(m["id"] for m in foreign)


async def test_a_namespace_benchd_did_not_write_is_refused_unless_adopted(
    store: RunningRefStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await import_raw(store, [{"id": "theirs", "content": "x y z", "client_id": "taken"}])
    t = via_http(store, monkeypatch, namespace="taken")
    try:
        with pytest.raises(OwnershipError, match=r"'taken'.*did not write"):
            await t.seed(MEMORIES)
    finally:
        await t.aclose()
    assert await export_ids(store, "taken") == ["theirs"]
    adopted = via_http(store, monkeypatch, namespace="taken", adopt_namespace=True)
    try:
        assert (await adopted.seed(MEMORIES)).adopted is True
    finally:
        await adopted.aclose()


async def test_the_auth_header_is_built_from_name_and_prefix(
    store: RunningRefStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = via_http(store, monkeypatch)
    bad = via_http(store, monkeypatch, auth_prefix="Bearer ")
    try:
        assert good.build_search_request(SearchQuery("q", 5)).headers["x-api-key"] == store.api_key
        await good.seed(MEMORIES[:1])
        with pytest.raises(TargetAuthError) as refused:
            await bad.search(SearchQuery("staging database", 5))
        assert store.api_key not in str(refused.value)
        assert "GET " + store.url + "/memory/search" in str(refused.value)
    finally:
        await good.aclose()
        await bad.aclose()


async def test_a_cycle_under_load_uses_the_engines_pool_and_scores_like_serial(
    store: RunningRefStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    target_config = example("http-zengram.toml", monkeypatch, "BRAIN_API_KEY", store.api_key)
    settings = dataclasses.replace(target_config.settings, url=store.url)
    probe = ProbeConfig(
        name="http",
        fixture=packaged_fixture("smoke"),
        target=TargetConfig("http", settings, target_config.secret),
        load=LoadProfile(mode="closed", concurrency=2, requests=32),
    )
    fixture = load_fixture(probe.fixture)
    target = build_target("http", settings, target_config.secret)
    assert target.capabilities.load_sender
    try:
        result = await run_cycle(probe, fixture, target)
    finally:
        await target.aclose()
    assert result.outcome == "success" and result.load is not None
    assert dict(result.load.requests) == {"ok": 32}
    for key in ("recall@5", "mrr@10", "ndcg@10"):
        assert result.load.aggregate[key] == pytest.approx(result.aggregate[key])


# -- a store that assigns its own ids: the mem0-style example ----------------------


@pytest.fixture
async def mem0() -> AsyncIterator[tuple[Mem0Standin, str]]:
    standin = Mem0Standin(key="mem0-key-0123")
    async with serve_app(standin.app()) as url:
        yield standin, url


def mem0_target(url: str, monkeypatch: pytest.MonkeyPatch, **changes: Any) -> HttpTarget:
    target = example("http-mem0-style.toml", monkeypatch, "MEM0_API_KEY", "mem0-key-0123")
    settings = dataclasses.replace(target.settings, url=url, **changes)
    built = build_target("http", settings, target.secret)
    assert isinstance(built, HttpTarget)
    return built


async def test_store_assigned_ids_are_mapped_back_to_fixture_ids(
    mem0: tuple[Mem0Standin, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    standin, url = mem0
    t = mem0_target(url, monkeypatch)
    try:
        report = await t.seed(MEMORIES)
        ranked = await t.search(SearchQuery("which port does the staging database use", 5))
    finally:
        await t.aclose()
    assert (report.verified, report.missing) == (5, ())
    assert standin.add_requests == 6  # batch_size = 1, plus the sentinel
    assert ranked[0] == "m-port"
    assert set(ranked) <= {m["id"] for m in MEMORIES}  # no server ids, no sentinel


async def test_reseeding_deletes_earlier_copies_by_their_server_ids(
    mem0: tuple[Mem0Standin, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    standin, url = mem0
    standin.memories["x"] = {"id": "x", "memory": "a foreign memory", "user_id": "alice"}
    t = mem0_target(url, monkeypatch)
    try:
        await t.seed(MEMORIES)
        await t.seed(MEMORIES)
        assert await t.cleanup([m["id"] for m in MEMORIES]) == 5
    finally:
        await t.aclose()
    left = standin.of_user("benchd-eval")
    assert [m["metadata"]["fixture_id"] for m in left] == [sentinel_id("benchd-eval")]
    assert "x" in standin.memories


async def test_a_missing_token_prefix_is_an_auth_error(
    mem0: tuple[Mem0Standin, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, url = mem0
    t = mem0_target(url, monkeypatch, auth_prefix="")
    try:
        with pytest.raises(TargetAuthError, match=r"POST http://.*/search: HTTP 401"):
            await t.search(SearchQuery("port", 5))
    finally:
        await t.aclose()


# -- parsing and building, no server ----------------------------------------------


def offline(monkeypatch: pytest.MonkeyPatch, **search: Any) -> HttpTarget:
    target = example("http-zengram.toml", monkeypatch, "BRAIN_API_KEY", "k")
    settings = target.settings
    if search:
        settings = dataclasses.replace(
            settings, search=dataclasses.replace(settings.search, **search)
        )
    return HttpTarget(settings, target.secret)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"hits": []}, r"ids path 'results\[\*\]\.id': no key 'results' at the top"),
        ({"results": [{"id": "a"}, {"score": 1}]}, r"no key 'id' in an object at results\[1\]"),
        ({"results": {"id": "a"}}, r"expected an array at results, got an object"),
        ({"results": [{"id": {"x": 1}}]}, r"element 0 is \{\"x\": 1\}, expected a string"),
    ],
)
def test_id_path_errors_name_the_path_and_the_endpoint(
    monkeypatch: pytest.MonkeyPatch, body: Any, problem: str
) -> None:
    t = offline(monkeypatch)
    with pytest.raises(TargetProtocolError, match=problem) as err:
        parse_answer(t, 200, {}, json.dumps(body).encode(), what=t.http_store._search_what)
    assert str(err.value).startswith("GET http://127.0.0.1:8084/memory/search: ")


def test_scores_come_with_their_ids_sentinel_removed_and_odd_values_as_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    t = offline(monkeypatch, scores="results[*].s")
    sentinel = sentinel_id("benchd-eval")
    body = {"results": [{"id": "a", "s": 0.9}, {"id": sentinel, "s": 0.8},
                        {"id": "b", "s": "high"}, {"id": "c", "s": float("nan")},
                        {"id": "d", "s": 3}]}  # fmt: skip
    ranked = parse_answer(t, 200, {}, json.dumps(body).encode(), limit=3)
    assert list(ranked) == ["!a", "!b", "!c"]  # the sentinel is out, its score with it
    assert ranked.scores == (0.9, None, None)  # type: ignore[attr-defined]
    unscored = parse_answer(offline(monkeypatch, scores=None), 200, {}, json.dumps(body).encode())
    assert set(unscored.scores) == {None}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "body",
    [{"results": [{"id": "a", "s": 1}, {"id": "b"}]}, {"results": [{"id": "a"}], "s": 1}],
)
def test_a_scores_path_that_misses_a_result_is_a_protocol_error(
    monkeypatch: pytest.MonkeyPatch, body: Any
) -> None:
    t = offline(monkeypatch, scores="results[*].s")
    with pytest.raises(TargetProtocolError, match=r"scores path 'results\[\*\]\.s'"):
        parse_answer(t, 200, {}, json.dumps(body).encode(), what=t.http_store._search_what)


def test_non_json_and_error_statuses_are_classified(monkeypatch: pytest.MonkeyPatch) -> None:
    t = offline(monkeypatch)
    with pytest.raises(TargetProtocolError, match="not JSON"):
        parse_answer(t, 200, {}, b"<html>")
    with pytest.raises(TargetHTTPError) as err:
        parse_answer(t, 503, {}, b'{"error": "degraded"}')
    assert err.value.kind == "http_5xx"


def test_an_error_status_with_odd_headers_is_still_classified(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    t = offline(monkeypatch)
    with pytest.raises(TargetHTTPError) as err:
        parse_answer(t, 429, {"retry-after": "\x80", "x-ok": "1"}, b"{}")
    assert err.value.kind == "rate_limited"


def test_a_header_that_cannot_carry_the_query_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    t = offline(monkeypatch, headers={"X-Query": "{q}"})
    assert t.build_search_request(SearchQuery("plain", 5)).headers["x-query"] == "plain"
    with pytest.raises(TargetProtocolError, match="header X-Query would carry non-ASCII"):
        t.build_search_request(SearchQuery("café", 5))


def test_integer_ids_and_nested_id_lists_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    t = offline(monkeypatch, ids="ids[0]", scores=None)
    # ids benchd did not write are labelled so they can never score as a fixture id
    assert parse_answer(t, 200, {}, b'{"ids": [["a", 7]]}') == ("!a", "!7")


def test_search_request_fills_placeholders_with_types(monkeypatch: pytest.MonkeyPatch) -> None:
    body = {
        "query": "{q}",
        "top_k": "{k}",
        "filter": {"ns": "{namespace}"},
        "on": "{reference_date}",
    }
    t = offline(monkeypatch, method="POST", body=body, max_k=20)
    request = t.build_search_request(SearchQuery("what's up?", 50))
    assert json.loads(request.content) == {
        "query": "what's up?",
        "top_k": 20,
        "filter": {"ns": "benchd-eval"},
    }
    params = request.url.params
    assert (params["limit"], params["client_id"], params["read_only"]) == (
        "20",
        "benchd-eval",
        "true",
    )
    assert "reference_date" not in params  # a missing value leaves the parameter out
    dated = t.build_search_request(SearchQuery("q", 5, reference_date="2026-05-01"))
    assert dated.url.params["reference_date"] == "2026-05-01"
    assert json.loads(dated.content)["on"] == "2026-05-01"


# -- strict config ------------------------------------------------------------------


def parse_target(target: dict[str, Any]) -> TargetConfig:
    data = {"probe": [{"name": "p", "fixture": "f.json", "target": target}]}
    return parse_config(data, file="t.toml", base=Path(".")).probes[0].target


BASE = {"kind": "http", "url": "http://127.0.0.1:1"}
SEARCH = {"path": "/search", "ids": "results[*].id", "query": {"q": "{q}"}}


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ({**BASE, "serch": SEARCH}, r"probe\[0\]\.target\.serch: unknown key"),
        ({**BASE}, r"probe\[0\]\.target\.search: required key is missing"),
        (
            {**BASE, "search": {**SEARCH, "limit": 5}},
            r"target\.search\.limit: unknown key; known keys here: body, full_answers, headers",
        ),
        (
            {**BASE, "search": {**SEARCH, "query": {"q": "{query}"}}},
            r"target\.search: query\.q: unknown placeholder \{query\}; known here: \{k\}",
        ),
        (
            {**BASE, "search": {**SEARCH, "ids": "results[x].id"}},
            r"target\.search\.ids: bad path 'results\[x\]\.id' at character 8",
        ),
        (
            {**BASE, "search": {**SEARCH, "body": {"text": "{q"}}},
            r"target\.search: body\.text: unbalanced brace",
        ),
        (
            {**BASE, "search": {**SEARCH, "path": "search"}},
            r"target\.search\.path: must start with '/'",
        ),
        (
            {**BASE, "search": {**SEARCH, "method": "FETCH"}},
            r"target\.search\.method: expected one of 'GET'",
        ),
        (
            {**BASE, "search": SEARCH, "seed": {"path": "/add", "record": {"x": "{q}"}}},
            r"target\.seed: record\.x: unknown placeholder \{q\}",
        ),
        (
            {**BASE, "search": SEARCH, "cleanup": "before"},
            r"target: cleanup = 'before' needs \[probe\.target\.seed\] and \[probe\.target\.delete",
        ),
        (
            {**BASE, "search": {**SEARCH, "body": {"since": datetime.date(2026, 5, 1)}}},
            r"target\.search: body\.since: a TOML date cannot be sent as JSON; quote it",
        ),
        (
            {**BASE, "search": {**SEARCH, "query": {"boost": math.inf}}},
            r"target\.search: query\.boost: inf cannot be sent as JSON",
        ),
        (
            {**BASE, "search": SEARCH, "auth_header": "X Api Key"},
            r"target\.auth_header: is not a valid header name",
        ),
    ],
)
def test_config_errors_name_the_file_and_key_path(target: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as err:
        parse_target(target)
    assert str(err.value).startswith("t.toml: ")
    assert "\n" not in str(err.value)


def test_a_minimal_config_needs_only_url_and_search() -> None:
    parsed = parse_target({**BASE, "search": SEARCH})
    assert parsed.kind == "http" and parsed.secret is None
    assert (parsed.settings.cleanup, parsed.settings.seed, parsed.settings.export) == (
        "never",
        None,
        None,
    )


def test_every_shipped_http_example_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("BRAIN_API_KEY", "MEM0_API_KEY", "CHROMA_TOKEN"):
        monkeypatch.setenv(var, "key")
    for name in ("http-zengram.toml", "http-mem0-style.toml"):
        target = load_config(CONFIGS / name).probes[0].target
        assert target.kind == "http" and target.secret is not None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@functools.cache
def _parsing_target(ids: str, scores: str | None = None) -> HttpTarget:
    """One target per id and scores path (parsing needs no connection; a client is slow)."""
    search = {"path": "/s", "ids": ids} | ({"scores": scores} if scores else {})
    return HttpTarget(parse_target({**BASE, "search": search}).settings, None)


@settings(max_examples=300, deadline=None)
@given(
    path=st.sampled_from(["results[*].id", "ids[0]", "[*].id", "a.b[1]", "x[*][*]", "results"]),
    body=json_values,
    status=st.sampled_from([200, 201, 301, 404, 429, 500]),
)
def test_any_search_answer_gives_ids_or_one_target_error(path: str, body: Any, status: int) -> None:
    target = _parsing_target(path)
    try:
        ranked = parse_answer(target, status, {}, json.dumps(body).encode())
    except TargetError as exc:
        assert "\n" not in str(exc)
    else:
        assert status < 300 and all(isinstance(i, str) for i in ranked)


_ids = st.text(max_size=4) | st.integers()
_scores = st.floats(allow_nan=False) | json_values  # mostly numbers, some anything
_scored = st.fixed_dictionaries(
    {"id": _ids, "score": _scores, "s": st.lists(_scores, min_size=1, max_size=2)}
)
_any_result = st.fixed_dictionaries(
    {"id": _ids}, optional={"score": _scores, "s": st.lists(_scores, max_size=2)}
)
search_answers = st.fixed_dictionaries(
    {"results": st.lists(_scored, max_size=12) | st.lists(_any_result, max_size=12)},
    optional={"scores": st.lists(_scores, max_size=12)},
)


@settings(max_examples=300, deadline=None)
@given(
    scores=st.sampled_from(["results[*].score", "scores", "results[*].s[0]", "x"]),
    body=search_answers | json_values,
)
def test_any_answer_with_a_scores_path_gives_aligned_scores_or_one_target_error(
    scores: str, body: Any
) -> None:
    target = _parsing_target("results[*].id", scores)
    try:
        ranked = parse_answer(target, 200, {}, json.dumps(body).encode())
    except TargetError as exc:
        assert "\n" not in str(exc)
    else:
        got = ranked.scores  # type: ignore[attr-defined]
        assert len(got) == len(ranked)
        assert all(s is None or (isinstance(s, float) and math.isfinite(s)) for s in got)
