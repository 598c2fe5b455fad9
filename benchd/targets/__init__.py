"""Store adapters: one protocol, one file per kind, one registry.

``TARGET_KINDS`` is the only list of kinds: each kind's settings schema is
registered with :mod:`benchd.config.kinds` (config decodes ``[probe.target]``
with it, without importing any adapter) and the probe uses it to build the
adapter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchd.config.kinds import register_target_kind
from benchd.config.secrets import Secret
from benchd.targets.base import SearchQuery, Target
from benchd.targets.http.target import HttpConfig, HttpTarget
from benchd.targets.python import PythonConfig, python_target
from benchd.targets.zengram import ZengramConfig, ZengramTarget

__all__ = ["TARGET_KINDS", "SearchQuery", "Target", "TargetKind", "build_target"]


@dataclass(frozen=True, slots=True)
class TargetKind:
    """How to decode a kind's config table and build its adapter."""

    name: str
    config_type: type[Any]
    factory: Callable[[Any, Secret | None], Target]


TARGET_KINDS: dict[str, TargetKind] = {
    kind.name: kind
    for kind in (
        TargetKind("zengram", ZengramConfig, ZengramTarget),
        TargetKind("http", HttpConfig, HttpTarget),
        TargetKind("python", PythonConfig, python_target),
    )
}


for _kind in TARGET_KINDS.values():
    register_target_kind(_kind.name, _kind.config_type)


def build_target(kind: str, config: Any, secret: Secret | None) -> Target:
    return TARGET_KINDS[kind].factory(config, secret)
