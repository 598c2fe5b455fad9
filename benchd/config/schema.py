"""Strict decoding of TOML tables into frozen dataclasses.

One generic decoder so every config section (and every target kind's own
section) is checked the same way: unknown keys, wrong types and bad choices
are :class:`~benchd.errors.ConfigError` lines naming the file and key path.
Supported field types: ``str``, ``int``, ``float`` (ints accepted), ``bool``,
``Literal[...]``, ``X | None``, ``tuple[T, ...]``, ``dict[str, T]`` and nested
dataclasses. A field's ``metadata["check"]`` may hold a callable returning an
error text (or ``None``) for extra validation.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, get_args, get_origin

from benchd.errors import ConfigError

__all__ = ["check", "decode", "describe", "join_key"]

T = TypeVar("T")
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def check(fn: Callable[[Any], str | None]) -> dict[str, Any]:
    """Field metadata running ``fn(value)``; a returned string is the error."""
    return {"check": fn}


def describe(tp: Any) -> str:
    """A short human name for a type, used in error messages."""
    origin = get_origin(tp)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in get_args(tp))
    if origin in (types.UnionType, typing.Union):
        return " or ".join(describe(a) for a in get_args(tp) if a is not type(None))
    if origin is tuple:
        return f"array of {describe(get_args(tp)[0])}"
    if origin is dict:
        return f"table of {describe(get_args(tp)[1])}"
    if dataclasses.is_dataclass(tp):
        return "table"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(tp, str(tp))


def decode(cls: type[T], data: Any, *, file: str, path: str) -> T:
    """Build ``cls`` from a TOML table, or raise ConfigError naming ``file: path``.

    Every problem of the table (each unknown key, missing key and bad value,
    nested tables included) is collected, so one ConfigError lists them all.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{file}: {path or 'top level'}: expected a table, got {_tname(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    known = ", ".join(sorted(fields))
    problems = [
        f"{file}: {_join(path, key)}: unknown key; known keys here: {known}"
        for key in sorted(set(data) - set(fields))
    ]
    kwargs: dict[str, Any] = {}
    for name, field in fields.items():
        try:
            found, value = _field(field, hints[name], data, file=file, path=_join(path, name))
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        if found:
            kwargs[name] = value
    if problems:
        raise ConfigError(problems)
    try:
        return cls(**kwargs)
    except (ConfigError, ValueError) as exc:  # a dataclass's own cross-field checks
        raise ConfigError(f"{file}: {path or 'top level'}: {exc}") from None


def _field(
    field: dataclasses.Field[Any], tp: Any, data: Mapping[str, Any], *, file: str, path: str
) -> tuple[bool, Any]:
    """(present, value) of one field; a missing required key or bad value raises."""
    if field.name not in data:
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{file}: {path}: required key is missing")
        return False, None
    value = _convert(tp, data[field.name], file=file, path=path)
    checker = field.metadata.get("check")
    if checker is not None and (problem := checker(value)):
        raise ConfigError(f"{file}: {path}: {problem}")
    return True, value


def _convert(tp: Any, value: Any, *, file: str, path: str) -> Any:
    origin = get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        options = [a for a in get_args(tp) if a is not type(None)]
        return _convert(options[0], value, file=file, path=path)
    if origin is typing.Literal:
        if value not in get_args(tp):
            raise ConfigError(f"{file}: {path}: expected one of {describe(tp)}, got {value!r}")
        return value
    if origin is tuple:
        return _convert_tuple(tp, value, file=file, path=path)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise _type_error(tp, value, file, path)
        item_tp = get_args(tp)[1]
        return {
            str(k): _convert(item_tp, v, file=file, path=_join(path, str(k)))
            for k, v in value.items()
        }
    if dataclasses.is_dataclass(tp):
        return decode(tp, value, file=file, path=path)  # type: ignore[arg-type]
    return _convert_scalar(tp, value, file=file, path=path)


def _convert_tuple(tp: Any, value: Any, *, file: str, path: str) -> tuple[Any, ...]:
    if not isinstance(value, list | tuple):
        raise _type_error(tp, value, file, path)
    item_tp = get_args(tp)[0]
    return tuple(_convert(item_tp, v, file=file, path=f"{path}[{i}]") for i, v in enumerate(value))


def _convert_scalar(tp: Any, value: Any, *, file: str, path: str) -> Any:
    if tp is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp is bool and isinstance(value, bool):
        return value
    if tp is str and isinstance(value, str):
        return value
    if tp is Any:
        return value
    raise _type_error(tp, value, file, path)


def _type_error(tp: Any, value: Any, file: str, path: str) -> ConfigError:
    return ConfigError(f"{file}: {path}: expected {describe(tp)}, got {_tname(value)} {value!r}")


def _tname(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, Mapping):
        return "table"
    if isinstance(value, list):
        return "array"
    return {int: "integer", float: "number", str: "string"}.get(type(value), type(value).__name__)


def join_key(path: str, key: str) -> str:
    """``path.key``, with an odd key quoted as TOML would (so a message stays one line)."""
    shown = key if _BARE_KEY.match(key) else json.dumps(key)
    return f"{path}.{shown}" if path else shown


_join = join_key
