"""``[probe.target.embed]``: which embedder computes a target's vectors (no numpy here)."""

from __future__ import annotations

from dataclasses import dataclass, field

from benchd.config.schema import check
from benchd.embed.spec import read_spec, spec_problem

DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024

__all__ = ["MAX_BATCH", "EmbedConfig"]

MAX_BATCH = 4096


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

    @property
    def label(self) -> str:
        """The embedder's label (the probe's model label), without building the embedder."""
        return read_spec(self.model).label

    @property
    def dims(self) -> int | None:
        """The vectors' dimensions where known before use (None for an endpoint)."""
        return read_spec(self.model).dims
