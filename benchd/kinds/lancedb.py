"""The ``lancedb`` kind: LanceDB, embedded, through its own client (``benchd[lancedb]``).

Settings (``[probe.target]``, ``kind = "lancedb"``)::

    path = "/var/lib/benchd/lancedb"  # the database: a local directory, opened in-process
    table = ""                         # default "benchd_<namespace>"
    shared = false                     # false: benchd's own table; true: an existing one
    distance = "cosine"                # cosine | l2 | ip
    [probe.target.embed]
    model = "minilm"

LanceDB is a library over files, not a server: benchd opens the directory
in its own process (the async client, no thread of benchd's), and so can
another process beside it (another benchd, the table's other tenants):
every commit is atomic and every read sees the latest version (read
consistency interval 0), so a second writer's lease is seen at once.

Columns (names configurable, for a shared table): ``id`` (benchd's owned id,
:mod:`benchd.store.owned`, kept as is), ``namespace``, ``content``,
``benchd`` (benchd's flat mark as JSON text) and ``vector``. A record is
benchd's when its ``namespace`` is benchd's; ids are not unique in a Lance
table, so every write merges on (``id``, ``namespace``) and another
tenant's row under one of benchd's ids is never replaced: the flow reads
the ids first (:meth:`LancedbIO.holders`) and refuses to write at all.

**Own table**: benchd creates it with the schema metadata ``benchd_owner =
<namespace>``, refuses a table of that name without it, and drops and
recreates only that one when the embedder's dimensions change. **Shared
table**: it must exist with the columns above; benchd never creates, alters
or drops it. Every listing, search and delete filters on ``namespace``.

No vector index is created: a search of benchd's own table is an exact
(flat) scan of the namespace. A shared table's own index is used as it is.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import anyio

from benchd.config.kinds import CommonSettings, Starter
from benchd.config.schema import check, concurrency_problem
from benchd.config.secrets import Secret
from benchd.embed.config import EmbedConfig
from benchd.errors import TargetError, TargetProtocolError, TargetTimeout, TargetUnreachable
from benchd.http.client import positive_problem
from benchd.http.messages import words
from benchd.kinds.vectors import (
    BULK_DELETE,
    EMBED_STARTER,
    MAX_STORE_ID,
    Marked,
    Row,
    Scored,
    VectorSettings,
    VectorStore,
    check_collection_owner,
    embed_stage,
    import_off_loop,
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
    "EXTRA",
    "KIND",
    "OWNER_META",
    "LancedbConfig",
    "LancedbIO",
    "LancedbStore",
    "literal",
    "table_name",
]

KIND = "lancedb"
EXTRA = "lancedb"
OWNER_META = "benchd_owner"
log = get_logger("benchd.targets.lancedb")

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$")
_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_DISTANCES = {"cosine": "cosine", "l2": "l2", "ip": "dot"}
MAX_MARK_CHARS = 16_384  # benchd's mark as JSON (the lease is ~250 characters)
MAX_META_CHARS = 4096  # one value of it benchd keeps
LOG_LEVEL = "error"
"""LanceDB's own (Rust) log level unless ``LANCEDB_LOG`` says otherwise: its warnings
("No existing dataset ... it will be created") would reach benchd's stderr unstructured."""


def _name_problem(value: str) -> str | None:
    if not value or _NAME.match(value):
        return None
    return "must be 1-255 characters of letters, digits, _ . - (a LanceDB table name)"


def _column_problem(value: str) -> str | None:
    return None if _COLUMN.match(value) else "must be a column name (letters, digits, _)"


def _path_problem(value: str) -> str | None:
    if not value:
        return "must name the database's directory"
    if "://" in value:
        return "must be a local directory (object stores and LanceDB Cloud are not supported)"
    return None


def table_name(config: LancedbConfig) -> str:
    """As set, else ``benchd_<namespace>`` with every other character made ``_``."""
    if config.table:
        return config.table
    return "benchd_" + re.sub(r"[^A-Za-z0-9_]", "_", config.namespace)


