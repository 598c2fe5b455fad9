"""The ``chroma`` kind: Chroma's v2 HTTP API (``chroma run``, Chroma Cloud), over httpx.

Settings (``[probe.target]``, ``kind = "chroma"``; nothing beyond httpx)::

    url = "http://127.0.0.1:8000"
    tenant = "default_tenant"
    database = "default_database"
    collection = ""            # default "benchd-<namespace>"
    shared = false             # false: benchd's own collection; true: share an existing one
    distance = "cosine"        # cosine | l2 | ip (own collection only: its hnsw:space)
    ef_search = 100            # optional, own collection only: HNSW's search breadth
    ef_construction = 100      # optional, own collection only, on creation: build breadth
    namespace_key = "benchd_namespace"
    api_key_env = "CHROMA_TOKEN"   # optional, sent as x-chroma-token
    [probe.target.embed]
    model = "minilm"           # vectors come from benchd's embed stage

The collection is looked up by name and its id cached until a records call
answers 404 (the collection was deleted, or the server came back empty): it
is looked up again, created again where it is benchd's own, and the call runs
once more. **Own collection**
(``shared = false``): benchd creates it with the metadata ``benchd_owner =
<namespace>`` and refuses a collection of that name without that mark; when
the embedder's dimensions change it deletes and recreates that collection,
never another. ``ef_search`` and ``ef_construction`` set the own collection's
HNSW breadths at creation (Chroma's defaults are 100); a changed ``ef_search``
is applied to the existing own collection (Chroma changes it in place), a
changed ``ef_construction`` only when the collection is recreated. **Shared
collection**: it must exist; benchd never creates, modifies or deletes it.

Every record benchd writes carries ``<namespace_key> = <namespace>`` in its
metadata, and every get, query and delete benchd sends filters on it
(``where``), so another tenant's records in a shared collection are never
listed, ranked or deleted, whatever their ids. A write deletes benchd's own
ids in its namespace, then adds (``add`` never overwrites an existing id), and
reads the batch back: Chroma's add skips an id the collection already holds and
answers success all the same, so a record held under benchd's id outside its
namespace fails the write with ``ownership``, naming how many.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal
from urllib.parse import quote

from benchd import redact
from benchd.config.kinds import Starter, UrlKeyCommon, key
from benchd.config.schema import check, concurrency_problem
from benchd.config.secrets import Secret
from benchd.embed.config import EmbedConfig
from benchd.errors import OwnershipError, TargetHTTPError, TargetProtocolError
from benchd.http.answers import decode
from benchd.http.client import (
    DEFAULT_MAX_RESPONSE_BYTES,
    ErrorContext,
    http_url_problem,
    non_negative_problem,
    open_clients,
    positive_problem,
)
from benchd.http.sender import Connect
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
    shared_collection_missing,
    vector_starter_keys,
)
from benchd.logging import get_logger
from benchd.store.flow import NamespaceFlow
from benchd.store.handles import Handles, fresh_after_restart
from benchd.store.lease import LeaseHolder
from benchd.store.owned import namespace_problem
from benchd.store.protocol import Capabilities
from benchd.store.target import ProbeTarget, WriteRate

if TYPE_CHECKING:
    from benchd.embed.stage import EmbedStage

__all__ = [
    "KIND",
    "OWNER_META",
    "ChromaConfig",
    "ChromaIO",
    "ChromaStore",
    "collection_name",
]

KIND = "chroma"
OWNER_META = "benchd_owner"
log = get_logger("benchd.targets.chroma")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]$")
_SPACES = {"cosine": "cosine", "l2": "l2", "ip": "ip"}
MAX_META_CHARS = 4096  # a metadata value benchd reads (the lease is ~250 characters)


def _name_problem(value: str) -> str | None:
    if not value or _NAME.match(value):
        return None
    return "must be 3-512 characters of [a-zA-Z0-9._-], starting and ending with a letter or digit"


def _optional_positive(value: int | None) -> str | None:
    return None if value is None or value > 0 else "must be > 0"


def collection_name(config: ChromaConfig) -> str:
    """The collection's name: as set, else ``benchd-<namespace>`` made a valid Chroma name."""
    if config.collection:
        return config.collection
    safe = re.sub(r"[^A-Za-z0-9._-]", "-", config.namespace)
    name = f"benchd-{safe}".rstrip("._-")
    return name if _NAME.match(name) else name + "-0"


