"""benchd's layers, checked on its import graph (tests/import_graph.py), and the checker itself.

The picture (docs/architecture in DESIGN.md §1 and STYLE.md): config is
read by everyone and reads only the base modules; targets, scoring and the
result know nothing of the cycle that drives them; surfacers only read
results. An import anywhere in a module counts, lazy or type-only.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from import_graph import Edge, Rule, import_graph, violations

import benchd

PACKAGE_ROOT = Path(benchd.__file__).resolve().parent

BASE = ("benchd.errors", "benchd.redact", "benchd.inputs")
"""What config may import besides itself (no benchd module below them but each other)."""
SHARED = (*BASE, "benchd.hooks", "benchd.logging")
"""Base modules anyone may import: the shared hooks of cycle and targets, and logging."""
CYCLE = ("benchd.cycle", "benchd.load", "benchd.probe", "benchd.budget")
"""The probe cycle: running one, its load engine, its request budget."""
RUNNERS = ("benchd.scheduler", "benchd.daemon", "benchd.commands", "benchd.cli", "benchd.web")
"""What drives cycles and serves their results: schedules, entry points, the web app."""
TARGETS = ("benchd.kinds", "benchd.store", "benchd.http")
SCORING = ("benchd.scoring",)
RESULT = ("benchd.result",)
SURFACERS = ("benchd.surfacers",)

RULES = (
    Rule("base modules import only base modules", SHARED, only=SHARED),
    Rule("config imports only errors, redact, inputs and its own", ("benchd.config",), only=BASE),
    Rule(
        "scoring and result import no targets, cycle or surfacers",
        (*SCORING, *RESULT),
        forbidden=(*TARGETS, *CYCLE, *RUNNERS, *SURFACERS),
    ),
    Rule(
        "surfacers import no targets, cycle or scoring",
        SURFACERS,
        forbidden=(*TARGETS, *CYCLE, *SCORING),
    ),
    Rule(
        "targets import no cycle or surfacers",
        TARGETS,
        forbidden=(*CYCLE, *RUNNERS, *SURFACERS),
    ),
    Rule("the reference store imports no targets", ("benchd.refstore",), forbidden=TARGETS),
    Rule(
        "embed (shared by the reference store and the targets) imports neither, nor the cycle",
        ("benchd.embed",),
        forbidden=("benchd.refstore", "benchd.kinds", "benchd.store", *CYCLE, *RUNNERS, *SURFACERS),
    ),
)


@functools.cache
def benchd_edges() -> tuple[Edge, ...]:
    """benchd's import graph, read in a fresh interpreter.

    CPython 3.11's ``ast.parse`` can fail with "AST constructor recursion depth
    mismatch" in a process where deep recursion ran before (the hostile-input
    tests do), so the graph is never read inside the test process.
    """
    script = (
        "import json, sys; sys.path.insert(0, sys.argv[1]);"
        "from import_graph import import_graph;"
        "print(json.dumps([[e.importer, e.imported, e.file, e.line]"
        " for e in import_graph(__import__('pathlib').Path(sys.argv[2]), 'benchd')]))"
    )
    here = str(Path(__file__).resolve().parent)
    proc = subprocess.run(
        [sys.executable, "-c", script, here, str(PACKAGE_ROOT)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return tuple(Edge(a, b, f, int(n)) for a, b, f, n in json.loads(proc.stdout))


def test_benchd_keeps_its_layers() -> None:
    edges = benchd_edges()
    assert len(edges) > 300  # the graph was read, not an empty walk
    assert violations(edges, RULES) == []


def test_every_layer_of_the_rules_exists() -> None:
    """A renamed module must not leave a rule guarding nothing."""
    edges = benchd_edges()
    modules = {e.importer for e in edges} | {e.imported for e in edges}
    for prefix in (*SHARED, *CYCLE, *RUNNERS, *TARGETS, *SCORING, *RESULT, *SURFACERS):
        assert any(m == prefix or m.startswith(prefix + ".") for m in modules), prefix


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    for directory in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        (directory / "__init__.py").touch()
    return root


SMALL_RULES = (
    Rule("config imports only errors and its own", ("pkg.config",), only=("pkg.errors",)),
    Rule("targets import no cycle", ("pkg.targets",), forbidden=("pkg.cycle",)),
)


def test_a_clean_package_has_no_violations(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "errors.py": "",
            "cycle.py": "from pkg.targets import zengram\nfrom pkg.config import load\n",
            "config/load.py": "from pkg.errors import E\nfrom . import kinds\n",
            "config/kinds.py": "",
            "targets/zengram.py": "from ..config.load import X\nimport pkg.errors\n",
        },
    )
    edges = import_graph(root, "pkg")
    assert {(e.importer, e.imported) for e in edges} == {
        ("pkg.cycle", "pkg.targets.zengram"),
        ("pkg.cycle", "pkg.config.load"),
        ("pkg.config.load", "pkg.errors"),
        ("pkg.config.load", "pkg.config.kinds"),
        ("pkg.targets.zengram", "pkg.config.load"),
        ("pkg.targets.zengram", "pkg.errors"),
    }
    assert violations(edges, SMALL_RULES) == []


@pytest.mark.parametrize(
    ("name", "text", "importer", "imported"),
    [
        ("config/load.py", "from pkg.targets import zengram\n", "pkg.config.load", "pkg.targets"),
        (  # a lazy import inside a function is an edge
            "config/load.py",
            "def kinds():\n    from pkg.targets.zengram import Z\n    return Z\n",
            "pkg.config.load",
            "pkg.targets.zengram",
        ),
        (  # so is a type-only one
            "config/load.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import cycle\n",
            "pkg.config.load",
            "pkg.cycle",
        ),
        (  # and a module loaded by its literal name
            "config/load.py",
            "import importlib\nimportlib.import_module('pkg.targets')\n",
            "pkg.config.load",
            "pkg.targets",
        ),
        (
            "config/load.py",
            "def f():\n    return __import__('pkg.targets.zengram')\n",
            "pkg.config.load",
            "pkg.targets.zengram",
        ),
        (
            "config/load.py",
            "from importlib import import_module\nimport_module('.zengram', 'pkg.targets')\n",
            "pkg.config.load",
            "pkg.targets.zengram",
        ),
        ("targets/zengram.py", "from ..cycle import Fire\n", "pkg.targets.zengram", "pkg.cycle"),
        ("targets/__init__.py", "from .. import cycle\n", "pkg.targets", "pkg.cycle"),
    ],
)
def test_a_forbidden_edge_is_reported_with_its_place(
    tmp_path: Path, name: str, text: str, importer: str, imported: str
) -> None:
    files = {"errors.py": "", "cycle.py": "", "targets/zengram.py": "", "config/load.py": ""}
    root = _package(tmp_path, {**files, name: text})
    (problem,) = violations(import_graph(root, "pkg"), SMALL_RULES)
    assert f"{importer} imports {imported}" in problem
    assert problem.startswith(("config imports only", "targets import no cycle"))
    assert str(root / name) in problem


def test_imports_of_other_packages_are_not_edges(tmp_path: Path) -> None:
    root = _package(tmp_path, {"config/load.py": "import json\nfrom httpx import Client\n"})
    assert import_graph(root, "pkg") == []


def test_a_rule_with_only_allows_its_own_layer() -> None:
    rule = Rule("r", ("pkg.config",), only=("pkg.errors",))
    assert not rule.breaks(Edge("pkg.config.load", "pkg.config.kinds", "f", 1))
    assert not rule.breaks(Edge("pkg.config.load", "pkg.errors", "f", 1))
    assert rule.breaks(Edge("pkg.config.load", "pkg.errorsx", "f", 1))
    assert not rule.breaks(Edge("pkg.cycle", "pkg.targets", "f", 1))


def test_config_reads_no_kind_until_an_entry_point_hands_it_the_registry(tmp_path: Path) -> None:
    """At run time too: config never loads the targets package by name."""
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from benchd.config.load import parse_config
        doc = {"probe": [{"name": "p", "fixture": "packaged:smoke",
                          "target": {"kind": "python",
                                     "factory": "benchd.examples.retrievers:bm25"}}]}
        try:
            parse_config(doc, file="t.toml", base=Path("."))
        except RuntimeError as exc:
            print("refused:", exc)
        assert "benchd.kinds" not in sys.modules, "config imported the targets"
        from benchd.kinds import register_kinds
        register_kinds()
        print("kinds:", parse_config(doc, file="t.toml", base=Path(".")).probes[0].target.kind)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    refused, kinds = proc.stdout.splitlines()
    assert refused.startswith("refused: no store kinds are registered")
    assert "benchd.kinds.register_kinds()" in refused
    assert kinds == "kinds: python"
