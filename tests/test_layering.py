"""benchd's layers, checked on its import graph (tests/import_graph.py), and the checker itself.

The picture is docs/architecture.json: benchd's parts (path prefixes), the
arrows drawn between them and the import directions that must never occur,
each with its reason (config is a leaf, the flow is transport-free, the web
app does not reach back into the daemon, results are plain data, ...).
Every file of benchd belongs to exactly one part; every ``never`` is a rule;
every import between two parts is an arrow of the picture. An import anywhere
in a module counts, lazy or type-only. The team's copy of the picture
(../shared/architecture.json, beside the clone) must list the same nevers.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from import_graph import Edge, Never, Picture, broken_nevers, import_graph, owners, undrawn

import benchd

PACKAGE_ROOT = Path(benchd.__file__).resolve().parent
REPO_ROOT = Path(__file__).resolve().parent.parent
PICTURE_FILE = REPO_ROOT / "docs" / "architecture.json"
TEAM_PICTURE_FILE = REPO_ROOT.parent / "shared" / "architecture.json"


@functools.cache
def picture() -> Picture:
    return Picture.from_json(json.loads(PICTURE_FILE.read_text(encoding="utf-8")))


def owner_of_each_module() -> dict[str, str]:
    """Each benchd module's part (that it has exactly one is a test of its own, below)."""
    held = owners(picture(), PACKAGE_ROOT, "benchd")
    return {m: parts[0] if parts else "(no part)" for m, parts in held.items()}


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


def test_every_file_of_benchd_belongs_to_exactly_one_part() -> None:
    held = owners(picture(), PACKAGE_ROOT, "benchd")
    assert len(held) > 100  # the package was walked, not an empty folder
    assert {m: parts for m, parts in held.items() if len(parts) != 1} == {}


def test_every_prefix_of_the_picture_holds_a_file() -> None:
    """A renamed or removed module must not leave a part naming nothing."""
    files = [p.relative_to(PACKAGE_ROOT.parent).as_posix() for p in PACKAGE_ROOT.rglob("*.py")]
    empty = [
        (name, prefix)
        for name, prefixes in picture().parts.items()
        for prefix in prefixes
        if not any(f == prefix or (prefix.endswith("/") and f.startswith(prefix)) for f in files)
    ]
    assert empty == []


def test_arrows_and_nevers_name_parts_of_the_picture_and_never_agree() -> None:
    pic = picture()
    named = {a for a, _ in pic.arrows} | {b for _, b in pic.arrows}
    named |= {n.importer for n in pic.never} | {n.imported for n in pic.never}
    assert named - set(pic.parts) == set()
    never = {(n.importer, n.imported) for n in pic.never}
    assert len(never) == len(pic.never), "a never listed twice"
    assert pic.arrows & never == set()
    assert all(n.reason.strip() for n in pic.never)


def test_benchd_takes_no_direction_the_picture_says_never_occurs() -> None:
    edges = benchd_edges()
    assert len(edges) > 300  # the graph was read, not an empty walk
    assert broken_nevers(edges, picture(), owner_of_each_module()) == []


def test_every_import_between_two_parts_is_an_arrow_of_the_picture() -> None:
    """The picture stays true: a new dependency between parts is drawn, or it is not made."""
    assert undrawn(benchd_edges(), picture(), owner_of_each_module()) == []


def test_the_picture_holds_the_nevers_the_issue_names() -> None:
    """The flow is transport-free; the web app does not reach back into the daemon; the
    result and the surfacers read no drift or daemon module."""
    never = {(n.importer, n.imported) for n in picture().never}
    assert {
        ("Flow", "Transport"),
        ("Web", "Daemon"),
        ("Result", "Drift"),
        ("Result", "Daemon"),
        ("Surfacers", "Drift"),
        ("Surfacers", "Daemon"),
    } <= never


_HTTP_LIBRARY = re.compile(
    r"^\s*(?:import|from)\s+(httpx|h11|httpcore|http\.client|urllib3)\b", re.MULTILINE
)


def test_the_store_package_imports_no_http_library() -> None:
    """The protocol and the flow are transport-free, of benchd's plumbing and of any other."""
    found = [
        f"{path.relative_to(PACKAGE_ROOT.parent)}: {match.group(0).strip()}"
        for path in sorted((PACKAGE_ROOT / "store").rglob("*.py"))
        for match in _HTTP_LIBRARY.finditer(path.read_text(encoding="utf-8"))
    ]
    assert found == []
    assert _HTTP_LIBRARY.search("def f():\n    import httpx\n")  # a lazy one is seen too