_KEY = "sent as `auth_header` (`x-chroma-token`) with `auth_prefix` (empty)"
_OWN_ONLY = " (benchd's own collection)"
_WRITES = "records per write, writes in flight, deletes in flight"


@dataclass(frozen=True, slots=True)
class ChromaConfig(UrlKeyCommon, VectorSettings):
    """``[probe.target]`` keys for ``kind = "chroma"``."""

    starter: ClassVar[Starter] = Starter(
        "Chroma's v2 HTTP API (chroma run, Chroma Cloud)",
        (
            ("url", "http://127.0.0.1:8000", "base URL of the Chroma server"),
            ("tenant", "default_tenant", "Chroma tenant"),
            ("database", "default_database", "Chroma database"),
            ("collection", "", "default benchd-<namespace>; a shared collection's name"),
            ("distance", "cosine", "cosine | l2 | ip" + _OWN_ONLY),
            *vector_starter_keys("collection"),
        ),
        (EMBED_STARTER,),
    )

    url: str = field(metadata=key("e.g. `http://127.0.0.1:8000`", http_url_problem))
    embed: EmbedConfig
    tenant: str = field(default="default_tenant", metadata=key(""))
    database: str = field(default="default_database", metadata=key(""))
    collection: str = field(
        default="",
        metadata=key(
            "looked up by name, its id cached; required with `shared = true`",
            _name_problem,
            shown="`benchd-<namespace>`",
        ),
    )
    shared: bool = field(default=False, metadata=key(""))
    namespace_key: str = field(
        default="benchd_namespace",
        metadata=key(
            "the metadata key every record benchd writes carries, and every "
            "get/query/delete filters on"
        ),
    )
    distance: Literal["cosine", "l2", "ip"] = field(
        default="cosine", metadata=key("the own collection's `hnsw:space`")
    )
    ef_search: int | None = field(
        default=None,
        metadata=key(
            "own collection only: HNSW's search breadth (`hnsw:search_ef`); a changed value "
            "is set in place on the existing collection, no re-seed",
            _optional_positive,
            shown="Chroma's (100)",
        ),
    )
    ef_construction: int | None = field(
        default=None,
        metadata=key(
            "own collection only, at creation (`hnsw:construction_ef`)",
            _optional_positive,
            shown="Chroma's (100)",
        ),
    )
    namespace: str = field(default="benchd-eval", metadata=check(namespace_problem))
    cleanup: Literal["before", "after", "never"] = "never"
    adopt_namespace: bool = False
    batch_size: int = field(default=300, metadata=key(_WRITES, positive_problem))
    concurrency: int = field(default=2, metadata=key(_WRITES, concurrency_problem))
    delete_concurrency: int = field(default=4, metadata=key(_WRITES, concurrency_problem))
    api_key_env: str | None = field(default=None, metadata=key(_KEY))
    api_key_file: str | None = field(default=None, metadata=key(_KEY))
    auth_header: str = "x-chroma-token"
    auth_prefix: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = field(default=10.0, metadata=check(positive_problem))
    max_retries: int = field(default=3, metadata=check(non_negative_problem))
    backoff_s: float = field(default=0.25, metadata=check(non_negative_problem))
    max_retry_after_s: float = field(default=30.0, metadata=check(non_negative_problem))
    max_response_bytes: int = field(
        default=DEFAULT_MAX_RESPONSE_BYTES, metadata=check(positive_problem)
    )
    searchable_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.shared and not self.collection:
            raise ValueError("shared = true needs collection: the name of the shared collection")
        if not self.namespace_key or self.namespace_key.startswith("#"):
            raise ValueError("namespace_key: a metadata key, not empty and not starting with #")
        if self.shared and (self.ef_search is not None or self.ef_construction is not None):
            raise ValueError(
                "ef_search and ef_construction apply to benchd's own collection only: a shared "
                "collection keeps its owner's HNSW settings (remove them, or set shared = false)"
            )


