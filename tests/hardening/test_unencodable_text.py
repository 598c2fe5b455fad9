"""Text a store sends that is valid JSON but not UTF-8 reaches every output encodable and masked.

Hypothesis generates strings with lone surrogates (``"\\ud800"`` is valid
JSON; no UTF-8 encoder takes it), other odd code points, line breaks and the
API key, and a loopback store (``tests/hostile_store.py``'s
:class:`RawAnswers`) puts one in every string field of every answer it
gives — health, listing, import, search, and an error body. A real cycle
runs against it; then every output benchd has renders the result and must
encode as UTF-8 without the key: ``/metrics``, ``/api/status``, the page and
the probe page, the table, JUnit, TREC and a JSON log line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import structlog
from hostile_store import RawAnswers, response
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest

from benchd import redact
from benchd.config.load import ProbeConfig, TargetConfig
from benchd.config.secrets import Secret
from benchd.cycle import run_cycle
from benchd.fixtures.model import load_fixture
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.surfacers.book import ResultBook
from benchd.surfacers.junit import render_junit
from benchd.surfacers.prometheus import build_registry
from benchd.surfacers.status import status_document
from benchd.surfacers.table import render_many
from benchd.surfacers.trec_run import render_trec_run
from benchd.web.page import render_page, render_probe_page

KEY = "sk-benchd-SURROGATE-0c5f2a9e71d4b3"
ODD = st.sampled_from(["\ud800", "\udfff", "\udbff\u0041", "\ufffe", "\x00", "\u202e", "\n", KEY])
TEXT = st.lists(st.one_of(ODD, st.text(max_size=5)), min_size=1, max_size=6).map("".join)


@pytest.fixture(scope="module")
def store() -> Iterator[RawAnswers]:
    with RawAnswers() as server:
        yield server


@pytest.fixture(scope="module")
def fixture_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fixture") / "tiny.json"
    path.write_text(
        json.dumps(
            {
                "memories": [
                    {"id": "m1", "content": "harbor ferry", "created_at": "2026-01-05T10:00:00Z"}
                ],
                "queries": [{"id": "q1", "q": "harbor", "expected_ids": ["m1"]}],
            }
        )
    )
    return path


def router(bad: str, error: bool):  # type: ignore[no-untyped-def]
    def route(method: str, target: str) -> bytes:
        path = target.partition("?")[0]
        if error and path.startswith("/memory/search"):
            return response(500, json.dumps({"error": bad}).encode())
        if path == "/health":
            return response(200, json.dumps({"status": bad, "model": bad, "version": bad}).encode())
        if path == "/export/import":
            return response(
                200, json.dumps({"imported": 1, "skipped": 0, "errors": 0, "x": bad}).encode()
            )
        if path == "/export":
            memories = [{"id": bad, "content": bad, "client_id": bad, "content_hash": bad}]
            return response(200, json.dumps({"memories": memories, "has_more": False}).encode())
        if path == "/memory/search":
            results = [{"id": bad, "effective_score": 0.5, "summary": bad, "type": bad}]
            body = {"query": bad, "count": 1, "results": results, "expanded_query": bad}
            return response(200, json.dumps(body).encode())
        return response(200, json.dumps({"id": bad, "deleted": True, "message": bad}).encode())

    return route


def outputs(book: ResultBook, name: str) -> dict[str, str | bytes]:
    result = book.latest(name)
    assert result is not None
    document = status_document(book, queries=True)
    events: list[str] = []
    structlog.configure(
        processors=[redact.processor, structlog.processors.JSONRenderer()],
        logger_factory=lambda *a: structlog.PrintLogger(file=_Lines(events)),
    )
    structlog.get_logger().error("cycle failed", error=result.error_message, model=result.info)
    return {
        "metrics": generate_latest(build_registry(book)),
        "status": json.dumps(document, ensure_ascii=False, allow_nan=False),
        "page": render_page(status_document(book, queries=False)),
        "probe page": render_probe_page(document, name),
        "table": render_many([result]),
        "junit": render_junit([result]),
        "trec": render_trec_run(result),
        "log": "".join(events),
    }


class _Lines:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def write(self, text: str) -> None:
        self.lines.append(text)

    def flush(self) -> None:
        pass


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(bad=TEXT, error=st.booleans())
def test_every_output_encodes_whatever_text_a_store_sends(
    store: RawAnswers, fixture_path: Path, bad: str, error: bool
) -> None:
    redact.clear_secrets()
    redact.register_secret(KEY)
    store.route = router(bad, error)
    settings_ = ZengramConfig(
        url=store.url, namespace="ns-odd", max_retries=0, searchable_timeout_s=0.2, cleanup="never"
    )
    probe = ProbeConfig(
        name="odd",
        fixture=fixture_path,
        k=(1,),
        target=TargetConfig("zengram", settings_, Secret(KEY)),
    )

    async def cycle() -> object:
        target = ZengramTarget(settings_, Secret(KEY))
        try:
            return await run_cycle(probe, load_fixture(fixture_path), target)
        finally:
            await target.aclose()

    result = anyio.run(cycle)
    book = ResultBook()
    book.set_probes(["odd"], {"odd": 60.0})
    book.record(result)  # type: ignore[arg-type]
    try:
        for name, out in outputs(book, "odd").items():
            data = out if isinstance(out, bytes) else out.encode("utf-8")  # raises if unencodable
            assert KEY.encode() not in data, name
    finally:
        structlog.reset_defaults()
        redact.clear_secrets()
