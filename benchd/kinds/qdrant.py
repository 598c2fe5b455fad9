"""The ``qdrant`` kind (experimental): Qdrant through qdrant-client (``benchd[qdrant]``).

Settings (``[probe.target]``, ``kind = "qdrant"``)::

    path = "/var/lib/benchd/qdrant"  # local mode: qdrant-client's own store in this directory
    # url = "http://127.0.0.1:6333"  # or a Qdrant server (REST; prefer_grpc = true for gRPC)
    collection = ""                   # default "benchd_<namespace>"
    shared = false                    # false: benchd's own collection; true: an existing one
    distance = "cosine"               # cosine | l2 | ip (own collection)
    namespace_key = "benchd_namespace"
    api_key_env = "QDRANT_API_KEY"    # optional, server only
    [probe.target.embed]
    model = "minilm"

**Experimental**: only qdrant-client's local mode (``path``, or ``":memory:"``)
runs on the machines benchd is tested on; the REST and gRPC paths to a
Qdrant server are the same client calls but were never run against a server.

Qdrant's point ids are unsigned integers or UUIDs, so benchd's id (its
owned id, :mod:`benchd.store.owned`) becomes the UUID v5 of that id
(:func:`point_id`) and is kept in the payload (``benchd_id``), beside
``<namespace_key> = <namespace>``, the text and benchd's mark. A point is
benchd's only when both agree (its UUID is the v5 of the ``benchd_id`` it
carries, in benchd's namespace).

**Own collection**: benchd creates it with the collection metadata
``benchd_owner = <namespace>``, refuses a collection of that name without
it, and deletes and recreates only that one when the embedder's dimensions
change. **Shared collection**: it must exist; benchd never creates, alters
or deletes it. Every scroll, query and delete carries the namespace filter;
a write first reads the points it is about to upsert and refuses
(``ownership``) if any of them is not benchd's in this namespace — Qdrant's
upsert overwrites by id whoever wrote it.

Local mode allows one client per directory (a file lock): a second process
on the same ``path`` gets an ``ownership`` error at once. Its store is pure
Python: benchd drives the sync client in a worker thread, one call at a time,
never on the event loop; a server is reached through the async client.
"""

from __future__ import annotations

import functools
import math
import os
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import anyio
import anyio.to_thread

from benchd import redact
from benchd.config.kinds import CommonSettings, Starter, key
from benchd.config.schema import check, concurrency_problem, url_problem
from benchd.config.secrets import Secret
from benchd.embed.config import EmbedConfig
from benchd.errors import (
    OwnershipError,
    TargetAuthError,
    TargetError,
    TargetProtocolError,
    TargetTimeout,
    TargetUnreachable,
)
from benchd.http.client import DEFAULT_MAX_RESPONSE_BYTES, positive_problem
from benchd.http.messages import words
from benchd.kinds.vectors import (
    DIGEST_KEY,
    EMBED_STARTER,
    FIXTURE_KEY,
    LEASE_KEY,
    MODEL_KEY,
    SENTINEL_KEY,
    Marked,
    Row,
    Scored,
    VectorSettings,
    VectorStore,
    check_collection_owner,
    embed_stage,
    import_off_loop,
    shared_collection_missing,
    vector_starter_keys,
)
from benchd.logging import get_logger
from benchd.store.flow import NamespaceFlow
from benchd.store.lease import LeaseHolder
from benchd.store.owned import MAX_ID_CHARS, namespace_problem
from benchd.store.protocol import Capabilities
from benchd.store.target import ProbeTarget, WriteRate

if TYPE_CHECKING:
    from benchd.embed.stage import EmbedStage

__all__ = [
    "CLIENT_LIBRARY",
    "EXTRA",
    "ID_KEY",
    "KIND",
    "OWNER_META",
    "POINT_NAMESPACE",
    "QdrantConfig",
    "QdrantIO",
    "QdrantStore",
    "collection_name",
    "point_id",
]