class ChromaIO:
    """The collection and its records over Chroma's v2 API; knows nothing of ownership.

    Every call goes through benchd's one HTTP client (retries, bounded
    answers, the error map); every records call carries the namespace filter.
    """

    def __init__(
        self,
        config: ChromaConfig,
        auth: dict[str, str],
        embed: EmbedStage,
        connect: Connect | None = None,
    ) -> None:
        self.config = config
        self.embed = embed
        self.base, self.client, self.http = open_clients(
            config, auth, connect, context=ErrorContext(api="a Chroma server")
        )
        self.name = collection_name(config)
        t, d = quote(config.tenant, safe=""), quote(config.database, safe="")
        self._collections = f"/api/v2/tenants/{t}/databases/{d}/collections"
        self._id: str | None = None
        self._dims: int | None = None
        self.where = f"chroma collection {self.name} at {self.base}"
        self.handles = Handles(self.where, self._forget)

    async def _forget(self) -> None:
        """The collection's id and dimensions: it is looked up by name again."""
        self._id = self._dims = None

    @property
    def filter(self) -> dict[str, Any]:
        return {self.config.namespace_key: self.config.namespace}

    async def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        answer = await self.http.request(method, path, **kwargs)
        return await decode(answer.body, f"{method} {self.base}{path}")

    async def _on_records(
        self, cid: str, op: str, body: Mapping[str, Any], *, answer: bool = True
    ) -> Any:
        """``POST .../collections/<cid>/<op>``, its answer decoded (``answer``); a 404 forgets
        the collection's id (deleted or recreated, or the server came back empty)."""
        path = self._records(cid, op)
        try:
            sent = await self.http.request("POST", path, json=body)
        except TargetHTTPError as exc:
            if exc.status == 404:
                await self.handles.stale(exc.message)
            raise
        return await decode(sent.body, f"POST {self.base}{path}") if answer else None

    async def _added(self, cid: str, ids: Sequence[str]) -> None:
        """Check an add stored every record: Chroma's add skips an id the collection holds
        already and answers success all the same, saying nothing of it."""
        body = {"ids": list(ids), "where": self.filter, "include": []}
        got = await self._on_records(cid, "get", body)
        stored = {sid for sid, _ in _id_meta(got, self.where, len(ids))}
        dropped = [sid for sid in ids if sid not in stored]
        if not dropped:
            return
        body = {"ids": dropped, "include": []}  # no namespace filter: ids only, whose they are
        held = len(_id_meta(await self._on_records(cid, "get", body), self.where, len(dropped)))
        said = f"{self.where}: the add stored {len(ids) - len(dropped)} of {len(ids)} records"
        if not held:  # not there at all: the verify reads the namespace back and counts them
            log.warning("chroma answered an add it did not store", store=said, missing=len(dropped))
            return
        raise OwnershipError(
            f"{said} and answered success: Chroma's add keeps a record it holds under the same "
            f"id and drops the new one, and {held} of these ids are held outside benchd's "
            f"namespace {self.config.namespace!r} (another tenant's records, which benchd never "
            "overwrites): choose another namespace or collection"
        )

    # -- the collection ---------------------------------------------------------------

    async def lookup(self) -> dict[str, Any] | None:
        """The collection as Chroma describes it, or None if there is none of that name."""
        path = f"{self._collections}/{quote(self.name, safe='')}"
        answer = await self.http.request_allowing("GET", path, allow=(404,))
        if answer.status == 404:
            return None
        found: Any = await decode(answer.body, f"GET {self.base}{path}")
        if not isinstance(found, dict) or not isinstance(found.get("id"), str):
            raise TargetProtocolError(f"{self.where}: the collection answer has no id")
        self._check_mark(found)
        self._id = found["id"]
        await self._apply_ef_search(found)
        dims = found.get("dimension")
        self._dims = dims if isinstance(dims, int) and not isinstance(dims, bool) else None
        return found

    def _check_mark(self, found: Mapping[str, Any]) -> None:
        if self.config.shared:
            return
        meta = found.get("metadata")
        owner = meta.get(OWNER_META) if isinstance(meta, dict) else None
        check_collection_owner(
            self.where, self.config.namespace, owner, never="writes into or deletes"
        )

    async def collection_id(self, dims: int | None) -> str | None:
        """The collection's id, creating (own) it for ``dims`` when asked; None if absent."""
        if self._id is None and await self.lookup() is None:
            if self.config.shared:
                raise shared_collection_missing(self.where)
            if dims is None:
                return None
            await self._create()
        if dims is not None and self._dims is not None and self._dims != dims:
            await self._dims_changed(dims)
        return self._id

    async def _apply_ef_search(self, found: Mapping[str, Any]) -> None:
        """Set the own collection's ``ef_search`` in place when it differs from the config's."""
        wanted = self.config.ef_search
        if self.config.shared or wanted is None:
            return
        configuration = found.get("configuration_json")
        hnsw = configuration.get("hnsw") if isinstance(configuration, dict) else None
        if isinstance(hnsw, dict) and hnsw.get("ef_search") == wanted:
            return
        path = f"{self._collections}/{quote(str(found['id']), safe='')}"
        await self.http.request(
            "PUT", path, json={"new_configuration": {"hnsw": {"ef_search": wanted}}}
        )
        log.info("set ef_search on benchd's own collection", collection=self.name, ef_search=wanted)

    async def _create(self) -> None:
        metadata: dict[str, Any] = {
            OWNER_META: self.config.namespace, "hnsw:space": _SPACES[self.config.distance]
        }
        if self.config.ef_search is not None:
            metadata["hnsw:search_ef"] = self.config.ef_search
        if self.config.ef_construction is not None:
            metadata["hnsw:construction_ef"] = self.config.ef_construction
        body = {"name": self.name, "metadata": metadata, "get_or_create": True}
        created = await self._json("POST", self._collections, json=body)
        if not isinstance(created, dict) or not isinstance(created.get("id"), str):
            raise TargetProtocolError(f"{self.where}: the create answer has no id")
        self._check_mark(created)
        await self._apply_ef_search(created)  # get_or_create may answer a collection made apart
        self._id, self._dims = created["id"], None

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
        await self.http.request("DELETE", f"{self._collections}/{quote(self.name, safe='')}")
        self._id = self._dims = None
        await self._create()

    def _records(self, cid: str, op: str) -> str:
        return f"{self._collections}/{cid}/{op}"

    # -- records -----------------------------------------------------------------------

    @fresh_after_restart
    async def page(self, cursor: str | None, limit: int) -> tuple[list[Marked], str | None]:
        """Up to ``limit`` records of the namespace from offset ``cursor`` (Chroma pages so)."""
        cid = await self.collection_id(None)
        if cid is None:
            return [], None
        offset = int(cursor or 0)
        body = {"where": self.filter, "include": ["metadatas"], "limit": limit, "offset": offset}
        got = await self._on_records(cid, "get", body)
        rows = _id_meta(got, self.where, limit)
        return rows, (str(offset + len(rows)) if len(rows) == limit else None)

    @fresh_after_restart
    async def rows(self, ids: Sequence[str]) -> list[Marked]:
        cid = await self.collection_id(None)
        if cid is None or not ids:
            return []
        body = {"ids": list(ids), "where": self.filter, "include": ["metadatas"]}
        got = await self._on_records(cid, "get", body)
        return _id_meta(got, self.where, len(ids))

    @fresh_after_restart
    async def holders(self, ids: Sequence[str]) -> dict[str, bool]:
        """Which of ``ids`` the collection holds in any namespace: True where benchd's."""
        cid = await self.collection_id(None)
        if cid is None or not ids:
            return {}
        body = {"ids": list(ids), "include": ["metadatas"]}
        got = await self._on_records(cid, "get", body)
        key, ns = self.config.namespace_key, self.config.namespace
        return {sid: meta.get(key) == ns for sid, meta in _id_meta(got, self.where, len(ids))}

    @fresh_after_restart
    async def write(self, rows: Sequence[Row]) -> None:
        """Replace benchd's records with these ids in its namespace: delete (filtered), add."""
        dims = len(rows[0][3]) if rows else None
        cid = await self.collection_id(dims)
        if cid is None or not rows:
            return
        ids = [r[0] for r in rows]
        await self._on_records(cid, "delete", {"ids": ids, "where": self.filter}, answer=False)
        body = {
            "ids": ids,
            "documents": [r[1] for r in rows],
            "metadatas": [{**r[2], **self.filter} for r in rows],
            "embeddings": [[float(x) for x in r[3]] for r in rows],
        }
        await self._on_records(cid, "add", body, answer=False)
        self._dims = dims
        await self._added(cid, ids)

    @fresh_after_restart
    async def delete(self, store_id: str) -> bool:
        cid = await self.collection_id(None)
        if cid is None:
            return False
        body = {"ids": [store_id], "where": self.filter}
        answer = await self._on_records(cid, "delete", body)
        deleted = answer.get("deleted") if isinstance(answer, dict) else None
        return not isinstance(deleted, int) or deleted > 0  # older servers answer {}

    @fresh_after_restart
    async def delete_many(self, store_ids: Sequence[str]) -> int:
        """One ``delete`` for the set, filtered on benchd's namespace like every delete."""
        cid = await self.collection_id(None)
        if cid is None:
            return 0
        body = {"ids": list(store_ids), "where": self.filter}
        answer = await self._on_records(cid, "delete", body)
        deleted = answer.get("deleted") if isinstance(answer, dict) else None
        return deleted if isinstance(deleted, int) else len(store_ids)  # older servers: {}

    def search_request(self, cid: str, vector: Sequence[float], limit: int) -> dict[str, Any]:
        return {
            "query_embeddings": [[float(x) for x in vector]],
            "n_results": limit,
            "where": self.filter,
            "include": ["distances"],
        }

    @fresh_after_restart
    async def search(self, vector: Sequence[float], limit: int) -> list[Scored]:
        cid = await self.collection_id(None)
        if cid is None:
            return []
        got = await self._on_records(cid, "query", self.search_request(cid, vector, limit))
        return hits_of(got, self.where, limit, self.config.distance)

    async def aclose(self) -> None:
        await self.http.aclose()


