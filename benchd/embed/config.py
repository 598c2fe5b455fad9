"""``[probe.target.embed]``: which embedder computes a target's vectors (no numpy here)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from benchd.config.schema import check
from benchd.embed.spec import read_spec, spec_problem

DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024

__all__ = ["MAX_BATCH", "MAX_CANARY", "EmbedConfig"]

MAX_BATCH = 4096
MAX_CANARY = 64
"""The most texts the embedding canary embeds (one call per cycle)."""
MAX_CANARY_CHARS = 2000


def _canary_count_problem(value: int) -> str | None:
    return None if 0 <= value <= MAX_CANARY else f"must be in 0..{MAX_CANARY} (0: no canary)"


def _canary_texts_problem(value: tuple[str, ...]) -> str | None:
    if len(value) > MAX_CANARY:
        return f"at most {MAX_CANARY} texts"
    if any(not t.strip() or len(t) > MAX_CANARY_CHARS for t in value):
        return f"each text must be non-empty and at most {MAX_CANARY_CHARS} characters"
    if len(set(value)) != len(value):
        return "each text once"
    return None


def _bytes_problem(value: int) -> str | None:
    return None if value > 0 else "must be > 0"


def _batch_problem(value: int) -> str | None:
    return None if 1 <= value <= MAX_BATCH else f"must be in 1..{MAX_BATCH}"


@dataclass(frozen=True, slots=True)
class EmbedConfig:
    """``[probe.target.embed]``: which embedder computes the vectors, and how they are kept."""

    model: str = field(metadata=check(spec_problem))
    batch_size: int = field(default=64, metadata=check(_batch_problem))
    cache: bool = True
    cache_dir: str = ""
    # the largest answer read from an openai: endpoint (declared or received)
    max_response_bytes: int = field(
        default=DEFAULT_MAX_RESPONSE_BYTES, metadata=check(_bytes_problem)
    )
    # the embedding canary, pinned by `benchd baseline save`: these texts, else the
    # corpus's first canary_queries queries (0 and no texts: no canary)
    canary_queries: int = field(default=4, metadata=check(_canary_count_problem))
    canary_texts: tuple[str, ...] = field(default=(), metadata=check(_canary_texts_problem))

    @property
    def label(self) -> str:
        """The embedder's label (the probe's model label), without building the embedder."""
        return read_spec(self.model).label

    @property
    def canary_on(self) -> bool:
        """Whether the embedding canary runs (``canary_queries = 0`` and no texts: it does not)."""
        return bool(self.canary_texts) or self.canary_queries > 0

    def canary(self, queries: Sequence[str]) -> tuple[str, ...]:
        """The texts the canary embeds: ``canary_texts``, else the first distinct queries."""
        if self.canary_texts:
            return self.canary_texts
        return tuple(dict.fromkeys(q for q in queries if q.strip()))[: self.canary_queries]

    @property
    def dims(self) -> int | None:
        """The vectors' dimensions where known before use (None for an endpoint)."""
        return read_spec(self.model).dims
