"""The ``milvus`` kind: Milvus (or the Milvus Lite server) through pymilvus (``benchd[milvus]``).

Settings (``[probe.target]``, ``kind = "milvus"``)::

    uri = "http://127.0.0.1:19530"
    collection = ""            # default "benchd_<namespace>"
    shared = false             # false: benchd's own collection; true: share an existing one
    distance = "cosine"        # cosine | l2 | ip (own collection: its index metric)
    namespace_field = "namespace"   # a partition key in benchd's own collection
    token_env = "MILVUS_TOKEN"      # optional (or token_file): "user:password" or an API key
    [probe.target.embed]
    model = "minilm"

**Own collection**: benchd creates it (fields ``id`` VARCHAR primary key,
``namespace`` VARCHAR partition key, ``content``, ``benchd`` JSON mark,
``vector`` FLOAT_VECTOR) with the property ``benchd_owner = <namespace>``,
refuses a collection of that name without it, and drops and recreates only
that collection when the embedder's dimensions change. **Shared collection**:
it must exist with the configured field names; benchd never creates, alters
or drops it. Every query, search and delete carries ``namespace_field ==
<namespace>`` (a bound filter parameter), so another tenant's entities are
never listed, ranked or deleted.

Data calls use pymilvus's async client; collection creation (which the async
client cannot do against Milvus Lite) runs the sync client in a worker
thread. Answers are bounded: ``limit`` on every query and search, and the gRPC
channel's ``max_receive_message_length`` (``max_response_bytes``).

A restarted server: the collection is looked up again after a connection error
(through a new channel) or an answer that it does not exist (the server came
back empty: benchd's own is created again) or is released (Milvus Lite
releases every collection when it restarts: benchd loads it), and the call
runs once more.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

import anyio
import anyio.to_thread

from benchd import redact
from benchd.config.kinds import CommonSettings, Starter, key
from benchd.config.schema import check, concurrency_problem, url_problem
from benchd.config.secrets import Secret
from benchd.embed.config import EmbedConfig
from benchd.errors import (
    TargetAuthError,
    TargetError,
    TargetProtocolError,
    TargetTimeout,
    TargetUnreachable,
)
from benchd.http.client import DEFAULT_MAX_RESPONSE_BYTES, positive_problem
from benchd.http.messages import words
from benchd.kinds.vectors import (
    BULK_DELETE,
    EMBED_STARTER,
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
from benchd.logging import get_logger, route_library_logs
from benchd.store.flow import NamespaceFlow
from benchd.store.handles import Handles, fresh_after_restart
from benchd.store.lease import LeaseHolder
from benchd.store.owned import MAX_ID_CHARS, namespace_problem
from benchd.store.protocol import Capabilities
from benchd.store.target import ProbeTarget, WriteRate

if TYPE_CHECKING:
    from benchd.embed.stage import EmbedStage

__all__ = [
    "CLIENT_LIBRARY",
    "EXTRA",
    "KIND",
    "OWNER_PROPERTY",
    "MilvusConfig",
    "MilvusIO",
    "MilvusStore",
    "collection_name",
]

KIND = "milvus"
EXTRA = "milvus"
CLIENT_LIBRARY = "pymilvus"  # the module its extra brings
OWNER_PROPERTY = "benchd_owner"
CONSISTENCY = "Strong"
"""Every read sees every write before it: Milvus's default (Bounded) lets a query or
search miss rows inserted or deleted a moment ago, so a verify right after the seed
could call records missing and a listing right after a delete could still show them."""
log = get_logger("benchd.targets.milvus")
T = TypeVar("T")

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")
_METRICS = {"cosine": "COSINE", "l2": "L2", "ip": "IP"}
MAX_QUERY_WINDOW = 16_384  # Milvus's limit on offset + limit of one query
GRPC_MAX_RECEIVE = b"grpc.max_receive_message_length"  # grpc's ChannelArgKey (bytes)
GRPC_IDLE_PINGS = "grpc.keepalive_permit_without_calls"  # as pymilvus spells its default (str)
GRPC_OWN_SUBCHANNELS = "grpc.use_local_subchannel_pool"
MAX_CONTENT_CHARS = 65_535  # Milvus's VARCHAR limit; longer texts are cut when written
_RESTARTED = (100, 101)
"""MilvusException codes for a collection the server no longer has (100: it came back
empty) or holds released (101: "call load() before search/get/query")."""


def _name_problem(value: str) -> str | None:
    if not value or _NAME.match(value):
        return None
    return "must start with a letter or _ and hold only letters, digits and _ (Milvus names)"


def _field_problem(value: str) -> str | None:
    return None if _NAME.match(value) else "must be a Milvus field name (letters, digits, _)"


def _uri_problem(value: str) -> str | None:
    return url_problem(value, schemes=("http", "https", "tcp", "grpc"))


def collection_name(config: MilvusConfig) -> str:
    """As set, else ``benchd_<namespace>`` with every other character made ``_``."""
    if config.collection:
        return config.collection
    return "benchd_" + re.sub(r"[^A-Za-z0-9_]", "_", config.namespace)


_FIELDS = "benchd's own collection makes `namespace` a partition key; `benchd` is a JSON field"


@dataclass(frozen=True, slots=True)
class MilvusConfig(VectorSettings):
    """``[probe.target]`` keys for ``kind = "milvus"``."""

    listing_page: ClassVar[int] = MAX_QUERY_WINDOW
    starter: ClassVar[Starter] = Starter(
        "Milvus or the Milvus Lite server through pymilvus (benchd[milvus])",
        (
            ("uri", "http://127.0.0.1:19530", "the Milvus gRPC endpoint"),
            ("collection", "", "default benchd_<namespace>; a shared collection's name"),
            ("distance", "cosine", "cosine | l2 | ip (benchd's own collection)"),
            *vector_starter_keys("collection"),
        ),
        (EMBED_STARTER,),
    )

    uri: str = field(
        metadata=key("the gRPC endpoint, e.g. `http://127.0.0.1:19530`", _uri_problem)
    )
    embed: EmbedConfig
    db_name: str = field(default="", metadata=key("", shown="default database"))
    collection: str = field(
        default="",
        metadata=key("required with `shared = true`", _name_problem, shown="`benchd_<namespace>`"),
    )
    shared: bool = field(default=False, metadata=key(""))
    id_field: str = field(default="id", metadata=key(_FIELDS, _field_problem))
    namespace_field: str = field(default="namespace", metadata=key(_FIELDS, _field_problem))
    content_field: str = field(default="content", metadata=key(_FIELDS, _field_problem))
    mark_field: str = field(default="benchd", metadata=key(_FIELDS, _field_problem))
    vector_field: str = field(default="vector", metadata=key(_FIELDS, _field_problem))
    distance: Literal["cosine", "l2", "ip"] = field(
        default="cosine", metadata=key("the own collection's index metric (`AUTOINDEX`)")
    )
    namespace: str = field(default="benchd-eval", metadata=check(namespace_problem))
    cleanup: Literal["before", "after", "never"] = "never"
    adopt_namespace: bool = False
    batch_size: int = field(default=500, metadata=check(positive_problem))
    concurrency: int = field(default=2, metadata=check(concurrency_problem))
    token_env: str | None = field(
        default=None, metadata=key("`user:password` or an API key", shown="unset")
    )
    token_file: str | None = field(default=None, metadata=key("`user:password` or an API key"))
    timeout_s: float = field(default=10.0, metadata=check(positive_problem))
    max_response_bytes: int = field(
        default=DEFAULT_MAX_RESPONSE_BYTES,
        metadata=key(
            "the gRPC channel's `max_receive_message_length` (pymilvus leaves it unbounded)",
            positive_problem,
            shown="16 MiB",
        ),
    )
    searchable_timeout_s: float = 30.0

    def common(self) -> CommonSettings:
        return CommonSettings(
            namespace=self.namespace,
            url=self.uri,
            cleanup=self.cleanup,
            adopt_namespace=self.adopt_namespace,
            api_key_env=self.token_env,
            api_key_file=self.token_file,
            secret_kind="token: USER:PASSWORD or an API key",
        )

    def __post_init__(self) -> None:
        if self.shared and not self.collection:
            raise ValueError("shared = true needs collection: the name of the shared collection")


def error_of(exc: BaseException, where: str) -> TargetError:
    """A pymilvus or gRPC error as benchd's: connect, auth, timeout, or decode."""
    text = words(str(exc)) or type(exc).__name__  # masked before it is cut
    low = text.lower()
    if "unauthenticated" in low or "authentication" in low or "permission" in low:
        return TargetAuthError(f"{where}: the token was refused ({text})")
    if "deadline" in low or "timeout" in low or "timed out" in low:
        return TargetTimeout(f"{where}: no answer in time ({text})")
    if "unavailable" in low or "connect" in low or "fail to connect" in low:
        return TargetUnreachable(f"{where}: {text}")
    return TargetProtocolError(f"{where}: {type(exc).__name__}: {text}")


