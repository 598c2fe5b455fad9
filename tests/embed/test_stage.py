"""The embed stage: vectors from memory, the disk cache, then the model; counted calls."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from structlog.testing import capture_logs

from benchd.config.schema import decode
from benchd.embed.cache import CACHE_FILE
from benchd.embed.models import Embedder, FloatMatrix, HashEmbedder, parse_embedder
from benchd.embed.stage import EmbedConfig, EmbedStage
from benchd.errors import ConfigError, TargetProtocolError

pytestmark = pytest.mark.anyio

TEXTS = [f"memory {i} about the staging database on port {5000 + i}" for i in range(10)]


class Counting:
    """Wraps an embedder and records every batch it is asked for."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.batches: list[tuple[str, int]] = []

    @property
    def spec(self) -> str:
        return self.inner.spec

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        self.batches.append(("passage", len(texts)))
        return await self.inner.embed(texts)

    async def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        self.batches.append(("query", len(texts)))
        return await self.inner.embed_queries(texts)

    async def aclose(self) -> None:
        await self.inner.aclose()


class QueryPrefixed(Counting):
    """Embeds queries differently from passages, as e5 does."""

    async def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        self.batches.append(("query", len(texts)))
        return await self.inner.embed([f"query {t}" for t in texts])


MADE: dict[int, list[Counting]] = {}


def stage(tmp_path: Path, model: str = "hash:64", *, cache: bool = True) -> EmbedStage:
    """A stage over a counting embedder; ``made(stage)`` lists the embedders it built."""
    config = EmbedConfig(model=model, batch_size=4, cache=cache, cache_dir=str(tmp_path))
    made: list[Counting] = []

    def make(spec: str) -> Embedder:
        made.append(Counting(parse_embedder(spec)))
        return made[-1]

    built = EmbedStage(config, make=make)
    MADE[id(built)] = made
    return built


def made(s: EmbedStage) -> list[Counting]:
    return MADE[id(s)]


async def test_vectors_are_the_embedders_own_in_batches_of_batch_size(tmp_path: Path) -> None:
    s = stage(tmp_path)
    vectors = await s.passages(TEXTS)
    assert np.array_equal(vectors, HashEmbedder(64).embed_sync(TEXTS))
    assert s.calls == 3 and s.embedded == 10  # 4 + 4 + 2
    assert made(s)[0].batches == [("passage", 4), ("passage", 4), ("passage", 2)]
    await s.aclose()


async def test_a_fresh_stage_reads_an_unchanged_corpus_from_disk(tmp_path: Path) -> None:
    first = stage(tmp_path)
    computed = await first.passages(TEXTS)
    await first.aclose()
    second = stage(tmp_path)
    cached = await second.passages(TEXTS)
    assert np.array_equal(cached, computed)
    assert second.calls == 0 and made(second) == []
    await second.aclose()


async def test_only_the_changed_texts_reach_the_model(tmp_path: Path) -> None:
    first = stage(tmp_path)
    await first.passages(TEXTS)
    await first.aclose()
    second = stage(tmp_path)
    changed = [*TEXTS[:9], "an edited memory"]
    vectors = await second.passages(changed)
    assert second.embedded == 1
    assert np.array_equal(vectors, HashEmbedder(64).embed_sync(changed))
    await second.aclose()


async def test_a_switched_model_misses_the_cache(tmp_path: Path) -> None:
    first = stage(tmp_path, "hash:64")
    await first.passages(TEXTS)
    await first.aclose()
    other = stage(tmp_path, "hash:128")
    vectors = await other.passages(TEXTS)
    assert other.embedded == 10 and vectors.shape == (10, 128)
    assert other.label == "hash:128"
    await other.aclose()


async def test_queries_and_passages_are_cached_apart(tmp_path: Path) -> None:
    config = EmbedConfig(model="hash:64", cache_dir=str(tmp_path))
    s = EmbedStage(config, make=lambda spec: QueryPrefixed(parse_embedder(spec)))
    passage = await s.passages(["deploys on thursday"])
    query = await s.queries(["deploys on thursday"])
    assert not np.array_equal(passage, query)
    assert s.calls == 2
    again = await s.query("deploys on thursday")
    assert again == [float(x) for x in query[0]] and s.calls == 2
    await s.aclose()


async def test_a_repeated_query_is_served_from_memory_without_the_disk(tmp_path: Path) -> None:
    s = stage(tmp_path)
    await s.query("where is staging")
    (tmp_path / CACHE_FILE).unlink()  # memory answers; the file is not read again
    await s.query("where is staging")
    assert s.calls == 1
    await s.aclose()


async def test_cache_off_recomputes_in_a_fresh_stage(tmp_path: Path) -> None:
    first = stage(tmp_path, cache=False)
    await first.passages(TEXTS)
    await first.aclose()
    second = stage(tmp_path, cache=False)
    await second.passages(TEXTS)
    assert second.embedded == 10
    assert not (tmp_path / CACHE_FILE).exists()
    await second.aclose()


async def test_an_unreadable_cache_file_costs_time_not_correctness(tmp_path: Path) -> None:
    (tmp_path / CACHE_FILE).write_bytes(b"this is not a sqlite database" * 100)
    s = stage(tmp_path)
    with capture_logs() as events:
        vectors = await s.passages(TEXTS)
    assert np.array_equal(vectors, HashEmbedder(64).embed_sync(TEXTS))
    assert any(e["event"].startswith("embed cache") for e in events)
    await s.aclose()


async def test_an_embedder_changing_width_within_one_request_is_a_decode_error(
    tmp_path: Path,
) -> None:
    class Shrinking(Counting):
        async def embed(self, texts: Sequence[str]) -> FloatMatrix:
            dims = 8 if self.batches else 16
            self.batches.append(("passage", len(texts)))
            return np.ones((len(texts), dims), dtype=np.float32)

    config = EmbedConfig(model="openai:http://127.0.0.1:9/v1#m", batch_size=2, cache=False)
    s = EmbedStage(config, make=lambda spec: Shrinking(HashEmbedder(8)))
    with pytest.raises(TargetProtocolError, match="16- and 8-wide vectors to one") as caught:
        await s.passages(TEXTS[:4])
    assert caught.value.kind == "decode"
    await s.aclose()


def test_config_rejects_bad_specs_and_batch_sizes() -> None:
    with pytest.raises(ConfigError) as caught:
        decode(EmbedConfig, {"model": "hash:1", "batch_size": 0}, file="f.toml", path="embed")
    text = "\n".join(caught.value.problems)
    assert "embed.model: hash embedder needs 2..65536 dims" in text
    assert "embed.batch_size: must be in 1..4096" in text
    with pytest.raises(ConfigError, match="unknown embedder 'word2vec'"):
        decode(EmbedConfig, {"model": "word2vec"}, file="f.toml", path="embed")


def test_labels_and_dimensions_are_known_without_building_the_model() -> None:
    assert EmbedConfig(model=" hash:300 ").label == "hash:300"
    assert EmbedConfig(model="minilm").dims == 384
    assert EmbedConfig(model="e5").label == "e5"
    endpoint = EmbedConfig(model="openai:http://127.0.0.1:8080/v1#nomic&encoding=base64")
    assert endpoint.label == "openai:http://127.0.0.1:8080/v1#nomic&encoding=base64"
    assert endpoint.dims is None
