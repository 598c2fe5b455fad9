"""The embedding canary's one call against a hostile endpoint: bounded like every embed call.

A bad answer, a 100 MB one, a dribbled one or a refusal is a reading with its
counted error kind (never a raised error, never ``internal``): the cycle goes on
with whatever the cache holds, and the next cycle calls again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_embeddings import HostileEmbeddings
from structlog.testing import capture_logs
from test_endpoint import Target, stage_for

from benchd.embed.models import HashEmbedder

pytestmark = pytest.mark.anyio
TEXTS = ("where does staging listen", "when do we ship")


@pytest.fixture(scope="module")
def endpoint() -> Iterator[HostileEmbeddings]:
    with HostileEmbeddings(dribble_s=0.2) as server:
        yield server


def pinned() -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(float(x) for x in v) for v in HashEmbedder(16).embed_sync(list(TEXTS)))


@pytest.mark.parametrize(
    ("model", "kind"),
    [
        ("huge", "decode"),
        ("flood", "decode"),
        ("lists", "decode"),
        ("string", "decode"),
        ("deep", "decode"),
        ("refused", "auth"),
        ("lockout", "rate_limited"),
        ("dribble", "timeout"),
    ],
)
async def test_a_hostile_answer_to_the_canary_is_a_reading_with_its_kind(
    endpoint: HostileEmbeddings, tmp_path: Path, model: str, kind: str
) -> None:
    stage = stage_for(endpoint.url, model, tmp_path, target=Target(timeout_s=1.0))
    stage.arm_canary(TEXTS, pinned(), 0.999)
    try:
        with capture_logs() as logs:
            reading = await stage.canary()
    finally:
        await stage.aclose()
    assert reading is not None and reading.error == kind
    assert reading.similarity is None and not reading.changed and stage.canary_calls == 1
    assert [e["event"] for e in logs] == ["embed_canary_failed"]


async def test_a_healthy_endpoint_reads_1_and_the_next_call_goes_out_again(
    endpoint: HostileEmbeddings, tmp_path: Path
) -> None:
    stage = stage_for(endpoint.url, "hash", tmp_path)
    stage.arm_canary(TEXTS, pinned(), 0.999)
    await stage.queries(list(TEXTS))  # cached now: the canary never reads the cache
    before = len(endpoint.seen)
    try:
        first, second = await stage.canary(), await stage.canary()
    finally:
        await stage.aclose()
    assert len(endpoint.seen) == before + 2 and stage.canary_calls == 2
    for reading in (first, second):
        assert reading is not None and reading.similarity == pytest.approx(1.0)
        assert not reading.changed and reading.vectors == ()  # compared: not kept
