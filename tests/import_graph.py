"""An import graph of a package from its source (ast), and layering rules over it.

Every import counts wherever it is written: at the top, inside a function
(a lazy import is still a dependency), under ``if TYPE_CHECKING:`` (a type
names the layer it comes from), and ``importlib.import_module("pkg.mod")``
or ``__import__("pkg.mod")`` with a literal name (a registry loaded by name
is an edge too; ``import_module(".mod", "pkg")`` is resolved).
``from pkg import name`` is an edge to ``pkg.name`` when that is a module
of the package, else to ``pkg``. No dependency beyond the standard library,
so the check runs wherever the tests run (tests/test_layering.py).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Edge", "Rule", "import_graph", "violations"]


@dataclass(frozen=True, slots=True)
class Edge:
    """``importer`` imports ``imported`` at ``file:line``."""

    importer: str
    imported: str
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.importer} imports {self.imported}"


@dataclass(frozen=True, slots=True)
class Rule:
    """Modules under ``importers`` may not import ``forbidden`` (or, with ``only``, anything else).

    Names are module prefixes: ``pkg.config`` covers ``pkg.config`` and
    ``pkg.config.load``. With ``only`` set, an importer may import its own
    layer and the ``only`` prefixes, nothing else of the package.
    """

    name: str
    importers: tuple[str, ...]
    forbidden: tuple[str, ...] = ()
    only: tuple[str, ...] | None = None

    def breaks(self, edge: Edge) -> bool:
        if not _under(edge.importer, self.importers):
            return False
        if self.only is not None:
            return not _under(edge.imported, (*self.importers, *self.only))
        return _under(edge.imported, self.forbidden)


def _under(module: str, prefixes: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _module_name(path: Path, root: Path, package: str) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def _modules(root: Path, package: str) -> dict[str, Path]:
    return {_module_name(p, root, package): p for p in sorted(root.rglob("*.py"))}


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` names (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts.pop()
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def _targets(node: ast.AST, module: str, is_package: bool, known: set[str]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = _base(module, is_package, node)
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            yield sub if sub in known else base
    elif isinstance(node, ast.Call) and _is_import_call(node.func):
        names = [a.value for a in node.args[:2] if isinstance(a, ast.Constant)]
        if names and isinstance(names[0], str):
            name = names[0]
            if name.startswith(".") and len(names) == 2 and isinstance(names[1], str):
                name = names[1] + name if name != "." else names[1]  # import_module(".x", "pkg")
            yield name


def _is_import_call(func: ast.expr) -> bool:
    """``importlib.import_module(...)``, ``import_module(...)`` or ``__import__(...)``."""
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module"
    return isinstance(func, ast.Name) and func.id in ("import_module", "__import__")


def import_graph(root: Path, package: str) -> list[Edge]:
    """Every import of ``package`` (its source under ``root``) of another of its modules."""
    modules = _modules(root, package)
    known = set(modules)
    edges: dict[tuple[str, str, int], Edge] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            for imported in _targets(node, module, is_package, known):
                if _under(imported, (package,)) and imported != module:
                    line = getattr(node, "lineno", 0)
                    edges[module, imported, line] = Edge(module, imported, str(path), line)
    return list(edges.values())


def violations(edges: Iterable[Edge], rules: Sequence[Rule]) -> list[str]:
    """One line per edge that breaks a rule: the rule, then where and what."""
    return [f"{rule.name}: {edge}" for edge in edges for rule in rules if rule.breaks(edge)]
