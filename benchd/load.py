"""Load engine: serial, closed-loop and open-loop request scheduling with raw timings.

The engine knows nothing of HTTP or relevance: it calls a :data:`Fire`
(``query index -> ranked ids``) and records, per request, the query index, the
scheduled send time, the actual send time, the completion time, the outcome
(``"ok"`` or a :class:`~benchd.errors.TargetError` kind) and the ranked ids.

Modes (see docs/load.md):

- ``serial`` — one request at a time, one pass over the queries (or
  ``requests``): the exact ranking baseline.
- ``closed`` — ``concurrency`` workers, each sending its next request as soon
  as the previous one is answered, for ``duration_s`` (or ``requests`` in all).
- ``open`` — arrivals at a constant ``rate`` (request *j* is scheduled at
  ``j / rate``), at most ``concurrency`` in flight. *Corrected* latency counts
  from the scheduled time, *service* latency from the actual send (wrk2).
  A request sent more than ``late_tolerance_s`` after its schedule is *late*;
  a request still waiting for a free slot when the arrival window closes is
  *dropped* — never sent (k6's ``dropped_iterations``).

Every mode respects the store (docs/load.md, "Rate limits"): ``max_rate``
(the probe's share of its API key's read budget) caps sends per second; a
429 pauses all sending for its ``Retry-After`` (in open loop the sends
scheduled inside the pause are *dropped* and the schedule restarts when it
ends, so corrected latency never counts a pause benchd imposed on itself);
a 429 without ``Retry-After`` (the real store's lockout), a pause that
outlasts the pass, or a share of 429s above ``max_rate_limited_ratio``
stops the pass early, and it is marked ``rate_limited``.

All times come from :func:`time.perf_counter`; a :class:`LoadRun` stores them
in seconds since the start of the measured window.
"""

from __future__ import annotations

import asyncio
import math
import time
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import anyio
import anyio.to_thread

from benchd.config.profiles import LoadMode, LoadProfile
from benchd.errors import ERROR_KINDS, ConfigError, TargetError, TargetHTTPError
from benchd.progress import WaitClock, report_wait, waited_window
from benchd.result import LoadResult
from benchd.scoring.latency import summarize
from benchd.store.target import Fire

__all__ = [
    "OUTCOMES",
    "Fire",
    "LoadMode",
    "LoadProfile",
    "LoadRun",
    "run_load",
    "sleep_until",
]

OUTCOMES: tuple[str, ...] = ("ok", *ERROR_KINDS)
"""Every outcome a request can have; a :class:`LoadRun` stores indexes into it."""

_OUTCOME_CODE = {name: code for code, name in enumerate(OUTCOMES)}
_TIMEOUT = _OUTCOME_CODE["timeout"]
_LIMITED = _OUTCOME_CODE["rate_limited"]  # a 429
# The 429 share is judged over at least this many sends, so that the first
# couple of 429s of a pass do not stop it on their own.
_SHARE_FLOOR = 20

# asyncio timers fire 1-2 ms late (epoll rounds its timeout up to whole
# milliseconds), while time.sleep() in a thread wakes within ~0.1 ms. So the
# dispatcher blocks a worker thread until _SPIN_S before a deadline, then
# yields to the loop until the deadline has passed. Spinning for the whole
# last 2 ms instead cost a large share of a core and, on oversubscribed
# cores, delayed answers by 1-3 ms (the scheduler penalizes a busy process).
_SPIN_S = 0.0003
_THREAD_MIN_S = 0.0006  # closer deadlines are cheaper to spin for


