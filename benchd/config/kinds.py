"""The target kinds' settings schemas, registered by the targets package.

Config decodes ``[probe.target]`` with the settings dataclass its ``kind``
names, but it must not import the adapters (httpx, the HTTP templating, user
factories): the dependency points the other way, and tests/test_layering.py
holds it. The registry is handed to config by the entry points:
:func:`benchd.kinds.register_kinds` (also run when :mod:`benchd.kinds`
is first imported) calls :func:`register_target_kind` for each built-in
kind, and every command that reads a config calls it first. Config never
loads an adapter package by name.

What config and the budget planner read of a kind's settings is declared by
the kind, never probed: :class:`KindSchema` (which a registry entry of
:mod:`benchd.kinds` satisfies) gives the settings every kind may share
(:class:`CommonSettings`) and what a cycle costs the store besides its
searches (:class:`StoreCosts`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, Protocol

__all__ = [
    "CommonSettings",
    "KindSchema",
    "StoreCosts",
    "UrlKeySettings",
    "register_target_kind",
    "target_kinds",
    "url_key_common",
]



@dataclass(frozen=True, slots=True)
class CommonSettings:
    """The settings generic code reads of any kind; a kind without one leaves it unset."""

    namespace: str | None = None  # the namespace (client_id) the probe owns
    url: str | None = None  # the store's URL; None for an in-process store
    cleanup: Literal["before", "after", "never"] = "never"
    adopt_namespace: bool | None = None  # None: the kind has no such setting
    api_key_env: str | None = None
    api_key_file: str | None = None
    # what the secret read from api_key_env / api_key_file is, for a person: the
    # placeholder an error's `export VAR=<...>` shows
    secret_kind: str = "API key"
    # its search answers a set, scored whole (hit, recall, recall_all, precision; no @k):
    # what thresholds may name (the kind's capabilities say the same to the cycle)
    unranked: bool = False


class UrlKeySettings(Protocol):
    """A kind's settings that name the common settings by their common names."""

    @property
    def namespace(self) -> str: ...
    @property
    def url(self) -> str | None: ...
    @property
    def cleanup(self) -> Literal["before", "after", "never"]: ...
    @property
    def adopt_namespace(self) -> bool: ...
    @property
    def api_key_env(self) -> str | None: ...
    @property
    def api_key_file(self) -> str | None: ...


def url_key_common(config: UrlKeySettings) -> CommonSettings:
    """The common settings of a kind whose settings use the common names (url, api_key_*)."""
    return CommonSettings(
        namespace=config.namespace,
        url=config.url,
        cleanup=config.cleanup,
        adopt_namespace=config.adopt_namespace,
        api_key_env=config.api_key_env,
        api_key_file=config.api_key_file,
    )


@dataclass(frozen=True, slots=True)
class StoreCosts:
    """What one cycle asks of the store besides its searches, for the budget planner."""

    page_size: int = 500  # records per listing page
    batch_size: int = 500  # records per write
    lists: int = 2  # listings per cycle (ownership check, verify)
    searchable_polls: int = 1  # time-to-searchable polls (at least)
    lease_reads: int = 0  # per writing cycle, keeping the lease
    lease_listings: int = 0  # listings of the namespace per writing cycle (the lease read-back)
    lease_writes: int = 0
    # The kind's default budget: what its stores allow one API key a minute, where
    # [probe.budget] does not say; None: no such limit (no warning, no pacing).
    reads_per_min: int | None = None
    writes_per_min: int | None = None


class KindSchema(Protocol):
    """What config knows of a kind: its settings type, and what it declares about them."""

    @property
    def name(self) -> str: ...

    @property
    def settings_type(self) -> type[Any]: ...

    @property
    def common(self) -> Callable[[Any], CommonSettings]: ...

    @property
    def costs(self) -> Callable[[Any], StoreCosts]: ...

    @property
    def namespace_default(self) -> Callable[[str], str | None]:
        """The namespace of a probe whose table names none, from the probe's name."""
        ...


_KINDS: dict[str, KindSchema] = {}


def register_target_kind(kind: KindSchema) -> None:
    """Decode ``kind = kind.name`` tables with ``kind.settings_type`` (a frozen dataclass)."""
    known = _KINDS.get(kind.name)
    if known is not None and known.settings_type is not kind.settings_type:
        raise ValueError(
            f"target kind {kind.name!r} is already registered ({known.settings_type.__name__})"
        )
    _KINDS[kind.name] = kind


def target_kinds() -> Mapping[str, KindSchema]:
    """Every kind the entry point registered; raises when it registered none (a bug)."""
    if not _KINDS:
        raise RuntimeError(
            "no store kinds are registered with benchd.config: call "
            "benchd.kinds.register_kinds() before reading a config (benchd's commands do)"
        )
    return MappingProxyType(_KINDS)
