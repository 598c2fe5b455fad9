"""A JSON request body: the value httpx's ``json=`` would send, or httpx's own error.

:func:`benchd.http.jsonbody.json_body` is held to httpx's encoding
(``httpx.Request(..., json=value)``): the bytes read back by ``json.loads``
to the same value (types, key order, float bits), or it raises the same
exception, with the same words. A plain ``orjson.dumps`` fails these cases
(:data:`NAIVE_FAILS`): it writes NaN and infinities as ``null`` and Enums,
UUIDs, dataclasses and datetimes that ``json`` refuses, and refuses what
``json`` writes (integers beyond 64 bits, non-``str`` keys, float and str
subclasses, nesting deeper than 254).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
import uuid
from collections import OrderedDict, namedtuple
from typing import Any

import httpx
import orjson
import pytest
from connection_support import ConnectionSettings
from fake_store import FakeStore
from hypothesis import given, settings
from hypothesis import strategies as st
from json_exact import exact

from benchd.http.client import RetryingClient, RetryPolicy, open_clients
from benchd.http.jsonbody import json_body


class Colour(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    HIGH = 2


class Tag(enum.StrEnum):
    HOT = "hot"


class Text(str):
    pass


class Number(int):
    pass


class Real(float):
    pass


class Table(dict):  # type: ignore[type-arg]
    pass


class Row(list):  # type: ignore[type-arg]
    pass


@dataclasses.dataclass
class Point:
    x: int


Pair = namedtuple("Pair", "a b")

_NAN = float("nan")
_INF = float("inf")


def httpx_body(value: Any) -> tuple[str, bytes]:
    """httpx's ``json=`` encoding: its Content-Type and bytes (or its error)."""
    request = httpx.Request("POST", "http://store.example/x", json=value)
    assert request.headers["content-length"] == str(len(request.content))
    return request.headers["content-type"], request.content



def outcome(encode: Any, value: Any) -> tuple[str, Any]:
    """What ``encode(value)`` gives: the value its bytes read back to, or its error's type."""
    try:
        body = encode(value)
    except Exception as exc:
        return "error", type(exc)
    return "value", exact(json.loads(body))


def assert_as_httpx(value: Any) -> None:
    """``json_body(value)`` is httpx's value, or httpx's error with the same words."""
    try:
        kind, theirs = httpx_body(value)
    except Exception as exc:
        with pytest.raises(type(exc)) as ours:
            json_body(value)
        assert type(ours.value) is type(exc)
        assert str(ours.value) == str(exc)
        return
    assert kind == "application/json"
    assert exact(json.loads(json_body(value))) == exact(json.loads(theirs))


def _deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


NAIVE_FAILS: dict[str, Any] = {
    "nan": {"score": _NAN},
    "infinity": [1.0, _INF],
    "-infinity": {"a": {"b": [-_INF]}},
    "nan-among-nulls": {"a": None, "b": [None, _NAN]},
    "enum": {"colour": Colour.RED},
    "uuid": [uuid.UUID(int=7)],
    "fragment": {"raw": orjson.Fragment(b"[1]")},
    "dataclass": {"point": Point(1)},
    "datetime": [datetime.datetime(2025, 1, 2, 3, 4, 5)],
    "date": [datetime.date(2025, 1, 2)],
    "time": [datetime.time(3, 4)],
    "2**64": 2**64,
    "-2**63-1": [-(2**63) - 1],
    "int-key": {1: "a"},
    "float-key": {1.5: "a", -0.0: "b"},
    "bool-and-none-keys": {True: 1, None: 2},
    "str-subclass-key": {Text("k"): 1},
    "float-subclass": [Real(1.5)],
    "namedtuple": {"pair": Pair(1, 2)},
    "lone-surrogate": {"text": "a\ud800b"},
    "lone-surrogate-key": {"\udfff": 1},
    "deep": _deep(300),
}
"""Bodies a plain ``orjson.dumps`` gets wrong: another value, or an error httpx does not raise
(or the other way round)."""