@dataclass(frozen=True, slots=True)
class LoadRun:
    """Raw per-request records of one measured window, in request order.

    Parallel arrays, one entry per request that was sent after warm-up:
    ``query`` (query index), ``scheduled``/``start``/``end`` (seconds since the
    window opened) and ``outcome`` (indexes into :data:`OUTCOMES`); ``ranked``
    holds the ids of each answer (empty on error).
    """

    mode: LoadMode
    target_rate: float | None
    late_tolerance_s: float
    query: array[int]
    scheduled: array[float]
    start: array[float]
    end: array[float]
    outcome: bytes
    ranked: tuple[tuple[str, ...], ...]
    dropped: int = 0
    warmup_requests: int = 0
    rate_limited: bool = False  # stopped early on 429s
    paused_s: float = 0.0  # seconds sending was paused for Retry-After
    max_rate: float | None = None  # the read-budget cap it was paced to

    def __len__(self) -> int:
        return len(self.query)

    def counts(self) -> dict[str, int]:
        """Requests by outcome (only outcomes that occurred)."""
        counts: dict[str, int] = {}
        for code in self.outcome:
            name = OUTCOMES[code]
            counts[name] = counts.get(name, 0) + 1
        return counts

    def _ok(self) -> Iterator[int]:
        return (i for i, code in enumerate(self.outcome) if code == 0)

    def service_samples(self) -> tuple[float, ...]:
        """Seconds from actual send to answer, successful requests only."""
        return tuple(self.end[i] - self.start[i] for i in self._ok())

    def corrected_samples(self) -> tuple[float, ...]:
        """Seconds from *scheduled* send to answer, successful requests only."""
        return tuple(self.end[i] - self.scheduled[i] for i in self._ok())

    def dispatch_lags(self) -> tuple[float, ...]:
        """Seconds each request was sent after its schedule (every outcome)."""
        return tuple(s - t for s, t in zip(self.start, self.scheduled, strict=True))

    @property
    def late(self) -> int:
        """Requests sent more than ``late_tolerance_s`` after their schedule."""
        return sum(1 for lag in self.dispatch_lags() if lag > self.late_tolerance_s)

    @property
    def elapsed_s(self) -> float:
        """From the window's opening to the last answer (0 when nothing was sent)."""
        return max(self.end, default=0.0)

    @property
    def achieved_rate(self) -> float:
        """Answered requests (any outcome) per second over :attr:`elapsed_s`."""
        elapsed = self.elapsed_s
        return len(self) / elapsed if elapsed > 0 else 0.0

    def answers(self) -> Iterator[tuple[int, tuple[str, ...]]]:
        """``(query index, ranked ids)`` of every successful request, in order."""
        return ((self.query[i], self.ranked[i]) for i in self._ok())

    def to_result(self, aggregate: Mapping[str, float] | None = None) -> LoadResult:
        """The frozen :class:`LoadResult` for a cycle; ``aggregate`` is its scored quality."""
        service = self.service_samples()
        is_open = self.mode == "open"
        corrected = self.corrected_samples() if is_open else ()
        return LoadResult(
            mode=self.mode,
            duration_s=self.elapsed_s,
            requests=self.counts(),
            service=summarize(service),
            corrected=summarize(corrected) if is_open else None,
            service_samples=service,
            corrected_samples=corrected,
            achieved_rate=self.achieved_rate,
            target_rate=self.target_rate,
            late=self.late if is_open else 0,
            dropped=self.dropped,
            aggregate=dict(aggregate or {}),
            rate_limited=self.rate_limited,
            paused_s=self.paused_s,
            max_rate=self.max_rate,
        )


async def sleep_until(deadline: float, limiter: anyio.CapacityLimiter | None = None) -> None:
    """Wait until ``time.perf_counter() >= deadline``, within tens of microseconds.

    Blocks a worker thread (taken through ``limiter``) until shortly before
    the deadline, then yields to the loop, so in-flight requests keep
    progressing, until the deadline has passed.
    """
    if deadline - time.perf_counter() > _THREAD_MIN_S:
        await anyio.to_thread.run_sync(
            _block_until, deadline - _SPIN_S, limiter=limiter, abandon_on_cancel=True
        )
    while time.perf_counter() < deadline:
        await anyio.sleep(0)


def _block_until(deadline: float) -> None:
    remaining = deadline - time.perf_counter()
    if remaining > 0:
        time.sleep(remaining)


_Outcome = tuple[int, tuple[str, ...]]  # (code into OUTCOMES, ranked ids)


