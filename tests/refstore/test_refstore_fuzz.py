"""Arbitrary query text and import records never make the store answer 500."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import import_ok, refstore_fixture

fuzz_store = refstore_fixture(name="fuzz_store", scope="module", retriever="hybrid")

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_record = st.dictionaries(
    st.sampled_from(
        ["id", "content", "text", "type", "importance", "client_id", "created_at", "metadata",
         "entities", "tags", "key", "subject", "confidence", "access_count", "active"]
    ),
    _json,
)  # fmt: skip


@pytest.fixture(scope="module")
def fuzz_client(fuzz_store: RefStoreThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fuzz_store.url, headers={"x-api-key": fuzz_store.api_key}) as client:
        import_ok(client, [{"content": "hello world, café NEAR AND 日本語"}])
        yield client


@settings(max_examples=60, deadline=None)
@given(q=st.text(min_size=1, max_size=300))
def test_any_query_text_gets_200(fuzz_client: httpx.Client, q: str) -> None:
    reply = fuzz_client.get("/memory/search", params={"q": q, "read_only": "true"})
    assert reply.status_code == (200 if q.strip() else 400), reply.text


@settings(max_examples=60, deadline=None)
@given(records=st.lists(_record, max_size=5))
def test_any_import_records_are_counted_never_500(
    fuzz_client: httpx.Client, records: list[dict[str, Any]]
) -> None:
    counts = import_ok(fuzz_client, records)
    assert counts["imported"] + counts["skipped"] + counts["errors"] == len(records)


def test_nan_and_infinity_in_a_body_are_400(fuzz_client: httpx.Client) -> None:
    for literal in (b"NaN", b"Infinity", b"-Infinity"):
        body = (
            b'{"operator_approved": true, "data": [{"content": "x", "confidence": '
            + literal
            + b"}]}"
        )
        reply = fuzz_client.post("/export/import", content=body)
        assert reply.status_code == 400
        assert literal.decode().lstrip("-") in reply.json()["error"]


@settings(max_examples=40, deadline=None)
@given(
    moment=st.datetimes(timezones=st.timezones() | st.none()),
    q=st.sampled_from(
        ["recently", "this year", "last month", "in december", "3 years ago", "today"]
    ),
)
def test_any_reference_date_is_answered_or_refused_never_500(
    fuzz_client: httpx.Client, moment: Any, q: str
) -> None:
    params = {"q": q, "reference_date": moment.isoformat(), "read_only": "true"}
    reply = fuzz_client.get("/memory/search", params=params)
    assert reply.status_code == (200 if 1000 <= moment.year <= 9000 else 400), reply.text
