"""The streaming fixture writer: both layouts, atomic output, record order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchd.convert import FixtureWriter
from benchd.errors import UsageError
from benchd.fixtures import load_fixture

MEMORIES = [{"id": "m1", "content": "first"}, {"id": "m2", "content": "second é"}]
QUERIES = [{"id": "q1", "q": "which one", "relevance": {"m2": 2, "m1": 1}}]


def _write(path: Path, meta: dict[str, str] | None = None) -> None:
    with FixtureWriter(path, meta=meta) as writer:
        for memory in MEMORIES:
            writer.add_memory(memory)
        for query in QUERIES:
            writer.add_query(query)


def test_json_layout_is_one_document_with_meta_keys(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    _write(path, {"_comment": "made by a test", "reference_date": "2026-05-31"})
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc == {
        "_comment": "made by a test",
        "reference_date": "2026-05-31",
        "memories": MEMORIES,
        "queries": QUERIES,
    }
    assert load_fixture(path).reference_date == "2026-05-31"


def test_jsonl_layout_has_a_fixture_line_then_one_record_per_line(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    _write(path, {"reference_date": "2026-05-31"})
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert lines == [
        {"fixture": {"reference_date": "2026-05-31"}},
        *({"memory": m} for m in MEMORIES),
        *({"query": q} for q in QUERIES),
    ]
    fixture = load_fixture(path)
    assert [m["id"] for m in fixture.memories] == ["m1", "m2"]
    assert fixture.reference_date == "2026-05-31"


def test_failure_inside_leaves_no_file_behind(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    with pytest.raises(ValueError, match="boom"), FixtureWriter(path) as writer:
        writer.add_memory(MEMORIES[0])
        raise ValueError("boom")
    assert list(tmp_path.iterdir()) == []


def test_existing_file_is_replaced_only_on_success(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_text("previous")
    with pytest.raises(ValueError), FixtureWriter(path) as writer:
        writer.add_memory(MEMORIES[0])
        raise ValueError("boom")
    assert path.read_text() == "previous"
    _write(path)
    assert len(load_fixture(path).memories) == 2


def test_memory_after_a_query_is_refused(tmp_path: Path) -> None:
    with (
        pytest.raises(RuntimeError, match="before queries"),
        FixtureWriter(tmp_path / "f.json") as writer,
    ):
        writer.add_memory(MEMORIES[0])
        writer.add_query(QUERIES[0])
        writer.add_memory(MEMORIES[1])


def test_unknown_suffix_is_a_usage_error_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"name the file \*\.json"):
        FixtureWriter(tmp_path / "f.yaml")