ALIKE: dict[str, Any] = {
    "import": {
        "data": [{"id": "benchd:ns:1", "content": "ünïcödé — “q” \u2028\n😀", "n": 1.5}],
        "operator_approved": True,
    },
    "-0.0": [-0.0, 0.0],
    "1e16": [1e16, 1e-5, 1e-7, 1e22, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308],
    "int-bounds": [2**63 - 1, -(2**63), 2**63, 2**64 - 1, 2**53 + 1],
    "null-in-text": {"a": "null", "b": None, "c": [1.5, "nullnull"]},
    "tuple": {"t": (1, (2.5, "x"), [])},
    "int-enum": [Level.HIGH],
    "str-enum": [Tag.HOT],
    "str-subclass": [Text("t")],
    "int-subclass": [Number(3)],
    "dict-subclass": Table(a=1),
    "ordered-dict": OrderedDict([("b", 1), ("a", 2)]),
    "list-subclass": Row([1, 2]),
    "controls": '\x00\x1f\x7f"\\',
    "scalars": [None, True, False, "", 0],
    "bare": 1.0,
    "deep-enough": _deep(250),
    "set": {"s": {1, 2}},  # both refuse it: TypeError
    "bytes": [b"x"],
    "circular-free-shared": [[1.5]] * 3,
}
"""Bodies a plain ``orjson.dumps`` may get right: json_body still must."""


@pytest.mark.parametrize(
    "value", [*NAIVE_FAILS.values(), *ALIKE.values()], ids=[*NAIVE_FAILS, *ALIKE]
)
def test_a_body_is_httpxs_value_or_httpxs_error(value: Any) -> None:
    assert_as_httpx(value)


@pytest.mark.parametrize("value", NAIVE_FAILS.values(), ids=NAIVE_FAILS.keys())
def test_each_naive_case_tells_a_plain_orjson_encoder_from_httpx(value: Any) -> None:
    theirs = outcome(lambda v: httpx_body(v)[1], value)
    assert outcome(orjson.dumps, value) != theirs  # the case catches a plain encoder
    assert outcome(json_body, value) == theirs


def test_a_body_that_contains_itself_fails_as_httpx_fails() -> None:
    looped: list[Any] = [1.5]
    looped.append({"again": looped})
    assert_as_httpx(looped)
    with pytest.raises(ValueError, match="Circular reference"):
        json_body(looped)


def test_a_plain_body_is_orjsons_bytes() -> None:
    body = ALIKE["import"]
    assert json_body(body) == orjson.dumps(body)
    assert json_body([1e-5]) == b"[0.00001]"  # json writes 1e-05: the same float


_CHARS = st.one_of(
    st.characters(codec="ascii"),
    st.characters(min_codepoint=0x80, max_codepoint=0xFFFF, exclude_categories=["Cs"]),
    st.characters(min_codepoint=0x10000),  # astral
    st.characters(categories=["Cs"]),  # lone surrogates
)
_TEXT = st.text(_CHARS, max_size=6)
_INTS = st.one_of(
    st.integers(),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, -(2**64)]),
    st.integers(min_value=-(2**65), max_value=2**65),
)
_FLOATS = st.one_of(
    st.floats(),  # NaN, infinities, subnormals, -0.0
    st.sampled_from([-0.0, 1e16, 1e-5, 5e-324, _NAN, _INF, -_INF]),
)
_ODD = st.sampled_from(
    [
        Colour.RED,
        Level.HIGH,
        Tag.HOT,
        uuid.UUID(int=1),
        Point(2),
        datetime.datetime(2025, 1, 1),
        Text("t"),
        Number(5),
        Real(0.5),
        Table(k=1),
        Row([1]),
        Pair(1, 2),
    ]
)
_KEYS = st.one_of(_TEXT, _TEXT, _TEXT, st.integers(), st.floats(), st.booleans(), st.none())
_LEAVES = st.one_of(st.none(), st.booleans(), _INTS, _FLOATS, _TEXT, _ODD)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(_TEXT, inner, max_size=4),
        st.dictionaries(_KEYS, inner, max_size=3),
    ),
    max_leaves=12,
)
_PLAIN_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=6),
)
_PLAIN = st.recursive(
    _PLAIN_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=16,
)


@settings(max_examples=1500, deadline=None)
@given(value=_VALUES.filter(lambda v: v is not None))  # json=None: no body
def test_any_json_like_body_is_httpxs_value_or_httpxs_error(value: Any) -> None:
    assert_as_httpx(value)


@settings(max_examples=500, deadline=None)
@given(
    value=_PLAIN.filter(lambda v: v is not None),
    bad=st.sampled_from([_NAN, _INF, -_INF]),
    at=st.integers(0, 40),
)
def test_a_non_finite_float_anywhere_in_a_plain_body_is_refused(
    value: Any, bad: float, at: int
) -> None:
    assert_as_httpx(value)
    spoiled = _spoil(value, bad, at)
    with pytest.raises(ValueError, match="Out of range float"):
        json_body(spoiled)
    assert_as_httpx(spoiled)


