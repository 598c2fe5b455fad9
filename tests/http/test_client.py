"""The one HTTP error map, the Retry-After parser and the size checks (benchd.http.client)."""

from __future__ import annotations

import email.utils
import json

import httpx
import pytest

from benchd import redact
from benchd.errors import (
    TargetAuthError,
    TargetHTTPError,
    TargetProtocolError,
    TargetRateLimited,
    TargetRedirect,
)
from benchd.http.client import (
    RETRY_AFTER_CEILING_S,
    ClientSettings,
    ErrorContext,
    declared_too_large,
    open_clients,
    retry_after_s,
    status_error,
)
from benchd.http.messages import MESSAGE_CHARS
from benchd.kinds.zengram import ZengramConfig
from benchd.store.target import note_service_time, service_timer

pytestmark = pytest.mark.anyio

WHERE = "GET http://127.0.0.1:9/memory/search"
NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("7", 7.0),
        ("1.5", 1.5),
        (" 2 ", 2.0),
        ("0", 0.0),
        ("-1", 0.0),  # a delay in the past: now
        ("nan", RETRY_AFTER_CEILING_S),  # "wait", for how long unknown: never at once
        ("inf", RETRY_AFTER_CEILING_S),
        ("1e12", RETRY_AFTER_CEILING_S),
        (email.utils.formatdate(NOW + 30, usegmt=True), 30.0),
        (email.utils.formatdate(NOW + 30), 30.0),  # "-0000": no zone, read as UTC
        (email.utils.formatdate(NOW - 600, usegmt=True), 0.0),  # a past date: now
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_reads_seconds_and_http_dates_and_clamps(
    value: str | None, seconds: float | None
) -> None:
    assert retry_after_s(value, now=NOW) == seconds


def test_a_2xx_is_no_error() -> None:
    assert status_error(200, {}, b"{}", WHERE) is None
    assert status_error(204, {}, b"", WHERE) is None


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_its_own_kind_and_names_only_where_it_points(status: int) -> None:
    location = "https://user:pw@elsewhere.test:8443/steal?token=abc#frag"
    error = status_error(status, {"location": location}, b"", WHERE)
    assert isinstance(error, TargetRedirect) and error.kind == "redirect"
    assert error.status == status
    message = str(error)
    assert f"HTTP {status} redirect to https://elsewhere.test:8443;" in message
    for secret in ("user", "pw", "/steal", "token", "abc", "frag"):
        assert secret not in message.split(":", 2)[2], secret


def test_a_relative_or_missing_location_is_still_a_redirect() -> None:
    relative = status_error(302, {"location": "/v2/search"}, b"", WHERE)
    assert relative is not None and "another path on the same server" in str(relative)
    assert "/v2" not in str(relative)
    bare = status_error(301, {}, b"", WHERE)
    assert isinstance(bare, TargetRedirect)


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_quotes_the_store_with_any_key_it_echoes_hidden(status: int) -> None:
    body = json.dumps({"error": "invalid key sk-live-123456 for tenant 42"}).encode()
    error = status_error(status, {}, body, WHERE)
    assert isinstance(error, TargetAuthError) and error.kind == "auth"
    assert str(error) == (
        f"{WHERE}: HTTP {status}: invalid key <hidden> for tenant 42; the store refused "
        "the API key from the configured api_key_env or api_key_file"
    )


def test_a_refused_key_names_the_config_key_and_where_the_key_came_from() -> None:
    context = ErrorContext(key_source="api_key_env BRAIN_API_KEY")
    error = status_error(401, {}, b'{"error": "Invalid API key"}', WHERE, context)
    assert str(error) == (
        f"{WHERE}: HTTP 401: Invalid API key; the store refused the API key from "
        "api_key_env BRAIN_API_KEY"
    )


def test_a_registered_secret_is_masked_before_the_message_is_cut() -> None:
    secret = "sk-registered-" + "9" * 30
    redact.register_secret(secret)
    try:
        # the secret straddles the cut: masking first leaves none of it standing
        body = json.dumps({"detail": "x" * (MESSAGE_CHARS - 10) + secret}).encode()
        error = status_error(422, {}, body, WHERE)
        assert "sk-registered" not in str(error) and "9999" not in str(error)
        assert str(error).startswith(f"{WHERE}: HTTP 422: xxx")
        assert len(str(error)) <= len(f"{WHERE}: HTTP 422: ") + MESSAGE_CHARS
    finally:
        redact.clear_secrets()


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (  # Chroma: an error class and its message
            {"error": "ChromaError", "message": 'missing field "embeddings" at line 1'},
            'ChromaError: missing field "embeddings" at line 1',
        ),
        (  # FastAPI validation
            {"detail": [{"loc": ["body", "embeddings"], "msg": "field required"}]},
            "body.embeddings: field required",
        ),
        ({"detail": "Collection not found"}, "Collection not found"),
        (
            {"status": {"error": "Wrong input: vector dim 3 != 384"}, "time": 0.1},
            "Wrong input: vector dim 3 != 384",
        ),  # Qdrant
        ({"code": 1100, "message": "invalid parameter[dim]"}, "invalid parameter[dim]"),  # Milvus
        (  # Elasticsearch / OpenSearch
            {
                "error": {"type": "index_not_found_exception", "reason": "no such index [m]"},
                "status": 404,
            },
            "index_not_found_exception: no such index [m]",
        ),
        (  # JSON-RPC (an MCP server)
            {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Invalid params"}},
            "Invalid params",
        ),
        ({"error": "Memory not found"}, "Memory not found"),  # Zengram
        ({"ok": False}, ""),
        ([], ""),
    ],
    ids=[
        "chroma",
        "fastapi-list",
        "fastapi",
        "qdrant",
        "milvus",
        "elastic",
        "jsonrpc",
        "zengram",
        "no-words",
        "empty-list",
    ],
)
def test_the_stores_own_words_are_found_in_the_usual_shapes(body: object, said: str) -> None:
    error = status_error(422, {}, json.dumps(body).encode(), WHERE)
    assert str(error) == f"{WHERE}: HTTP 422" + (f": {said}" if said else "")


