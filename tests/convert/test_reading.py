"""Reading converter inputs: the streaming JSON array reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchd.convert.reading import iter_json_array
from benchd.errors import RunFileError

DOC = [
    {"id": 1, "text": "brackets ] [ and braces } { in a string", "n": -12345.678e-3},
    {"nested": {"list": [1, 2, [3, {"x": '"quoted"'}]]}, "unicode": "café 東京 🚀"},
    123456789012345678901234567890,
    "a plain string",
    [],
    None,
]


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 64, 1 << 20])
@pytest.mark.parametrize("indent", [None, 2])
def test_array_elements_decode_whatever_the_chunk_size(
    tmp_path: Path, chunk_size: int, indent: int | None
) -> None:
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(DOC, indent=indent, ensure_ascii=False), encoding="utf-8")
    assert [item for _, item in iter_json_array(path, chunk_size)] == DOC


def test_array_elements_report_the_line_they_start_on(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text('[\n  {"a": 1},\n\n  {"b":\n 2},\n  3\n]\n')
    assert [line for line, _ in iter_json_array(path, chunk_size=4)] == [2, 4, 6]


def test_empty_array_yields_nothing(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text(" [ ] \n")
    assert list(iter_json_array(path)) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1}', ":1: expected a JSON array '[' at the top level, found '{'"),
        ("[1, 2", ":1: expected ',' or ']' after an array element, found end of file"),
        ("[1, 2]\n[3]", ":2: extra text after the array"),
        ('[\n{"a": tru}\n]', ":2: not valid JSON (Expecting value)"),
        ("", ":1: expected a JSON array '[' at the top level, found end of file"),
    ],
)
def test_malformed_array_is_a_file_line_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "doc.json"
    path.write_text(text)
    with pytest.raises(RunFileError) as caught:
        list(iter_json_array(path, chunk_size=3))
    assert str(caught.value) == f"{path}{message}"
