"""The ``python`` target: an in-process retriever loaded from ``module:callable``.

For libraries with no server (a BM25 package, a reranker, a vector index):
``factory = "pkg.mod:make"`` is imported when the config loads (a bad name,
or options its signature cannot take, is a config error naming the key) and
called as ``make(**options)`` in a worker thread when the probe first needs
it. It may return either

- a full :class:`~benchd.store.target.Target` (async ``info``, ``seed``,
  ``search``, ``cleanup``, ``aclose``), used as it is; or
- a simple *retriever*, wrapped here::

      index(memories: list[dict]) -> None     # the whole corpus, on every seed
      search(q: str, k: int) -> list[str]      # fixture ids, best first
      delete(ids: list[str]) -> int            # optional
      close() -> None                          # optional
      model: str                               # optional label
      private: bool                            # optional: True if its store is its own

  Unless the retriever declares its store private (``private = True``), it
  is treated like any shared store: the records it indexes carry benchd's
  own ids (``benchd:<namespace>:<fixture id>``, see
  :mod:`benchd.store.owned`), its rankings are mapped back to fixture ids,
  an id benchd did not give it scores as non-relevant, and ``delete`` is
  passed benchd's ids only.

  Its methods are plain functions run in worker threads, at most
  ``concurrency`` at a time (1 unless the retriever is thread-safe), so the
  daemon's event loop stays free. An exception inside them becomes a
  ``TargetProtocolError`` (error kind ``decode``) recorded in the cycle.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

import anyio
import anyio.to_thread

from benchd.config.kinds import CommonSettings, DeclaredSettings, Starter, StoreCosts, key
from benchd.config.schema import concurrency_problem, label_problem
from benchd.config.secrets import Secret
from benchd.errors import OwnershipError, TargetProtocolError, TargetUnreachable
from benchd.http.messages import raised
from benchd.kinds.retriever import RetrieverPlan, RetrieverStore, has_hooks
from benchd.logging import get_logger
from benchd.result import SeedReport, TargetInfo
from benchd.store.flow import NamespaceFlow
from benchd.store.lease import LeaseHolder
from benchd.store.owned import MAX_NAMESPACE_CHARS, OwnedIds, namespace_problem
from benchd.store.protocol import Capabilities, Purged, SeedPlan
from benchd.store.target import ProbeTarget, Progress, SearchQuery, Target, WriteRate

__all__ = [
    "KIND",
    "PythonConfig",
    "PythonTarget",
    "RetrieverTarget",
    "load_factory",
]

if TYPE_CHECKING:
    from benchd.store.target import Fire

KIND = "python"
log = get_logger("benchd.targets")
T = TypeVar("T")


def load_factory(spec: str) -> Callable[..., Any]:
    """Import ``module:callable`` (dotted attributes allowed); ValueError says what failed."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(
            f"expected 'module:callable' such as 'mypkg.retrievers:make', got {spec!r}"
        )
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ValueError(
            f"cannot import module {module_name!r} ({exc}); install it or add its "
            "directory to PYTHONPATH"
        ) from None
    except Exception as exc:  # a user module may fail in any way while importing
        raise ValueError(
            f"importing module {module_name!r} raised {type(exc).__name__}: {exc}"
        ) from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{spec!r} is not callable (type {type(obj).__name__})")
    return obj  # type: ignore[no-any-return]


def _factory_problem(spec: str) -> str | None:
    try:
        load_factory(spec)
    except ValueError as exc:
        return str(exc)
    return None


def _positive(v: int) -> str | None:
    return None if v > 0 else "must be > 0"