def test_a_text_or_html_error_page_is_quoted_as_its_text() -> None:
    express = (
        b'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>Error'
        b"</title>\n</head>\n<body>\n<pre>Cannot GET /health</pre>\n</body>\n</html>\n"
    )
    assert str(status_error(404, {}, express, WHERE)) == f"{WHERE}: HTTP 404: Cannot GET /health"
    plain = b"upstream connect error\r\nreset reason: overflow"
    said = "upstream connect error reset reason: overflow"
    assert str(status_error(503, {}, plain, WHERE)) == f"{WHERE}: HTTP 503: {said}"


def test_a_missing_route_asks_whether_the_url_serves_the_kinds_api() -> None:
    context = ErrorContext(api="a Zengram API")
    where = "GET http://127.0.0.1:9/health"
    error = status_error(404, {}, b"Cannot GET /health", where, context)
    assert str(error) == (
        f"{where}: HTTP 404: Cannot GET /health; is this a Zengram API? GET /health answered 404"
    )
    assert "Zengram" not in str(status_error(500, {}, b"", where, context))  # a store error
    assert "Zengram" not in str(status_error(404, {}, b"", where))  # a kind without one


def test_a_429_is_rate_limited_with_its_parsed_retry_after() -> None:
    limited = status_error(429, {"retry-after": "1.5"}, b'{"error": "slow"}', WHERE)
    assert isinstance(limited, TargetRateLimited) and limited.kind == "rate_limited"
    assert limited.retry_after_s == 1.5 and limited.status == 429
    assert str(limited) == f"{WHERE}: HTTP 429 rate limited, Retry-After 1.5 s: slow"
    lockout = status_error(429, {}, b"", WHERE)
    assert isinstance(lockout, TargetRateLimited) and lockout.retry_after_s is None
    assert TargetHTTPError("x", 429).kind == "rate_limited"  # one kind for a 429, however made


@pytest.mark.parametrize(
    ("status", "kind"), [(400, "http_4xx"), (404, "http_4xx"), (503, "http_5xx")]
)
def test_other_statuses_quote_a_small_error_body(status: int, kind: str) -> None:
    error = status_error(status, {}, b'{"error": "line one\\nline two"}', WHERE)
    assert isinstance(error, TargetHTTPError) and error.kind == kind
    assert str(error) == f"{WHERE}: HTTP {status}: line one line two"


@pytest.mark.parametrize(
    "body",
    [b'{"error":' * 2000 + b'"x"' + b"}" * 2000, b'{"error": "' + b"x" * 100_000 + b'"}', b"\xff"],
    ids=["deep", "huge", "not-utf8"],
)
def test_an_error_body_that_is_deep_huge_or_garbage_is_not_quoted(body: bytes) -> None:
    error = status_error(500, {}, body, WHERE)
    assert str(error) == f"{WHERE}: HTTP 500"


def test_a_declared_length_over_the_cap_is_refused_before_reading() -> None:
    declared_too_large({"content-length": "100"}, 100, WHERE)
    declared_too_large({"content-length": "garbage"}, 100, WHERE)  # left to the read
    declared_too_large({}, 100, WHERE)
    with pytest.raises(TargetProtocolError, match=r"1073741824 bytes \(declared\)") as caught:
        declared_too_large({"content-length": "1073741824"}, 100, WHERE)
    assert caught.value.kind == "decode"


def test_the_service_timer_keeps_the_answering_attempt_only() -> None:
    note_service_time(9.0)  # outside any timer: nothing to note into
    with service_timer() as timer:
        note_service_time(5.0)  # a failed attempt's time is replaced ...
        note_service_time(0.25)  # ... by the attempt that answered
    assert timer.service_s() == 0.25
    with service_timer() as untimed:  # a target that notes nothing: the whole call
        pass
    assert 0.0 <= untimed.service_s() < 9.0


async def test_a_corrupt_gzip_body_is_a_decode_error_never_a_crash() -> None:
    def corrupt(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-encoding": "gzip"}, content=b"\x1f\x8bnot")

    settings: ClientSettings = ZengramConfig(url="http://store.test", max_retries=2)
    clients = open_clients(settings, {}, httpx.MockTransport(corrupt))
    try:
        with pytest.raises(TargetProtocolError, match="content-encoding is corrupt"):
            await clients.http.request("GET", "/health")
    finally:
        await clients.client.aclose()
    assert clients.http.retries == 0 and clients.http.retry_wait_s == 0.0
