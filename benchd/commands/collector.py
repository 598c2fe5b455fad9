"""The cyclic garbage collector's settings while a command runs cycles (once, run, compare).

A cycle allocates containers in bursts: each listing page decodes to hundreds of
dicts, each import batch and answer to dozens more. At CPython's default
generation-0 threshold (700 allocations) a burst is collected while it is still
in use, its objects are promoted, and the full collections that follow re-scan
every long-lived object: the tens of thousands of functions, classes and dicts
the imports made, the config and the loaded fixtures. So, set here by the
commands and never by library code other callers import:

- a larger generation-0 threshold, so a burst is freed by reference counting
  before the collector looks at it;
- :func:`gc.freeze` when start-up is done, so what the imports, the config and
  the fixtures made leaves the collected generations.

Frozen objects are never collected as cyclic garbage (reference counting still
frees the others), so the freeze is made once, at start-up: a daemon freezes
before its first fixture is loaded, and what a reload replaces (configs,
fixtures, runners) stays collectable; reloads never add to the frozen set.
On the way out both settings are undone. A host process that froze objects
itself before calling :func:`benchd.cli.main` keeps its freeze: when anything
is frozen on entry, nothing is frozen or unfrozen here (:func:`gc.unfreeze`
releases every frozen object, not only those one freeze made).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["YOUNG_THRESHOLD", "for_cycles"]

# Allocations (net of frees) between generation-0 collections: a listing page of
# 500 records with its answer fits, and is freed by its last reference, unscanned.
YOUNG_THRESHOLD = 20_000


@contextmanager
def for_cycles() -> Iterator[None]:
    """Within: the larger generation-0 threshold, and everything alive on entry frozen.

    Entry collects nothing first: the few objects start-up leaves as garbage
    are frozen with the rest (a full collection to free them costs more than
    they hold), once, and a reload never adds to them. When something is
    already frozen (by the host process, or an enclosing ``for_cycles``), that
    freeze is left as it is, on entry and on exit.
    """
    saved = gc.get_threshold()
    freezes = gc.get_freeze_count() == 0
    if freezes:
        gc.freeze()
    gc.set_threshold(max(YOUNG_THRESHOLD, saved[0]), *saved[1:])
    try:
        yield
    finally:
        gc.set_threshold(*saved)
        if freezes:
            gc.unfreeze()
