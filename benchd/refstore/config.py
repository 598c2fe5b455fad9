"""The reference store's start-up settings."""

from __future__ import annotations

from dataclasses import dataclass

from benchd.errors import UsageError
from benchd.refstore.profiles import DEFAULT_PROFILE, PROFILES
from benchd.refstore.records import parse_timestamp
from benchd.refstore.retrievers import RETRIEVERS

__all__ = ["DEFAULT_EMBEDDER", "DEFAULT_RETRIEVER", "RefStoreConfig"]

DEFAULT_EMBEDDER = "hash:1024"
DEFAULT_RETRIEVER = "hybrid"


@dataclass(frozen=True, slots=True)
class RefStoreConfig:
    """How to start a reference store.

    ``port = 0`` picks a free ephemeral port; ``db = None`` keeps everything
    in memory. ``faults`` are fault specs (see :mod:`benchd.refstore.faults`).
    A rate limit of 0 disables that limit (the real server's defaults are
    120 reads and 60 writes per minute per key). ``profile`` picks the
    behaviour (see :mod:`benchd.refstore.profiles`); ``import_pacing`` scales
    the ``zengram-4.3`` profile's import pause (1.0 = 100 ms per 10 records);
    ``clock`` (ISO 8601) starts the store's clock at that moment.
    """

    api_key: str
    host: str = "127.0.0.1"
    port: int = 0
    db: str | None = None
    retriever: str = DEFAULT_RETRIEVER
    embedder: str = DEFAULT_EMBEDDER
    faults: tuple[str, ...] = ()
    read_limit_per_min: int = 120
    write_limit_per_min: int = 60
    profile: str = DEFAULT_PROFILE
    import_pacing: float = 1.0
    clock: str | None = None

    def __post_init__(self) -> None:
        if not self.api_key:
            raise UsageError("refstore: the API key is empty: set it in the environment")
        if self.retriever not in RETRIEVERS:
            raise UsageError(
                f"refstore: unknown retriever '{self.retriever}': "
                f"use one of {', '.join(RETRIEVERS)}"
            )
        if not 0 <= self.port <= 65535:
            raise UsageError(f"refstore: port {self.port} is out of range 0..65535")
        if self.read_limit_per_min < 0 or self.write_limit_per_min < 0:
            raise UsageError("refstore: rate limits must be >= 0 (0 = unlimited)")
        if self.profile not in PROFILES:
            raise UsageError(
                f"refstore: unknown profile '{self.profile}': use one of {', '.join(PROFILES)}"
            )
        if not 0.0 <= self.import_pacing <= 100.0:
            raise UsageError("refstore: import pacing must be in 0..100 (1 = the real server's)")
        if self.clock is not None:
            try:
                parse_timestamp(self.clock)
            except ValueError:
                raise UsageError(
                    f"refstore: clock '{self.clock}' is not an ISO 8601 time, "
                    "e.g. 2026-07-01T00:00:00Z"
                ) from None
