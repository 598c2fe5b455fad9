"""``/metrics`` and ``/api/status`` rendered once per change of state, not once per scrape.

Both bodies are pure functions of the result book, the registered secrets
(everything shown is masked) and, for the status, the probes' schedules. Each
cache keys what it keeps on those:

- a probe's part (its metric families' samples; its status entry from the
  last result on) on the probe's :class:`ProbeState`, which the book replaces
  on every cycle, and on :func:`benchd.redact.generation`;
- the whole book part on :attr:`BookSnapshot.version` and the secrets'
  generation; the status body also on the schedules it shows.

What moves between two changes of state is never cached: the process,
platform and GC collectors and any extra ones (``process_cpu_seconds_total``,
requests refused by the guard) are read at every scrape and follow the
cached part; nothing in the cached part reads a clock. A gzipped body keeps
the compressor's state after the cached part, so a scrape compresses only
what it reads afresh.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client.registry import Collector, CollectorRegistry

from benchd import redact
from benchd.surfacers.prometheus import book_families, completed, probe_families
from benchd.surfacers.result_book import BookSnapshot, ProbeState, ResultBook
from benchd.surfacers.status import (
    clean,
    probe_common,
    probe_detail,
    status_head,
    status_tail,
)

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from benchd.schedule import Schedule

__all__ = ["GZIP_LEVEL", "MetricsCache", "StatusCache", "Zipped", "wants_gzip"]

GZIP_LEVEL = 4  # of a 0.3-0.5 MB body: a third of level 9's CPU, 15-20% more bytes
_EOF = b"# EOF\n"  # OpenMetrics' last line: the fresh part ends the body, so it carries it
_STATUS_BODIES = 4  # status bodies kept (each ~0.5 MB, and its gzip state once asked)
Encoder = Callable[[Any], bytes]


def wants_gzip(accept_encoding: str) -> bool:
    """Whether the client takes gzip (the same test as Starlette's GZip middleware's)."""
    return "gzip" in accept_encoding


@dataclass(slots=True)
class Zipped:
    """A cached body and, once asked for, its gzip stream kept open after it."""

    body: bytes
    _head: bytes | None = None
    _compressor: zlib._Compress | None = None  # its state right after ``body``

    def gzip(self, rest: bytes = b"") -> bytes:
        """``body + rest`` gzipped; ``body`` is compressed once, ``rest`` at every call."""
        if self._compressor is None:
            compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            self._head, self._compressor = compressor.compress(self.body), compressor
        tail = self._compressor.copy()
        return (self._head or b"") + tail.compress(rest) + tail.flush()


class _Families:
    """A fixed list of families, as the exposition encoders take a collector."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> list[Metric]:
        return self._families


def _render(encoder: Encoder, families: Iterable[Metric]) -> bytes:
    """``families`` in ``encoder``'s format, without OpenMetrics' closing ``# EOF``."""
    out = encoder(_Families(families))
    return out[: -len(_EOF)] if out.endswith(_EOF) else out


@dataclass(slots=True)
class _Probe:
    state: ProbeState
    secrets: int
    samples: tuple[bytes, ...]  # per family of probe_families: this probe's sample lines


@dataclass(slots=True)
class _Format:
    """One exposition format's cached pieces."""

    headers: tuple[bytes, ...] = ()  # per family of probe_families: its HELP/TYPE lines
    probes: dict[str, _Probe] = field(default_factory=dict)
    key: tuple[int, int] | None = None  # (book version, secrets' generation) of ``book``
    book: Zipped = field(default_factory=lambda: Zipped(b""))


class MetricsCache:
    """``/metrics``: the book's families cached per format, the process part read afresh.

    ``fresh`` holds the collectors read at every scrape (process, platform, GC
    and extra ones); the body is the book's families followed by theirs.
    """

    def __init__(self, book: ResultBook, fresh: CollectorRegistry | Collector) -> None:
        self._book = book
        self._fresh = fresh
        self._formats: dict[str, _Format] = {}
        self._lock = threading.Lock()

    def render(self, encoder: Encoder, content_type: str, *, gzip: bool = False) -> bytes:
        """The body in the format ``encoder`` writes (``content_type`` names it)."""
        with self._lock:
            book = self._book_part(encoder, content_type)
        fresh = encoder(self._fresh)
        return book.gzip(fresh) if gzip else book.body + fresh

    def book_body(self, encoder: Encoder, content_type: str) -> bytes:
        """The cached part alone (what a fresh render of the book collector gives)."""
        with self._lock:
            return self._book_part(encoder, content_type).body

    def _book_part(self, encoder: Encoder, content_type: str) -> Zipped:
        snap = self._book.snapshot()
        secrets = redact.generation()  # read before rendering: a change meanwhile re-renders
        fmt = self._formats.setdefault(content_type, _Format())
        if fmt.key != (snap.version, secrets):
            fmt.book = Zipped(self._render_book(fmt, encoder, snap, secrets))
            fmt.key = (snap.version, secrets)
        return fmt.book

    def _render_book(
        self, fmt: _Format, encoder: Encoder, snap: BookSnapshot, secrets: int
    ) -> bytes:
        if not fmt.headers:
            fmt.headers = tuple(_render(encoder, [f]) for f in probe_families([]))
        states = completed(snap)
        kept = {s.name for s in states}
        for name in [n for n in fmt.probes if n not in kept]:
            del fmt.probes[name]
        samples = [self._probe_samples(fmt, encoder, s, secrets) for s in states]
        parts = [_render(encoder, book_families(snap))]
        for i, header in enumerate(fmt.headers):
            parts.append(header)
            parts.extend(probe[i] for probe in samples)
        return b"".join(parts)

    @staticmethod
    def _probe_samples(
        fmt: _Format, encoder: Encoder, state: ProbeState, secrets: int
    ) -> tuple[bytes, ...]:
        cached = fmt.probes.get(state.name)
        if cached is not None and cached.state is state and cached.secrets == secrets:
            return cached.samples
        families = list(probe_families([state]))
        samples = tuple(
            _render(encoder, [family])[len(header) :]
            for family, header in zip(families, fmt.headers, strict=True)
        )
        fmt.probes[state.name] = _Probe(state, secrets, samples)
        return samples


