"""scripts/test.sh's parts: the store matrices of tests/stores split between processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from store_servers import HERE, REPO, SERVER_FIXTURES, split_by_store, store_of


def item(name: str, *, where: Path = HERE, kind: str | None = None, uses: str = "") -> Any:
    callspec = SimpleNamespace(params={"kind": kind}) if kind is not None else None
    fixtures = ["tmp_path", uses] if uses else ["tmp_path"]
    return SimpleNamespace(
        name=name, path=where / "test_x.py", callspec=callspec, fixturenames=fixtures
    )


def test_a_tests_store_is_its_kind_else_its_server_fixture_else_the_store_its_name_names() -> None:
    assert store_of(item("test_seeds[chroma]", kind="chroma")) == "chroma"
    assert store_of(item("test_restart[http]", kind="http", uses="postgres")) == "http"
    assert store_of(item("test_foreign_rows", uses="postgres")) == "pgvector"
    assert store_of(item("test_a_milvus_channel_idle")) == "milvus"
    assert store_of(item("test_chroma_hnsw_breadths[pgvector-x]")) == "chroma"
    assert store_of(item("test_mcp_answers")) == ""
    assert store_of(item("test_milvus", where=REPO / "tests" / "kinds", kind="milvus")) == ""


def test_only_and_except_split_the_items_between_them() -> None:
    items = [item("a", kind="pgvector"), item("b", uses="chroma"), item("c"), item("d")]
    only = split_by_store("only:pgvector, chroma", items)
    rest = split_by_store("except:pgvector,chroma", items)
    assert only == (items[:2], items[2:]) and rest == (items[2:], items[:2])
    assert split_by_store("", items) == (items, [])
    for spec in ("pgvector", "only:", "some:pgvector"):
        with pytest.raises(pytest.UsageError, match="BENCHD_TEST_STORES"):
            split_by_store(spec, items)


def collected(spec: str) -> list[str]:
    env = {**os.environ, "BENCHD_TEST_STORES": spec}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         str(HERE)],
        capture_output=True, text=True, check=False, env=env, cwd=REPO, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [line for line in proc.stdout.splitlines() if "::" in line]


def test_the_parts_of_scripts_test_sh_are_every_store_and_hold_each_test_once() -> None:
    script = (REPO / "scripts" / "test.sh").read_text(encoding="utf-8")
    found = re.search(r"^STORE_PARTS=\(([^)]*)\)$", script, re.MULTILINE)
    assert found, "scripts/test.sh names its store parts in STORE_PARTS=(...)"
    parts = found.group(1).split()
    assert sorted(parts) == sorted(SERVER_FIXTURES)
    stores = collected("only:" + ",".join(parts))
    rest = collected("except:" + ",".join(parts))
    assert stores and rest and not set(stores) & set(rest)
    assert any("milvus_channel_idle" in test for test in stores)
    in_a_store_matrix = re.compile(r"\[(.*-)?(" + "|".join(parts) + r")[\]-]")
    assert not [test for test in rest if in_a_store_matrix.search(test)]
    assert len([test for test in stores if in_a_store_matrix.search(test)]) > len(parts)