def _id_meta(got: Any, where: str, limit: int) -> list[Marked]:
    if not isinstance(got, dict) or not isinstance(got.get("ids"), list):
        raise TargetProtocolError(f"{where}: a get answer without an ids list")
    ids = got["ids"][:limit]
    metas = got.get("metadatas") or [None] * len(ids)
    if not isinstance(metas, list):
        raise TargetProtocolError(f"{where}: metadatas is not a list")
    out: list[Marked] = []
    for i, sid in enumerate(ids):
        if not isinstance(sid, str):
            raise TargetProtocolError(f"{where}: a listed id is not a string")
        meta = metas[i] if i < len(metas) and isinstance(metas[i], dict) else {}
        out.append((sid, {k: v for k, v in meta.items() if _small(v)}))
    return out


def _small(value: Any) -> bool:
    return not isinstance(value, str) or len(value) <= MAX_META_CHARS


def hits_of(got: Any, where: str, limit: int, distance: str) -> list[Scored]:
    """Ids and scores (higher is better) from a query answer's first row, at most ``limit``."""
    try:
        ids = got["ids"][0][:limit]
        dists = (got.get("distances") or [[None] * len(ids)])[0]
    except (KeyError, IndexError, TypeError, AttributeError):
        raise TargetProtocolError(f"{where}: a query answer without ids[0]") from None
    if not isinstance(ids, list):  # "ids": "abc" would read as the id "a"
        raise TargetProtocolError(f"{where}: a query answer whose ids[0] is not a list")
    out: list[Scored] = []
    for i, sid in enumerate(ids):
        if not isinstance(sid, str):
            raise TargetProtocolError(f"{where}: a ranked id is not a string")
        d = dists[i] if isinstance(dists, list) and i < len(dists) else None
        if isinstance(d, int | float) and not isinstance(d, bool) and abs(d) < 1e30:
            out.append((sid, -float(d) if distance == "l2" else 1.0 - float(d)))
        else:
            out.append((sid, None))
    return out