@dataclass(slots=True)
class _Recorder:
    """Raw records while a run is in progress, in completion order; see :meth:`freeze`.

    Compact arrays rather than a tuple per request: a 10k req/s closed loop
    records 300k requests in 30 s.
    """

    origin: float = 0.0  # perf_counter() at which the measured window opens
    seq: array[int] = field(default_factory=lambda: array("q"))
    query: array[int] = field(default_factory=lambda: array("q"))
    times: array[float] = field(default_factory=lambda: array("d"))  # scheduled, start, end
    outcome: bytearray = field(default_factory=bytearray)
    ranked: list[tuple[str, ...]] = field(default_factory=list)
    warmup: int = 0
    dropped: int = 0

    def record(
        self, seq: int, query: int, times: tuple[float, float, float], result: _Outcome
    ) -> None:
        scheduled, start, end = times
        if scheduled < self.origin:
            self.warmup += 1
            return
        o = self.origin
        self.seq.append(seq)
        self.query.append(query)
        self.times.extend((scheduled - o, start - o, end - o))
        self.outcome.append(result[0])
        self.ranked.append(result[1])

    def freeze(self, profile: LoadProfile, gate: _Gate) -> LoadRun:
        """The records in request (sequence) order, as a frozen :class:`LoadRun`."""
        order = sorted(range(len(self.seq)), key=self.seq.__getitem__)
        times = self.times
        return LoadRun(
            mode=profile.mode,
            target_rate=profile.effective_rate if profile.mode == "open" else None,
            late_tolerance_s=profile.late_tolerance_s,
            query=array("q", (self.query[i] for i in order)),
            scheduled=array("d", (times[3 * i] for i in order)),
            start=array("d", (times[3 * i + 1] for i in order)),
            end=array("d", (times[3 * i + 2] for i in order)),
            outcome=bytes(self.outcome[i] for i in order),
            ranked=tuple(self.ranked[i] for i in order),
            dropped=self.dropped,
            warmup_requests=self.warmup,
            rate_limited=gate.rate_limited,
            paused_s=gate.close(),
            max_rate=profile.max_rate,
        )


@dataclass(slots=True)
class _Gate:
    """What every sender of one pass shares: read-budget pacing and 429 pauses.

    ``pace_s`` is the least spacing between sends (``1 / max_rate``, 0 when
    unpaced); nothing is sent before ``paused_until`` (a 429's Retry-After).
    Once ``rate_limited`` is set the pass sends nothing more.
    """

    pace_s: float
    stop_at: float  # perf_counter() at which the sending window closes
    max_limited_ratio: float
    next_send: float = 0.0
    paused_until: float = 0.0
    pause_from: float = 0.0  # perf_counter() at which the latest pause began
    paused_s: float = 0.0  # the pauses before it (see paused_by)
    window: list[float] | None = None  # the latest pause on the cycle's wait clock
    sent: int = 0
    limited: int = 0
    rate_limited: bool = False

    @classmethod
    def for_profile(cls, profile: LoadProfile, stop_at: float) -> _Gate:
        pace = 0.0 if profile.max_rate is None else 1.0 / profile.max_rate
        return cls(pace, stop_at, profile.max_rate_limited_ratio)

    def reserve(self) -> float | None:
        """The earliest time the next send may go (and take it), or None: the pass is over."""
        at = max(time.perf_counter(), self.next_send, self.paused_until)
        if self.rate_limited or at >= self.stop_at:
            return None
        self.next_send = at + self.pace_s
        return at

    def paused_by(self, end: float) -> float:
        """Seconds the pass actually sat paused up to ``end`` (its end, ``perf_counter()``).

        A pause is counted as it passes, never when its 429 arrives: one that
        outlasts the pass counts only until the pass ended. Overlapping
        pauses (concurrent 429s) count once.
        """
        return self.paused_s + max(0.0, min(self.paused_until, end) - self.pause_from)

    def close(self) -> float:
        """The pass is over: end its last pause on the cycle's clock; seconds paused."""
        if self.window is not None:
            WaitClock.cut(self.window, time.monotonic())
        return self.paused_by(time.perf_counter())

    def answered(self, code: int, retry_after_s: float | None) -> None:
        """Count one answer; a 429 pauses sending, or stops the pass (see module docs)."""
        self.sent += 1
        if code != _LIMITED:
            return
        self.limited += 1
        if retry_after_s is None:  # the real store's lockout: every further request prolongs it
            self.rate_limited = True
            return
        now = time.perf_counter()
        until = now + retry_after_s
        if until > self.paused_until:
            added = until - max(now, self.paused_until)
            if now >= self.paused_until:  # a new pause: the one before it is over
                self.paused_s += self.paused_until - self.pause_from
                self.pause_from = now
                self.window = waited_window(retry_after_s)
            elif self.window is not None:
                self.window[1] += added  # the pause goes on longer
            self.paused_until = until
            report_wait(added, "429 Retry-After (load pass paused)")
        if until >= self.stop_at or self.limited > self.max_limited_ratio * max(
            self.sent, _SHARE_FLOOR
        ):
            self.rate_limited = True