def test_the_repository_keeps_the_teams_nevers() -> None:
    """../shared/architecture.json is the team's picture: the repository's copy keeps each of
    its nevers, for the same reason, and may draw more (the parts may differ: the team's copy
    can be drawn ahead of the code, or behind it)."""
    if not TEAM_PICTURE_FILE.is_file():
        pytest.skip(f"no team picture at {TEAM_PICTURE_FILE} (it sits beside a checkout)")
    team = Picture.from_json(json.loads(TEAM_PICTURE_FILE.read_text(encoding="utf-8")))
    ours = {(n.importer, n.imported): n.reason for n in picture().never}
    theirs = {(n.importer, n.imported): n.reason for n in team.never}
    assert sorted(set(theirs) - set(ours)) == []
    assert {pair: ours[pair] for pair in theirs} == theirs


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    for directory in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        (directory / "__init__.py").touch()
    return root


SMALL_PICTURE = Picture(
    parts={
        "Base": ("pkg/__init__.py", "pkg/errors.py"),
        "Cycle": ("pkg/cycle.py",),
        "Config": ("pkg/config/",),
        "Targets": ("pkg/targets/",),
    },
    arrows=frozenset(
        {("Cycle", "Targets"), ("Cycle", "Config"), ("Config", "Base"), ("Targets", "Config")}
    ),
    never=(
        Never("Config", "Targets", "config is a leaf"),
        Never("Config", "Cycle", "config is a leaf"),
        Never("Targets", "Cycle", "a target knows nothing of the cycle"),
    ),
)


def _owner(root: Path, picture: Picture = SMALL_PICTURE) -> dict[str, str]:
    held = owners(picture, root, "pkg")
    assert all(len(parts) == 1 for parts in held.values()), held
    return {m: parts[0] for m, parts in held.items()}


def test_a_clean_package_breaks_no_never(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "errors.py": "",
            "cycle.py": "from pkg.targets import zengram\nfrom pkg.config import load\n",
            "config/load.py": "from pkg.errors import E\nfrom . import kinds\n",
            "config/kinds.py": "",
            "targets/zengram.py": "from ..config.load import X\n",
        },
    )
    edges = import_graph(root, "pkg")
    assert {(e.importer, e.imported) for e in edges} == {
        ("pkg.cycle", "pkg.targets.zengram"),
        ("pkg.cycle", "pkg.config.load"),
        ("pkg.config.load", "pkg.errors"),
        ("pkg.config.load", "pkg.config.kinds"),
        ("pkg.targets.zengram", "pkg.config.load"),
    }
    assert broken_nevers(edges, SMALL_PICTURE, _owner(root)) == []
    assert undrawn(edges, SMALL_PICTURE, _owner(root)) == []


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
def test_an_edge_taking_a_never_is_reported_with_its_reason_and_place(
    tmp_path: Path, name: str, text: str, importer: str, imported: str
) -> None:
    files = {"errors.py": "", "cycle.py": "", "targets/zengram.py": "", "config/load.py": ""}
    root = _package(tmp_path, {**files, name: text})
    (problem,) = broken_nevers(import_graph(root, "pkg"), SMALL_PICTURE, _owner(root))
    assert f"{importer} imports {imported}" in problem
    assert problem.startswith(("Config never imports", "Targets never imports Cycle"))
    assert "config is a leaf" in problem or "knows nothing of the cycle" in problem
    assert str(root / name) in problem


def test_an_import_between_parts_without_an_arrow_is_reported(tmp_path: Path) -> None:
    root = _package(tmp_path, {"errors.py": "", "targets/zengram.py": "import pkg.errors\n"})
    (problem,) = undrawn(import_graph(root, "pkg"), SMALL_PICTURE, _owner(root))
    assert problem.startswith("Targets imports Base, an arrow the picture lacks")
    assert f"{root / 'targets' / 'zengram.py'}:1: pkg.targets.zengram imports pkg.errors" in problem


def test_imports_of_other_packages_are_not_edges(tmp_path: Path) -> None:
    root = _package(tmp_path, {"config/load.py": "import json\nfrom httpx import Client\n"})
    assert import_graph(root, "pkg") == []


def test_a_folder_prefix_holds_its_files_and_a_file_prefix_one_file() -> None:
    pic = Picture(
        parts={"Seam": ("pkg/store/__init__.py", "pkg/store/lease.py"), "Flow": ("pkg/store/",)},
        arrows=frozenset(),
        never=(),
    )
    assert pic.parts_of("pkg/store/flow.py") == ["Flow"]
    assert pic.parts_of("pkg/store/lease.py") == ["Seam", "Flow"]  # held twice: the test fails
    assert pic.parts_of("pkg/store/lease_token.py") == ["Flow"]  # a file prefix is no folder
    assert pic.parts_of("pkg/storey.py") == []
    assert pic.parts_of("pkg/__init__.py") == []  # the root package is no prefix of the rest


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