@dataclass(slots=True)
class _Entry:
    state: ProbeState
    secrets: int
    queries: bool
    detail: str  # the JSON of probe_detail, its braces included


class StatusCache:
    """``/api/status``: each probe's entry cached on its state, the body on the book's version.

    The body is byte for byte ``json.dumps(status_document(...))`` (compact
    separators, no NaN): it is assembled from JSON pieces whose keys never
    overlap, in the document's key order.
    """

    def __init__(self, book: ResultBook) -> None:
        self._book = book
        self._probes: dict[tuple[str, bool], _Entry] = {}
        self._bodies: OrderedDict[Any, tuple[Any, Zipped]] = OrderedDict()
        self._lock = threading.Lock()

    def render(
        self,
        schedules: Mapping[str, Schedule],
        names: Sequence[str] | None,
        *,
        queries: bool,
    ) -> Zipped:
        """The body for ``?probe=`` ``names`` (None: all) and ``?queries=``; gzip it from there."""
        snap = self._book.snapshot()
        secrets = redact.generation()
        shown = [n for n in snap.probes if names is None or n in names]
        timing = tuple((n, _schedule(schedules.get(n))) for n in shown)
        ask = (None if names is None else tuple(names), queries)
        key = (snap.version, secrets, self._book.configured(), timing)
        with self._lock:
            held = self._bodies.get(ask)
            if held is not None and held[0] == key:
                self._bodies.move_to_end(ask)
                return held[1]
            body = Zipped(self._body(snap, schedules, shown, secrets, queries=queries))
            self._bodies[ask] = (key, body)
            self._bodies.move_to_end(ask)
            while len(self._bodies) > _STATUS_BODIES:
                self._bodies.popitem(last=False)
            return body

    def _body(
        self,
        snap: BookSnapshot,
        schedules: Mapping[str, Schedule],
        shown: list[str],
        secrets: int,
        *,
        queries: bool,
    ) -> bytes:
        for key in [k for k in self._probes if k[0] not in snap.states]:
            del self._probes[key]  # a reload removed the probe
        head = _dumps(clean(status_head(snap, configured=self._book.configured())))
        tail = _dumps(clean(status_tail(snap)))
        entries = []
        for name in shown:
            common = _dumps(clean(probe_common(snap, name, schedules.get(name))))
            detail = self._detail(snap.states.get(name), name, secrets, queries=queries)
            entries.append(f"{_dumps(redact.text(name))}:{_join(common, detail)}")
        probes = '"probes":{' + ",".join(entries) + "}"
        return _join(_join(head, "{" + probes + "}"), tail).encode()

    def _detail(self, state: ProbeState | None, name: str, secrets: int, *, queries: bool) -> str:
        if state is None:
            return _dumps(clean(probe_detail(None, queries=queries)))
        key = (name, queries)
        cached = self._probes.get(key)
        if cached is not None and cached.state is state and cached.secrets == secrets:
            return cached.detail
        detail = _dumps(clean(probe_detail(state, queries=queries)))
        self._probes[key] = _Entry(state, secrets, queries, detail)
        return detail


def _schedule(schedule: Schedule | None) -> tuple[bool, float | None] | None:
    return None if schedule is None else (schedule.running, schedule.next_due_at)


def _dumps(value: Any) -> str:
    return json.dumps(value, allow_nan=False, separators=(",", ":"))


def _join(first: str, second: str) -> str:
    """Two JSON objects as one: ``{"a":1}`` and ``{"b":2}`` give ``{"a":1,"b":2}``."""
    if first == "{}":
        return second
    if second == "{}":
        return first
    return first[:-1] + "," + second[1:]
