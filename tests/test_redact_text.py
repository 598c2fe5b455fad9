"""One output path for text: encodable, secrets masked before the cut, bounded.

Property tests generate the hostile class itself: a secret echoed at every
offset around the cut, split by line breaks (real and JSON-escaped), already
cut by something upstream, next to lone surrogates and control characters.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchd import redact

SECRET = "sk-benchd-TEXT-5c1e9a07b3d24f86aa01"
# padding drawn from characters the secret never uses, so any window of it in
# the output can only have come from the secret
PAD = st.text(
    alphabet=st.sampled_from([*"xyzXYZ qwQW.,;:!?/\u00e9\u4e2d\u202e\t", "\ud800", "\udfff"]),
    max_size=300,
)
BREAKS = st.sampled_from(["\n", "\r\n", "\r", "\n    ", "\\n", "\\r\\n"])


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    redact.clear_secrets()
    redact.register_secret(SECRET)
    yield
    redact.clear_secrets()


def windows(secret: str) -> list[str]:
    n = redact.MIN_FRAGMENT
    return [secret[i : i + n] for i in range(len(secret) - n + 1)]


def assert_safe(out: str, limit: int) -> None:
    out.encode("utf-8")  # raises if anything unencodable survived
    assert len(out) <= limit
    for window in windows(SECRET):
        assert window not in out, f"{window!r} of the secret survived in {out!r}"


@settings(max_examples=400, deadline=None)
@given(before=PAD, after=PAD, limit=st.integers(1, 400))
def test_a_secret_at_any_offset_around_the_cut_never_shows(
    before: str, after: str, limit: int
) -> None:
    assert_safe(redact.text(before + SECRET + after, limit), limit)


@settings(max_examples=400, deadline=None)
@given(
    before=PAD,
    after=PAD,
    at=st.integers(1, len(SECRET) - 1),
    brk=BREAKS,
    limit=st.integers(1, 400),
)
def test_a_secret_split_across_a_line_break_never_shows(
    before: str, after: str, at: int, brk: str, limit: int
) -> None:
    out = redact.text(before + SECRET[:at] + brk + SECRET[at:] + after, limit)
    assert_safe(out, limit)
    # and neither half survives on its own line, whatever the length of the halves
    assert SECRET[:at] not in out or at < redact.MIN_FRAGMENT // 2
    assert SECRET[at:] not in out or len(SECRET) - at < redact.MIN_FRAGMENT // 2


@settings(max_examples=300, deadline=None)
@given(
    before=PAD,
    after=PAD,
    keep=st.integers(redact.MIN_FRAGMENT, len(SECRET) - 1),
    from_end=st.booleans(),
)
def test_a_secret_cut_upstream_leaves_no_fragment(
    before: str, after: str, keep: int, from_end: bool
) -> None:
    fragment = SECRET[-keep:] if from_end else SECRET[:keep]
    assert_safe(redact.text(before + fragment + after), redact.TEXT_CHARS)


@settings(max_examples=300, deadline=None)
@given(value=st.text(max_size=600), limit=st.integers(1, 600))
def test_any_string_comes_out_encodable_and_bounded(value: str, limit: int) -> None:
    out = redact.text(value, limit)
    out.encode("utf-8")
    assert len(out) <= limit
    label = redact.label(value)
    label.encode("utf-8")
    assert len(label) <= redact.LABEL_CHARS
    assert not any(c in label for c in "\n\r\x00\u2028")


def test_a_surrogate_pair_is_kept_as_its_character_and_a_lone_one_replaced() -> None:
    assert redact.text("a\ud83d\ude00b\ud800c") == "a\U0001f600b\ufffdc"


def test_text_that_needs_nothing_comes_back_unchanged() -> None:
    plain = "HTTP 500 (index rebuilding) \u00e9\u4e2d \U0001f600"
    assert redact.text(plain) == plain


def test_a_long_label_is_cut_with_a_visible_mark() -> None:
    out = redact.label("m" * 15_000_000)
    assert len(out) == redact.LABEL_CHARS and out.endswith("\u2026")


@given(word_len=st.integers(1, redact.MIN_FRAGMENT - 1))
def test_a_name_sharing_only_a_keys_first_word_is_not_masked(word_len: int) -> None:
    """A probe named like a key's first word keeps its label; a longer run of the key does not."""
    key = "embedded-daemon-key-31337-abcdef"
    redact.register_secret(key)
    name = key[:word_len]
    assert redact.label(name) == name
    assert key[: redact.MIN_FRAGMENT] not in redact.label(key[: redact.MIN_FRAGMENT] + " tail")


def test_a_text_answered_before_a_secret_was_registered_is_masked_after_it() -> None:
    """text() remembers its answers, never past a change of the registered secrets."""
    later = "sk-benchd-LATER-9f3b2c71d0e84a65bb02"
    echoed = f"store said: bad key {later}"
    for _ in range(2):  # the second answer is the remembered one
        assert redact.text(echoed) == echoed
        assert redact.label(echoed) == echoed
    redact.register_secret(later)
    assert later not in redact.text(echoed) and later not in redact.label(echoed)
    assert redact.text(echoed) == f"store said: bad key {redact.MASK}"
    redact.clear_secrets()
    assert redact.text(echoed) == echoed  # forgotten: nothing masks it any more


def test_the_texts_remembered_are_bounded() -> None:
    for i in range(redact.MEMO_KEPT + 10):
        assert redact.text(f"q{i}", 100) == f"q{i}"
    assert len(redact._memo) <= redact.MEMO_KEPT
    assert redact.text(f"q0 {SECRET}") == f"q0 {redact.MASK}"