@dataclass(frozen=True, slots=True)
class PythonConfig(DeclaredSettings):
    """``[probe.target]`` keys for ``kind = "python"``."""

    starter: ClassVar[Starter] = Starter(
        "an in-process retriever, no server: module:callable returns it",
        (
            ("factory", "benchd.examples.retrievers:bm25", "module:callable that returns the "
             "retriever (index(memories) + search(q, k), or the batch hooks)"),
            ("options", {"k1": 1.2, "b": 0.75}, "keyword arguments of the factory"),
        ),
        edit="factory and options",
    )  # fmt: skip

    factory: str = field(
        metadata=key("`module:callable`, dotted attributes allowed", _factory_problem)
    )
    options: dict[str, Any] = field(
        default_factory=dict, metadata=key("keyword arguments of the factory", shown="none")
    )
    model: str = field(
        default="",
        metadata=key(
            "the model label; else the retriever's `model` attribute", label_problem, shown="—"
        ),
    )
    concurrency: int = field(
        default=1,
        metadata=key("calls in flight; raise only if the retriever is thread-safe",
                     concurrency_problem),
    )  # fmt: skip
    # Read from a config file, a probe's namespace defaults to its own: benchd-<probe name>.
    namespace: str = field(
        default="benchd-eval",
        metadata=key(
            "the namespace the probe owns, passed to a factory that takes `namespace=`",
            namespace_problem,
            shown="`benchd-<probe name>`",
        ),
    )
    # With the batch hooks (write, list, delete): the namespace flow's settings.
    cleanup: Literal["before", "after", "never"] = field(
        default="never", metadata=key("with the batch hooks: as for the other kinds")
    )
    adopt_namespace: bool = field(
        default=False, metadata=key("with the batch hooks: as for the other kinds")
    )
    batch_size: int = field(default=100, metadata=key("records per `write` call", _positive))
    searchable_timeout_s: float = field(
        default=10.0, metadata=key("0: do not measure time-to-searchable")
    )

    def __post_init__(self) -> None:
        _check_options(self.factory, self.options)

    def common(self) -> CommonSettings:
        return CommonSettings(
            namespace=self.namespace, cleanup=self.cleanup, adopt_namespace=self.adopt_namespace
        )

    def costs(self) -> StoreCosts:
        """In-process: no request budget (never planned: there is no key at a store)."""
        return StoreCosts(lists=2, searchable_polls=1)

    @classmethod
    def namespace_for(cls, probe: str) -> str:
        """A python probe's own namespace, from its name (``benchd-<name>``)."""
        namespace = f"benchd-{probe}"
        if len(namespace) <= MAX_NAMESPACE_CHARS:
            return namespace
        return f"benchd-{probe[:40]}-{hashlib.sha256(probe.encode()).hexdigest()[:12]}"


def _check_options(spec: str, options: Mapping[str, Any]) -> None:
    """Reject options the factory cannot take, without calling it (ValueError)."""
    try:
        signature = inspect.signature(load_factory(spec))
    except (TypeError, ValueError):  # no signature to check (a builtin, a C callable)
        return
    given = dict(options)
    if "namespace" in signature.parameters:
        given.setdefault("namespace", "")  # benchd passes the probe's namespace
    try:
        signature.bind(**given)
    except TypeError as exc:
        names = ", ".join(signature.parameters) or "none"
        raise ValueError(
            f"options: {spec} cannot take them ({exc}); its parameters: {names}"
        ) from None


