"""A kind is a settings class and a store class; the registry derives the rest.

Each kind's entry (shared settings, costs, capabilities, builder, default
namespace), its key table in docs/targets.md and its ``benchd init`` starter
come from the two classes, and its name is written once in production code.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

import pytest

from benchd.config.kinds import (
    CommonSettings,
    DeclaredSettings,
    Starter,
    StoreCosts,
    UrlKeyCommon,
    key,
)
from benchd.config.secrets import Secret
from benchd.kinds import TARGET_KINDS, TargetKind
from benchd.kinds.docs import (
    DOCS_FILE,
    STARTERS_FILE,
    documented_kinds,
    key_table,
    rewrite_docs,
    starter_document,
    starter_settings,
    starter_tables,
    starters_text,
)
from benchd.store.protocol import Capabilities
from benchd.store.target import ProbeTarget

PACKAGE = Path(__file__).resolve().parents[2] / "benchd"
BUILT_IN = ("zengram", "http", "python", "mcp", "pgvector", "chroma", "milvus", "qdrant")
DECLARED = [name for name, kind in TARGET_KINDS.items() if kind.store_type is not None]
"""The kinds declared by their two classes (a test may register one made of callables)."""
WORDS = ("http", "python")
"""Kind names that are also a URL scheme and a runtime's name: looked for as kinds only."""


def own_place(kind: str) -> str:
    """Where ``kind``'s name may be written: its module, or its package (``kinds/mcp/``)."""
    parts = TARGET_KINDS[kind].settings_type.__module__.split(".")
    return f"kinds/{parts[2]}/" if len(parts) > 3 else f"kinds/{parts[2]}.py"


@dataclass(frozen=True, slots=True)
class ToySettings(UrlKeyCommon):
    """A kind of the tests: the registry reads only what the two classes declare."""

    starter: ClassVar[Starter] = Starter(
        "a toy",
        (("url", "http://127.0.0.1:9", ""), ("pages", 3, "listing pages")),
    )

    url: str = field(metadata=key("the toy's `url`"))
    namespace: str = "benchd-eval"
    cleanup: Literal["before", "after", "never"] = "never"
    adopt_namespace: bool = False
    api_key_env: str | None = field(default=None, metadata=key("the key", shown="none"))
    api_key_file: str | None = field(default=None, metadata=key("the key", shown="none"))
    pages: int = field(default=2, metadata=key("pages a listing reads"))
    wide: bool = False

    def costs(self) -> StoreCosts:
        return StoreCosts(page_size=self.pages, reads_per_min=7, writes_per_min=3)

    @classmethod
    def namespace_for(cls, probe: str) -> str:
        return f"toy-{probe}"


class ToyStore:
    built: ClassVar[list[tuple[ToySettings, Secret | None]]] = []

    @classmethod
    def capabilities_for(cls, settings: ToySettings) -> Capabilities:
        return Capabilities(lists=True, writes=settings.wide)

    @classmethod
    def probe_target(cls, settings: ToySettings, secret: Secret | None) -> ProbeTarget:
        cls.built.append((settings, secret))
        return None  # type: ignore[return-value]  # what was built is what the test reads


def test_an_entry_is_derived_from_the_settings_class_and_the_store_class() -> None:
    entry = TargetKind.of("toy", ToySettings, ToyStore)
    settings = ToySettings(url="http://h", api_key_env="TOY_KEY", wide=True)
    assert entry.settings_type is ToySettings and entry.starter is ToySettings.starter
    assert entry.common(settings) == CommonSettings(
        namespace="benchd-eval", url="http://h", cleanup="never", adopt_namespace=False,
        api_key_env="TOY_KEY",
    )  # fmt: skip
    assert entry.costs(settings) == StoreCosts(page_size=2, reads_per_min=7, writes_per_min=3)
    assert entry.capabilities(settings) == Capabilities(lists=True, writes=True)
    assert entry.namespace_default("p1") == "toy-p1"
    secret = Secret("s-123456", "TOY_KEY")
    entry.build(settings, secret)
    assert ToyStore.built[-1] == (settings, secret)


def test_a_settings_class_without_its_own_namespace_keeps_the_fields_default() -> None:
    @dataclass(frozen=True, slots=True)
    class Plain(DeclaredSettings):
        namespace: str = "benchd-eval"

    assert Plain.namespace_for("p1") is None
    assert TARGET_KINDS["zengram"].namespace_default("p1") is None
    assert TARGET_KINDS["python"].namespace_default("p1") == "benchd-p1"


