"""The store's own words as benchd shows them (benchd.http.messages): one line, masked, then cut."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchd import redact
from benchd.errors import TargetProtocolError
from benchd.http.messages import MESSAGE_CHARS, raised, store_message
from benchd.kinds.python import PythonConfig, RetrieverTarget

SECRET = "sk-said-" + "7" * 40

pytestmark = pytest.mark.anyio


@pytest.fixture
def secret() -> Iterator[str]:
    redact.register_secret(SECRET)
    yield SECRET
    redact.clear_secrets()


def test_an_exception_reads_as_its_class_and_message_on_one_line() -> None:
    exc = ValueError('Collection "m" expects\nembeddings of dimension 384, got 3')
    assert raised(exc) == ('ValueError: Collection "m" expects embeddings of dimension 384, got 3')


def test_a_secret_straddling_the_cut_is_masked_before_it(secret: str) -> None:
    padding = "x" * (MESSAGE_CHARS - 20)
    for words in (
        raised(RuntimeError(padding + secret)),
        store_message(f'{{"message": "{padding}{secret}"}}'.encode()),
    ):
        assert len(words) <= MESSAGE_CHARS
        assert "sk-said" not in words and "7777" not in words


def test_a_large_or_binary_body_has_no_words() -> None:
    assert store_message(b"x" * 70_000) == ""
    assert store_message(b"\xff\xfe") == ""
    assert store_message(b"   ") == ""
    assert store_message(None) == ""  # type: ignore[arg-type]  # a body spilled to disk


class Refusing:
    """A python retriever whose store refuses writes, with its own words."""

    def index(self, memories: Any) -> None:
        raise ValueError('missing field "embeddings"\n(at line 1)')

    def search(self, q: str, k: int) -> list[str]:
        return []


async def test_a_python_stores_exception_reaches_the_cycle_in_its_own_words() -> None:
    target = RetrieverTarget(Refusing(), PythonConfig(factory="benchd.examples.retrievers:bm25"))
    with pytest.raises(TargetProtocolError) as caught:
        await target.seed([{"id": "m", "content": "x"}])
    assert str(caught.value).endswith(
        'index() raised ValueError: missing field "embeddings" (at line 1)'
    )


def _cpu_s(body: bytes, repeats: int = 3) -> float:
    """The least CPU time (not wall time: other processes do not count) ``store_message`` took."""
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        store_message(body)
        best = min(best, time.process_time() - started)
    return best


@pytest.mark.parametrize(
    "hostile",
    [b"<script>a" * 7000, b">" + b"<" * 60_000, b"> " + b"<a " * 20_000],
    ids=["unclosed-scripts", "lt-flood", "open-tags"],
)
def test_a_hostile_error_page_costs_what_a_plain_one_does(hostile: bytes) -> None:
    """Quadratic patterns took 3-8 s of CPU on these 60 KB pages (the event loop's time)."""
    plain = b"<html><body><p>" + b"the index is rebuilding " * 2700 + b"</p></body></html>"
    assert len(plain) >= len(hostile)
    # Both are linear: tens of times the plain page's CPU at most, where the
    # quadratic patterns took thousands of times.
    assert _cpu_s(hostile) < 50 * max(_cpu_s(plain), 1e-3)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(
        st.sampled_from(["error", "message", "detail", "msg", "loc", "type", "status", "x"]),
        inner,
        max_size=4,
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(body=st.one_of(st.binary(max_size=400), _JSON.map(lambda v: json.dumps(v).encode())))
def test_any_body_gives_one_bounded_line(body: bytes) -> None:
    for said in (store_message(body), store_message(body, credentials=False)):
        assert len(said) <= MESSAGE_CHARS
        assert "\n" not in said and "\r" not in said and "\x00" not in said


@settings(max_examples=200, deadline=None)
@given(
    around=st.text(max_size=400),
    key=st.sampled_from(["error", "message", "detail", "reason"]),
    shape=st.sampled_from(["flat", "nested", "list", "text"]),
)
def test_a_registered_secret_never_shows_whatever_surrounds_it(
    around: str, key: str, shape: str
) -> None:
    redact.register_secret(SECRET)
    try:
        words = around + SECRET + around
        doc: object = {
            "flat": {key: words},
            "nested": {"error": {"type": "bad_request", key: words}},
            "list": {"detail": [{"loc": ["body"], "msg": words}]},
            "text": words,
        }[shape]
        body = words.encode() if shape == "text" else json.dumps(doc).encode()
        said = store_message(body)
        assert SECRET not in said and SECRET[:16] not in said and SECRET[-16:] not in said
    finally:
        redact.clear_secrets()


def test_the_vector_kinds_errors_are_masked_before_they_are_cut(secret: str) -> None:
    """milvus cut at 300 characters first and masked nothing; pgvector masked nothing."""
    from benchd.kinds import milvus, pgvector

    padding = "y" * (MESSAGE_CHARS - 20)
    shown = [
        str(milvus.error_of(RuntimeError(f"insert failed: {padding}{secret}"), "milvus m")),
        str(pgvector.error_of(ValueError(f"bad row {padding}{secret}\nDETAIL: x"), "pg t")),
    ]
    for text in shown:
        assert secret[:5] not in text and "7777" not in text, text  # no fragment either
    assert shown[0].startswith("milvus m: RuntimeError: insert failed: yyy")
    assert shown[1].startswith("pg t: SQL error ValueError: bad row yyy")
