"""The target kinds' settings schemas, registered by the targets package.

Config decodes ``[probe.target]`` with the settings dataclass its ``kind``
names, but it must not import the adapters (httpx, the HTTP templating, user
factories): the dependency points the other way. :mod:`benchd.targets`
calls :func:`register_target_kind` for each built-in kind when it is
imported; :func:`target_kinds` imports it on first use if nothing has yet
(the way a plugin group is discovered), so ``load_config`` works from any
entry point without config naming an adapter.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["BUILTIN_KINDS_PACKAGE", "register_target_kind", "target_kinds"]

BUILTIN_KINDS_PACKAGE = "benchd.targets"
"""The package whose import registers the built-in kinds (zengram, http, python)."""

_KINDS: dict[str, type[Any]] = {}


def register_target_kind(name: str, settings_type: type[Any]) -> None:
    """Decode ``kind = name`` tables with ``settings_type`` (a frozen dataclass)."""
    known = _KINDS.get(name)
    if known is not None and known is not settings_type:
        raise ValueError(f"target kind {name!r} is already registered ({known.__name__})")
    _KINDS[name] = settings_type


def target_kinds() -> Mapping[str, type[Any]]:
    """Every registered kind and its settings type (the built-in ones loaded on first use)."""
    if not _KINDS:
        importlib.import_module(BUILTIN_KINDS_PACKAGE)
    return MappingProxyType(_KINDS)
