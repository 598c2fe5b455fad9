"""An ``openai:`` embedder through the targets' bounded client, against a hostile endpoint.

Each case goes through the embed stage a vector kind builds
(:func:`benchd.kinds.vectors.embed_stage`) and ends as a counted error
kind, never ``internal``; the URL's user info and query string reach the
endpoint but no message.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hostile_embeddings import HostileEmbeddings

from benchd import redact
from benchd.embed.config import EmbedConfig
from benchd.embed.endpoint import EmbedderError, Limits, endpoint_url, matrix_of
from benchd.embed.models import HashEmbedder, parse_embedder
from benchd.embed.stage import EmbedStage
from benchd.errors import TargetError
from benchd.kinds.vectors import embed_stage

pytestmark = pytest.mark.anyio
TEXTS = ["the staging database listens on port 5544", "we ship on fridays"]


@dataclass(frozen=True)
class Target:
    """The keys an embed stage takes from its target's config."""

    timeout_s: float = 2.0
    max_retries: int = 0
    backoff_s: float = 0.0
    max_retry_after_s: float = 1.0


@pytest.fixture(scope="module")
def endpoint() -> Iterator[HostileEmbeddings]:
    with HostileEmbeddings() as server:
        yield server


TARGET = Target()


def stage_for(
    url: str, model: str, tmp_path: Path, target: Target = TARGET, **embed: Any
) -> EmbedStage:
    config = EmbedConfig(model=f"openai:{url}#{model}", cache_dir=str(tmp_path), **embed)
    return embed_stage(config, target)


async def failure(url: str, model: str, tmp_path: Path, **kw: Any) -> TargetError:
    stage = stage_for(url, model, tmp_path, **kw)
    try:
        with pytest.raises(TargetError) as caught:
            await stage.passages(TEXTS)
    finally:
        await stage.aclose()
    return caught.value


async def test_a_healthy_endpoint_gives_the_models_unit_vectors(
    endpoint: HostileEmbeddings, tmp_path: Path
) -> None:
    stage = stage_for(endpoint.url, "hash", tmp_path)
    vectors = await stage.passages(TEXTS)
    await stage.aclose()
    assert np.allclose(vectors, HashEmbedder(16).embed_sync(TEXTS), atol=1e-6)


async def test_a_large_answer_is_decoded_in_the_worker_and_matches(
    endpoint: HostileEmbeddings, tmp_path: Path
) -> None:
    stage = stage_for(endpoint.url, "big", tmp_path)
    vectors = await stage.passages(TEXTS)
    await stage.aclose()
    assert np.allclose(vectors, HashEmbedder(16).embed_sync(TEXTS), atol=1e-6)


@pytest.mark.parametrize(
    ("model", "kind", "words"),
    [
        ("huge", "decode", "exceeds max_response_bytes"),
        ("flood", "decode", "exceeds max_response_bytes"),
        ("lists", "decode", "data[0] is not an object"),
        ("string", "decode", "no 'data' array"),
        ("deep", "decode", "nests JSON deeper"),
        ("refused", "auth", "HTTP 401"),
    ],
)
async def test_a_bad_answer_is_a_counted_kind_naming_the_endpoint(
    endpoint: HostileEmbeddings, tmp_path: Path, model: str, kind: str, words: str
) -> None:
    error = await failure(endpoint.url, model, tmp_path)
    assert (error.kind, type(error).__name__) != ("connect", "TargetError")
    assert error.kind == kind, error
    assert words in str(error)
    assert str(error).startswith(f"embed stage: POST {endpoint.url}/embeddings")


async def test_the_size_cap_is_the_embed_tables_own(
    endpoint: HostileEmbeddings, tmp_path: Path
) -> None:
    error = await failure(endpoint.url, "hash", tmp_path, max_response_bytes=100)
    assert error.kind == "decode" and "max_response_bytes = 100" in str(error)


async def test_a_dribbled_answer_ends_at_the_targets_timeout(
    endpoint: HostileEmbeddings, tmp_path: Path
) -> None:
    error = await failure(endpoint.url, "dribble", tmp_path, target=Target(timeout_s=1.0))
    assert error.kind == "timeout"
    assert "no complete answer within the timeout" in str(error)