KIND = "qdrant"
EXTRA = "qdrant"
CLIENT_LIBRARY = "qdrant_client"  # the module its extra brings
OWNER_META = "benchd_owner"
ID_KEY = "benchd_id"
POINT_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/benchd/benchd#qdrant")
"""The UUID v5 namespace of benchd's point ids (fixed: changing it would orphan every point)."""
log = get_logger("benchd.targets.qdrant")

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$")
_DISTANCES = {"cosine": "Cosine", "l2": "Euclid", "ip": "Dot"}
MAX_META_CHARS = 4096  # a payload value benchd reads (the lease is ~250 characters)
MARK_KEYS = (FIXTURE_KEY, DIGEST_KEY, MODEL_KEY, SENTINEL_KEY, LEASE_KEY)


def point_id(store_id: str) -> str:
    """The Qdrant point id of benchd's id: its UUID v5 under :data:`POINT_NAMESPACE`."""
    return str(uuid.uuid5(POINT_NAMESPACE, store_id))


def _name_problem(value: str) -> str | None:
    if not value or _NAME.match(value):
        return None
    return "must be 1-255 characters of letters, digits, _ . - (a Qdrant collection name)"


def _url_problem(value: str) -> str | None:
    return url_problem(value, schemes=("http", "https")) if value else None


def collection_name(config: QdrantConfig) -> str:
    """As set, else ``benchd_<namespace>`` with every other character made ``_``."""
    if config.collection:
        return config.collection
    return "benchd_" + re.sub(r"[^A-Za-z0-9_]", "_", config.namespace)


_KEYS = "the payload key of the text; a shared collection's named vector"
_WRITES = "points per upsert, upserts in flight"


@dataclass(frozen=True, slots=True)
class QdrantConfig(VectorSettings):
    """``[probe.target]`` keys for ``kind = "qdrant"``: ``path`` (local mode) or ``url``."""

    starter: ClassVar[Starter] = Starter(
        "EXPERIMENTAL: Qdrant through qdrant-client (benchd[qdrant]); tested in its local "
        "mode only (docs/targets.md)",
        (
            ("path", "./qdrant-data", "local mode: qdrant-client's store in this directory "
             "(one process at a time); or url = \"http://HOST:6333\" for a Qdrant server"),
            ("collection", "", "default benchd_<namespace>; a shared collection's name"),
            ("distance", "cosine", "cosine | l2 | ip (benchd's own collection)"),
            *vector_starter_keys("collection"),
        ),
        (EMBED_STARTER,),
    )  # fmt: skip

    embed: EmbedConfig
    path: str = field(
        default="",
        metadata=key(
            "local mode: qdrant-client's store in this directory (`\":memory:\"` for one "
            "process's memory); one process at a time",
            shown="— (or `url`)",
        ),
    )
    url: str = field(
        default="",
        metadata=key(
            "a Qdrant server's REST endpoint, e.g. `http://127.0.0.1:6333` (untested)",
            _url_problem,
            shown="— (or `path`)",
        ),
    )
    prefer_grpc: bool = field(
        default=False, metadata=key("server only: gRPC instead of REST (untested)")
    )
    grpc_port: int = field(
        default=6334, metadata=key("server only: gRPC instead of REST (untested)", positive_problem)
    )
    collection: str = field(
        default="",
        metadata=key("required with `shared = true`", _name_problem, shown="`benchd_<namespace>`"),
    )
    shared: bool = field(default=False, metadata=key(""))
    namespace_key: str = field(
        default="benchd_namespace",
        metadata=key(
            "the payload key every point benchd writes carries, and every scroll/query/delete "
            "filters on"
        ),
    )
    content_key: str = field(default="content", metadata=key(_KEYS))
    vector_name: str = field(default="", metadata=key(_KEYS, shown="unnamed"))
    distance: Literal["cosine", "l2", "ip"] = field(
        default="cosine", metadata=key("the own collection's `Cosine`, `Euclid` or `Dot`")
    )
    namespace: str = field(default="benchd-eval", metadata=check(namespace_problem))
    cleanup: Literal["before", "after", "never"] = "never"
    adopt_namespace: bool = False
    batch_size: int = field(default=256, metadata=key(_WRITES, positive_problem))
    concurrency: int = field(default=2, metadata=key(_WRITES, concurrency_problem))
    api_key_env: str | None = field(default=None, metadata=key("server only", shown="unset"))
    api_key_file: str | None = field(default=None, metadata=key("server only"))
    timeout_s: float = field(default=10.0, metadata=check(positive_problem))
    max_response_bytes: int = field(
        default=DEFAULT_MAX_RESPONSE_BYTES,
        metadata=key(
            "gRPC's `max_receive_message_length` (server, gRPC only)",
            positive_problem,
            shown="16 MiB",
        ),
    )
    searchable_timeout_s: float = 30.0

    def common(self) -> CommonSettings:
        return CommonSettings(
            namespace=self.namespace,
            url=self.url or None,  # None in local mode: the store is in-process
            cleanup=self.cleanup,
            adopt_namespace=self.adopt_namespace,
            api_key_env=self.api_key_env,
            api_key_file=self.api_key_file,
        )

    def __post_init__(self) -> None:
        if bool(self.path) == bool(self.url):
            raise ValueError(
                "set exactly one of path (qdrant-client's local mode) and url (a Qdrant server)"
            )
        if self.shared and not self.collection:
            raise ValueError("shared = true needs collection: the name of the shared collection")
        reserved = {ID_KEY, self.content_key}
        if not self.namespace_key or self.namespace_key in reserved:
            raise ValueError(f"namespace_key: a payload key other than {sorted(reserved)}")


