"""Strict decoding of TOML tables into frozen dataclasses.

One generic decoder so every config section (and every target kind's own
section) is checked the same way: unknown keys, wrong types and bad choices
are :class:`~benchd.errors.ConfigError` lines naming the file and key path.
Supported field types: ``str``, ``int``, ``float`` (ints accepted), ``bool``,
``Literal[...]``, ``X | None``, ``tuple[T, ...]``, ``dict[str, T]`` and nested
dataclasses. A field's ``metadata["check"]`` may hold a callable returning an
error text (or ``None``) for extra validation.

Ranges that hold for every field, so that a value ``validate`` accepts can
never crash a cycle: a float is finite (TOML's ``nan`` and ``inf`` are
rejected) and within ±:data:`MAX_FLOAT`; an integer is within TOML's own
64-bit range (:data:`MIN_INT` .. :data:`MAX_INT`). Fields with tighter limits
say so in their checks. A value taken from the environment (``${VAR}``) is
never quoted in a message (:func:`hidden_paths`).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import re
import types
import typing
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar, get_args, get_origin
from urllib.parse import SplitResult, urlsplit

from benchd.errors import ConfigError

__all__ = [
    "MAX_FLOAT",
    "MAX_INT",
    "MAX_STORE_CONCURRENCY",
    "MIN_INT",
    "check",
    "concurrency_problem",
    "decode",
    "describe",
    "headers_problem",
    "hidden_paths",
    "join_key",
    "label_problem",
    "url_problem",
]

T = TypeVar("T")
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")

MIN_INT = -(2**63)
MAX_INT = 2**63 - 1
MAX_FLOAT = 1e9
"""Largest float magnitude a config accepts (10^9 seconds is about 31 years)."""

_HIDDEN: ContextVar[Collection[str]] = ContextVar("benchd_config_hidden", default=())
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # RFC 9110 field-name
_FIELD_VALUE = re.compile(r"^[\x20-\x7e\t]*$")  # visible ASCII, space, tab
MAX_LABEL_CHARS = 256  # = benchd.redact.LABEL_CHARS: what /metrics would cut a label to


def headers_problem(headers: Mapping[str, str]) -> str | None:
    """Config check for a ``headers`` table: what HTTP lets benchd send, or why not.

    A name must be an RFC 9110 token; a value visible ASCII, spaces and tabs,
    without line breaks, NULs or leading/trailing spaces. Values are never
    quoted (one may be a key from ``${VAR}``); the name is.
    """
    for name, value in headers.items():
        if not _TOKEN.match(name):
            return (
                f"header name {json.dumps(name[:64])} is not an HTTP token "
                "(letters, digits and !#$%&'*+-.^_`|~; no spaces or ':')"
            )
        if not isinstance(value, str):
            continue
        if "\r" in value or "\n" in value:
            problem = "holds a line break (CR or LF)"
        elif "\x00" in value:
            problem = "holds a NUL character"
        elif not _FIELD_VALUE.match(value):
            problem = "holds a character outside visible ASCII (HTTP sends header values as bytes)"
        elif value != value.strip(" \t"):
            problem = "starts or ends with spaces, which HTTP drops"
        else:
            continue
        return f"header {json.dumps(name)}: its value {problem}; fix the value (not shown here)"
    return None


MAX_STORE_CONCURRENCY = 1024
"""Most calls a store kind keeps in flight (each may hold a connection, a thread or a task)."""


def concurrency_problem(value: int) -> str | None:
    """Config check for calls in flight to a store: 1..:data:`MAX_STORE_CONCURRENCY`."""
    if 1 <= value <= MAX_STORE_CONCURRENCY:
        return None
    return f"must be 1..{MAX_STORE_CONCURRENCY} (calls in flight to the store)"


def label_problem(value: str) -> str | None:
    """Config check for a label benchd exports (a model label): one line, at most 256 chars."""
    if len(value) > MAX_LABEL_CHARS:
        return f"is {len(value)} characters; a label benchd exports is at most {MAX_LABEL_CHARS}"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return "holds a line break or another control character; a label is one line"
    return None


@contextmanager
def hidden_paths(paths: Collection[str]) -> Iterator[None]:
    """Within this block, values at these key paths (and below) are never quoted in an error.

    ``paths`` is read when a message is built, so it may still be filled in
    (``${VAR}`` expansion records the paths it touched) after the block opens.
    """
    token = _HIDDEN.set(paths)
    try:
        yield
    finally:
        _HIDDEN.reset(token)


def url_problem(value: str, *, schemes: tuple[str, ...] = ("http", "https")) -> str | None:
    """Config check for a store URL: its scheme, a host and a port in 1..65535.

    The same parsing the HTTP client does, so a URL that passes here opens a
    connection there (or fails with ``connect``), never an exception.
    """
    try:
        parts = urlsplit(value)
    except ValueError as exc:  # "Invalid IPv6 URL"
        return f"not a valid URL ({exc}); write it as http://HOST:PORT"
    if parts.scheme not in schemes:
        return f"must start with {' or '.join(s + '://' for s in schemes)}"
    return _netloc_problem(parts)


def _netloc_problem(parts: SplitResult) -> str | None:
    if any(c.isspace() or not c.isprintable() for c in parts.netloc):
        return "the host part holds a space or a control character; remove it"
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        return "the port must be an integer in 1..65535, as in http://127.0.0.1:8084"
    host = parts.hostname
    if not host:
        return "no host; write it as http://HOST:PORT"
    if "[" in parts.netloc and ":" not in host:
        return "brackets are only for an IPv6 address, as in http://[::1]:8084"
    try:
        host.encode("idna")
    except UnicodeError:
        return "the host name is not a valid (IDNA) domain name"
    return None


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


def _did_you_mean(key: object, known: Iterable[str]) -> str:
    """`` did you mean 'interval_s'?`` for a near miss (difflib's ratio >= 0.6), else ``""``."""
    close = difflib.get_close_matches(str(key), list(known), n=1)
    return f" did you mean {close[0]!r}?" if close else ""


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
        f"{file}: {_join(path, key)}: unknown key;{_did_you_mean(key, fields)} known keys here: "
        f"{known}"
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
    except (ConfigError, ValueError, TypeError) as exc:  # a dataclass's own cross-field checks
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
    if checker is not None and (problem := _run_check(checker, value)):
        raise ConfigError(f"{file}: {path}: {problem}")
    return True, value


def _run_check(checker: Callable[[Any], str | None], value: Any) -> str | None:
    try:
        return checker(value)
    except (ValueError, TypeError, OverflowError) as exc:  # a check must not crash the decoder
        return f"invalid value ({type(exc).__name__}: {exc})"


def _convert(tp: Any, value: Any, *, file: str, path: str) -> Any:
    origin = get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        options = [a for a in get_args(tp) if a is not type(None)]
        return _convert(options[0], value, file=file, path=path)
    if origin is typing.Literal:
        if not isinstance(value, str | int) or value not in get_args(tp):
            shown = _show(value, path)
            raise ConfigError(f"{file}: {path}: expected one of {describe(tp)}, got {shown}")
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
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{file}: {path}: must be a finite number, got {value!r}")
        if abs(value) > MAX_FLOAT:
            raise ConfigError(f"{file}: {path}: out of range; use a number within ±{MAX_FLOAT:g}")
        return float(value)
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        if not MIN_INT <= value <= MAX_INT:
            raise ConfigError(f"{file}: {path}: integer out of range; use one in -2^63..2^63-1")
        return value
    if tp is bool and isinstance(value, bool):
        return value
    if tp is str and isinstance(value, str):
        return value
    if tp is Any:
        return value
    raise _type_error(tp, value, file, path)


def _type_error(tp: Any, value: Any, file: str, path: str) -> ConfigError:
    shown = _show(value, path)
    return ConfigError(f"{file}: {path}: expected {describe(tp)}, got {_tname(value)} {shown}")


def _show(value: Any, path: str) -> str:
    """``value`` for a message: short, one line, and never a value taken from the environment."""
    hidden = _HIDDEN.get()
    if any(path == h or path.startswith((h + ".", h + "[")) for h in hidden):
        return "(a value from the environment)"
    if isinstance(value, int) and not isinstance(value, bool) and not MIN_INT <= value <= MAX_INT:
        return f"(an integer of about {int(value.bit_length() * 0.30103) + 1} digits)"
    if isinstance(value, Mapping | list):
        return "(a table)" if isinstance(value, Mapping) else "(an array)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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
