"""A request's JSON body: the value httpx's ``json=`` sends, encoded by orjson where it can.

httpx encodes ``json=`` with ``json.dumps(value, ensure_ascii=False,
separators=(",", ":"), allow_nan=False)`` and UTF-8. :func:`json_body` gives
bytes that ``json.loads`` reads back to exactly the value httpx's bytes give
(the same types, key order and float bits), or raises what httpx raises. The
bytes may differ where JSON allows it: orjson writes ``0.00001`` where
``json`` writes ``1e-05`` (the same float).

orjson's bytes are kept only for a *plain* value: every object in it a
``str``, ``int``, ``float``, ``bool``, ``None``, ``dict``, ``list`` or
``tuple`` (exactly: no subclass), every float finite, every integer within
64 bits, every key a ``str``, every string valid UTF-8 and nesting within
orjson's limit. Anything else is encoded by ``json.dumps`` exactly as httpx
does, so its bytes or its error are httpx's: orjson writes ``null`` for a
NaN or an infinity (``json`` raises ``ValueError``), writes an ``Enum``,
a ``UUID`` or an ``orjson.Fragment`` that ``json`` refuses (``TypeError``),
and refuses what ``json`` writes (a non-``str`` key, an integer beyond 64
bits, a ``str`` or ``int`` subclass, a lone surrogate, which ``json``
writes and the UTF-8 encoding then refuses with ``UnicodeEncodeError``).
"""

from __future__ import annotations

import gc
import json
import math
from typing import Any, NoReturn

import orjson

__all__ = ["json_body"]

_OPTIONS = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)
"""What orjson writes its own way (a dataclass, a datetime, a subclass) goes to
:func:`_refuse` instead: ``json`` decides it."""

_PLAIN = frozenset({str, int, float, bool, type(None), dict, list, tuple})
"""The types whose values orjson and ``json`` write alike (floats: finite ones)."""

_NULL = b"null"  # what orjson writes for None, and for a NaN or an infinity


def json_body(value: Any) -> bytes:
    """``value`` as the UTF-8 JSON httpx sends for ``json=value``, or httpx's error."""
    try:
        body = orjson.dumps(value, default=_refuse, option=_OPTIONS)
    except Exception:  # whatever orjson refuses, json decides: its bytes or its error
        return _httpx_body(value)
    if _plain(value, floats=_NULL in body):
        return body
    return _httpx_body(value)


def _refuse(value: Any) -> NoReturn:
    raise TypeError(f"{type(value).__name__} is left to json")


def _httpx_body(value: Any) -> bytes:
    """``httpx._content.encode_json``'s bytes (or error) for ``value``."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8")


def _plain(value: Any, *, floats: bool) -> bool:
    """Whether every object in ``value`` (a tree orjson wrote) is of a :data:`_PLAIN`
    type; with ``floats``, also whether every float in it is finite.

    Walked a level at a time by :func:`gc.get_referents`, which gives a list's
    or tuple's items and a dict's values (and any key not an exact ``str``,
    which orjson refused already) and skips every scalar. A NaN or an infinity
    makes the level's float sum non-finite (a sum that overflows is refused
    too: ``json`` then decides).
    """
    level = [value]
    while level:
        if not _PLAIN.issuperset(map(type, level)):
            return False
        if floats and not math.isfinite(sum(filter(float.__instancecheck__, level), 0.0)):
            return False
        level = gc.get_referents(*level)
    return True