@dataclass(frozen=True, slots=True)
class LancedbConfig(VectorSettings):
    """``[probe.target]`` keys for ``kind = "lancedb"``."""

    starter: ClassVar[Starter] = Starter(
        "LanceDB, embedded in benchd's process (benchd[lancedb])",
        (
            ("path", "./lancedb-data", "the database directory (created if absent)"),
            ("table", "", "default benchd_<namespace>; a shared table's name"),
            ("distance", "cosine", "cosine | l2 | ip (benchd's own table)"),
            *vector_starter_keys("table"),
        ),
        (EMBED_STARTER,),
    )  # fmt: skip

    path: str = field(metadata=check(_path_problem))
    embed: EmbedConfig
    table: str = field(default="", metadata=check(_name_problem))
    shared: bool = False
    id_column: str = field(default="id", metadata=check(_column_problem))
    namespace_column: str = field(default="namespace", metadata=check(_column_problem))
    content_column: str = field(default="content", metadata=check(_column_problem))
    mark_column: str = field(default="benchd", metadata=check(_column_problem))
    vector_column: str = field(default="vector", metadata=check(_column_problem))
    distance: Literal["cosine", "l2", "ip"] = "cosine"
    namespace: str = field(default="benchd-eval", metadata=check(namespace_problem))
    cleanup: Literal["before", "after", "never"] = "never"
    adopt_namespace: bool = False
    batch_size: int = field(default=500, metadata=check(positive_problem))
    concurrency: int = field(default=2, metadata=check(concurrency_problem))
    timeout_s: float = field(default=10.0, metadata=check(positive_problem))
    searchable_timeout_s: float = 30.0

    def common(self) -> CommonSettings:
        return CommonSettings(
            namespace=self.namespace,
            url=None,  # embedded: the store is in-process
            cleanup=self.cleanup,
            adopt_namespace=self.adopt_namespace,
        )

    def __post_init__(self) -> None:
        if self.shared and not self.table:
            raise ValueError("shared = true needs table: the name of the shared table")
        columns = [self.id_column, self.namespace_column, self.content_column,
                   self.mark_column, self.vector_column]  # fmt: skip
        if len(set(columns)) != len(columns):
            raise ValueError("id_column, namespace_column, content_column, mark_column and "
                             "vector_column must be five different columns")  # fmt: skip


def literal(text: str) -> str:
    """A SQL string literal for a LanceDB filter (``'`` doubled; no control characters)."""
    if any(ord(ch) < 32 or ch == "\x7f" for ch in text):
        raise TargetProtocolError(f"a control character in {text!r} cannot go into a filter")
    return "'" + text.replace("'", "''") + "'"


def _q(column: str) -> str:
    """A column as a filter names it: quoted, so that ``and`` or ``not`` is a column."""
    return f"`{column}`"


def _missing(text: str) -> bool:
    """LanceDB's answer for a table that is not (or no longer) there."""
    low = text.lower()
    return "was not found" in low or "not found:" in low or "no such file" in low


def error_of(exc: BaseException, where: str) -> TargetError:
    """A LanceDB (Lance, Arrow, OS) error as benchd's: bounded text and a kind."""
    text = words(str(exc)) or type(exc).__name__  # masked before it is cut
    low = text.lower()
    if "permission denied" in low or "read-only file system" in low:
        return TargetUnreachable(f"{where}: the database directory refused benchd ({text})")
    if "timed out" in low or "timeout" in low:
        return TargetTimeout(f"{where}: no answer in time ({text})")
    return TargetProtocolError(f"{where}: {type(exc).__name__}: {text}")