def error_of(exc: BaseException, where: str) -> TargetError:
    """A qdrant-client, httpx, gRPC or local-mode error as benchd's (bounded text, a kind)."""
    text = words(str(exc)) or type(exc).__name__  # masked before it is cut
    low = text.lower()
    status = getattr(exc, "status_code", None)
    if "already accessed by another instance" in low:
        return OwnershipError(
            f"{where}: the local storage is held by another process (qdrant-client's local "
            "mode allows one client per directory): benchd never writes beside it"
        )
    if status in (401, 403) or "unauthenticated" in low or "permission denied" in low:
        return TargetAuthError(f"{where}: the API key was refused ({text})")
    if "deadline" in low or "timed out" in low or "timeout" in low:
        return TargetTimeout(f"{where}: no answer in time ({text})")
    if "unavailable" in low or "connect" in low:
        return TargetUnreachable(f"{where}: {text}")
    return TargetProtocolError(f"{where}: {type(exc).__name__}: {text}")


class QdrantIO:
    """The collection and its points through qdrant-client; knows nothing of ownership."""

    def __init__(self, config: QdrantConfig, api_key: str, embed: EmbedStage) -> None:
        self.config = config
        self.embed = embed
        self.name = collection_name(config)
        self._api_key = api_key
        self._client: Any = None
        self._models: Any = None
        self.local = bool(config.path)  # qdrant-client's local mode, in this process
        self._one_call = anyio.Lock()
        self._dims: int | None = None
        self._known = False
        place = f"local {config.path}" if config.path else redact.public_url(config.url)
        self.where = f"qdrant collection {self.name} at {place}"

    def _options(self) -> dict[str, Any]:
        c = self.config
        if c.path == ":memory:":
            return {"location": ":memory:"}
        if c.path:
            # built in a worker thread, used on the loop: its SQLite may change threads
            return {"path": c.path, "force_disable_check_same_thread": True}
        return {
            "url": c.url, "api_key": self._api_key or None, "prefer_grpc": c.prefer_grpc,
            "grpc_port": c.grpc_port, "timeout": max(1, math.ceil(c.timeout_s)),
            "grpc_options": {"grpc.max_receive_message_length": c.max_response_bytes},
            "check_compatibility": False,
        }  # fmt: skip

    async def client(self) -> Any:
        if self._client is None:
            if self.config.path not in ("", ":memory:") and _held(self.config.path):
                raise error_of(RuntimeError(HELD), f"{self.where}: open")
            module = await import_off_loop(CLIENT_LIBRARY, EXTRA, self.where)
            self._models = module.models
            options = self._options()
            # local mode: the sync client, driven in a worker thread (below)
            make = module.QdrantClient if self.local else module.AsyncQdrantClient
            try:  # local mode reads its whole store when it opens: not on the loop
                self._client = await anyio.to_thread.run_sync(lambda: make(**options))
            except Exception as exc:
                raise error_of(exc, f"{self.where}: open") from None
        return self._client

    async def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One client call, bounded in time, its errors made benchd's."""
        try:
            with anyio.fail_after(self.config.timeout_s):
                if not self.local:
                    return await fn(*args, **kwargs)
                # Local mode is qdrant-client's pure-Python store: an exact scan per search
                # (docs/targets.md) that its async client runs on the event loop,
                # stalling every probe, /metrics and signals. Its sync client runs in a
                # worker thread instead, one call at a time (the store is not thread-safe),
                # never abandoned mid-call (the next one would run beside it).
                async with self._one_call:
                    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
        except TimeoutError:
            raise TargetTimeout(f"{self.where}: {what}: no answer in time") from None
        except TargetError:
            raise
        except Exception as exc:  # UnexpectedResponse, httpx, grpc and local mode's ValueError
            raise error_of(exc, f"{self.where}: {what}") from None

    @property
    def filter(self) -> Any:
        """``<namespace_key> == <namespace>``: on every scroll, query and delete."""
        m = self._models
        return m.Filter(
            must=[m.FieldCondition(key=self.config.namespace_key,
                                   match=m.MatchValue(value=self.config.namespace))]
        )  # fmt: skip

    # -- the collection ---------------------------------------------------------------

    async def lookup(self) -> bool:
        """Whether the collection exists; checks benchd's mark (own) and learns its dims."""
        client = await self.client()
        if not await self._call("collection_exists", client.collection_exists, self.name):
            return False
        info = await self._call("get_collection", client.get_collection, self.name)
        self._check_mark(getattr(info.config, "metadata", None))
        self._dims = _vector_dims(info.config.params.vectors, self.config.vector_name)
        self._known = True
        return True

    def _check_mark(self, metadata: Any) -> None:
        if self.config.shared:
            return
        owner = metadata.get(OWNER_META) if isinstance(metadata, Mapping) else None
        check_collection_owner(
            self.where, self.config.namespace, owner, never="writes into or deletes"
        )

    async def ready(self, dims: int | None) -> bool:
        """Whether the collection is there, creating (own) it for ``dims`` when asked."""
        if not self._known and not await self.lookup():
            if self.config.shared:
                raise shared_collection_missing(self.where)
            if dims is None:
                return False
            await self._create(dims)
        if dims is not None and self._dims not in (None, dims):
            await self._dims_changed(dims)
        return True

    async def _create(self, dims: int) -> None:
        m, c = self._models, self.config
        params = m.VectorParams(size=dims, distance=m.Distance(_DISTANCES[c.distance]))
        vectors = {c.vector_name: params} if c.vector_name else params
        client = await self.client()
        await self._call(
            "create_collection", client.create_collection, self.name,
            vectors_config=vectors, metadata={OWNER_META: c.namespace},
        )  # fmt: skip
        self._dims, self._known = dims, True

    async def _dims_changed(self, dims: int) -> None:
        if self.config.shared:
            raise TargetProtocolError(
                f"{self.where} holds vectors of {self._dims} dimensions, the embedder "
                f"{self.embed.label} gives {dims}; benchd never changes a shared collection"
            )
        log.warning(
            "embedder dimensions changed: recreating benchd's own collection",
            collection=self.name, was=self._dims, now=dims,
        )  # fmt: skip
        client = await self.client()
        await self._call("delete_collection", client.delete_collection, self.name)
        self._known = False
        await self._create(dims)

    # -- points -------------------------------------------------------------------------

    def _payload_keys(self) -> list[str]:
        """What a listing reads of a point's payload: never its text."""
        return [ID_KEY, *MARK_KEYS, self.config.namespace_key]

    async def page(self, cursor: str | None, limit: int) -> tuple[list[Marked], str | None]:
        """Up to ``limit`` points of the namespace from point id ``cursor``, in id order."""
        if not await self.ready(None):
            return [], None
        client = await self.client()
        points, after = await self._call(
            "scroll", client.scroll, self.name, scroll_filter=self.filter, limit=limit,
            offset=cursor, with_payload=self._payload_keys(), with_vectors=False,
        )  # fmt: skip
        listed = [self._marked(p) for p in list(points or ())[:limit]]
        if after is not None and not isinstance(after, str | int):
            raise TargetProtocolError(f"{self.where}: a scroll offset of {type(after).__name__}")
        return listed, (str(after) if after is not None else None)

    def _marked(self, point: Any) -> Marked:
        """(benchd's id, its mark) of a point that is benchd's; (its point id, {}) else."""
        pid = str(getattr(point, "id", ""))
        if len(pid) > MAX_ID_CHARS * 2:
            raise TargetProtocolError(f"{self.where}: a point id of {len(pid)} characters")
        payload = getattr(point, "payload", None)
        payload = payload if isinstance(payload, Mapping) else {}
        sid = payload.get(ID_KEY)
        theirs = payload.get(self.config.namespace_key) != self.config.namespace
        if theirs or not isinstance(sid, str) or len(sid) > MAX_ID_CHARS * 2:
            return pid, {}
        if point_id(sid) != pid:  # benchd's id copied onto another point: not benchd's
            return pid, {}
        return sid, {k: payload[k] for k in MARK_KEYS if k in payload and _small(payload[k])}

    async def _points(self, ids: Sequence[str]) -> list[Any]:
        client = await self.client()
        found = await self._call(
            "retrieve", client.retrieve, self.name, ids=[point_id(i) for i in ids],
            with_payload=self._payload_keys(), with_vectors=False,
        )  # fmt: skip
        return list(found or ())[: len(ids)]

    async def rows(self, ids: Sequence[str]) -> list[Marked]:
        if not ids or not await self.ready(None):
            return []
        wanted = set(ids)
        return [m for m in map(self._marked, await self._points(ids)) if m[0] in wanted]

    async def holders(self, ids: Sequence[str]) -> dict[str, bool]:
        """Which of ``ids`` have a point in any namespace: True where it is benchd's."""
        if not ids or not await self.ready(None):
            return {}
        by_point = {point_id(i): i for i in ids}
        out: dict[str, bool] = {}
        for point in await self._points(ids):
            sid = by_point.get(str(getattr(point, "id", "")))
            if sid is not None:
                out[sid] = self._marked(point)[0] == sid
        return out

    async def write(self, rows: Sequence[Row]) -> None:
        """Upsert benchd's points (the flow read their ids first: :meth:`holders`)."""
        if not rows:
            return
        await self.ready(len(rows[0][3]))
        m, c = self._models, self.config
        points = [
            m.PointStruct(
                id=point_id(sid),
                vector={c.vector_name: [float(x) for x in vec]} if c.vector_name
                else [float(x) for x in vec],
                payload={**mark, ID_KEY: sid, c.namespace_key: c.namespace,
                         c.content_key: text},
            )
            for sid, text, mark, vec in rows
        ]  # fmt: skip
        client = await self.client()
        await self._call("upsert", client.upsert, self.name, points=points, wait=True)

    async def delete(self, store_id: str) -> bool:
        """Delete one of benchd's points: by its UUID, its ``benchd_id`` and the namespace."""
        if not await self.ready(None) or not await self.rows([store_id]):
            return False
        m = self._models
        only = m.Filter(
            must=[*self.filter.must,
                  m.HasIdCondition(has_id=[point_id(store_id)]),
                  m.FieldCondition(key=ID_KEY, match=m.MatchValue(value=store_id))]
        )  # fmt: skip
        client = await self.client()
        await self._call(
            "delete", client.delete, self.name,
            points_selector=m.FilterSelector(filter=only), wait=True,
        )  # fmt: skip
        return True

    async def delete_many(self, store_ids: Sequence[str]) -> int:
        """One at a time (no bulk delete declared: each point's filter names its own id)."""
        return sum([await self.delete(sid) for sid in store_ids])

    async def search(self, vector: Sequence[float], limit: int) -> list[Scored]:
        if not await self.ready(None):
            return []
        client = await self.client()
        found = await self._call(
            "query_points", client.query_points, self.name,
            query=[float(x) for x in vector], using=self.config.vector_name or None,
            query_filter=self.filter, limit=limit, with_payload=[ID_KEY, self.config.namespace_key],
        )  # fmt: skip
        return self._hits(getattr(found, "points", None), limit)

    def _hits(self, points: Any, limit: int) -> list[Scored]:
        """Ids and scores (higher is better), at most ``limit``; no id, no answer."""
        if not isinstance(points, list):
            raise TargetProtocolError(f"{self.where}: a query answer without points")
        out: list[Scored] = []
        for point in points[:limit]:
            sid, _ = self._marked(point)
            s = getattr(point, "score", None)
            number = isinstance(s, int | float) and not isinstance(s, bool)
            score = float(s) if number and math.isfinite(s) else None  # type: ignore[arg-type]
            # Euclid answers a distance (lower is better), Cosine and Dot a similarity.
            out.append((sid, -score if score is not None and self.config.distance == "l2"
                        else score))  # fmt: skip
        return out

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            try:
                await self._call("close", client.close)
            except Exception as exc:  # closing a broken channel must not fail shutdown
                log.info("qdrant client close failed", error=str(exc))


