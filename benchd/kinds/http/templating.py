"""Tiny JSON templates and id paths for the generic ``http`` target.

**Paths** pick values out of JSON (``results[*].id``)::

    key          a member of an object      (any characters but . [ ] { } and spaces)
    .key         a member, after another step
    [N]          the N-th element of an array (N >= 0)
    [*]          every element of an array; the result is a flat list

``results[*].id`` is every result's id; ``ids[0]`` is Chroma's first id list;
``[*].id`` reads a top-level array. :func:`extract` is strict: a missing key,
a short array or a wrong type is a :class:`PathError` naming the place.
:func:`lookup` is lenient (missing is :data:`MISSING`, or ``None`` inside a
``[*]`` list so parallel columns stay aligned).

**Templates** are TOML values (strings, numbers, booleans, arrays, tables)
whose strings may hold placeholders: ``{name}`` or ``{name<path>}``, e.g.
``{q}``, ``{k}``, ``{memory.tags}``, ``{records[*].id}``. A string that is
exactly one placeholder takes the value's own JSON type (``"{k}"`` becomes
the integer 10, ``"{records}"`` the list); inside a longer string a value is
written as text. A missing value (``{reference_date}`` when the query has
none, ``{memory.tags}`` when the record has none) leaves out the table key,
array element, query parameter or header that is exactly that placeholder,
and is empty text inside a longer string. ``{{`` and ``}}`` are literal braces.
Table keys are never templated.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

__all__ = [
    "MISSING",
    "Path",
    "PathError",
    "as_text",
    "extract",
    "lookup",
    "parse_path",
    "render",
    "render_text",
    "template_problem",
]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()
"""What a lenient lookup returns when the value is not there."""

WILD: Final = "*"  # a [*] step; keys never spell it (the key regex excludes brackets)
_KEY = re.compile(r"[^.\[\]{}\s]+")
_INDEX = re.compile(r"\[(\*|\d+)\]")
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)([^{}]*)\}")

Step = str | int


class PathError(ValueError):
    """A path does not fit the data; the message names where it broke."""


@dataclass(frozen=True, slots=True)
class Path:
    """A parsed path; ``steps`` holds keys (str), indexes (int) and :data:`WILD`."""

    text: str
    steps: tuple[tuple[str, Step], ...]  # ("key"|"index"|"wild", value)


@lru_cache(maxsize=1024)
def parse_path(text: str) -> Path:
    """Parse ``text`` or raise ValueError saying what is wrong and where."""
    if not text:
        raise ValueError("path is empty; write e.g. results[*].id")
    steps: list[tuple[str, Step]] = []
    pos = 0
    while pos < len(text):
        if m := _INDEX.match(text, pos):
            raw = m.group(1)
            steps.append(("wild", WILD) if raw == "*" else ("index", int(raw)))
            pos = m.end()
            continue
        if pos > 0:
            if text[pos] != ".":
                raise ValueError(_where(text, pos, "expected '.key', '[N]' or '[*]'"))
            pos += 1
        m = _KEY.match(text, pos)
        if m is None:
            raise ValueError(_where(text, pos, "expected a key"))
        steps.append(("key", m.group()))
        pos = m.end()
    return Path(text, tuple(steps))


def _where(text: str, pos: int, problem: str) -> str:
    return f"bad path {text!r} at character {pos + 1}: {problem}"


def extract(path: Path, data: Any) -> Any:
    """The value at ``path`` in ``data``; PathError if anything is missing or mistyped."""
    try:
        return _fast(data, path.steps)
    except _Miss:
        return _walk(data, path.steps, "", strict=True)  # again, to say where it broke


class _Miss(Exception):
    pass


def _fast(value: Any, steps: tuple[tuple[str, Step], ...]) -> Any:
    """:func:`extract` without bookkeeping of where it is (the search answer hot path)."""
    for i, (kind, step) in enumerate(steps):
        if kind == "key":
            if type(value) is not dict or step not in value:
                raise _Miss
            value = value[step]
        elif kind == "index":
            if type(value) is not list or not isinstance(step, int) or step >= len(value):
                raise _Miss
            value = value[step]
        else:
            if type(value) is not list:
                raise _Miss
            rest = steps[i + 1 :]
            if not any(k == "wild" for k, _ in rest):
                return [_fast(item, rest) for item in value]
            return [x for item in value for x in _fast(item, rest)]
    return value


def lookup(path: Path, data: Any) -> Any:
    """The value at ``path`` in ``data``, or :data:`MISSING`."""
    return _walk(data, path.steps, "", strict=False)


def _walk(value: Any, steps: tuple[tuple[str, Step], ...], where: str, *, strict: bool) -> Any:
    for i, (kind, step) in enumerate(steps):
        if kind == "wild":
            if not isinstance(value, list):
                return _fail(
                    strict, f"expected an array at {where or 'the top'}, got {_kind(value)}"
                )
            return _spread(value, steps[i + 1 :], where, strict=strict)
        if kind == "index":
            assert isinstance(step, int)
            if not isinstance(value, list) or step >= len(value):
                got = f"an array of {len(value)}" if isinstance(value, list) else _kind(value)
                return _fail(strict, f"no element [{step}] at {where or 'the top'} ({got})")
            value, where = value[step], f"{where}[{step}]"
            continue
        if not isinstance(value, dict) or step not in value:
            at = f"in {_kind(value)} at {where}" if where else f"at the top ({_kind(value)})"
            return _fail(strict, f"no key {step!r} {at}")
        value, where = value[step], f"{where}.{step}" if where else str(step)
    return value


def _spread(
    items: list[Any], rest: tuple[tuple[str, Step], ...], where: str, *, strict: bool
) -> list[Any]:
    nested = any(kind == "wild" for kind, _ in rest)
    out: list[Any] = []
    for j, item in enumerate(items):
        got = _walk(item, rest, f"{where}[{j}]", strict=strict)
        if got is MISSING:
            got = None  # keep parallel columns aligned
        if nested and isinstance(got, list):
            out.extend(got)
        else:
            out.append(got)
    return out


def _fail(strict: bool, message: str) -> Any:
    if strict:
        raise PathError(message)
    return MISSING


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    return "a number"


# -- templates --------------------------------------------------------------------


def template_problem(template: Any, allowed: Collection[str], where: str) -> str | None:
    """The first problem in ``template`` (unknown placeholder, bad path, stray brace), or None."""
    if isinstance(template, str):
        return _text_problem(template, allowed, where)
    if isinstance(template, float) and not math.isfinite(template):
        return f"{where}: {template} cannot be sent as JSON; use a finite number"
    if not isinstance(template, int | float | bool | Mapping | list | tuple | None):
        return (
            f"{where}: a TOML {type(template).__name__} cannot be sent as JSON; "
            "quote it as a string"
        )
    if isinstance(template, Mapping):
        for key, value in template.items():
            if problem := template_problem(value, allowed, f"{where}.{key}"):
                return problem
    elif isinstance(template, list | tuple):
        for i, value in enumerate(template):
            if problem := template_problem(value, allowed, f"{where}[{i}]"):
                return problem
    return None


def _text_problem(text: str, allowed: Collection[str], where: str) -> str | None:
    for m in _PLACEHOLDER.finditer(text):
        name = m.group(1)
        if name is None:
            continue
        if name not in allowed:
            known = ", ".join("{" + n + "}" for n in sorted(allowed))
            return f"{where}: unknown placeholder {{{name}}}; known here: {known}"
        try:
            parse_path(name + m.group(2))
        except ValueError as exc:
            return f"{where}: placeholder {m.group()}: {exc}"
    if "{" in _PLACEHOLDER.sub("", text) or "}" in _PLACEHOLDER.sub("", text):
        return f"{where}: unbalanced brace in {text!r}; write {{{{ or }}}} for a literal brace"
    return None


def render(template: Any, values: Mapping[str, Any]) -> Any:
    """Fill ``template`` from ``values``; may return :data:`MISSING` (see the module doc)."""
    if isinstance(template, str):
        return _render_str(template, values)
    if isinstance(template, Mapping):
        out: dict[str, Any] = {}
        for key, value in template.items():
            rendered = render(value, values)
            if rendered is not MISSING:
                out[str(key)] = rendered
        return out
    if isinstance(template, list | tuple):
        items = (render(v, values) for v in template)
        return [v for v in items if v is not MISSING]
    return template


def _render_str(text: str, values: Mapping[str, Any]) -> Any:
    whole = _PLACEHOLDER.fullmatch(text)
    if whole is not None and whole.group(1) is not None:
        return lookup(parse_path(whole.group(1) + whole.group(2)), values)
    return render_text(text, values)


def render_text(
    text: str, values: Mapping[str, Any], escape: Callable[[str], str] | None = None
) -> str:
    """Fill every placeholder as text (``escape`` applied to each value, e.g. URL quoting)."""

    def one(m: re.Match[str]) -> str:
        if m.group(1) is None:
            return m.group()[0]
        value = as_text(lookup(parse_path(m.group(1) + m.group(2)), values))
        return escape(value) if escape is not None else value

    return _PLACEHOLDER.sub(one, text)


def as_text(value: Any) -> str:
    """A value as it is written inside a string: JSON for non-strings, '' for missing."""
    if value is MISSING or value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
