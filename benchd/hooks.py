"""What the cycle and the store adapters share: the load pass's call, and progress hooks.

A base module (it imports nothing of benchd's), so that :mod:`benchd.kinds`
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
:class:`WaitClock` the cycle installs beside the listener: every wait (a
429's ``Retry-After`` or a backoff before a retry, a load pass's pause) is a
window of wall time (:func:`waited_window`), cut short when the wait ends
early, and concurrent windows overlap, so four requests waiting the same
30 s count 30 s, and a pause the pass never sat out counts nothing. The
clock keeps that union per phase of the cycle too (:meth:`WaitClock.by_phase`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol, runtime_checkable

__all__ = [
    "CycleProgress",
    "Fire",
    "PollProgress",
    "WaitClock",
    "WaitListener",
    "covered_s",
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


def covered_s(spans: Iterable[tuple[float, float]]) -> float:
    """Seconds of the union of ``spans`` (``(start, end)``): a moment shared counts once."""
    covered, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            covered += end - max(start, reach)
            reach = end
    return covered


class WaitClock:
    """Wall time covered by waits: the union of their windows, up to now, and per phase.

    A window may end in the future (a pause announced for its whole
    ``Retry-After``); only the part already past counts, and :meth:`cut`
    ends it early when the wait did (the sleeper woke, the pass ended). A
    window belongs to the phase the cycle was in when it opened
    (:meth:`enter`, :meth:`leave`) and counts for that phase only while the
    phase ran, so a phase's waits never come to more than its wall time.
    """

    def __init__(self) -> None:
        self._windows: list[list[float]] = []
        self._owners: list[str | None] = []  # the phase each window opened in
        self._spans: dict[str, list[list[float]]] = {}  # phase -> its [start, end] runs
        self._phase: str | None = None

    def enter(self, phase: str, at: float | None = None) -> None:
        """The cycle entered ``phase`` (at ``time.monotonic()`` seconds ``at``, else now)."""
        start = time.monotonic() if at is None else at
        self._spans.setdefault(phase, []).append([start, math.inf])
        self._phase = phase

    def leave(self, at: float | None = None) -> None:
        """The phase entered last is over (at ``at``, else now)."""
        if self._phase is None:
            return
        self._spans[self._phase][-1][1] = time.monotonic() if at is None else at
        self._phase = None

    def open(self, start: float, until: float) -> list[float]:
        """Add the window ``[start, until]`` (``time.monotonic()`` seconds); its handle."""
        window = [start, max(start, until)]
        self._windows.append(window)
        self._owners.append(self._phase)
        return window

    @staticmethod
    def cut(window: list[float], at: float) -> None:
        """End ``window`` at ``at`` if it would run on past it."""
        window[1] = max(window[0], min(window[1], at))

    def total(self, now: float | None = None) -> float:
        """Seconds of the union of every window, counted up to ``now``."""
        upto = time.monotonic() if now is None else now
        return covered_s((a, min(b, upto)) for a, b in self._windows if a < upto)

    def by_phase(self, now: float | None = None) -> dict[str, float]:
        """Per phase entered: seconds during which at least one of its waits was waiting.

        Each phase's windows, cut to the phase's own runs and to ``now``; a
        phase without waits reads 0.
        """
        upto = time.monotonic() if now is None else now
        waited: dict[str, float] = {}
        for phase, runs in self._spans.items():
            owned = zip(self._windows, self._owners, strict=True)
            windows = [w for w, owner in owned if owner == phase]
            waited[phase] = covered_s(
                (max(a, start), min(b, end, upto))
                for a, b in windows
                for start, end in runs
                if max(a, start) < min(b, end, upto)
            )
        return waited


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
