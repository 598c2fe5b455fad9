"""Store kinds: one protocol, one module per kind, one registry.

Where a new kind goes: one module in this package (``benchd/kinds/<kind>.py``,
or a package for a large one) that declares two classes, plus one line in
``TARGET_KINDS`` below, ``TargetKind.of("<kind>", Settings, Store)``:

- the **settings class**, a frozen dataclass (:class:`benchd.config.kinds.KindSettings`):
  its fields are the ``[probe.target]`` keys, each with its doc
  (``field(metadata=key("what it does"))``: the key table of docs/targets.md is
  made from them); ``common()`` the settings generic code reads
  (:class:`~benchd.config.kinds.UrlKeyCommon` where they go by their common
  names), ``costs()`` what a cycle asks of the store, ``starter`` the example
  ``benchd init --kind`` writes, ``namespace_for(probe)`` a probe's default
  namespace (:class:`~benchd.config.kinds.DeclaredSettings`: the field's default);
- the **store class** (:class:`KindStore`), which implements the transport-free
  store protocol of :mod:`benchd.store.protocol`: ``capabilities_for(settings)``
  what a store with those settings can do, ``probe_target(settings, secret)`` the
  probe target built over it.

Everything benchd promises about a namespace (owned ids, verified seeds,
verified deletes, the sentinel and its lease, purge) then comes from the one
flow, :mod:`benchd.store.flow`; what the kind cannot do it declares in its
:class:`~benchd.store.protocol.Capabilities`, and benchd says which
guarantees such a probe lacks.

``TARGET_KINDS`` is the only list of kinds: config decodes ``[probe.target]``
with the entry's settings type and reads what the entry declares about them
(:mod:`benchd.config.kinds`: common settings, budget costs) without importing
any adapter; the probe builds the adapter with the entry's builder; generic
code reads the entry's capabilities, never a target's attributes;
:mod:`benchd.kinds.docs` writes the key tables and the starters from it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from benchd.config.kinds import (
    CommonSettings,
    KindSettings,
    Starter,
    StoreCosts,
    register_target_kind,
)
from benchd.config.secrets import Secret
from benchd.kinds.chroma import ChromaConfig, ChromaStore
from benchd.kinds.http.config import HttpConfig
from benchd.kinds.http.target import TemplatedStore
from benchd.kinds.lancedb import LancedbConfig, LancedbStore
from benchd.kinds.mcp.config import McpConfig
from benchd.kinds.mcp.store import McpStore
from benchd.kinds.milvus import MilvusConfig, MilvusStore
from benchd.kinds.pgvector import PgvectorConfig, PgvectorStore
from benchd.kinds.python import PythonConfig, PythonTarget
from benchd.kinds.qdrant import QdrantConfig, QdrantStore
from benchd.kinds.zengram import ZengramConfig, ZengramStore
from benchd.store.lease import LeaseHolder
from benchd.store.protocol import Capabilities
from benchd.store.target import ProbeTarget, SearchQuery, Target, WriteRate

__all__ = [
    "TARGET_KINDS",
    "Capabilities",
    "KindStore",
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
K = TypeVar("K", bound=KindSettings)
K_contra = TypeVar("K_contra", contravariant=True)


class KindStore(Protocol[K_contra]):
    """What the registry reads of a kind's store class."""

    @classmethod
    def capabilities_for(cls, settings: K_contra) -> Capabilities:
        """What a store with these settings can do (read before one is built)."""
        ...

    @classmethod
    def probe_target(
        cls,
        settings: K_contra,
        secret: Secret | None,
        *,
        lease: LeaseHolder | None = None,
        write_rate: WriteRate | None = None,
    ) -> ProbeTarget:
        """The probe target over a store with these settings (the flow around it)."""
        ...


@dataclass(frozen=True, slots=True)
class TargetKind(Generic[S]):
    """One registered kind: its settings type and what it declares about them.

    ``build`` makes the adapter; ``capabilities`` says what a store with
    these settings can do; ``common`` and ``costs`` are what config and the
    budget planner read (see :class:`benchd.config.kinds.KindSchema`);
    ``starter`` what ``benchd init --kind`` writes. A built-in kind's entry is
    made by :meth:`of` from its two classes (``store_type``).
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
    starter: Starter | None = None
    store_type: type[Any] | None = None  # the store class (None: an entry of callables)

    @classmethod
    def of(cls, name: str, settings: type[K], store: type[KindStore[K]]) -> TargetKind[K]:
        """The entry of a kind declared by its settings class and its store class."""
        return TargetKind(
            name,
            settings,
            store.probe_target,
            store.capabilities_for,
            settings.common,
            settings.costs,
            settings.namespace_for,
            settings.starter,
            store,
        )


TARGET_KINDS: dict[str, TargetKind[Any]] = {
    kind.name: kind
    for kind in (
        TargetKind.of("zengram", ZengramConfig, ZengramStore),
        TargetKind.of("http", HttpConfig, TemplatedStore),
        TargetKind.of("python", PythonConfig, PythonTarget),
        TargetKind.of("mcp", McpConfig, McpStore),
        # vector stores: benchd computes the vectors ([probe.target.embed])
        TargetKind.of("pgvector", PgvectorConfig, PgvectorStore),
        TargetKind.of("chroma", ChromaConfig, ChromaStore),
        TargetKind.of("milvus", MilvusConfig, MilvusStore),
        # experimental: tested in qdrant-client's local mode only (docs/targets.md)
        TargetKind.of("qdrant", QdrantConfig, QdrantStore),
        TargetKind.of("lancedb", LancedbConfig, LancedbStore),
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
