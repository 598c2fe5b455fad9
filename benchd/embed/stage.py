"""The embed stage: a target's corpus and queries turned into vectors on benchd's side.

Stores that need vectors from the caller (pgvector, Chroma, Milvus, an HTTP
store with ``{embedding}`` placeholders) get them here, from one
``[probe.target.embed]`` table::

    [probe.target.embed]
    model = "minilm"        # hash:DIMS | minilm | e5 | openai:URL#MODEL
    batch_size = 64         # texts per call to the model
    cache = true            # keep vectors on disk by model, role and text
    cache_dir = ""          # default: $BENCHD_CACHE_DIR, $XDG_CACHE_HOME/benchd, ~/.cache/benchd

The embedder's label is the probe's model label (``TargetInfo.model``), so
switching it is a model change to drift and ``benchd_probe_info``. Vectors
are looked up in memory, then on disk (:mod:`benchd.embed.cache`), and only
what neither holds reaches the model: an unchanged corpus is embedded once
per machine, not once per cycle. Nothing is downloaded: ``minilm`` and
``e5`` read weights from the ``models`` extra.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import anyio.to_thread
import numpy as np

from benchd.embed.cache import CacheRefused, Role, VectorCache, default_cache_dir
from benchd.embed.canary import min_cosine, width_problem
from benchd.embed.config import EmbedConfig
from benchd.embed.models import (
    Embedder,
    EmbedderError,
    EmbedderSpecError,
    FloatMatrix,
    parse_embedder,
)
from benchd.errors import (
    TargetAuthError,
    TargetError,
    TargetProtocolError,
    TargetTimeout,
    TargetUnreachable,
)
from benchd.logging import get_logger
from benchd.result import EmbedCanary

__all__ = ["EmbedConfig", "EmbedStage"]

log = get_logger("benchd.embed")

_MEMORY_ROWS = 20_000  # vectors kept in memory per stage (queries and the latest corpus)


class EmbedStage:
    """Vectors for texts: memory, then the disk cache, then the model in batches.

    ``calls`` counts the batches sent to the model and ``embedded`` the texts
    in them, so tests and ``bench/`` can tell a cached corpus from a
    recomputed one. The model is built on first need, in a worker thread.

    One request's vectors are always of one width. When the model's width
    changes under the same label (a model change), ``model_changes`` counts it
    and the ``embed_model_changed`` warning is logged; vectors already read at
    the old width are computed again (``recomputed``) and the disk cache's
    rows of the old width removed (``dropped``).

    The embedding canary (:meth:`canary`), once armed with its texts (and the
    vectors a baseline pinned), sends them with one call per cycle past every
    cache; ``canary_calls`` counts those calls apart from ``calls``.
    """

    def __init__(
        self, config: EmbedConfig, *, make: Callable[[str], Embedder] = parse_embedder
    ) -> None:
        self.config = config
        self.label = config.label
        self.calls = 0
        self.embedded = 0
        self.model_changes = 0
        self.recomputed = 0
        self.dropped = 0
        self._make = make
        self._embedder: Embedder | None = None
        self._build_lock = anyio.Lock()
        self._cache: VectorCache | None = None
        self._cache_tried = not config.cache
        self._memory: dict[tuple[Role, str], FloatMatrix] = {}
        self._dims = config.dims
        self.canary_calls = 0
        self._canary_texts: tuple[str, ...] = ()
        self._canary_pinned: tuple[tuple[float, ...], ...] = ()
        self._canary_threshold: float | None = None

    @property
    def dims(self) -> int | None:
        """The vectors' dimensions: from the spec, else from the first vector computed."""
        return self._dims

    async def passages(self, texts: Sequence[str]) -> FloatMatrix:
        """Unit vectors of stored texts (row i for ``texts[i]``)."""
        return await self._vectors("passage", texts)

    async def queries(self, texts: Sequence[str]) -> FloatMatrix:
        """Unit vectors of search queries (e5 embeds them differently from passages)."""
        return await self._vectors("query", texts)

    async def query(self, text: str) -> list[float]:
        """One query's vector as a plain list (what client libraries take)."""
        return [float(x) for x in (await self.queries([text]))[0]]

    def remembered_query(self, text: str) -> list[float] | None:
        """A query's vector if this stage computed or read it before (no I/O, no model)."""
        hit = self._memory.get(("query", text))
        return None if hit is None else [float(x) for x in hit]

    def arm_canary(
        self,
        texts: Sequence[str],
        pinned: Sequence[Sequence[float]] = (),
        threshold: float | None = None,
    ) -> None:
        """Embed ``texts`` at every :meth:`canary`, compared with ``pinned`` below ``threshold``
        (without them the canary only reads: what pinning a baseline needs)."""
        self._canary_texts = tuple(texts)
        self._canary_pinned = tuple(tuple(float(x) for x in v) for v in pinned)
        self._canary_threshold = threshold

    async def canary(self) -> EmbedCanary | None:
        """The canary's reading this cycle (None when not armed): one model call, no cache.

        A failed call is a reading with its error kind, logged; it never fails
        the cycle (the cached vectors may still serve it).
        """
        texts = self._canary_texts
        if not texts:
            return None
        try:
            vectors = await self._canary_vectors(list(texts))
        except TargetError as exc:
            log.warning("embed_canary_failed", model=self.label, kind=exc.kind, error=str(exc))
            return EmbedCanary(texts, threshold=self._canary_threshold, error=exc.kind)
        return self._read_canary(texts, vectors)

    async def _canary_vectors(self, texts: list[str]) -> tuple[tuple[float, ...], ...]:
        embedder = await self._model()
        self.canary_calls += 1
        try:
            part = await embedder.embed_queries(texts)
        except TargetError as exc:
            raise _named(exc) from None
        except EmbedderError as exc:
            raise _as_target_error(exc) from None
        if part.ndim != 2 or part.shape[0] != len(texts) or not np.isfinite(part).all():
            raise TargetProtocolError(
                f"embed stage ({self.label}): the embedder answered {part.shape} for "
                f"{len(texts)} canary texts, or non-finite values"
            )
        return tuple(tuple(float(x) for x in row) for row in part)

    def _read_canary(
        self, texts: tuple[str, ...], vectors: tuple[tuple[float, ...], ...]
    ) -> EmbedCanary:
        pinned, threshold = self._canary_pinned, self._canary_threshold
        if not pinned:
            return EmbedCanary(texts, vectors)
        similarity = min_cosine(vectors, pinned)  # compared: the vectors need not be kept
        detail = width_problem(vectors, pinned) or ""
        reading = EmbedCanary(texts, (), similarity, threshold, detail=detail)
        if reading.changed:
            log.warning(
                "embed_canary_changed",
                model=self.label,
                similarity=round(similarity, 6),
                threshold=threshold,
                detail=reading.detail or "the same texts give other vectors: a model change",
            )
        return reading

    async def aclose(self) -> None:
        """Release the model's resources and the cache file."""
        if self._embedder is not None:
            await self._embedder.aclose()
            self._embedder = None
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    # -- steps -----------------------------------------------------------------

    async def _vectors(self, role: Role, texts: Sequence[str]) -> FloatMatrix:
        if not texts:
            return np.zeros((0, self._dims or 1), dtype=np.float32)
        rows: dict[int, FloatMatrix] = {}
        for i, text in enumerate(texts):
            hit = self._memory.get((role, text))
            if hit is not None:
                rows[i] = hit
        todo = [i for i in range(len(texts)) if i not in rows]
        if todo:
            rows.update(await self._from_disk_or_model(role, [texts[i] for i in todo], todo))
        stale = [i for i, v in rows.items() if v.shape[0] != self._dims]
        if stale:  # read before the model changed width: the old model's vectors
            self.recomputed += len(stale)
            rows.update(await self._from_disk_or_model(role, [texts[i] for i in stale], stale))
            if any(v.shape[0] != self._dims for v in rows.values()):
                raise TargetProtocolError(
                    f"embed stage ({self.label}): the embedder's vectors changed width "
                    "twice while embedding one request; is the endpoint serving two models?"
                )
        return np.vstack([rows[i] for i in range(len(texts))]).astype(np.float32, copy=False)

    async def _from_disk_or_model(
        self, role: Role, texts: list[str], where: list[int]
    ) -> dict[int, FloatMatrix]:
        cache = await self._open_cache()
        found: dict[int, FloatMatrix] = {}
        if cache is not None:
            found = await self._cached(cache, role, texts)
        missing = [j for j in range(len(texts)) if j not in found]
        if missing:
            computed = await self._compute(role, [texts[j] for j in missing])
            found.update(zip(missing, computed, strict=True))
            if cache is not None:
                await self._store(cache, role, [texts[j] for j in missing], computed)
        self._remember(role, texts, found)
        return {where[j]: v for j, v in found.items()}

    def _remember(self, role: Role, texts: list[str], found: dict[int, FloatMatrix]) -> None:
        if len(self._memory) + len(found) > _MEMORY_ROWS:
            self._memory.clear()
        for j, vector in found.items():
            self._memory[(role, texts[j])] = vector

    async def _compute(self, role: Role, texts: list[str]) -> FloatMatrix:
        embedder = await self._model()
        size = self.config.batch_size
        parts: list[FloatMatrix] = []
        for start in range(0, len(texts), size):
            batch = texts[start : start + size]
            try:
                if role == "query":
                    part = await embedder.embed_queries(batch)
                else:
                    part = await embedder.embed(batch)
            except TargetError as exc:
                raise _named(exc) from None
            except EmbedderError as exc:
                raise _as_target_error(exc) from None
            self.calls += 1
            self.embedded += len(batch)
            parts.append(self._checked(part, len(batch), parts))
        return np.vstack(parts)

    def _checked(self, part: FloatMatrix, rows: int, before: list[FloatMatrix]) -> FloatMatrix:
        dims = int(part.shape[1]) if part.ndim == 2 else 0
        if part.shape[0] != rows or dims == 0 or not np.isfinite(part).all():
            raise TargetProtocolError(
                f"embed stage ({self.label}): the embedder answered {part.shape} for {rows} "
                "texts, or non-finite values"
            )
        if before and before[0].shape[1] != dims:
            raise TargetProtocolError(
                f"embed stage ({self.label}): the embedder answered {before[0].shape[1]}- and "
                f"{dims}-wide vectors to one request; is the endpoint serving two models?"
            )
        if self._dims is not None and dims != self._dims:
            self._width_changed(self._dims, dims)
        self._dims = dims
        return part

    def _width_changed(self, was: int, now: int) -> None:
        """The same label gives vectors of another width: a model change. Nothing old is kept."""
        self.model_changes += 1
        self._memory.clear()
        log.warning(
            "embed_model_changed",
            model=self.label,
            dims_before=was,
            dims_now=now,
            detail="the same model label gives vectors of another width: a model change; "
            "vectors of the old width are dropped and computed again",
        )

    async def _model(self) -> Embedder:
        if self._embedder is None:
            async with self._build_lock:
                if self._embedder is None:
                    self._embedder = await anyio.to_thread.run_sync(self._build)
        return self._embedder

    def _build(self) -> Embedder:
        try:
            return self._make(self.config.model)
        except EmbedderSpecError as exc:
            raise TargetUnreachable(f"embed stage: {exc}") from None

    async def _open_cache(self) -> VectorCache | None:
        if self._cache_tried:
            return self._cache
        self._cache_tried = True
        directory = Path(self.config.cache_dir) if self.config.cache_dir else default_cache_dir()
        try:
            self._cache = await anyio.to_thread.run_sync(VectorCache, directory)
        except (OSError, sqlite3.Error, CacheRefused) as exc:  # compute instead
            log.warning("embed cache unavailable", directory=str(directory), error=str(exc))
        return self._cache

    async def _cached(
        self, cache: VectorCache, role: Role, texts: list[str]
    ) -> dict[int, FloatMatrix]:
        """Cached rows at the stage's width (before it knows one: the width last cached)."""
        try:
            if self._dims is None:
                self._dims = await anyio.to_thread.run_sync(cache.width, self.label)
            if self._dims is None:
                return {}
            return await anyio.to_thread.run_sync(cache.get, self.label, role, texts, self._dims)
        except (OSError, sqlite3.Error) as exc:  # a miss, never a wrong vector
            log.warning("embed cache not read", error=str(exc))
            return {}

    async def _store(
        self, cache: VectorCache, role: Role, texts: list[str], rows: FloatMatrix
    ) -> None:
        try:
            dropped = await anyio.to_thread.run_sync(cache.put, self.label, role, texts, rows)
        except (OSError, sqlite3.Error) as exc:  # a full disk: vectors stay correct
            log.warning("embed cache not written", error=str(exc))
            return
        if dropped:
            self.dropped += dropped
            log.warning(
                "embed_cache_width_changed",
                model=self.label,
                dims=int(rows.shape[1]),
                dropped=dropped,
                detail="cached vectors of another width under this label were removed",
            )


def _named(exc: TargetError) -> TargetError:
    """``exc``, its message saying it came from the embed stage (its kind unchanged)."""
    exc.message = f"embed stage: {exc.message}"
    exc.args = (exc.message,)
    return exc


_KINDS: dict[str, type[TargetError]] = {
    "timeout": TargetTimeout,
    "auth": TargetAuthError,
    "decode": TargetProtocolError,
}


def _as_target_error(exc: EmbedderError) -> TargetError:
    """An embedder's failure as the target error of its kind (``connect`` if none fits)."""
    kind = getattr(exc, "kind", "connect")
    return _KINDS.get(kind, TargetUnreachable)(f"embed stage: {exc}")