class PythonTarget:
    """Calls the factory on first use, in a worker thread, and drives what it made.

    Building lazily keeps a slow factory (loading a model, connecting a client)
    off the event loop and inside a cycle, where a failure is an error the
    cycle records (kind ``connect``), retried next cycle, instead of an
    exception that would stop the daemon. A retriever with the batch hooks
    runs under the namespace flow (:mod:`benchd.kinds.retriever`); an
    ``index``-only one is wrapped as it always was and reported unverified.
    """

    kind = KIND

    def __init__(self, config: PythonConfig, *, lease: LeaseHolder | None = None) -> None:
        self.config = config
        self._inner: Target | None = None  # what the factory made, as a Target
        self._driver: ProbeTarget | None = None  # the same, where benchd drives it
        self._lock = anyio.Lock()
        self._lease = lease  # the driver's, once the factory made one

    @classmethod
    def capabilities_for(cls, settings: PythonConfig) -> Capabilities:
        """Before the factory runs: what a retriever with the batch hooks gets (its best case)."""
        return Capabilities(
            lists=True,
            writes=True,
            deletes=True,
            lease=True,
            decided_by="its retriever's hooks (write, list, delete), known when the factory "
            "runs: an index()-only retriever is unverified",
        )

    @classmethod
    def probe_target(
        cls,
        settings: PythonConfig,
        secret: Secret | None,
        *,
        lease: LeaseHolder | None = None,
        write_rate: WriteRate | None = None,
    ) -> PythonTarget:
        """The adapter for ``kind = "python"`` (``secret`` is unused: nothing to authenticate;
        nor ``write_rate``: in-process, no key, no write budget)."""
        return cls(settings, lease=lease)

    @property
    def capabilities(self) -> Capabilities:
        if self._driver is not None:
            return self._driver.capabilities
        if self._inner is not None:
            return Capabilities(writes=True)  # a Target of its own: nothing benchd checks
        return self.capabilities_for(self.config)

    @property
    def retries(self) -> int:
        return 0

    @property
    def retry_wait_s(self) -> float:
        return 0.0

    @property
    def leftover_records(self) -> int:
        return self._driver.leftover_records if self._driver is not None else 0

    async def release(self) -> int:
        return await self._driver.release() if self._driver is not None else 0

    async def release_lease(self) -> bool:
        return await self._driver.release_lease() if self._driver is not None else False

    async def purge(self, memories: Sequence[Mapping[str, Any]], *, force: bool) -> Purged:
        await self.target()
        if self._driver is None:
            raise OwnershipError(
                f"python target {self.config.factory}: it cannot list and delete records, "
                "so benchd cannot purge it"
            )
        return await self._driver.purge(memories, force=force)

    def load_sender(
        self, queries: Sequence[SearchQuery], *, concurrency: int, timeout_s: float
    ) -> AbstractAsyncContextManager[Fire]:
        raise NotImplementedError("the python kind declares no load sender")

    async def target(self) -> Target:
        """The Target the factory made (calling it the first time)."""
        if self._inner is not None:
            return self._inner
        async with self._lock:
            if self._inner is None:
                made = await anyio.to_thread.run_sync(self._make)
                self._adapt(made)
        assert self._inner is not None
        return self._inner

    def _make(self) -> Any:
        where = f"python target {self.config.factory}"
        try:
            factory = load_factory(self.config.factory)
            return factory(**self._arguments(factory))
        except Exception as exc:  # the factory is user code
            keys = ", ".join(sorted(self.config.options)) or "no options"
            raise TargetUnreachable(
                f"{where}: the factory (with {keys}) raised {raised(exc)}; "
                "it is called again next cycle"
            ) from None

    def _arguments(self, factory: Callable[..., Any]) -> dict[str, Any]:
        """The options, and the probe's namespace where the factory takes one."""
        options = dict(self.config.options)
        try:
            takes = "namespace" in inspect.signature(factory).parameters
        except (TypeError, ValueError):  # no signature to read
            takes = False
        if takes:
            options.setdefault("namespace", self.config.namespace)
        return options

    def _adapt(self, made: Any) -> None:
        if isinstance(made, Target):
            self._inner = made
        elif has_hooks(made):
            store = RetrieverStore(made, _retriever_plan(self.config))
            self._inner = self._driver = NamespaceFlow(store, lease=self._lease)
        elif callable(getattr(made, "index", None)) and callable(getattr(made, "search", None)):
            legacy = RetrieverTarget(made, self.config)
            log.warning(
                "python retriever unverified",
                factory=self.config.factory,
                lacks="; ".join(legacy.capabilities.lacks()),
                fix="give it write(batch), list(cursor) and delete(id) (docs/targets.md)",
            )
            self._inner = self._driver = legacy
        else:
            raise TargetProtocolError(
                f"python target {self.config.factory}: the factory returned an object of type "
                f"{type(made).__name__}, which has neither the Target methods (info, seed, "
                "search, cleanup, aclose), nor write(batch), list(cursor) and search(q, k), "
                "nor index(memories) and search(q, k)"
            )

    async def info(self) -> TargetInfo:
        return await (await self.target()).info()

    async def seed(
        self, memories: Sequence[Mapping[str, Any]], *, progress: Progress | None = None
    ) -> SeedReport:
        return await (await self.target()).seed(memories, progress=progress)

    async def search(self, query: SearchQuery) -> tuple[str, ...]:
        return await (await self.target()).search(query)

    async def cleanup(self, ids: Sequence[str]) -> int:
        return await (await self.target()).cleanup(ids)

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()
            self._inner = self._driver = None


def _retriever_plan(config: PythonConfig) -> RetrieverPlan:
    plan = SeedPlan(
        namespace=config.namespace,
        cleanup=config.cleanup,
        adopt_namespace=config.adopt_namespace,
        batch_size=config.batch_size,
        concurrency=config.concurrency,
        delete_concurrency=config.concurrency,
        endpoint=f"python:{config.factory}",
        searchable_timeout_s=config.searchable_timeout_s,
    )
    return RetrieverPlan(KIND, config.factory, config.model, plan, config.concurrency)