def test_every_built_in_kind_is_declared_by_its_two_classes() -> None:
    assert set(BUILT_IN) <= set(DECLARED)
    for name in DECLARED:
        entry = TARGET_KINDS[name]
        settings = entry.settings_type
        assert entry.name == name
        assert entry.common is settings.common and entry.costs is settings.costs
        assert entry.starter is settings.starter
        store = entry.build.__self__  # type: ignore[attr-defined]
        assert entry.capabilities == store.capabilities_for


def test_a_key_table_is_made_from_the_fields_docs() -> None:
    assert key_table(ToySettings).splitlines() == [
        "| key | default | |",
        "|---|---|---|",
        "| `url` | — | the toy's `url` |",
        "| `api_key_env`, `api_key_file` | none | the key |",
        "| `pages` | 2 | pages a listing reads |",
    ]


def test_a_starter_takes_the_fields_doc_where_it_gives_no_comment() -> None:
    text = starter_tables(TargetKind.of("toy", ToySettings, ToyStore))
    assert text.splitlines() == [
        "[probe.target]",
        "# store kind: a toy",
        'kind = "toy"',
        "# the toy's `url`",
        'url = "http://127.0.0.1:9"',
        "# listing pages",
        "pages = 3",
    ]


def test_docs_key_tables_are_the_registrys() -> None:
    text = DOCS_FILE.read_text(encoding="utf-8")
    assert rewrite_docs(text) == text, "stale: run python -m benchd.kinds.docs --write"
    tables = re.findall(r"<!-- keys: (\w+) -->", text)
    assert sorted(tables) == sorted(documented_kinds())
    assert {"pgvector", "chroma", "milvus", "qdrant"} <= set(tables)


def test_a_stale_key_table_is_rewritten() -> None:
    stale = "x\n<!-- keys: milvus -->\n| key | default | |\n| `uri` | old |\n<!-- /keys -->\ny\n"
    fresh = rewrite_docs(stale)
    assert fresh.startswith("x\n<!-- keys: milvus -->\n| key | default | |\n|---|")
    assert "| `uri` | — | the gRPC endpoint" in fresh and "old" not in fresh
    assert fresh.endswith("<!-- /keys -->\ny\n")


def test_the_starters_benchd_init_writes_are_the_registrys() -> None:
    assert STARTERS_FILE.read_text(encoding="utf-8") == starters_text(), (
        "stale: run python -m benchd.kinds.docs --write"
    )
    document = starter_document()
    assert document["default"] == "zengram"
    assert list(document["kinds"]) == DECLARED


@pytest.mark.parametrize("kind", DECLARED)
def test_every_kind_declares_a_starter_its_settings_accept(kind: str) -> None:
    entry = TARGET_KINDS[kind]
    settings = starter_settings(entry)
    assert isinstance(settings, entry.settings_type)
    limits = starter_document()["kinds"][kind]["budget"]
    costs = entry.costs(settings)
    assert limits == (None if costs.reads_per_min is None else [120, 60])
    text = starter_tables(entry)
    assert f'kind = "{kind}"' in text and "\n# \n" not in text  # every key annotated


def _strings(path: Path) -> Iterator[tuple[str, int]]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value, node.lineno


def _production() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if not relative.startswith("refstore/"):  # its profile names are its own
            yield relative, path


def _registry_lines(name: str) -> list[int]:
    text = (PACKAGE / "kinds" / "__init__.py").read_text(encoding="utf-8")
    return [
        i
        for i, line in enumerate(text.splitlines(), 1)
        if line.strip().startswith(f'TargetKind.of("{name}",')
    ]


def test_a_kinds_name_is_written_only_in_its_module_and_its_registry_line() -> None:
    assert own_place("pgvector") == "kinds/pgvector.py" and own_place("mcp") == "kinds/mcp/"
    names = {name for name in DECLARED if name not in WORDS}
    found = []
    for relative, path in _production():
        for value, line in _strings(path):
            if value not in names or relative.startswith(own_place(value)):
                continue
            if relative == "kinds/__init__.py" and line in _registry_lines(value):
                continue
            found.append(f"{relative}:{line}: {value!r}")
    assert found == []
    assert all(len(_registry_lines(name)) == 1 for name in DECLARED)


def test_http_and_python_are_written_as_kind_names_only_in_their_modules() -> None:
    """As a kind: a ``kind=`` argument, a comparison with a kind, or a registry line."""
    found = []
    for relative, path in _production():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            values: list[ast.expr] = []
            if isinstance(node, ast.keyword) and node.arg == "kind":
                values = [node.value]
            elif isinstance(node, ast.Compare) and "kind" in ast.unparse(node.left):
                values = list(node.comparators)
            for value in values:
                if not isinstance(value, ast.Constant) or value.value not in DECLARED:
                    continue
                if not relative.startswith(own_place(value.value)):
                    found.append(f"{relative}:{value.lineno}: {value.value!r}")
    assert found == []
