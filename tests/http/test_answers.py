"""The body buffer holds what it was given, not one object per read."""

from __future__ import annotations

import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from benchd.http.answers import INLINE_DECODE_BYTES, BodyBuffer, Spill


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
