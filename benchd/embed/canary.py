"""The embedding canary: a few fixed texts, embedded every cycle, compared with pinned vectors.

An embedding model changed behind its name (a library or ONNX update, a
provider's silent version bump) changes every vector before it changes a
ranking anyone looks at, and a vector cache hides it from the rankings
altogether. The canary embeds a few fixed texts with one call to the model
per cycle, never from a cache, and compares each vector with the one pinned
in the baseline (:func:`min_cosine`). ``benchd baseline save --repeats N``
learns how far an unchanged model wobbles (:func:`learned_threshold`).

Pure Python (a few hundred products per text): the baseline code reads it
without numpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["CANARY_MARGIN", "learned_threshold", "min_cosine", "width_problem"]

CANARY_MARGIN = 1e-3
"""The least room below the lowest similarity seen while pinning (an exact model gives 1.0)."""

Vectors = Sequence[Sequence[float]]


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return dot / norm if norm > 0.0 else 0.0


def width_problem(now: Vectors, pinned: Vectors) -> str | None:
    """Why these vectors cannot be compared with the pinned ones (None: they can)."""
    if len(now) != len(pinned):
        return f"{len(now)} vectors, pinned {len(pinned)}"
    widths = {len(v) for v in now}
    pinned_widths = {len(v) for v in pinned}
    if widths != pinned_widths:
        return f"width {_widths(widths)}, pinned {_widths(pinned_widths)}"
    return None


def _widths(widths: set[int]) -> str:
    return "/".join(str(w) for w in sorted(widths))


def min_cosine(now: Vectors, pinned: Vectors) -> float:
    """The lowest cosine of a vector with its pinned one; 0.0 when they cannot be compared
    (another width: nothing in common)."""
    if not pinned or width_problem(now, pinned) is not None:
        return 0.0
    return min(_cosine(a, b) for a, b in zip(now, pinned, strict=True))


def learned_threshold(similarities: Sequence[float]) -> float:
    """The threshold below which the canary says the model changed.

    ``similarities`` are the later repeats' (with the first, pinned one) when
    the baseline was pinned; none (one repeat) counts as 1.0. The threshold
    is the lowest seen minus a margin: the wobble seen again, at least
    :data:`CANARY_MARGIN` (an exact model: 0.999; one that wobbled to
    0.99999: 0.99899).
    """
    lowest = min([1.0, *similarities])
    return lowest - max(CANARY_MARGIN, 1.0 - lowest)