async def test_a_refused_connection_is_connect(tmp_path: Path) -> None:
    with HostileEmbeddings() as gone:
        url = gone.url
    error = await failure(url, "hash", tmp_path)
    assert error.kind == "connect"


@pytest.mark.parametrize("model", ["flaky", "limited"])
async def test_a_503_or_429_with_retry_after_is_retried_and_answered(
    endpoint: HostileEmbeddings, tmp_path: Path, model: str
) -> None:
    stage = stage_for(endpoint.url, model, tmp_path, target=Target(max_retries=2))
    vectors = await stage.passages(TEXTS)
    await stage.aclose()
    assert vectors.shape == (2, 16)
    assert sum(1 for _, _, body in endpoint.seen if body["model"] == model) == 2


async def test_a_429_without_retry_after_is_rate_limited_and_not_retried(
    endpoint: HostileEmbeddings, tmp_path: Path
) -> None:
    error = await failure(endpoint.url, "lockout", tmp_path, target=Target(max_retries=3))
    assert error.kind == "rate_limited"
    assert sum(1 for _, _, body in endpoint.seen if body["model"] == "lockout") == 1


async def test_the_query_follows_the_path_and_no_credential_is_shown(
    endpoint: HostileEmbeddings, tmp_path: Path
) -> None:
    secret, password = "AzKey-0123456789abcdef", "pw-5544-secret"
    url = f"http://bob:{password}@{endpoint.url.removeprefix('http://')}?api-key={secret}"
    config = EmbedConfig(model=f"openai:{url}#hash", cache_dir=str(tmp_path))
    assert config.label == f"openai:{endpoint.url}#hash"
    stage = embed_stage(config, TARGET)
    await stage.passages(["one text"])
    path, headers, _ = endpoint.seen[-1]
    assert path == f"/v1/embeddings?api-key={secret}"
    assert headers["Authorization"].startswith("Basic ")
    await stage.aclose()
    error = await failure(url, "string", tmp_path)
    assert secret not in str(error) and password not in str(error)
    assert redact.text(f"GET {url}") == f"GET http://***@{endpoint.url[7:]}?api-key=***"


def test_an_endpoint_url_is_taken_apart() -> None:
    parts = endpoint_url("https://u:p@api.example:8443/openai/v1/?api-version=2&api-key=k")
    assert parts.origin == "https://api.example:8443"
    assert parts.path == "/openai/v1/embeddings"
    assert parts.params == (("api-version", "2"), ("api-key", "k"))
    assert parts.public == "https://api.example:8443/openai/v1/embeddings"
    assert endpoint_url("http://h:1/v1/embeddings").path == "/v1/embeddings"


@pytest.mark.parametrize(
    "value",
    [
        {"data": [[0.1, 0.2]]},
        {"data": "xxx"},
        {"data": [{"embedding": [0.1, True]}]},
        {"data": [{"embedding": "not base64!"}]},
        {"data": [{"embedding": [1e39]}]},
        {"data": [{"embedding": [10**400]}]},
        {"data": [{"embedding": [float("nan")]}]},
        {"data": [{"index": 5, "embedding": [0.1]}]},
        {"data": []},
        [1, 2],
    ],
)
def test_anything_but_the_documented_shape_is_a_value_error(value: object) -> None:
    with pytest.raises(ValueError):
        matrix_of(value, rows=1)


@pytest.mark.parametrize(
    ("model", "kind"),
    [
        ("huge", "decode"),
        ("flood", "decode"),
        ("lists", "decode"),
        ("string", "decode"),
        ("deep", "decode"),
        ("refused", "auth"),
        ("dribble", "timeout"),
    ],
)
async def test_the_reference_stores_own_client_is_bounded_too(
    endpoint: HostileEmbeddings, model: str, kind: str
) -> None:
    """Without the targets' client (the reference store cannot import it): same bounds."""
    embedder = parse_embedder(f"openai:{endpoint.url}#{model}", limits=Limits(timeout_s=1.0))
    try:
        with pytest.raises(EmbedderError) as caught:
            await embedder.embed(TEXTS)
    finally:
        await embedder.aclose()
    assert caught.value.kind == kind, caught.value
    assert str(caught.value).startswith(f"POST {endpoint.url}/embeddings")