class LancedbIO:
    """The table and its rows through LanceDB's async client; knows nothing of ownership."""

    def __init__(self, config: LancedbConfig, embed: EmbedStage) -> None:
        self.config = config
        self.embed = embed
        self.name = table_name(config)
        self._db: Any = None
        self._query: Any = None  # lancedb.query (its ColumnOrdering)
        self._pa: Any = None  # pyarrow, which lancedb brings
        self._table: Any = None  # the open table, once looked up (or created)
        self._dims: int | None = None
        self._one_write = anyio.Lock()  # one commit at a time from this process
        self.where = f"lancedb table {self.name} at {config.path}"
        self.handles = Handles(self.where, self._forget)

    async def _forget(self) -> None:
        """The table looked up: it was dropped (or replaced) under benchd."""
        self._table = None

    async def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One client call, bounded in time (the call is dropped), its errors made benchd's."""
        try:
            with anyio.fail_after(self.config.timeout_s):
                return await fn(*args, **kwargs)
        except TimeoutError:
            raise TargetTimeout(f"{self.where}: {what}: no answer in time") from None
        except TargetError:
            raise
        except Exception as exc:  # LanceDB raises ValueError, RuntimeError, OSError alike
            error = error_of(exc, f"{self.where}: {what}")
            if self._table is not None and _missing(str(exc)):
                await self.handles.stale(error.message)
            raise error from None

    async def db(self) -> Any:
        if self._db is None:
            os.environ.setdefault("LANCEDB_LOG", LOG_LEVEL)  # read when the library loads
            module = await import_off_loop("lancedb", EXTRA, self.where)
            self._query = await import_off_loop("lancedb.query", EXTRA, self.where)
            self._pa = await import_off_loop("pyarrow", EXTRA, self.where)
            self._db = await self._call(
                "open", module.connect_async, self.config.path,
                read_consistency_interval=timedelta(0),
            )  # fmt: skip
        return self._db

    @property
    def filter(self) -> str:
        """``namespace = '<namespace>'``: on every listing, search and delete."""
        return f"{_q(self.config.namespace_column)} = {literal(self.config.namespace)}"

    def _ids_filter(self, ids: Sequence[str]) -> str:
        listed = ", ".join(literal(i) for i in ids)
        return f"{self.filter} AND {_q(self.config.id_column)} IN ({listed})"

    # -- the table ------------------------------------------------------------------------

    async def lookup(self) -> bool:
        """Whether the table exists; checks benchd's mark (own) and learns its dims."""
        db = await self.db()
        try:
            table = await self._call("open table", db.open_table, self.name)
        except TargetProtocolError as exc:
            if _missing(exc.message):
                return False
            raise
        schema = await self._call("schema", table.schema)
        self._check_mark(schema.metadata or {})
        self._dims = _vector_dims(schema, self.config.vector_column)
        self._table = table
        return True

    def _check_mark(self, metadata: Mapping[bytes, bytes]) -> None:
        if self.config.shared:
            return
        raw = metadata.get(OWNER_META.encode())
        owner = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else None
        check_collection_owner(
            self.where, self.config.namespace, owner, never="writes into or drops"
        )

    async def ready(self, dims: int | None) -> Any:
        """The table (None where there is none yet), creating (own) it for ``dims`` when asked."""
        if self._table is None and not await self.lookup():
            if self.config.shared:
                raise TargetProtocolError(
                    f"{self.where} does not exist; with shared = true benchd never creates "
                    "a table: create it, or set shared = false"
                )
            if dims is None:
                return None
            await self._create(dims)
        if dims is not None and self._dims not in (None, dims):
            await self._dims_changed(dims)
        return self._table

    def _schema(self, dims: int) -> Any:
        c, pa = self.config, self._pa
        return pa.schema(
            [pa.field(c.id_column, pa.string(), nullable=False),
             pa.field(c.namespace_column, pa.string(), nullable=False),
             pa.field(c.content_column, pa.string()),
             pa.field(c.mark_column, pa.string()),
             pa.field(c.vector_column, pa.list_(pa.float32(), dims))],
            metadata={OWNER_META: c.namespace},
        )  # fmt: skip

    async def _create(self, dims: int) -> None:
        db = await self.db()
        try:
            self._table = await self._call(
                "create table", db.create_table, self.name, schema=self._schema(dims)
            )
            self._dims = dims
        except TargetProtocolError as exc:
            if "already exists" not in exc.message.lower() or not await self.lookup():
                raise  # else another process created it meanwhile: its mark was checked

    async def _dims_changed(self, dims: int) -> None:
        if self.config.shared:
            raise TargetProtocolError(
                f"{self.where} holds vectors of {self._dims} dimensions, the embedder "
                f"{self.embed.label} gives {dims}; benchd never changes a shared table"
            )
        log.warning(
            "embedder dimensions changed: recreating benchd's own table",
            table=self.name, was=self._dims, now=dims,
        )  # fmt: skip
        db = await self.db()
        self._table = None
        await self._call("drop table", db.drop_table, self.name)
        await self._create(dims)

    # -- rows -----------------------------------------------------------------------------

    def _columns(self, *, mark: bool) -> dict[str, str]:
        """The id (and mark) columns as a read answers them: cut one past benchd's bound, so
        that a row of megabytes is never handed over whole (and is refused, or not trusted)."""
        c = self.config
        out = {c.id_column: f"left({_q(c.id_column)}, {MAX_STORE_ID + 1})"}
        if mark:
            out[c.mark_column] = f"left({_q(c.mark_column)}, {MAX_MARK_CHARS + 1})"
        return out

    async def _rows_where(self, where: str, columns: dict[str, str], limit: int) -> list[Any]:
        table = await self.ready(None)
        if table is None:
            return []
        query = table.query().where(where).select(columns).limit(limit)
        found = await self._call("query", query.to_arrow)
        return list(found.to_pylist())[:limit]

    @fresh_after_restart
    async def page(self, cursor: str | None, limit: int) -> tuple[list[Marked], str | None]:
        """Up to ``limit`` rows of the namespace with ids after ``cursor``, in id order."""
        if cursor is None:
            self._table = None  # each listing looks the table up again (its owner mark)
        table = await self.ready(None)
        if table is None:
            return [], None
        c = self.config
        query = (
            table.query()
            .where(f"{self.filter} AND {_q(c.id_column)} > {literal(cursor or '')}")
            .select(self._columns(mark=True))
            .order_by([self._query.ColumnOrdering(column_name=c.id_column)])
            .limit(limit)
        )
        rows = (await self._call("query", query.to_arrow)).to_pylist()[:limit]
        listed = [self._marked(row) for row in rows]
        return listed, (listed[-1][0] if len(listed) == limit else None)

    def _marked(self, row: Mapping[str, Any]) -> Marked:
        sid = row.get(self.config.id_column)
        if not isinstance(sid, str):
            raise TargetProtocolError(f"{self.where}: a row without a string id")
        if len(sid) > MAX_STORE_ID:
            raise TargetProtocolError(
                f"{self.where}: an id of more than {MAX_STORE_ID} characters: not benchd's"
            )
        return sid, _mark(row.get(self.config.mark_column))

    @fresh_after_restart
    async def rows(self, ids: Sequence[str]) -> list[Marked]:
        if not ids:
            return []
        found = await self._rows_where(
            self._ids_filter(ids), self._columns(mark=True), 2 * len(ids)
        )
        wanted, seen = set(ids), set[str]()
        out: list[Marked] = []
        for sid, mark in map(self._marked, found):
            if sid in wanted and sid not in seen:
                seen.add(sid)
                out.append((sid, mark))
        return out

    @fresh_after_restart
    async def holders(self, ids: Sequence[str]) -> dict[str, bool]:
        """Which of ``ids`` have a row in any namespace: True where every such row is benchd's."""
        if not ids:
            return {}
        c = self.config
        listed = ", ".join(literal(i) for i in ids)
        theirs = (f"{_q(c.id_column)} IN ({listed}) AND ({_q(c.namespace_column)} IS NULL "
                  f"OR {_q(c.namespace_column)} <> {literal(c.namespace)})")  # fmt: skip
        foreign = await self._rows_where(theirs, self._columns(mark=False), len(ids))
        mine = await self._rows_where(
            self._ids_filter(ids), self._columns(mark=False), 2 * len(ids)
        )
        wanted = set(ids)
        out = {r[c.id_column]: True for r in mine if r.get(c.id_column) in wanted}
        out.update({r[c.id_column]: False for r in foreign if r.get(c.id_column) in wanted})
        return out

    @fresh_after_restart
    async def write(self, rows: Sequence[Row]) -> None:
        """Insert or replace benchd's rows, matched on (id, namespace): never another's."""
        if not rows:
            return
        table = await self.ready(len(rows[0][3]))
        c = self.config
        data = self._arrow(rows)
        merge = (
            table.merge_insert([c.id_column, c.namespace_column])
            .when_matched_update_all()
            .when_not_matched_insert_all()
        )
        async with self._one_write:
            await self._call("merge_insert", merge.execute, data)

    def _arrow(self, rows: Sequence[Row]) -> Any:
        c, pa, dims = self.config, self._pa, len(rows[0][3])
        columns = {
            c.id_column: pa.array([r[0] for r in rows], pa.string()),
            c.namespace_column: pa.array([c.namespace] * len(rows), pa.string()),
            c.content_column: pa.array([r[1] for r in rows], pa.string()),
            c.mark_column: pa.array([json.dumps(r[2], sort_keys=True) for r in rows], pa.string()),
            c.vector_column: pa.array([[float(x) for x in r[3]] for r in rows],
                                      pa.list_(pa.float32(), dims)),
        }  # fmt: skip
        return pa.table(columns)

    @fresh_after_restart
    async def delete(self, store_id: str) -> bool:
        return await self.delete_many([store_id]) > 0

    @fresh_after_restart
    async def delete_many(self, store_ids: Sequence[str]) -> int:
        """One filtered delete for the set (namespace and ids); how many were there."""
        found = await self.rows(store_ids)
        table = self._table
        if not found or table is None:
            return 0
        async with self._one_write:
            await self._call("delete", table.delete, self._ids_filter([s for s, _ in found]))
        return len(found)

    @fresh_after_restart
    async def search(self, vector: Sequence[float], limit: int) -> list[Scored]:
        table = await self.ready(None)
        if table is None:
            return []
        c = self.config
        query = (
            table.query()
            .nearest_to([float(x) for x in vector])
            .column(c.vector_column)
            .distance_type(_DISTANCES[c.distance])
            .where(self.filter)
            .select({**self._columns(mark=False), "_distance": "_distance"})
            .limit(limit)
        )
        found = (await self._call("search", query.to_arrow)).to_pylist()[:limit]
        return [self._hit(row) for row in found]

    def _hit(self, row: Mapping[str, Any]) -> Scored:
        """The row's id and score (higher is better): LanceDB answers a distance, cosine's
        and dot's as ``1 - similarity``, l2's as the squared distance."""
        sid, _ = self._marked(row)
        d = row.get("_distance")
        if not isinstance(d, int | float) or isinstance(d, bool) or not math.isfinite(d):
            return sid, None
        return sid, (-float(d) if self.config.distance == "l2" else 1.0 - float(d))

    async def aclose(self) -> None:
        table, db = self._table, self._db
        self._table = self._db = None
        for handle in (table, db):
            if handle is not None:
                try:
                    handle.close()
                except Exception as exc:  # closing must not fail shutdown
                    log.info("lancedb close failed", error=words(str(exc)))