class RetrieverTarget:
    """Adapts a simple ``index``/``search`` retriever to the Target protocol."""

    kind = KIND

    def __init__(self, retriever: Any, config: PythonConfig) -> None:
        self.retriever = retriever
        self.config = config
        self._limiter = anyio.CapacityLimiter(config.concurrency)
        self.private = getattr(retriever, "private", False) is True
        self._owned = OwnedIds(config.namespace, ())

    @property
    def capabilities(self) -> Capabilities:
        """It indexes the corpus; nothing is listed, so nothing is verified or deleted."""
        return Capabilities(writes=True)

    @property
    def retries(self) -> int:
        return 0

    @property
    def retry_wait_s(self) -> float:
        return 0.0

    @property
    def leftover_records(self) -> int:
        return 0

    async def release(self) -> int:
        return 0

    async def release_lease(self) -> bool:
        return False

    async def purge(self, memories: Sequence[Mapping[str, Any]], *, force: bool) -> Purged:
        raise OwnershipError(
            f"python target {self.config.factory}: its retriever cannot list and delete "
            "records, so benchd cannot purge it"
        )

    def load_sender(
        self, queries: Sequence[SearchQuery], *, concurrency: int, timeout_s: float
    ) -> AbstractAsyncContextManager[Fire]:
        raise NotImplementedError("the python kind declares no load sender")

    async def _run(self, method: str, fn: Callable[..., T], *args: Any) -> T:
        def call() -> T:
            try:
                return fn(*args)
            except Exception as exc:  # user code: record it in the cycle, do not crash
                raise TargetProtocolError(
                    f"python target {self.config.factory}: {method}() raised {raised(exc)}"
                ) from None

        return await anyio.to_thread.run_sync(call, limiter=self._limiter)

    async def info(self) -> TargetInfo:
        model = self.config.model or str(getattr(self.retriever, "model", "") or "")
        return TargetInfo(
            kind=KIND,
            endpoint=f"python:{self.config.factory}",
            model=model,
            lacks=self.capabilities.lacks(),
        )

    async def seed(
        self, memories: Sequence[Mapping[str, Any]], *, progress: Progress | None = None
    ) -> SeedReport:
        """Index the whole corpus (in-process, so it is searchable as soon as it returns)."""
        started = time.monotonic()
        self._owned = OwnedIds.of(self.config.namespace, memories)
        records = [
            dict(m) if self.private else {**m, "id": self._owned.store_of[str(m["id"])]}
            for m in memories
        ]
        await self._run("index", self.retriever.index, records)
        if progress is not None:
            progress(len(records), len(records))
        n = len(records)
        return SeedReport(
            requested=n,
            imported=n,
            skipped=0,
            errors=0,
            verified=n,
            duration_s=time.monotonic() - started,
            searchable_after_s=0.0,
        )

    async def search(self, query: SearchQuery) -> tuple[str, ...]:
        ranked = await self._run("search", self.retriever.search, query.q, query.limit)
        ids = _ids(ranked, query.limit, self.config.factory)
        return ids if self.private else tuple(self._owned.label(i) for i in ids)

    async def cleanup(self, ids: Sequence[str]) -> int:
        delete = getattr(self.retriever, "delete", None)
        if not callable(delete):
            return 0
        if not self.private:
            ids = [self._owned.store_of[i] for i in ids if i in self._owned.store_of]
        deleted = await self._run("delete", delete, list(ids))
        if isinstance(deleted, bool) or not isinstance(deleted, int):
            return 0
        return min(max(deleted, 0), len(ids))  # a count: never negative, never over the ask

    async def aclose(self) -> None:
        close = getattr(self.retriever, "close", None)
        if callable(close):
            await self._run("close", close)


def _ids(ranked: Any, limit: int, factory: str) -> tuple[str, ...]:
    """The first ``limit`` ids (a longer answer is cut before it is checked)."""
    if isinstance(ranked, str | bytes) or not isinstance(ranked, Sequence):
        raise TargetProtocolError(
            f"python target {factory}: search() returned {type(ranked).__name__}, "
            "expected a list of ids"
        )
    ranked = ranked[: max(0, limit)]
    for item in ranked:
        if isinstance(item, bool) or not isinstance(item, str | int):
            raise TargetProtocolError(
                f"python target {factory}: search() returned an id of type "
                f"{type(item).__name__}; ids are strings (or integers)"
            )
    return tuple(str(item) for item in ranked)