HELD = "Storage folder is already accessed by another instance of Qdrant client"


def _held(path: str) -> bool:
    """Whether another client holds local mode's lock (``<path>/.lock``, an flock).

    Asked before opening: qdrant-client, refused the lock, leaves its lock file open.
    """
    import fcntl

    try:
        fd = os.open(os.path.join(path, ".lock"), os.O_RDWR)
    except OSError:
        return False  # no store there yet, or not ours to read: the client will say
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _small(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) and (
        not isinstance(value, str) or len(value) <= MAX_META_CHARS
    )


def _vector_dims(vectors: Any, name: str) -> int | None:
    """The size of the collection's (named) vector, None when it has no such vector."""
    if isinstance(vectors, Mapping):
        vectors = vectors.get(name)
    elif name:
        return None
    size = getattr(vectors, "size", None)
    return size if isinstance(size, int) and not isinstance(size, bool) else None


class QdrantStore(VectorStore):
    """The ``qdrant`` kind behind the store seam."""

    config: QdrantConfig
    kind = KIND
    client_library = CLIENT_LIBRARY

    def __init__(
        self, config: QdrantConfig, api_key: str | None, embed: EmbedStage | None = None
    ) -> None:
        stage = embed or embed_stage(config.embed, config)
        io = QdrantIO(config, api_key or "", stage)
        place = f"local {config.path}" if config.path else redact.public_url(config.url)
        super().__init__(io, stage, f"qdrant {place} collection {io.name}", config)
        self.qdrant = io

    @classmethod
    def capabilities_for(cls, settings: QdrantConfig) -> Capabilities:
        """Lists, writes and deletes its namespace's points; the sentinel keeps the lease."""
        return Capabilities(
            lists=True, writes=True, deletes=True, lease=True, owned_ids=True, scores=True,
            holders=True,
            full_answers=True,
        )  # fmt: skip

    @classmethod
    def probe_target(
        cls,
        settings: QdrantConfig,
        secret: Secret | None,
        *,
        lease: LeaseHolder | None = None,
        write_rate: WriteRate | None = None,
    ) -> ProbeTarget:
        """The ``qdrant`` kind: the shared namespace flow over a store of these settings."""
        store = cls(settings, secret.reveal() if secret is not None else None)
        return NamespaceFlow(store, lease=lease, write_rate=write_rate)


