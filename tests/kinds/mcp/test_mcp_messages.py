"""JSON-RPC messages as the wires keep them (benchd.kinds.mcp.messages), from bytes."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from benchd.errors import TargetProtocolError
from benchd.http.answers import INLINE_DECODE_BYTES, Spill
from benchd.kinds.mcp.messages import LineReader, LineTooLong, shaped


def lines_of(reader: LineReader) -> list[bytes]:
    out: list[bytes] = []
    while (line := reader.line()) is not None:
        if isinstance(line, Spill):
            with open(line.path, "rb") as file:
                out.append(file.read())
            line.discard()
        else:
            out.append(line)
    return out


@pytest.mark.parametrize("size", [1, 1000, 65536])
def test_lines_come_out_in_order_a_long_one_through_a_spill_file(size: int) -> None:
    long = b"L" * (INLINE_DECODE_BYTES + 100_000)
    data = b"a\n" + long + b"\nb\n\nc"
    reader = LineReader(8 << 20)
    got: list[bytes] = []
    for start in range(0, len(data), size):
        reader.feed(data[start : start + size])
        got += lines_of(reader)
    assert got == [b"a", long, b"b", b""]  # "c" has no newline yet
    reader.feed(b"\n")
    assert lines_of(reader) == [b"c"]


def test_a_line_past_max_bytes_is_refused_spilled_or_not() -> None:
    reader = LineReader(INLINE_DECODE_BYTES * 2)
    with pytest.raises(LineTooLong):
        for _ in range(40):
            reader.feed(b"x" * 65536)
            assert reader.line() is None
    small = LineReader(100)
    small.feed(b"y" * 150 + b"\n")
    with pytest.raises(LineTooLong):
        small.line()


def shape(value: Any, reducers: dict[Any, Any] | None = None) -> dict[str, Any]:
    return shaped(value, "mcp stdio server 'x'", reducers or {})


@pytest.mark.parametrize("ident", [[1], {"x": 1}, True, False])
def test_an_id_that_is_not_a_string_or_number_is_decode(ident: Any) -> None:
    with pytest.raises(TargetProtocolError, match="a JSON-RPC id is a string or a number"):
        shape({"jsonrpc": "2.0", "id": ident, "result": {}})


def test_a_message_that_is_not_an_object_is_decode() -> None:
    with pytest.raises(TargetProtocolError, match="not a JSON object"):
        shape([1, 2])


def test_answers_are_reduced_for_their_waiter_and_dropped_for_nobody() -> None:
    keep = functools.partial(len)
    assert shape({"id": 1, "result": [1, 2, 3]}, {1: keep}) == {"id": 1, "result": 3}
    assert shape({"id": 1, "result": [1, 2, 3]}, {1: None}) == {"id": 1, "result": [1, 2, 3]}
    assert shape({"id": 2, "result": [1, 2, 3]}, {1: keep}) == {"id": 2, "result": None}
    assert shape({"id": "n", "method": "ping", "params": {"big": "x" * 99}}) == {
        "method": "ping", "id": "n"
    }
    assert shape({"method": "notifications/progress", "params": {}}) == {
        "method": "notifications/progress"
    }


def test_a_reducers_failure_is_carried_for_that_call_only() -> None:
    def broken(value: Any) -> Any:
        return value["missing"]

    out = shape({"id": 1, "result": {}}, {1: broken})
    assert set(out) == {"id", "failed"} and isinstance(out["failed"], TargetProtocolError)
    assert "unexpected answer (KeyError" in str(out["failed"])


def test_an_error_is_kept_bounded() -> None:
    out = shape({"id": 1, "error": {"code": -1, "message": "m" * 10_000, "data": "x" * 10}})
    assert out == {"id": 1, "error": {"code": -1, "message": "m" * 4096}}
    nonsense = shape({"id": 1, "error": "nonsense"})
    assert nonsense == {"id": 1, "error": {"code": None, "message": ""}}