def _spoil(value: Any, bad: float, at: int) -> Any:
    """``value`` with ``bad`` put into its ``at``-th container (or beside it, at the top)."""
    containers: list[Any] = []

    def walk(v: Any) -> None:
        if type(v) in (dict, list):
            containers.append(v)
            for item in v.values() if type(v) is dict else v:
                walk(item)

    walk(value)
    if not containers:
        return [value, bad]
    target = containers[at % len(containers)]
    if type(target) is dict:
        target["spoiled"] = bad
    else:
        target.append(bad)
    return value


def test_a_sum_of_floats_too_large_is_still_sent_as_httpx_sends_it() -> None:
    body: dict[str, Any] = {"a": [1e308, 1e308, None], "b": -1e308}
    assert_as_httpx(body)
    assert math.isinf(sum(body["a"][:2]))  # overflows: json decides, and writes it


# -- through benchd's client: the bytes that reach the store --------------------------

BODY = {"x": 1e-05, "text": "ü 😀", "n": [2**63, -0.0, None]}
ORJSON_BYTES = (
    b'{"x":0.00001,"text":"\xc3\xbc \xf0\x9f\x98\x80","n":[9223372036854775808,-0.0,null]}'
)


def _heads(request: httpx.Request) -> list[tuple[bytes, bytes]]:
    """The header lines but Content-Length, and Connection (benchd's pool keeps its own)."""
    dropped = (b"content-length", b"connection")
    return [(k.lower(), v) for k, v in request.headers.raw if k.lower() not in dropped]


def _assert_sent_as_httpx_would(sent: httpx.Request, built: httpx.Request) -> None:
    """``sent`` carries orjson's bytes for ``BODY``, ``built`` (httpx's) the same value, and
    the headers are httpx's, Content-Length counted on the bytes sent."""
    assert sent.content == json_body(BODY) == ORJSON_BYTES != built.content
    assert exact(json.loads(sent.content)) == exact(json.loads(built.content))
    assert sent.headers["content-length"] == str(len(sent.content))
    assert _heads(sent) == _heads(built)


@pytest.mark.anyio
@pytest.mark.parametrize("headers", [None, {"Content-Type": "application/vnd+json"}])
async def test_a_json_body_through_httpx_goes_out_as_json_body_writes_it(
    headers: dict[str, str] | None,
) -> None:
    seen: list[httpx.Request] = []

    async def store(request: httpx.Request) -> httpx.Response:
        await request.aread()
        seen.append(request)
        return httpx.Response(200, json={})

    client = httpx.AsyncClient(
        base_url="http://store.example", transport=httpx.MockTransport(store)
    )
    http = RetryingClient(client, RetryPolicy(), "http://store.example")  # a proxy's path
    try:
        await http.request("POST", "/export/import", json=BODY, headers=headers)
        await http.request("POST", "/raw", json=BODY, content=b"[1]")  # httpx: content wins
    finally:
        await http.aclose()
    built = client.build_request("POST", "/export/import", json=BODY, headers=headers)
    _assert_sent_as_httpx_would(seen[0], built)
    assert seen[0].headers["content-type"] == built.headers["content-type"]
    assert seen[1].content == b"[1]" and "content-type" not in seen[1].headers


@pytest.mark.anyio
async def test_a_json_body_the_writer_leaves_to_httpx_goes_out_as_json_body_writes_it() -> None:
    seen: list[httpx.Request] = []

    def store(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    settings = ConnectionSettings("http://store.example:8080/api", headers={"X-Custom": "one"})
    clients = open_clients(settings, {"x-api-key": "sk-json-body-0123"}, FakeStore(store))
    try:
        assert clients.http._writer is not None
        assert clients.http._writer.write("POST", "/mémoire", {"json": BODY}) is None
        await clients.http.request("POST", "/mémoire", json=BODY)  # built by httpx
        await clients.http.request("POST", "/export/import", json=BODY)  # by the writer
    finally:
        await clients.http.aclose()
    for sent, path in zip(seen, ["/mémoire", "/export/import"], strict=True):
        built = clients.client.build_request("POST", path, json=BODY)
        _assert_sent_as_httpx_would(sent, built)