class MilvusIO:
    """The collection and its entities through pymilvus; knows nothing of ownership."""

    def __init__(self, config: MilvusConfig, token: str, embed: EmbedStage) -> None:
        self.config = config
        self.embed = embed
        self.name = collection_name(config)
        self._token = token
        self._client: Any = None
        self._dims: int | None = None  # of the collection, once looked at
        self._known = False  # the collection was looked up (or created, loaded) by this process
        self.where = f"milvus collection {self.name} at {config.uri}"
        self.handles = Handles(self.where, self._forget)

    async def _forget(self) -> None:
        """The collection looked up: the server restarted (empty, or with it released)."""
        self._known = False

    @property
    def filter(self) -> str:
        """``namespace_field == "<namespace>"``: on every query, search and delete."""
        return f"{self.config.namespace_field} == {literal(self.config.namespace)}"

    def _ids_filter(self, ids: Sequence[str]) -> str:
        listed = ", ".join(literal(i) for i in ids)
        return f"{self.filter} and {self.config.id_field} in [{listed}]"

    def _options(self) -> dict[str, Any]:
        return {
            "uri": self.config.uri,
            "token": self._token,
            "db_name": self.config.db_name,
            "timeout": self.config.timeout_s,
            # the key as bytes, as pymilvus spells its own default (-1, unbounded): under the
            # str key both reach the channel and the default wins (an answer is read past
            # the bound)
            "grpc_options": {
                GRPC_MAX_RECEIVE: self.config.max_response_bytes,
                # pymilvus pings every 10 s even with no call in flight; a server that allows
                # fewer (Milvus Lite: GOAWAY "too_many_pings" after ~70 s idle) drops the
                # channel between cycles and gRPC logs it on stderr. Ping only during calls.
                GRPC_IDLE_PINGS: 0,
                # gRPC shares subchannels (and their reconnect backoff) between channels to one
                # address: the new channel opened after a connection error would wait out the
                # old one's backoff, past the server's return. One subchannel per channel.
                GRPC_OWN_SUBCHANNELS: 1,
            },
            # pymilvus shares one channel per address and token: another client's options
            # (another probe's bound) would apply to this one
            "dedicated": True,
        }

    async def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One async client call, bounded in time, its errors made benchd's."""
        try:
            with anyio.fail_after(self.config.timeout_s):
                return await fn(*args, **kwargs)
        except TimeoutError:
            raise TargetTimeout(f"{self.where}: {what}: no answer in time") from None
        except TargetError:
            raise
        except Exception as exc:  # pymilvus raises MilvusException and grpc errors alike
            raise await self._error(exc, what, getattr(fn, "__self__", None)) from None

    async def _error(self, exc: Exception, what: str, client: Any = None) -> TargetError:
        """``exc`` as benchd's error; one that says the server restarted forgets the handles,
        and a connection error the async ``client`` the call went through (pymilvus does not
        always reconnect its channel to a restarted server: the next call opens a new one)."""
        error = error_of(exc, f"{self.where}: {what}")
        unreachable = isinstance(error, TargetUnreachable)
        if unreachable and client is not None and client is self._client:
            self._client = None
            await _close(client)
        if unreachable or getattr(exc, "code", None) in _RESTARTED:
            await self.handles.stale(error.message)
        return error

    async def _sync(self, what: str, fn: Callable[[Any], T]) -> T:
        """A sync client call in a worker thread (what the async client lacks on Milvus Lite)."""

        def run() -> T:
            from pymilvus import MilvusClient

            client = MilvusClient(**self._options())
            try:
                return fn(client)
            finally:
                client.close()

        try:
            with anyio.fail_after(self.config.timeout_s * 3):
                return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
        except TimeoutError:
            raise TargetTimeout(f"{self.where}: {what}: no answer in time") from None
        except TargetError:
            raise
        except Exception as exc:
            raise await self._error(exc, what) from None

    async def client(self) -> Any:
        if self._client is None:
            module = await import_off_loop(CLIENT_LIBRARY, EXTRA, self.where)
            route_library_logs("pymilvus")  # its import installed stderr handlers of its own
            self._client = module.AsyncMilvusClient(**self._options())
        return self._client

    # -- the collection ---------------------------------------------------------------

    async def lookup(self) -> bool:
        """Whether the collection exists; checks benchd's mark (own) and learns its dims."""
        client = await self.client()
        if not await self._call("has_collection", client.has_collection, self.name):
            return False
        described = await self._call("describe", client.describe_collection, self.name)
        self._check_mark(described)
        self._dims = _vector_dims(described, self.config.vector_field)
        await self._loaded(client)
        self._known = True
        return True

    async def _loaded(self, client: Any) -> None:
        """Load the collection where the server holds it released (Milvus Lite releases
        every collection when it restarts, and a released one answers no query)."""
        try:
            state = await self._call("get load state", client.get_load_state, self.name)
        except (TargetAuthError, TargetProtocolError) as exc:  # a role without the privilege
            log.info("load state unknown: the collection is not loaded by benchd", error=str(exc))
            return
        loaded = state.get("state") if isinstance(state, Mapping) else None
        if getattr(loaded, "name", None) == "NotLoad":
            log.info("loading the released collection", collection=self.name)
            await self._call("load", client.load_collection, self.name)

    def _check_mark(self, described: Mapping[str, Any]) -> None:
        if self.config.shared:
            return
        properties = described.get("properties") or {}
        owner = properties.get(OWNER_PROPERTY) if isinstance(properties, Mapping) else None
        check_collection_owner(
            self.where, self.config.namespace, owner, never="writes into or drops"
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
        c, name, metric = self.config, self.name, _METRICS[self.config.distance]

        def create(client: Any) -> None:
            from pymilvus import DataType

            schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
            schema.add_field(c.id_field, DataType.VARCHAR, is_primary=True, max_length=256)
            schema.add_field(
                c.namespace_field, DataType.VARCHAR, max_length=128, is_partition_key=True
            )
            schema.add_field(c.content_field, DataType.VARCHAR, max_length=MAX_CONTENT_CHARS)
            schema.add_field(c.mark_field, DataType.JSON)
            schema.add_field(c.vector_field, DataType.FLOAT_VECTOR, dim=dims)
            index = client.prepare_index_params()
            index.add_index(c.vector_field, index_type="AUTOINDEX", metric_type=metric)
            client.create_collection(
                name, schema=schema, index_params=index,
                properties={OWNER_PROPERTY: c.namespace},
                consistency_level=CONSISTENCY,
            )  # fmt: skip

        await self._sync("create collection", create)
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
        name = self.name
        await self._sync("drop collection", lambda client: client.drop_collection(name))
        self._known = False
        await self._create(dims)

    # -- entities -----------------------------------------------------------------------

    @fresh_after_restart
    async def page(self, cursor: str | None, limit: int) -> tuple[list[Marked], str | None]:
        """Up to ``limit`` entities of the namespace with ids after ``cursor``, in id order."""
        if not await self.ready(None):
            return [], None
        after = cursor or ""
        c = self.config
        client = await self.client()
        rows = await self._call(
            "query", client.query, self.name,
            filter=f"{self.filter} and {c.id_field} > {literal(after)}",
            output_fields=[c.id_field, c.mark_field], limit=limit,
            consistency_level=CONSISTENCY,
        )  # fmt: skip
        listed = sorted(_entities(rows, c.id_field, c.mark_field, self.where))[:limit]
        return listed, (listed[-1][0] if len(listed) == limit else None)

    @fresh_after_restart
    async def rows(self, ids: Sequence[str]) -> list[Marked]:
        if not ids or not await self.ready(None):
            return []
        c = self.config
        client = await self.client()
        rows = await self._call(
            "query", client.query, self.name,
            filter=self._ids_filter(ids),
            output_fields=[c.id_field, c.mark_field], limit=len(ids),
            consistency_level=CONSISTENCY,
        )  # fmt: skip
        return _entities(rows, c.id_field, c.mark_field, self.where)

    @fresh_after_restart
    async def holders(self, ids: Sequence[str]) -> dict[str, bool]:
        """Which of ``ids`` have an entity in any namespace: True where it is benchd's."""
        if not ids or not await self.ready(None):
            return {}
        c = self.config
        client = await self.client()
        rows = await self._call(
            "query", client.query, self.name,
            filter=f"{c.id_field} in [{', '.join(literal(i) for i in ids)}]",
            output_fields=[c.id_field, c.namespace_field], limit=len(ids),
            consistency_level=CONSISTENCY,
        )  # fmt: skip
        wanted, out = set(ids), dict[str, bool]()
        for row in list(rows or ()):
            sid = row.get(c.id_field) if isinstance(row, Mapping) else None
            if isinstance(sid, str) and sid in wanted:
                out[sid] = out.get(sid, True) and row.get(c.namespace_field) == c.namespace
        return out

    @fresh_after_restart
    async def write(self, rows: Sequence[Row]) -> None:
        """Replace benchd's entities with these ids in its namespace: delete (filtered), insert."""
        if not rows:
            return
        await self.ready(len(rows[0][3]))
        c = self.config
        client = await self.client()
        ids = [r[0] for r in rows]
        await self._call(
            "delete", client.delete, self.name,
            filter=self._ids_filter(ids),
        )  # fmt: skip
        data = [
            {c.id_field: sid, c.namespace_field: c.namespace,
             c.content_field: text[:MAX_CONTENT_CHARS], c.mark_field: dict(mark),
             c.vector_field: [float(x) for x in vector]}
            for sid, text, mark, vector in rows
        ]  # fmt: skip
        await self._call("insert", client.insert, self.name, data)

    @fresh_after_restart
    async def delete(self, store_id: str) -> bool:
        if not await self.ready(None):
            return False
        client = await self.client()
        found = await self.rows([store_id])
        if not found:
            return False
        await self._call(
            "delete", client.delete, self.name,
            filter=self._ids_filter([store_id]),
        )  # fmt: skip
        return True

    @fresh_after_restart
    async def delete_many(self, store_ids: Sequence[str]) -> int:
        """One filtered delete for the set (namespace and ids); how many were there."""
        if not await self.ready(None):
            return 0
        client = await self.client()
        found = await self.rows(store_ids)
        if not found:
            return 0
        await self._call(
            "delete", client.delete, self.name,
            filter=self._ids_filter([sid for sid, _ in found]),
        )  # fmt: skip
        return len(found)

    @fresh_after_restart
    async def search(self, vector: Sequence[float], limit: int) -> list[Scored]:
        if not await self.ready(None):
            return []
        c = self.config
        client = await self.client()
        found = await self._call(
            "search", client.search, self.name, data=[[float(x) for x in vector]],
            filter=self.filter, limit=limit,
            output_fields=[c.id_field], anns_field=c.vector_field,
            consistency_level=CONSISTENCY,
        )  # fmt: skip
        return _hits(found, limit, self.config.distance, self.where)

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await _close(client)


async def _close(client: Any) -> None:
    """Close an async client; a broken channel's close failing fails nothing."""
    with anyio.CancelScope(shield=True):
        try:
            await client.close()
        except Exception as exc:
            log.info("milvus client close failed", error=words(str(exc)))


def literal(text: str) -> str:
    """A Milvus expression string literal (Milvus Lite's server takes no filter parameters)."""
    if any(ord(ch) < 32 or ch == "\x7f" for ch in text):
        raise TargetProtocolError(f"a control character in {text!r} cannot go into a filter")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _vector_dims(described: Mapping[str, Any], name: str) -> int | None:
    for f in described.get("fields") or ():
        if isinstance(f, Mapping) and f.get("name") == name:
            dim = (f.get("params") or {}).get("dim")
            try:
                return int(dim) if dim is not None else None
            except (TypeError, ValueError):
                return None
    return None


def _entities(rows: Any, id_field: str, mark_field: str, where: str) -> list[Marked]:
    out: list[Marked] = []
    for row in list(rows or ()):
        if not isinstance(row, Mapping) or not isinstance(row.get(id_field), str):
            raise TargetProtocolError(f"{where}: an entity without a string {id_field}")
        sid = row[id_field]
        if len(sid) > MAX_ID_CHARS * 2:
            raise TargetProtocolError(f"{where}: an id of {len(sid)} characters")
        mark = row.get(mark_field)
        out.append((sid, dict(mark) if isinstance(mark, Mapping) else {}))
    return out


def _hits(found: Any, limit: int, distance: str, where: str) -> list[Scored]:
    """Ids and scores (higher is better) of the first query's hits, at most ``limit``."""
    try:
        first = list(found[0])[:limit]
    except (IndexError, TypeError, KeyError):
        raise TargetProtocolError(f"{where}: a search answer without hits") from None
    out: list[Scored] = []
    for hit in first:
        sid = hit.get("id") if isinstance(hit, Mapping) else None
        if not isinstance(sid, str):
            raise TargetProtocolError(f"{where}: a hit without a string id")
        d = hit.get("distance")
        score = float(d) if isinstance(d, int | float) and not isinstance(d, bool) else None
        # COSINE and IP answer similarities (higher is better), L2 a distance.
        out.append((sid, -score if score is not None and distance == "l2" else score))
    return out


class MilvusStore(VectorStore):
    """The ``milvus`` kind behind the store seam."""

    config: MilvusConfig
    kind = KIND
    client_library = CLIENT_LIBRARY
    # Milvus answers a query with a limit in no guaranteed id order, so a keyset page
    # can skip records: list up to Milvus's whole query window (16,384) in one call.
    page_size = MAX_QUERY_WINDOW

    def __init__(
        self, config: MilvusConfig, token: str | None, embed: EmbedStage | None = None
    ) -> None:
        stage = embed or embed_stage(config.embed, config)
        io = MilvusIO(config, token or "", stage)
        super().__init__(io, stage, f"{redact.public_url(config.uri)} collection {io.name}", config)

    @classmethod
    def capabilities_for(cls, settings: MilvusConfig) -> Capabilities:
        """Lists, writes and deletes its namespace's entities; the sentinel keeps the lease."""
        return Capabilities(
            lists=True, writes=True, deletes=True, lease=True, owned_ids=True, scores=True,
            holders=True,
            full_answers=True, bulk_deletes=BULK_DELETE,
        )

    @classmethod
    def probe_target(
        cls,
        settings: MilvusConfig,
        secret: Secret | None,
        *,
        lease: LeaseHolder | None = None,
        write_rate: WriteRate | None = None,
    ) -> ProbeTarget:
        """The ``milvus`` kind: the shared namespace flow over a store of these settings."""
        store = cls(settings, secret.reveal() if secret is not None else None)
        return NamespaceFlow(store, lease=lease, write_rate=write_rate)


