"""What the cycle and the store adapters share: the load pass's call, and progress hooks.

A base module (it imports nothing of benchd's), so that :mod:`benchd.targets`
never imports the cycle (:mod:`benchd.load`, :mod:`benchd.cycle`) for these
few names; tests/test_layering.py holds the rule.

:data:`Fire` is what the load engine calls to send one search: a target's
own load sender opens one (``query index -> ranked ids``).

A cycle's progress sink (the terminal line of ``benchd once``) may be a
plain ``progress(done, total)`` callable — what seeding calls as records go
out — or a :class:`CycleProgress` that is also told the phase (seed,
verify, searchable, serial, load, cleanup) and every wait on a 429's
``Retry-After``. Waits are reported from wherever benchd is about to sleep
on the store's say-so (the HTTP client's retries, the load engine's pauses)
through :func:`report_wait`, which reaches the listener the cycle installed
for its task with :func:`waits_reported_to`; no code path needs the sink
passed down to it. How long the cycle *actually* waited is a
:class:`WaitClock` the cycle installs beside the listener: every wait is a
window of wall time (:func:`waited_window`), cut short when the wait ends
early, and concurrent windows overlap, so four requests waiting the same
30 s count 30 s, and a pause the pass never sat out counts nothing.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol, runtime_checkable

__all__ = [
    "CycleProgress",
    "Fire",
    "PollProgress",
    "WaitClock",
    "WaitListener",
    "enter_phase",
    "report_poll",
    "report_wait",
    "waited_window",
    "waits_reported_to",
]

Fire = Callable[[int], Awaitable[tuple[str, ...]]]
"""Send the search for one query index; return ranked ids or raise a TargetError."""

WaitListener = Callable[[float, str], None]
"""Called as ``listener(seconds, reason)`` just before benchd sleeps on a store's say-so."""

_LISTENER: ContextVar[WaitListener | None] = ContextVar("benchd_wait_listener", default=None)


class WaitClock:
    """Wall time covered by waits: the union of their windows, up to now.

    A window may end in the future (a pause announced for its whole
    ``Retry-After``); only the part already past counts, and :meth:`cut`
    ends it early when the wait did (the sleeper woke, the pass ended).
    """

    def __init__(self) -> None:
        self._windows: list[list[float]] = []

    def open(self, start: float, until: float) -> list[float]:
        """Add the window ``[start, until]`` (``time.monotonic()`` seconds); its handle."""
        window = [start, max(start, until)]
        self._windows.append(window)
        return window

    @staticmethod
    def cut(window: list[float], at: float) -> None:
        """End ``window`` at ``at`` if it would run on past it."""
        window[1] = max(window[0], min(window[1], at))

    def total(self, now: float | None = None) -> float:
        """Seconds of the union of every window, counted up to ``now``."""
        upto = time.monotonic() if now is None else now
        spans = sorted((a, min(b, upto)) for a, b in self._windows if a < upto)
        covered, reach = 0.0, float("-inf")
        for start, end in spans:
            if end > reach:
                covered += end - max(start, reach)
                reach = end
        return covered


_CLOCK: ContextVar[WaitClock | None] = ContextVar("benchd_wait_clock", default=None)


@runtime_checkable
class CycleProgress(Protocol):
    """A progress sink that also hears the cycle's phase and its waits on 429s."""

    def __call__(self, done: int, total: int) -> None: ...

    def phase(self, name: str) -> None: ...

    def waiting(self, seconds: float, reason: str) -> None: ...


@runtime_checkable
class PollProgress(Protocol):
    """A progress sink that also hears each poll of a bounded wait (time-to-searchable)."""

    def polling(self, polls: int, elapsed_s: float, limit_s: float) -> None: ...


def report_poll(progress: object, polls: int, elapsed_s: float, limit_s: float) -> None:
    """Tell ``progress`` (if it listens) that poll ``polls`` ran, ``elapsed_s`` of ``limit_s``."""
    if isinstance(progress, PollProgress):
        progress.polling(polls, elapsed_s, limit_s)


def enter_phase(progress: object, name: str) -> None:
    """Tell ``progress`` the work entered phase ``name`` (if it listens for phases)."""
    if isinstance(progress, CycleProgress):
        progress.phase(name)


def report_wait(seconds: float, reason: str) -> None:
    """About to sleep ``seconds`` because the store said so (``reason``, e.g. a 429)."""
    listener = _LISTENER.get()
    if listener is not None:
        listener(seconds, reason)


def waited_window(seconds: float) -> list[float] | None:
    """A wait of ``seconds`` starts now: its window on the cycle's clock (None: no clock).

    Cut it with :meth:`WaitClock.cut` when the wait ends early.
    """
    clock = _CLOCK.get()
    if clock is None:
        return None
    now = time.monotonic()
    return clock.open(now, now + max(0.0, seconds))


@contextmanager
def waits_reported_to(listener: WaitListener, clock: WaitClock | None = None) -> Iterator[None]:
    """Within the block (and tasks started in it), waits go to ``listener`` and ``clock``."""
    token = _LISTENER.set(listener)
    clock_token = _CLOCK.set(clock)
    try:
        yield
    finally:
        _CLOCK.reset(clock_token)
        _LISTENER.reset(token)