def _mark(raw: Any) -> dict[str, Any]:
    """benchd's mark from its JSON text; {} where it is not one (too long, not an object)."""
    if not isinstance(raw, str) or len(raw) > MAX_MARK_CHARS:
        return {}
    try:
        mark = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(mark, dict):
        return {}
    return {
        k: v for k, v in mark.items()
        if isinstance(v, str | int | float | bool) and (not isinstance(v, str)
                                                        or len(v) <= MAX_META_CHARS)
    }  # fmt: skip


def _vector_dims(schema: Any, name: str) -> int | None:
    """The fixed size of the vector column, None where there is no such column."""
    try:
        size = schema.field(name).type.list_size
    except (KeyError, AttributeError):
        return None
    return size if isinstance(size, int) and size > 0 else None


class LancedbStore(VectorStore):
    """The ``lancedb`` kind behind the store seam."""

    config: LancedbConfig
    kind = KIND
    client_library = "lancedb"

    def __init__(self, config: LancedbConfig, embed: EmbedStage | None = None) -> None:
        stage = embed or embed_stage(config.embed, config)
        io = LancedbIO(config, stage)
        super().__init__(io, stage, f"lancedb {config.path} table {io.name}", config)



    @classmethod
    def capabilities_for(cls, settings: LancedbConfig) -> Capabilities:
        """Lists, writes and deletes its namespace's rows; reads ids across namespaces; the
        sentinel keeps the lease."""
        return Capabilities(
            lists=True, writes=True, deletes=True, lease=True, owned_ids=True, scores=True,
            holders=True, full_answers=True, bulk_deletes=BULK_DELETE,
        )  # fmt: skip

    @classmethod
    def probe_target(
        cls,
        settings: LancedbConfig,
        secret: Secret | None,
        *,
        lease: LeaseHolder | None = None,
        write_rate: WriteRate | None = None,
    ) -> ProbeTarget:
        """The ``lancedb`` kind: the shared namespace flow over a store of these settings (no
        secret: an embedded store has no credentials)."""
        return NamespaceFlow(cls(settings), lease=lease, write_rate=write_rate)

