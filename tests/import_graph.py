"""An import graph of a package from its source (ast), and layering rules over it.

Every import counts wherever it is written: at the top, inside a function
(a lazy import is still a dependency), under ``if TYPE_CHECKING:`` (a type
names the layer it comes from), and ``importlib.import_module("pkg.mod")``
or ``__import__("pkg.mod")`` with a literal name (a registry loaded by name
is an edge too; ``import_module(".mod", "pkg")`` is resolved).
``from pkg import name`` is an edge to ``pkg.name`` when that is a module
of the package, else to ``pkg``. No dependency beyond the standard library,
so the check runs wherever the tests run (tests/test_layering.py).

A :class:`Picture` (docs/architecture.json) names the package's parts by
path prefixes and the import directions between parts that must never
occur; :func:`broken_nevers` lists the edges that take one, and
:func:`undrawn` those between two parts the picture draws no arrow for.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Edge",
    "Never",
    "Picture",
    "broken_nevers",
    "import_graph",
    "modules",
    "owners",
    "undrawn",
]


@dataclass(frozen=True, slots=True)
class Edge:
    """``importer`` imports ``imported`` at ``file:line``."""

    importer: str
    imported: str
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.importer} imports {self.imported}"


def _under(module: str, prefixes: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _module_name(path: Path, root: Path, package: str) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` (its source under ``root``) and its file."""
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
    found = modules(root, package)
    known = set(found)
    edges: dict[tuple[str, str, int], Edge] = {}
    for module, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            for imported in _targets(node, module, is_package, known):
                if _under(imported, (package,)) and imported != module:
                    line = getattr(node, "lineno", 0)
                    edges[module, imported, line] = Edge(module, imported, str(path), line)
    return list(edges.values())


@dataclass(frozen=True, slots=True)
class Never:
    """Part ``importer`` must never import part ``imported``, because ``reason``."""

    importer: str
    imported: str
    reason: str


@dataclass(frozen=True, slots=True)
class Picture:
    """A package's parts, the arrows drawn between them, and the directions never taken.

    ``parts`` maps a part's name to path prefixes relative to the folder that
    holds the package (``"benchd/web/"``, ``"benchd/result.py"``): a prefix
    ending in ``/`` holds every file of that folder, any other one file.
    """

    parts: Mapping[str, tuple[str, ...]]
    arrows: frozenset[tuple[str, str]]
    never: tuple[Never, ...]

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Picture:
        """The picture of an architecture.json: ``parts`` (each ``is``), ``arrows``, ``never``."""
        return cls(
            parts={name: tuple(part["is"]) for name, part in doc["parts"].items()},
            arrows=frozenset((a, b) for a, b in doc.get("arrows", ())),
            never=tuple(Never(a, b, reason) for a, b, reason in doc["never"]),
        )

    def parts_of(self, path: str) -> list[str]:
        """Every part that holds ``path`` (relative, ``/``-separated)."""
        return [
            name
            for name, prefixes in self.parts.items()
            if any(path == p or (p.endswith("/") and path.startswith(p)) for p in prefixes)
        ]


def owners(picture: Picture, root: Path, package: str) -> dict[str, list[str]]:
    """Each module of ``package`` (source under ``root``) and the parts that hold its file."""
    return {
        module: picture.parts_of(path.relative_to(root.parent).as_posix())
        for module, path in modules(root, package).items()
    }


def _crossings(edges: Iterable[Edge], owner: Mapping[str, str]) -> Iterator[tuple[str, str, Edge]]:
    """Each edge between two parts, with the importer's part and the imported one's."""
    for edge in edges:
        a, b = owner[edge.importer], owner[edge.imported]
        if a != b:
            yield a, b, edge


def broken_nevers(edges: Iterable[Edge], picture: Picture, owner: Mapping[str, str]) -> list[str]:
    """One line per edge that takes a direction the picture says never occurs."""
    never = {(n.importer, n.imported): n.reason for n in picture.never}
    return [
        f"{a} never imports {b} ({never[a, b]}): {edge}"
        for a, b, edge in _crossings(edges, owner)
        if (a, b) in never
    ]


def undrawn(edges: Iterable[Edge], picture: Picture, owner: Mapping[str, str]) -> list[str]:
    """One line per edge between two parts that the picture draws no arrow for."""
    return [
        f"{a} imports {b}, an arrow the picture lacks: {edge}"
        for a, b, edge in _crossings(edges, owner)
        if (a, b) not in picture.arrows
    ]
