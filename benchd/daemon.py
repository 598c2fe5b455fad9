"""The long-running exporter: startup → main loop → shutdown.

``Daemon(config).run()`` serves benchd's endpoints, runs every probe on its
own schedule, applies reloads atomically (SIGHUP or ``POST /-/reload``: a bad
config keeps the old one and is reported through
``benchd_config_last_reload_successful``), and on SIGTERM/SIGINT cancels
in-flight work, runs each probe's configured cleanup and returns.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import anyio
import anyio.abc
from starlette.applications import Starlette

from benchd.budget import plan_budgets
from benchd.config.load import (
    Config,
    ProbeConfig,
    load_config,
    parse_listen,
)
from benchd.config.web import WebConfig
from benchd.errors import BenchdError, FixtureError
from benchd.fixtures.model import Fixture, load_fixture, load_fixture_steps
from benchd.fixtures.reader import JSONL_SUFFIXES, step
from benchd.logging import get_logger
from benchd.probe import CleanupReport, ProbeRunner, log_internal
from benchd.result import CycleResult
from benchd.schedule import Schedule, TriggerOutcome
from benchd.scheduler import ProbeLoop
from benchd.surfacers.base import Surfacer
from benchd.surfacers.log import LogSurfacer
from benchd.surfacers.result_book import ResultBook
from benchd.surfacers.status import iso_time
from benchd.web.app import build_app, set_auth, set_guard
from benchd.web.auth import Authenticator
from benchd.web.guard import GuardPolicy
from benchd.web.server import ServerLimits, serve_web

__all__ = ["Daemon"]

log = get_logger("benchd.daemon")


async def _load_fixture(probe: ProbeConfig) -> Fixture:
    """The probe's fixture; a path ``${VAR}`` made is shown as written, never expanded.

    A JSON Lines fixture is read on the event loop a few dozen lines at a time,
    the other probes' requests and timings running in between: read in a
    thread, its parsing would hold the GIL against them (docs/load.md). A JSON
    file is parsed in one piece, so in a thread.
    """
    try:
        if probe.fixture.suffix.lower() not in JSONL_SUFFIXES:
            return await anyio.to_thread.run_sync(load_fixture, probe.fixture)
        steps = load_fixture_steps(probe.fixture)
        while not (taken := step(steps))[0]:
            await anyio.sleep(0)  # a checkpoint: let the other probes run
        return cast(Fixture, taken[1])
    except FixtureError as exc:
        if not probe.fixture_source:
            raise
        path, written = str(probe.fixture), f"fixture {probe.fixture_source}"
        raise FixtureError(
            [written + p[len(path) :] if p.startswith(path) else p for p in exc.problems]
        ) from None


@dataclass(slots=True)
class _Running:
    probe: ProbeConfig
    loop: ProbeLoop


@dataclass(slots=True)
class Daemon:
    """benchd's main process; ``config_path`` (if any) is what reloads re-read."""

    config: Config
    config_path: str | None = None
    listen: str | None = None
    grace_s: float | None = None  # per probe on shutdown; None: [server] shutdown_grace_s
    book: ResultBook = field(init=False)
    surfacers: list[Surfacer] = field(default_factory=lambda: [LogSurfacer()])
    started: anyio.Event = field(default_factory=anyio.Event)
    url: str = ""
    _probes: dict[str, _Running] = field(default_factory=dict)
    _tg: anyio.abc.TaskGroup | None = None
    _reload_lock: anyio.Lock = field(default_factory=anyio.Lock)
    _stop: anyio.Event = field(default_factory=anyio.Event)
    _app: Starlette | None = None
    _loopback: bool = True

    def __post_init__(self) -> None:
        self.book = ResultBook(history=self.config.server.history)

    async def run(self) -> None:
        """Serve until SIGTERM/SIGINT or :meth:`stop`; then shut down cleanly."""
        server = self.config.server
        host, port = parse_listen(self.listen or server.listen)
        web = self.config.web or WebConfig()
        auth = Authenticator(web.auth) if web.auth is not None else None
        self._app = build_app(self.book, control=self, auth=auth)
        tls = web.tls.context() if web.tls else None
        limits = ServerLimits(
            header_timeout_s=server.header_timeout_s,
            idle_timeout_s=server.idle_timeout_s,
            max_connections=server.max_connections,
        )
        async with (
            serve_web(self._app, host, port, ssl_context=tls, limits=limits) as bound,
            anyio.create_task_group() as tg,
        ):
            self.url = bound.url
            self._loopback = bound.loopback
            set_guard(self._app, GuardPolicy.from_config(web.http, loopback=bound.loopback))
            self._warn_if_exposed(web)
            self._tg = tg
            tg.start_soon(self._signals)
            self.book.set_probes(
                [p.name for p in self.config.probes],
                {p.name: p.interval_s for p in self.config.probes},
            )
            self.book.config_loaded(time.time())
            runners = await self._prepare(self.config.probes, server.instance)
            self._budget(self.config, runners)
            for runner in runners:
                await self._start(runner)
            log.info("started", url=self.url, probes=[p.name for p in self.config.probes])
            self.started.set()
            await self._stop.wait()
            await self._shutdown()
            tg.cancel_scope.cancel()

    def stop(self) -> None:
        self._stop.set()

    def _warn_if_exposed(self, web: WebConfig) -> None:
        if web.auth is None and not self._loopback:
            log.warning(
                "listening beyond loopback without authentication",
                url=self.url,
                hint="anyone who can reach this address can read the status and metrics; "
                "set server.web_config (POST endpoints answer only loopback clients meanwhile)",
            )

    async def _apply_web(self, new: Config) -> None:
        """Swap the endpoints' credentials for the reloaded web config's."""
        web = new.web or WebConfig()
        old = self.config.web or WebConfig()
        if self._app is None or web == old:
            return
        auth = (
            await anyio.to_thread.run_sync(Authenticator, web.auth)
            if web.auth is not None
            else None
        )
        set_auth(self._app, auth)
        set_guard(self._app, GuardPolicy.from_config(web.http, loopback=self._loopback))
        if web.tls != old.tls:
            log.warning("tls_server_config changed; restart benchd to serve the new certificate")
        self._warn_if_exposed(web)

    async def _signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as sigs:
            async for signum in sigs:
                if signum == signal.SIGHUP:
                    try:
                        await self.reload()
                    except Exception as exc:  # applying it broke: the daemon must stay up
                        log_internal("reload", "-", exc)
                        self.book.config_reload(False, time.time(), error=str(exc))
                else:
                    log.info("stopping", signal=signal.Signals(signum).name)
                    self.stop()

    @staticmethod
    async def _prepare(probes: Sequence[ProbeConfig], instance: str = "") -> list[ProbeRunner]:
        """Load every fixture first, so a bad one fails before anything changes.

        Fixtures are read and parsed in a worker thread: a 200k-memory JSON
        Lines file takes seconds, which on the event loop stalled every other
        probe's timed requests and ``/healthz``. If one probe cannot be built,
        the runners already built are closed before the error propagates, so a
        failed reload leaks no connections.
        """
        runners: list[ProbeRunner] = []
        try:
            for probe in probes:
                fixture = await _load_fixture(probe)
                runners.append(ProbeRunner(probe, instance=instance or None, fixture=fixture))
        except BaseException:
            for runner in runners:
                await runner.aclose()
            raise
        return runners

    def _budget(self, config: Config, runners: Sequence[ProbeRunner]) -> None:
        """Plan every API key's budget over ``config``; warn; give each probe its read share.

        Probes kept across a reload get their new share too (a probe added on
        their key takes part of it).
        """
        everyone = {r.probe.name: r for r in runners}
        for name, running in self._probes.items():
            everyone.setdefault(name, running.loop.runner)
        sizes = {n: (len(r.fixture.memories), len(r.fixture.queries)) for n, r in everyone.items()}
        plan = plan_budgets(config, sizes)
        for warning in plan.warnings:
            log.warning("budget", warning=warning)
        for name, runner in everyone.items():
            runner.read_rate = plan.read_rates.get(name)
            runner.write_rate = plan.write_rates.get(name)

    async def _start(self, runner: ProbeRunner) -> None:
        assert self._tg is not None
        loop = ProbeLoop(runner, self._sink)
        await self._tg.start(loop.run)
        self._probes[runner.probe.name] = _Running(runner.probe, loop)

    def _sink(self, result: CycleResult) -> None:
        """Record into the book (pull surfacers read it), then hand to each push surfacer.

        One that raises is logged once and does not starve the others or the probe.
        """
        running = self._probes.get(result.probe)
        for write in (self.book.record, *(s.write for s in self.surfacers)):
            try:
                write(result)
            except Exception as exc:  # a surfacer's bug: logged once, the probe goes on
                log_internal("surfacer", result.probe, exc)
        due = running.loop.schedule.next_due_at if running is not None else None
        if due is not None:
            log.info("next cycle", probe=result.probe, due_at=iso_time(due),
                     in_s=round(max(0.0, due - time.time()), 3))  # fmt: skip

    def run_now(self, name: str) -> TriggerOutcome | None:
        """Start a cycle of probe ``name`` now (None: no such probe)."""
        running = self._probes.get(name)
        if running is None:
            return None
        outcome = running.loop.trigger()
        log.info("cycle requested", probe=name, outcome=type(outcome).__name__.lower())
        return outcome

    def schedules(self) -> dict[str, Schedule]:
        """Each running probe's schedule: running now, or when its next cycle is due."""
        return {name: running.loop.schedule for name, running in self._probes.items()}

    async def _stop_probe(self, name: str, *, cleanup: bool) -> None:
        """Cancel the probe's loop and (``cleanup``) delete what it wrote, within the grace."""
        running = self._probes.pop(name)
        running.loop.cancel()
        runner = running.loop.runner
        grace = self.config.server.shutdown_grace_s if self.grace_s is None else self.grace_s
        deadline = anyio.current_time() + grace
        with anyio.move_on_after(grace, shield=True):
            await running.loop.stopped.wait()
        if cleanup:
            left = max(0.0, deadline - anyio.current_time())
            try:
                report = await runner.cleanup(left)
            except BenchdError as exc:
                log.warning("cleanup failed", probe=name, error=str(exc))
                report = runner.cleanup_failed()
            if report is not None:
                self._report_cleanup(name, report, grace)
        with anyio.move_on_after(5.0, shield=True):
            await runner.aclose()

    def _report_cleanup(self, name: str, report: CleanupReport, grace: float) -> None:
        """Log the shutdown cleanup and show what is left over in status and metrics."""
        self.book.cleanup(name, report, time.time())
        if report.leftover:
            log.warning(
                "cleanup incomplete",
                probe=name,
                namespace=report.namespace,
                leftover_records=report.leftover,
                deleted=report.deleted,
                grace_s=grace,
                fix="benchd purge --config FILE --probe NAME deletes what benchd left there",
            )
        else:
            log.info("cleanup done", probe=name, namespace=report.namespace, deleted=report.deleted)

    async def reload(self) -> bool:
        """Re-read the config file and apply it atomically; False keeps the old one."""
        async with self._reload_lock:
            if self.config_path is None:
                reason = "running the embedded default (no --config): nothing to re-read"
                log.warning("reload ignored", reason=reason)
                self.book.config_reload(False, time.time(), error=reason)
                return False
            try:
                new = await anyio.to_thread.run_sync(load_config, self.config_path)
                changed = [p for p in new.probes if self._changed(p)]
                runners = await self._prepare(changed, new.server.instance)
                try:
                    self._budget(new, runners)
                except BaseException:
                    for runner in runners:
                        await runner.aclose()
                    raise
            except Exception as exc:  # a BenchdError, or a bug: either way the old config stays
                if not isinstance(exc, BenchdError):
                    log_internal("reload", "-", exc)
                problems = getattr(exc, "problems", None) or (str(exc),)
                log.error("reload failed", error=str(exc), problems=list(problems))
                self.book.config_reload(False, time.time(), error=str(exc))
                return False
            await self._apply_web(new)
            await self._apply(new, runners)
            self.book.config_reload(True, time.time())
            log.info("reloaded", probes=[p.name for p in new.probes])
            return True

    def _changed(self, probe: ProbeConfig) -> bool:
        running = self._probes.get(probe.name)
        return running is None or running.probe != probe

    async def _apply(self, new: Config, runners: Sequence[ProbeRunner]) -> None:
        wanted = {p.name for p in new.probes}
        replaced = {r.probe.name for r in runners}
        counted: dict[str, int] = {}  # a changed probe's cycle numbers go on where they were
        for name in list(self._probes):
            if name not in wanted or name in replaced:
                counted[name] = self._probes[name].loop.runner.cycles
                await self._stop_probe(name, cleanup=False)
        for runner in runners:
            runner.cycles = counted.get(runner.probe.name, runner.cycles)
        self.book.set_probes(sorted(wanted), {p.name: p.interval_s for p in new.probes})
        for runner in runners:
            await self._start(runner)
        self.config = new

    async def _shutdown(self) -> None:
        for name in list(self._probes):
            await self._stop_probe(name, cleanup=True)
        log.info("stopped")
