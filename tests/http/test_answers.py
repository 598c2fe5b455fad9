"""The body buffer holds what it was given, not one object per read."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchd.errors import TargetProtocolError
from benchd.http.answers import INLINE_DECODE_BYTES, MAX_DEPTH, BodyBuffer, Spill, loads


@settings(max_examples=30, deadline=None)
@given(
    size=st.integers(min_value=0, max_value=INLINE_DECODE_BYTES),
    piece=st.sampled_from([1, 7, 100, 4096, 16383, 16384, 65536]),
)
def test_a_body_read_in_tiny_pieces_costs_about_its_size(size: int, piece: int) -> None:
    """Whatever the read size, the buffer's peak stays near twice the body.

    A loopback answer arrives in 7-byte reads when the reader outruns the
    writer; kept one ``bytes`` object per read, a 200 kB body held 1.7 MB
    (each object's header is ~33 bytes plus a list slot).
    """
    data = bytes(range(256)) * (size // 256 + 1)
    data = data[:size]
    pieces = [data[i : i + piece] for i in range(0, size, piece)]
    tracemalloc.start()
    try:
        buffer = BodyBuffer()
        for chunk in pieces:
            buffer.add(chunk)
        body = buffer.take()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(body, bytes) and body == data
    assert peak <= 2 * size + 3 * 16384 + 4096, (size, piece, peak)


def test_a_body_past_the_inline_size_spills_whole() -> None:
    buffer = BodyBuffer()
    data = b"x" * (INLINE_DECODE_BYTES + 10)
    for i in range(0, len(data), 7):
        buffer.add(data[i : i + 7])
    body = buffer.take()
    assert isinstance(body, Spill) and len(body) == len(data)
    with open(body.path, "rb") as file:
        assert file.read() == data
    body.discard()


def _nested(levels: int, leaf: Any) -> Any:
    """``leaf`` under ``levels`` containers in all, objects and arrays alternating."""
    value = leaf
    for n in range(levels):
        value = {"k": value} if n % 2 else [value]
    return value


@pytest.mark.parametrize("levels", [63, 64, 65, 66])
def test_one_deep_branch_among_many_flat_records_is_found_at_its_depth(levels: int) -> None:
    """A listing page: many flat records and empty arrays, one value nested ``levels`` deep
    (the page and its array counted); only past MAX_DEPTH is it refused."""
    records: list[Any] = [
        {"id": f"r{i}", "tags": [], "n": i, "metadata": {"a": {"b": 1}}} for i in range(300)
    ]
    records[150]["deep"] = _nested(levels - 3, 1)  # under the page, its array, the record
    body = json.dumps({"memories": records, "has_more": False}).encode()
    if levels <= MAX_DEPTH:
        assert loads(body, "GET /export")["memories"][0]["id"] == "r0"
    else:
        with pytest.raises(TargetProtocolError, match="deeper than 64 levels"):
            loads(body, "GET /export")