async def _classified(fire: Fire, query: int, gate: _Gate) -> _Outcome:
    """Fire one request; turn a TargetError into its outcome code and tell the gate."""
    try:
        ids = await fire(query)
    except TargetHTTPError as exc:
        code = (
            _LIMITED if exc.status == 429 else _OUTCOME_CODE.get(exc.kind, _OUTCOME_CODE["connect"])
        )
        gate.answered(code, exc.retry_after_s)
        return code, ()
    except TargetError as exc:
        code = _OUTCOME_CODE.get(exc.kind, _OUTCOME_CODE["connect"])
        gate.answered(code, None)
        return code, ()
    gate.answered(0, None)
    return 0, tuple(ids)


async def _attempt(fire: Fire, query: int, timeout_s: float, gate: _Gate) -> _Outcome:
    """Fire one request under its own timeout; classify its outcome."""
    try:
        with anyio.fail_after(timeout_s):
            return await _classified(fire, query, gate)
    except TimeoutError:
        gate.answered(_TIMEOUT, None)
        return _TIMEOUT, ()


async def run_load(fire: Fire, n_queries: int, profile: LoadProfile) -> LoadRun:
    """Load a target through ``fire`` as ``profile`` says; return the raw records.

    Request *j* asks query ``j % n_queries``. Requests that fail are recorded
    with their error kind and kept out of the latency samples; a request that
    takes longer than ``profile.request_timeout_s`` is cancelled and recorded
    as ``"timeout"``. Requests sent during ``warmup_s`` are not recorded.
    """
    if n_queries < 1:
        raise ConfigError("load: the fixture has no queries to send; add at least one query")
    if profile.mode == "open":
        recorder, gate = await _run_open(fire, n_queries, profile)
    else:
        recorder, gate = await _run_closed(fire, n_queries, profile)
    return recorder.freeze(profile, gate)


@dataclass(slots=True)
class _ClosedPlan:
    """Hands out closed-loop request numbers until the budget or the duration is spent."""

    origin: float  # perf_counter() at which measuring starts (after warm-up)
    stop_at: float
    budget: int | None
    next_seq: int = 0
    measured: int = 0

    def take(self, now: float) -> int | None:
        if now >= self.stop_at:
            return None
        if now >= self.origin:
            if self.budget is not None and self.measured >= self.budget:
                return None
            self.measured += 1
        self.next_seq += 1
        return self.next_seq - 1


async def _run_closed(fire: Fire, n_queries: int, profile: LoadProfile) -> tuple[_Recorder, _Gate]:
    """Serial (one worker) or closed loop: each worker sends, waits, sends again."""
    serial = profile.mode == "serial"
    budget = profile.requests if profile.requests is not None else (n_queries if serial else None)
    recorder = _Recorder(origin=time.perf_counter() + profile.warmup_s)
    stop_at = math.inf if budget is not None else recorder.origin + profile.duration_s
    plan = _ClosedPlan(recorder.origin, stop_at, budget)
    gate = _Gate.for_profile(profile, stop_at)
    async with anyio.create_task_group() as tg:
        for _ in range(1 if serial else profile.concurrency):
            tg.start_soon(
                _closed_worker, fire, n_queries, (plan, gate), recorder, profile.request_timeout_s
            )
    return recorder, gate


async def _next_send(plan: _ClosedPlan, gate: _Gate) -> int | None:
    """Wait for this worker's turn (pacing, 429 pauses); its request number, or None."""
    while (at := gate.reserve()) is not None:
        wait = at - time.perf_counter()  # read the clock once: it moves between two reads
        if wait > 0:
            await anyio.sleep(wait)
            if gate.paused_until > at:  # a 429 came in while this worker waited
                continue
        return plan.take(at)
    return None


