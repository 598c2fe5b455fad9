"""Test plumbing: a JSON value spelled so that ``==`` on it means identical."""

from __future__ import annotations

import math
from typing import Any


def exact(value: Any) -> Any:
    """``value`` with each float as its bits (NaN as ``"nan"``) and each type kept: ``==``
    on it tells -0.0 from 0.0, 1 from 1.0 and True from 1, and key order counts."""
    if type(value) is float:
        return ("float", "nan" if math.isnan(value) else value.hex())
    if type(value) is dict:
        return ("dict", [(k, exact(v)) for k, v in value.items()])
    if type(value) is list:
        return ("list", [exact(v) for v in value])
    return (type(value).__name__, value)
