"""What a listing keeps of each record: fingerprints, their fast paths equal to the general
case."""

from __future__ import annotations

import pytest

from benchd.store.listing import _blake, fingerprint, text_fingerprint


@pytest.mark.parametrize("text", ["", "k", "benchd:ns:key", "é\u2028\ud800", "s3:abc"])
def test_one_texts_fingerprint_is_the_general_cases(text: str) -> None:
    general = _blake("".join(f"s{len(v)}:{v}" for v in (text,)))
    assert text_fingerprint(text) == general == fingerprint(text)
    assert fingerprint(text, None) != fingerprint(text)