class _Watchdog:
    """Cancels a closed-loop worker's scope once its request in flight outlives its timeout.

    One timer per worker, re-armed only when it fires before the request in
    flight is due (the one it was set for was answered): moving a deadline
    per request costs a timer scheduled and another cancelled, two heap
    operations on the loop, per request. A wait between requests is not
    timed.
    """

    __slots__ = ("_due", "_loop", "_scope", "_timeout_s", "_timer")

    def __init__(self, scope: anyio.CancelScope, timeout_s: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._scope = scope
        self._timeout_s = timeout_s
        self._due = math.inf  # loop.time() by which the request in flight must be answered
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """A request goes out now."""
        self._due = self._loop.time() + self._timeout_s
        if self._timer is None:
            self._timer = self._loop.call_at(self._due, self._expire)

    def stop(self) -> None:
        """The request in flight was answered."""
        self._due = math.inf

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        if self._due == math.inf:
            return
        if self._loop.time() < self._due:
            self._timer = self._loop.call_at(self._due, self._expire)
        else:
            self._scope.cancel()


async def _closed_worker(
    fire: Fire,
    n_queries: int,
    shared: tuple[_ClosedPlan, _Gate],
    recorder: _Recorder,
    timeout_s: float,
) -> None:
    """Send requests back to back until the plan runs out.

    One cancel scope serves many requests and one :class:`_Watchdog` times
    them (a fresh ``fail_after`` per request would cost a scope and two timer
    operations each). When a request outlives its timeout, it is recorded as
    a timeout and a new scope takes over.
    """
    plan, gate = shared
    while True:
        in_flight = (0, 0.0)
        with anyio.CancelScope() as scope:
            watchdog = _Watchdog(scope, timeout_s)
            try:
                while (seq := await _next_send(plan, gate)) is not None:
                    in_flight = (seq, time.perf_counter())
                    watchdog.start()
                    result = await _classified(fire, seq % n_queries, gate)
                    watchdog.stop()
                    start = in_flight[1]
                    end = time.perf_counter()
                    recorder.record(seq, seq % n_queries, (start, start, end), result)
                return
            finally:
                watchdog.close()
        seq, start = in_flight
        gate.answered(_TIMEOUT, None)
        recorder.record(seq, seq % n_queries, (start, start, time.perf_counter()), (_TIMEOUT, ()))


async def _run_open(fire: Fire, n_queries: int, profile: LoadProfile) -> tuple[_Recorder, _Gate]:
    """Open loop: one dispatcher sends request *j* at ``j / rate``, capped in flight.

    The rate is capped by ``max_rate``. A 429 pause drops the sends scheduled
    inside it and restarts the schedule at its end.
    """
    rate = profile.effective_rate
    period = 1.0 / rate
    n_warmup = math.floor(profile.warmup_s * rate)
    n_measured = profile.requests or max(1, math.floor(profile.duration_s * rate))
    n_total = n_warmup + n_measured
    t0 = time.perf_counter() + min(period, 0.002)  # first arrival: not late by setup
    recorder = _Recorder(origin=t0 + n_warmup * period)
    window_end = t0 + n_total * period
    gate = _Gate(0.0, window_end, profile.max_rate_limited_ratio)  # the schedule paces itself
    slots = anyio.Semaphore(profile.concurrency)
    timer = anyio.CapacityLimiter(1)  # the dispatcher's own waker thread

    async def send(seq: int, scheduled: float) -> None:
        try:
            start = time.perf_counter()
            result = await _attempt(fire, seq % n_queries, profile.request_timeout_s, gate)
            recorder.record(seq, seq % n_queries, (scheduled, start, time.perf_counter()), result)
        finally:
            slots.release()

    def drop(first: int, count: int) -> None:
        recorder.dropped += max(0, first + count - max(first, n_warmup))

    async with anyio.create_task_group() as tg:
        seq, anchor, anchor_seq = 0, t0, 0  # the schedule: anchor + (seq - anchor_seq) * period
        while seq < n_total:
            scheduled = anchor + (seq - anchor_seq) * period
            if gate.rate_limited:
                drop(seq, n_total - seq)
                break
            if gate.paused_until > scheduled:
                skipped = min(n_total - seq, math.ceil((gate.paused_until - scheduled) / period))
                drop(seq, skipped)
                seq += skipped
                anchor, anchor_seq = gate.paused_until, seq
                continue
            await sleep_until(scheduled, timer)
            if not await _acquire_before(slots, window_end):
                drop(seq, n_total - seq)
                break
            if gate.paused_until > scheduled or gate.rate_limited:
                slots.release()
                continue  # a 429 came in while the dispatcher waited (for the time or a slot)
            tg.start_soon(send, seq, scheduled)
            seq += 1
    return recorder, gate


async def _acquire_before(slots: anyio.Semaphore, deadline: float) -> bool:
    """Take an in-flight slot, waiting at most until ``deadline``; False if none came."""
    try:
        slots.acquire_nowait()
        return True
    except anyio.WouldBlock:
        pass
    with anyio.move_on_after(deadline - time.perf_counter()):
        await slots.acquire()
        return True
    return False