class ChromaStore(VectorStore):
    """The ``chroma`` kind behind the store seam."""

    config: ChromaConfig
    kind = KIND

    def __init__(
        self,
        config: ChromaConfig,
        api_key: str | None,
        embed: EmbedStage | None = None,
        connect: Connect | None = None,
    ) -> None:
        stage = embed or embed_stage(config.embed, config)
        auth = {config.auth_header: config.auth_prefix + api_key} if api_key else {}
        io = ChromaIO(config, auth, stage, connect)
        where = f"{redact.public_url(io.base)} collection {io.name}"
        super().__init__(io, stage, where, config, delete_concurrency=config.delete_concurrency)
        self.chroma = io

    @classmethod
    def capabilities_for(cls, settings: ChromaConfig) -> Capabilities:
        """Lists, writes and deletes its namespace's records; the sentinel keeps the lease."""
        return Capabilities(
            lists=True, writes=True, deletes=True, lease=True, owned_ids=True, scores=True,
            holders=True,
            full_answers=True,
            retries=True, bulk_deletes=BULK_DELETE,
        )  # fmt: skip

    @classmethod
    def probe_target(
        cls,
        settings: ChromaConfig,
        secret: Secret | None,
        *,
        lease: LeaseHolder | None = None,
        write_rate: WriteRate | None = None,
    ) -> ProbeTarget:
        """The ``chroma`` kind: the shared namespace flow over a store of these settings."""
        store = cls(settings, secret.reveal() if secret is not None else None)
        return NamespaceFlow(store, lease=lease, write_rate=write_rate)

    @property
    def retries(self) -> int:
        return self.chroma.http.retries

    @property
    def retry_wait_s(self) -> float:
        return self.chroma.http.retry_wait_s
