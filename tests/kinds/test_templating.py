"""The id path syntax and the template placeholders of the http target."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchd.kinds.http.templating import (
    MISSING,
    PathError,
    extract,
    lookup,
    parse_path,
    render,
    render_text,
    template_problem,
)

DATA = {
    "results": [{"id": "a", "meta": {"tags": ["x"]}}, {"id": 2}],
    "ids": [["p", "q"], ["r"]],
    "count": 2,
}


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("count", 2),
        ("results[*].id", ["a", 2]),
        ("results[0].meta.tags", ["x"]),
        ("results[0].meta.tags[0]", "x"),
        ("ids[0]", ["p", "q"]),
        ("ids[*][*]", ["p", "q", "r"]),  # nested wildcards flatten
    ],
)
def test_paths_select_keys_indexes_and_every_element(path: str, value: Any) -> None:
    assert extract(parse_path(path), DATA) == value


def test_a_top_level_array_is_read_with_a_leading_wildcard() -> None:
    assert extract(parse_path("[*].id"), [{"id": 1}, {"id": 2}]) == [1, 2]


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("result[*].id", "no key 'result' at the top (an object)"),
        ("results[*].name", "no key 'name' in an object at results[0]"),
        ("results[5]", "no element [5] at results (an array of 2)"),
        ("count[*]", "expected an array at count, got a number"),
        ("count.x", "no key 'x' in a number at count"),
    ],
)
def test_a_path_that_does_not_fit_says_where(path: str, problem: str) -> None:
    with pytest.raises(PathError) as err:
        extract(parse_path(path), DATA)
    assert str(err.value) == problem


@pytest.mark.parametrize("bad", ["", "a..b", ".a", "a.", "a[x]", "a[-1]", "a b", "a[*"])
def test_malformed_paths_are_rejected_with_the_position(bad: str) -> None:
    with pytest.raises(ValueError, match="path"):
        parse_path(bad)


def test_lenient_lookup_keeps_wildcard_columns_aligned() -> None:
    assert lookup(parse_path("results[*].meta"), DATA) == [{"tags": ["x"]}, None]
    assert lookup(parse_path("results[3]"), DATA) is MISSING


def test_an_exact_placeholder_keeps_its_type_and_text_is_substituted() -> None:
    values = {"q": "port?", "k": 10, "records": [{"id": "a"}], "flag": True}
    template = {
        "limit": "{k}",
        "records": "{records}",
        "ids": "{records[*].id}",
        "text": "q={q} k={k} on={flag} {{literal}}",
        "fixed": 3,
        "list": ["{q}", "{nothing}"],
    }
    assert render(template, values) == {
        "limit": 10,
        "records": [{"id": "a"}],
        "ids": ["a"],
        "text": "q=port? k=10 on=true {literal}",
        "fixed": 3,
        "list": ["port?"],
    }


def test_a_missing_value_drops_its_key_but_is_empty_inside_text() -> None:
    rendered = render({"date": "{reference_date}", "s": "at {reference_date}!"}, {})
    assert rendered == {"s": "at !"}


def test_path_values_can_be_escaped_for_urls() -> None:
    assert render_text("/m/{id}", {"id": "a/b c"}, escape=lambda v: v.replace("/", "%2F")) == (
        "/m/a%2Fb c"
    )


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ({"a": "{bogus}"}, "t.a: unknown placeholder {bogus}; known here: {k}, {q}"),
        ({"a": ["{q[x]}"]}, "t.a[0]: placeholder {q[x]}: bad path 'q[x]'"),
        ({"a": "{q"}, "t.a: unbalanced brace"),
        ({"a": "q}"}, "t.a: unbalanced brace"),
    ],
)
def test_template_problems_name_the_key(template: Any, problem: str) -> None:
    found = template_problem(template, ("q", "k"), "t")
    assert found is not None and found.startswith(problem)


def test_a_clean_template_has_no_problem() -> None:
    assert template_problem({"a": ["{q}", "{{x}}", 1, {"b": "{k}"}]}, ("q", "k"), "t") is None


json_values = st.recursive(
    st.none() | st.integers() | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "id"]), inner, max_size=3)
    ),
    max_leaves=10,
)
paths = st.lists(
    st.sampled_from([".a", ".b", ".id", "[0]", "[1]", "[*]"]), min_size=1, max_size=4
).map(lambda steps: "".join(steps).lstrip("."))


@settings(max_examples=400, deadline=None)
@given(data=json_values, text=paths)
def test_strict_extraction_agrees_with_lenient_lookup_or_says_where(data: Any, text: str) -> None:
    path = parse_path(text)
    try:
        value = extract(path, data)
    except PathError as exc:
        assert str(exc).startswith(("no key", "no element", "expected an array"))
    else:
        assert value == lookup(path, data)
