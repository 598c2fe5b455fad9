"""Store kinds: one protocol, one module per kind, one registry.

Where a new kind goes: one module in this package (``benchd/kinds/<kind>.py``,
or a package for a large one) that implements the transport-free store
protocol of :mod:`benchd.store.protocol` and declares its settings type,
plus one :class:`TargetKind` line in ``TARGET_KINDS`` below. Everything
benchd promises about a namespace (owned ids, verified seeds, verified
deletes, the sentinel and its lease, purge) then comes from the one flow,
:mod:`benchd.store.flow`; what the kind cannot do it declares in its
:class:`~benchd.store.protocol.Capabilities`, and benchd says which
guarantees such a probe lacks.

``TARGET_KINDS`` is the only list of kinds: config decodes ``[probe.target]``
with the entry's settings type and reads what the entry declares about them
(:mod:`benchd.config.kinds`: common settings, budget costs) without importing
any adapter; the probe builds the adapter with the entry's builder; generic
code reads the entry's capabilities, never a target's attributes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from benchd.config.kinds import CommonSettings, StoreCosts, register_target_kind, url_key_common
from benchd.config.secrets import Secret
from benchd.kinds.chroma import (
    ChromaConfig,
    chroma_capabilities,
    chroma_costs,
    chroma_target,
)
from benchd.kinds.http.target import (
    HttpConfig,
    HttpTarget,
    http_capabilities,
    http_costs,
)
from benchd.kinds.mcp.config import McpConfig
from benchd.kinds.mcp.store import mcp_capabilities, mcp_common, mcp_costs, mcp_target
from benchd.kinds.milvus import (
    MilvusConfig,
    milvus_capabilities,
    milvus_common,
    milvus_costs,
    milvus_target,
)
from benchd.kinds.pgvector import (
    PgvectorConfig,
    pgvector_capabilities,
    pgvector_common,
    pgvector_costs,
    pgvector_target,
)
from benchd.kinds.python import (
    PythonConfig,
    python_capabilities,
    python_common,
    python_costs,
    python_namespace,
    python_target,
)
from benchd.kinds.qdrant import (
    QdrantConfig,
    qdrant_capabilities,
    qdrant_common,
    qdrant_costs,
    qdrant_target,
)
from benchd.kinds.zengram import (
    ZengramConfig,
    ZengramTarget,
    zengram_capabilities,
    zengram_costs,
)
from benchd.store.flow import WriteRate
from benchd.store.lease import LeaseHolder
from benchd.store.protocol import Capabilities
from benchd.store.target import ProbeTarget, SearchQuery, Target

__all__ = [
    "TARGET_KINDS",
    "Capabilities",
    "ProbeTarget",
    "SearchQuery",
    "Target",
    "TargetKind",
    "build_target",
    "capabilities_of",
    "register",
    "register_kinds",
]

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class TargetKind(Generic[S]):
    """One registered kind: its settings type and what it declares about them.

    ``build`` makes the adapter; ``capabilities`` says what a store with
    these settings can do; ``common`` and ``costs`` are what config and the
    budget planner read (see :class:`benchd.config.kinds.KindSchema`).
    """

    name: str
    settings_type: type[S]
    # (settings, secret, *, lease=None, write_rate=None): lease and write share as the
    # probe runner grants them (benchd.store.flow.NamespaceFlow)
    build: Callable[..., ProbeTarget]
    capabilities: Callable[[S], Capabilities]
    common: Callable[[S], CommonSettings]
    costs: Callable[[S], StoreCosts]
    # the namespace of a probe whose table names none, from the probe's name (None: the
    # settings type's own default)
    namespace_default: Callable[[str], str | None] = lambda probe: None


TARGET_KINDS: dict[str, TargetKind[Any]] = {
    kind.name: kind
    for kind in (
        TargetKind(
            "zengram",
            ZengramConfig,
            ZengramTarget,
            zengram_capabilities,
            url_key_common,
            zengram_costs,
        ),
        TargetKind("http", HttpConfig, HttpTarget, http_capabilities, url_key_common, http_costs),
        TargetKind(
            "python",
            PythonConfig,
            python_target,
            python_capabilities,
            python_common,
            python_costs,
            python_namespace,
        ),
        TargetKind("mcp", McpConfig, mcp_target, mcp_capabilities, mcp_common, mcp_costs),
        # vector stores (#23): benchd computes the vectors ([probe.target.embed])
        TargetKind(
            "pgvector",
            PgvectorConfig,
            pgvector_target,
            pgvector_capabilities,
            pgvector_common,
            pgvector_costs,
        ),
        TargetKind(
            "chroma", ChromaConfig, chroma_target, chroma_capabilities, url_key_common, chroma_costs
        ),
        TargetKind(
            "milvus", MilvusConfig, milvus_target, milvus_capabilities, milvus_common, milvus_costs
        ),
        # experimental: tested in qdrant-client's local mode only (docs/targets.md)
        TargetKind(
            "qdrant", QdrantConfig, qdrant_target, qdrant_capabilities, qdrant_common, qdrant_costs
        ),
    )
}


def register_kinds() -> None:
    """Hand the registry to config (:mod:`benchd.config.kinds`); idempotent.

    Every entry point that reads a config calls it first: config decodes
    ``[probe.target]`` with what is registered and never imports this package.
    """
    for kind in TARGET_KINDS.values():
        register_target_kind(kind)


def register(kind: TargetKind[Any]) -> None:
    """Add a kind: one line for a new one (a test-only kind registers itself the same way)."""
    TARGET_KINDS[kind.name] = kind
    register_target_kind(kind)


register_kinds()  # so that code holding a kind's settings can read their declarations


def build_target(
    kind: str,
    config: Any,
    secret: Secret | None,
    *,
    lease: LeaseHolder | None = None,
    write_rate: WriteRate | None = None,
) -> ProbeTarget:
    """The adapter of ``kind``, holding ``lease`` (None: none) and keeping its deletes within
    ``write_rate`` (None: not spaced)."""
    return TARGET_KINDS[kind].build(config, secret, lease=lease, write_rate=write_rate)


def capabilities_of(kind: str, config: Any) -> Capabilities:
    """What a store of ``kind`` with these settings can do, as its entry declares."""
    return TARGET_KINDS[kind].capabilities(config)
