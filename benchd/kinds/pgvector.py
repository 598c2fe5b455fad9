"""The ``pgvector`` kind: a PostgreSQL table with a pgvector column, through psycopg 3 (async).

Settings (``[probe.target]``, ``kind = "pgvector"``; the extra ``benchd[pgvector]``)::

    dsn_env = "BENCHD_PG_DSN"   # or dsn_file: the DSN (with its password) is a secret
    table = "benchd_vectors"    # schema-qualified allowed: "probes.benchd_vectors"
    shared = false              # false: benchd's own table; true: share an existing one
    distance = "cosine"         # cosine | l2 | ip
    index = "hnsw"              # hnsw | ivfflat | none (own table only)
    ef_search = 40              # optional: SET hnsw.ef_search on every connection
    probes = 10                 # optional: SET ivfflat.probes
    [probe.target.embed]
    model = "minilm"            # vectors come from benchd's embed stage

**Own table** (``shared = false``): benchd creates the table (``id``,
``namespace``, ``content``, ``metadata`` jsonb, ``embedding vector(N)``), an
index on the vectors and one on ``(namespace, id)``, and marks it as its own
with a table comment naming the namespace. It refuses a table of that name it
did not create. When the embedder's dimensions change it drops and recreates
that table — only a table carrying its mark for this namespace.

**Shared table** (``shared = true``): the table exists and is someone else's;
the column names are settings (``id_column``, ``namespace_column``,
``content_column``, ``vector_column``, ``metadata_column``). benchd never
creates, alters or drops it; a vector column of other dimensions than the
embedder's is an error naming both.

In both modes every statement benchd issues carries ``namespace = %s`` (its
own namespace): a listing, a search, a write (delete-then-insert of benchd's
own ids, in one transaction) and a delete cannot touch another tenant's row,
whatever ids it holds. benchd's mark (fixture id, the digest of the text and
the embedder's label, and on the sentinel the lease) lives in the metadata
column. Errors: a refused connection is ``connect``, a bad password
``auth``, a cancelled statement ``timeout``, any other SQL error ``decode``
(with its SQLSTATE).

A restarted database: a pooled connection idle for half a second is checked
before it is handed out, and a connection error or a missing table forgets the
pool and the table checked, the call then runs once more (recreating benchd's
own table in a database that came back empty).
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal
from urllib.parse import unquote, urlsplit

import anyio

from benchd import redact
from benchd.config.kinds import CommonSettings, Starter, key
from benchd.config.schema import check, concurrency_problem
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
from benchd.http.messages import words
from benchd.kinds.vectors import (
    BULK_DELETE,
    EMBED_STARTER,
    Marked,
    Row,
    Scored,
    VectorSettings,
    VectorStore,
    embed_stage,
    import_off_loop,
    vector_starter_keys,
)
from benchd.logging import get_logger
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
    "PgvectorConfig",
    "PgvectorIO",
    "PgvectorSQL",
    "PgvectorStore",
    "error_of",
    "own_mark",
    "public_dsn",
]

KIND = "pgvector"
EXTRA = "pgvector"
CLIENT_LIBRARY = "psycopg"  # the module its extra brings
log = get_logger("benchd.targets.pgvector")

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_OPS = {"cosine": ("<=>", "vector_cosine_ops"), "l2": ("<->", "vector_l2_ops"),
        "ip": ("<#>", "vector_ip_ops")}  # fmt: skip
_OWN_MARK = "benchd: created by benchd for namespace "
_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE: no transaction left open
MAX_QUERY_TEXTS = 1024  # query vectors kept as text (a fixture's queries; cleared past it)
MAX_SHOWN_ID = 2 * MAX_ID_CHARS  # the longest id a listing or a search reads
MAX_MARK_BYTES = 4096  # the metadata a listing reads per row (a lease is ~250 bytes)
_UNDEFINED_TABLE = "42P01"  # SQLSTATE: the table is not there (a database recreated)
CHECK_IDLE_S = 0.5
"""A pooled connection idle this long is checked before it is handed out; one used more
recently is handed out as is (HikariCP's ``aliveBypassWindowMs`` is 500 ms too), so a
load pass's searches pay no extra round trip while a cycle after an idle interval finds
a restarted server's closed connections before it uses them."""


def _identifier_problem(value: str) -> str | None:
    parts = value.split(".")
    if len(parts) > 2 or not all(_IDENT.match(p) for p in parts):
        return "must be an SQL identifier (letters, digits, _), optionally schema.table"
    return None


def _column_problem(value: str) -> str | None:
    return None if _IDENT.match(value) else "must be an SQL identifier (letters, digits, _)"


def _positive(value: int | float) -> str | None:
    return None if value > 0 else "must be > 0"


def _optional_positive(value: int | None) -> str | None:
    return None if value is None or value > 0 else "must be > 0"


_DSN = ("the DSN, e.g. `postgresql://benchd:PW@db:5432/benchd`; a secret: never in the TOML, "
        "its password masked everywhere")
_ONE = "— (one required)"
_COLUMNS = "a shared table's columns (`metadata` is jsonb: benchd's mark and lease)"
_SET = "`SET hnsw.ef_search` / `SET ivfflat.probes` on every connection"
_WRITES = "rows per write transaction, writes in flight"


@dataclass(frozen=True, slots=True)
class PgvectorConfig(VectorSettings):
    """``[probe.target]`` keys for ``kind = "pgvector"``."""

    starter: ClassVar[Starter] = Starter(
        "PostgreSQL + pgvector through psycopg (benchd[pgvector])",
        (
            ("dsn_env", "BENCHD_PG_DSN", "environment variable holding the DSN (or dsn_file); "
             "its password is masked everywhere, never put it here"),
            ("table", "benchd_vectors", "the table: benchd's own, or a shared one"),
            ("distance", "cosine", "cosine | l2 | ip"),
            ("index", "hnsw", "hnsw | ivfflat | none (benchd's own table only)"),
            *vector_starter_keys("table"),
        ),
        (EMBED_STARTER,),
    )  # fmt: skip

    embed: EmbedConfig
    dsn_env: str | None = field(default=None, metadata=key(_DSN, shown=_ONE))
    dsn_file: str | None = field(default=None, metadata=key(_DSN, shown=_ONE))
    table: str = field(
        default="benchd_vectors", metadata=key("`schema.table` allowed", _identifier_problem)
    )
    shared: bool = field(default=False, metadata=key("see above"))
    id_column: str = field(default="id", metadata=key(_COLUMNS, _column_problem))
    namespace_column: str = field(default="namespace", metadata=key(_COLUMNS, _column_problem))
    content_column: str = field(default="content", metadata=key(_COLUMNS, _column_problem))
    vector_column: str = field(default="embedding", metadata=key(_COLUMNS, _column_problem))
    metadata_column: str = field(default="metadata", metadata=key(_COLUMNS, _column_problem))
    distance: Literal["cosine", "l2", "ip"] = field(
        default="cosine", metadata=key("`cosine` (`<=>`), `l2` (`<->`), `ip` (`<#>`)")
    )
    index: Literal["hnsw", "ivfflat", "none"] = field(
        default="hnsw", metadata=key("`hnsw`, `ivfflat` or `none`, on benchd's own table")
    )
    ef_search: int | None = field(default=None, metadata=key(_SET, _optional_positive))
    probes: int | None = field(default=None, metadata=key(_SET, _optional_positive))
    namespace: str = field(default="benchd-eval", metadata=check(namespace_problem))
    cleanup: Literal["before", "after", "never"] = "never"
    adopt_namespace: bool = False
    batch_size: int = field(default=500, metadata=key(_WRITES, _positive))
    concurrency: int = field(default=2, metadata=key(_WRITES, concurrency_problem))
    pool_size: int = field(
        default=10,
        metadata=key(
            "connections at most (opened on demand; a refused password is `auth` at once, "
            "never retried)",
            concurrency_problem,
        ),
    )
    timeout_s: float = field(
        default=10.0,
        metadata=key("`statement_timeout` and a client-side bound on every call", _positive),
    )
    searchable_timeout_s: float = 30.0

    def common(self) -> CommonSettings:
        """The DSN is the secret (read like an API key: from its variable or file)."""
        return CommonSettings(
            namespace=self.namespace,
            url=None,  # the host is in the secret DSN
            cleanup=self.cleanup,
            adopt_namespace=self.adopt_namespace,
            api_key_env=self.dsn_env,
            api_key_file=self.dsn_file,
            secret_kind="PostgreSQL DSN: a postgresql:// URL with user and password",
        )

    def __post_init__(self) -> None:
        if bool(self.dsn_env) == bool(self.dsn_file):
            raise ValueError(
                "set dsn_env (an environment variable) or dsn_file (a file) holding the "
                "DSN, exactly one: the DSN carries a password, so it is never in the TOML"
            )


def vector_text(vector: Sequence[float]) -> str:
    """pgvector's text form, exact for float32 values."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


class PgvectorSQL:
    """Every statement the kind sends, each scoped to ``namespace = %s``; no I/O here.

    Identifiers come from validated settings (``_identifier_problem``) and are
    double-quoted; values are always bound parameters.
    """

    def __init__(self, config: PgvectorConfig) -> None:
        self.c = config
        self.table = ".".join(f'"{p}"' for p in config.table.split("."))
        self.id, self.ns = f'"{config.id_column}"', f'"{config.namespace_column}"'
        self.text, self.vec = f'"{config.content_column}"', f'"{config.vector_column}"'
        self.meta = f'"{config.metadata_column}"'
        self.op, self.opclass = _OPS[config.distance]

    def create(self, dims: int) -> list[str]:
        """The own table, its indexes and benchd's mark (own mode only)."""
        name = self.c.table.replace(".", "_")
        out = [
            f"CREATE TABLE {self.table} ({self.id} text PRIMARY KEY, {self.ns} text NOT NULL, "
            f"{self.text} text NOT NULL, {self.meta} jsonb NOT NULL DEFAULT '{{}}', "
            f"{self.vec} vector({dims}) NOT NULL)",
            f'CREATE INDEX "{name}_ns_id" ON {self.table} ({self.ns}, {self.id})',
        ]
        if self.c.index != "none":
            out.append(
                f'CREATE INDEX "{name}_vec" ON {self.table} '
                f"USING {self.c.index} ({self.vec} {self.opclass})"
            )
        return out

    def mark_table(self) -> str:
        # COMMENT takes no parameters: the namespace is validated printable and quotes doubled.
        text = (_OWN_MARK + self.c.namespace).replace("'", "''")
        return f"COMMENT ON TABLE {self.table} IS '{text}'"

    def drop(self) -> str:
        return f"DROP TABLE {self.table}"

    describe = (
        "SELECT obj_description(c.oid, 'pg_class'), "
        "(SELECT atttypmod FROM pg_attribute WHERE attrelid = c.oid AND attname = %s "
        "AND NOT attisdropped) FROM pg_class c WHERE c.oid = to_regclass(%s)"
    )

    @property
    def shown_id(self) -> str:
        """An id as read: cut one past the longest id benchd could have written (a longer one,
        another writer's, is refused by :func:`_id` without reading it whole)."""
        return f"left({self.id}::text, {MAX_SHOWN_ID + 1})"

    def listing(self) -> str:
        return (
            f"SELECT {self.shown_id}, left({self.meta}::text, {MAX_MARK_BYTES}) "
            f"FROM {self.table} WHERE {self.ns} = %s AND {self.id} > %s ORDER BY {self.id} "
            "LIMIT %s"
        )

    def read_back(self) -> str:
        return (
            f"SELECT {self.shown_id}, left({self.meta}::text, {MAX_MARK_BYTES}) "
            f"FROM {self.table} WHERE {self.ns} = %s AND {self.id} = ANY(%s)"
        )

    def holders(self) -> str:
        """Ids in any namespace, and whether each row is in benchd's."""
        return f"SELECT {self.shown_id}, {self.ns} = %s FROM {self.table} WHERE {self.id} = ANY(%s)"

    def clear(self) -> str:
        """Before a write: benchd's own ids, in its own namespace only."""
        return f"DELETE FROM {self.table} WHERE {self.ns} = %s AND {self.id} = ANY(%s)"

    def insert(self) -> str:
        return (
            f"INSERT INTO {self.table} ({self.id}, {self.ns}, {self.text}, {self.meta}, "
            f"{self.vec}) VALUES (%s, %s, %s, %s::jsonb, %s::vector)"
        )

    def delete(self) -> str:
        return f"DELETE FROM {self.table} WHERE {self.ns} = %s AND {self.id} = %s"

    def search(self) -> str:
        return (
            # ORDER BY 2: the distance selected, so the vector is sent and parsed once (the
            # planner still takes the ANN index: an Index Scan ordered by the operator)
            f"SELECT {self.shown_id}, {self.vec} {self.op} %s::vector FROM {self.table} "
            f"WHERE {self.ns} = %s ORDER BY 2 LIMIT %s"
        )

    def score(self, distance: float) -> float:
        """A similarity, higher is better: 1 - cosine distance, -L2, the inner product."""
        if self.c.distance == "cosine":
            return 1.0 - distance
        return -distance  # <-> is a distance; <#> is the negative inner product

    def settings(self) -> list[str]:
        out = [f"SET statement_timeout = {int(self.c.timeout_s * 1000)}"]
        if self.c.ef_search is not None:
            out.append(f"SET hnsw.ef_search = {int(self.c.ef_search)}")
        if self.c.probes is not None:
            out.append(f"SET ivfflat.probes = {int(self.c.probes)}")
        return out


def own_mark(namespace: str) -> str:
    """The comment benchd puts on a table it created for ``namespace``."""
    return _OWN_MARK + namespace


def error_of(exc: Exception, where: str) -> TargetError:
    """A psycopg error as benchd's: connect, auth, timeout, or decode with its SQLSTATE."""
    import psycopg

    state = getattr(exc, "sqlstate", None) or ""
    text = words(str(exc).strip().splitlines()[0]) if str(exc).strip() else type(exc).__name__
    if state in ("28P01", "28000") or "password authentication failed" in text:
        return TargetAuthError(f"{where}: the DSN's credentials were refused ({text})")
    if state == "57014":
        return TargetTimeout(f"{where}: statement cancelled after its timeout ({text})")
    if isinstance(exc, psycopg.OperationalError) and not state.startswith(("42", "22", "23")):
        return TargetUnreachable(f"{where}: {text}")
    return TargetProtocolError(f"{where}: SQL error {state or type(exc).__name__}: {text}")


class PgvectorIO:
    """The connection pool and the statements' execution; knows nothing of ownership.

    The flow above decides what is written and deleted; this class only runs
    :class:`PgvectorSQL`'s statements for benchd's namespace, bounded in time
    (``timeout_s`` on the server and around every call) and in rows.
    """

    def __init__(self, config: PgvectorConfig, dsn: str, embed: EmbedStage) -> None:
        self.config = config
        self.sql = PgvectorSQL(config)
        self.embed = embed
        self._dsn = dsn
        self._idle: list[tuple[Any, float]] = []  # open connections not in use, since when
        self._slots = anyio.Semaphore(config.pool_size)
        self._table_dims: int | None = None  # None: not looked at yet
        self._texts: dict[tuple[float, ...], str] = {}  # query vectors as text
        self.where = f"pgvector table {config.table}"
        self.handles = Handles(self.where, self._forget)

    async def _connect(self) -> Any:
        psycopg = await import_off_loop(CLIENT_LIBRARY, EXTRA, self.where)
        conn = await psycopg.AsyncConnection.connect(
            self._dsn,
            autocommit=True,
            connect_timeout=max(2, int(self.config.timeout_s)),
            application_name="benchd",
        )
        for statement in self.sql.settings():
            await conn.execute(statement)
        return conn

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """A pooled connection; every psycopg error and timeout becomes a TargetError.

        At most ``pool_size`` connections, opened on demand in the caller (so a
        refused password is an ``auth`` error at once, never retried in the
        background); one idle for :data:`CHECK_IDLE_S` is checked before it is
        handed out; one that failed or timed out is closed, not reused. A
        connection error or a missing table forgets the pool and the table
        checked (:mod:`benchd.store.handles`): the database restarted.
        """
        psycopg = await import_off_loop(CLIENT_LIBRARY, EXTRA, self.where)
        async with self._slots:
            conn = None
            reusable = False
            try:
                with anyio.fail_after(self.config.timeout_s):
                    conn = await self._checked_idle(psycopg)
                    if conn is None:
                        conn = await self._connect()
                    yield conn
                reusable = not conn.closed and conn.info.transaction_status == _IDLE
            except TimeoutError:
                raise TargetTimeout(
                    f"{self.where}: no answer within {self.config.timeout_s:g}s"
                ) from None
            except psycopg.Error as exc:
                error = error_of(exc, self.where)
                if isinstance(error, TargetUnreachable) or exc.sqlstate == _UNDEFINED_TABLE:
                    await self.handles.stale(error.message)
                raise error from None
            except OSError as exc:
                await self.handles.stale(str(exc))
                raise TargetUnreachable(f"{self.where}: {exc}") from None
            finally:
                if conn is not None:
                    if reusable:
                        self._idle.append((conn, time.monotonic()))
                    else:
                        with anyio.CancelScope(shield=True):
                            await conn.close()

    async def _checked_idle(self, psycopg: Any) -> Any:
        """An idle connection that still answers, or None (none left: open one).

        One idle for :data:`CHECK_IDLE_S` or longer is checked with an empty
        statement first, as psycopg_pool's ``check_connection`` does; one that
        fails it was closed by the server (a restart, an idle timeout): the
        pool is forgotten and a new connection opened.
        """
        while self._idle:
            conn, since = self._idle.pop()
            if time.monotonic() - since < CHECK_IDLE_S:
                return conn
            try:
                await conn.execute("")
            except (psycopg.Error, OSError) as exc:
                with anyio.CancelScope(shield=True):
                    await conn.close()
                await self.handles.stale(f"a pooled connection was closed: {words(str(exc))}")
                continue
            except BaseException:  # the call's timeout, a cancelled cycle: not handed out
                with anyio.CancelScope(shield=True):
                    await conn.close()
                raise
            return conn
        return None

    async def _forget(self) -> None:
        """The pool's idle connections (closed) and the table checked: the database restarted."""
        idle, self._idle = self._idle, []
        self._table_dims = None
        with anyio.CancelScope(shield=True):
            for conn, _ in idle:
                await conn.close()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for conn, _ in idle:
            await conn.close()

    # -- the table ---------------------------------------------------------------

    async def table_state(self) -> tuple[str | None, int | None, bool]:
        """(comment, vector dims, exists) of the configured table."""
        async with self.connection() as conn:
            where = (self.config.vector_column, self.config.table)
            cur = await conn.execute(self.sql.describe, where)
            row = await cur.fetchone()
        if row is None:
            return None, None, False
        comment, typmod = row
        return comment, (int(typmod) if typmod is not None and typmod > 0 else None), True

    async def ensure_table(self, dims: int) -> None:
        """Check (shared) or create/recreate (own) the table for vectors of ``dims``."""
        if self._table_dims == dims:
            return
        comment, have, exists = await self.table_state()
        if self.config.shared:
            self._check_shared(exists, have, dims)
        elif not exists:
            await self._create(dims)
        else:
            self._check_own(comment)
            if have != dims:
                log.warning(
                    "embedder dimensions changed: recreating benchd's own table",
                    table=self.config.table, was=have, now=dims,
                )
                async with self.connection() as conn, conn.transaction():
                    await conn.execute(self.sql.drop())
                await self._create(dims)
        self._table_dims = dims

    def _check_shared(self, exists: bool, have: int | None, dims: int) -> None:
        if not exists:
            raise TargetProtocolError(
                f"{self.where} does not exist; with shared = true benchd never creates a "
                "table: create it, or set shared = false for a table of benchd's own"
            )
        if have != dims:
            raise TargetProtocolError(
                f"{self.where}: column {self.config.vector_column} holds vectors of "
                f"{have or 'unknown'} dimensions, the embedder {self.embed.label} gives {dims}; "
                "benchd never alters a shared table: pick an embedder of that size"
            )

    def _check_own(self, comment: str | None) -> None:
        if comment != own_mark(self.config.namespace):
            whose = (
                "created by benchd for another namespace"
                if (comment or "").startswith(_OWN_MARK)
                else "not created by benchd"
            )
            raise OwnershipError(
                f"{self.where} exists and was {whose} (this probe's namespace is "
                f"{self.config.namespace!r}); benchd never writes into, alters or drops such a "
                "table: set shared = true to share it, or choose another table"
            )

    async def _create(self, dims: int) -> None:
        async with self.connection() as conn, conn.transaction():
            for statement in [*self.sql.create(dims), self.sql.mark_table()]:
                await conn.execute(statement)

    async def exists(self) -> bool:
        """Whether the table is there (an own table: and carries benchd's mark); remembered."""
        if self._table_dims is not None:
            return True
        comment, have, exists = await self.table_state()
        if exists and not self.config.shared:
            self._check_own(comment)
        if exists and have is not None and have == self.embed.dims:
            self._table_dims = have
        return exists

    # -- rows --------------------------------------------------------------------

    @fresh_after_restart
    async def page(self, cursor: str | None, limit: int) -> tuple[list[Marked], str | None]:
        """Up to ``limit`` rows of the namespace with ids after ``cursor``, in id order."""
        if not self.config.shared and not await self.exists():
            return [], None  # benchd's own table, not created yet
        async with self.connection() as conn:
            cur = await conn.execute(
                self.sql.listing(), (self.config.namespace, cursor or "", limit)
            )
            rows = [(self._id(i), _mark(m)) for i, m in await cur.fetchall()]
        return rows, (rows[-1][0] if len(rows) == limit else None)

    @fresh_after_restart
    async def rows(self, ids: Sequence[str]) -> list[Marked]:
        if not ids or (not self.config.shared and not await self.exists()):
            return []
        async with self.connection() as conn:
            cur = await conn.execute(self.sql.read_back(), (self.config.namespace, list(ids)))
            rows = await cur.fetchall()
        return [(self._id(i), _mark(m)) for i, m in rows]

    @fresh_after_restart
    async def holders(self, ids: Sequence[str]) -> dict[str, bool]:
        """Which of ``ids`` the table holds in any namespace: True where benchd's."""
        if not ids or (not self.config.shared and not await self.exists()):
            return {}
        async with self.connection() as conn:
            cur = await conn.execute(self.sql.holders(), (self.config.namespace, list(ids)))
            rows = await cur.fetchall()
        out: dict[str, bool] = {}
        for i, mine in rows:
            sid = self._id(i)
            out[sid] = out.get(sid, True) and bool(mine)
        return out

    @fresh_after_restart
    async def write(self, rows: Sequence[Row]) -> None:
        """Replace benchd's rows with these ids in its namespace, in one transaction."""
        ns = self.config.namespace
        if not rows:
            return
        await self.ensure_table(len(rows[0][3]))
        params = [
            (sid, ns, text, json.dumps(mark, sort_keys=True), vector_text(vector))
            for sid, text, mark, vector in rows
        ]
        async with self.connection() as conn, conn.transaction():
            await conn.execute(self.sql.clear(), (ns, [r[0] for r in rows]))
            async with conn.cursor() as cur:
                await cur.executemany(self.sql.insert(), params)

    @fresh_after_restart
    async def delete(self, store_id: str) -> bool:
        if not self.config.shared and not await self.exists():
            return False
        async with self.connection() as conn:
            cur = await conn.execute(self.sql.delete(), (self.config.namespace, store_id))
            return bool(cur.rowcount and cur.rowcount > 0)

    @fresh_after_restart
    async def delete_many(self, store_ids: Sequence[str]) -> int:
        """``DELETE … WHERE namespace = $1 AND id = ANY($2)``: one statement for the set."""
        if not self.config.shared and not await self.exists():
            return 0
        async with self.connection() as conn:
            cur = await conn.execute(self.sql.clear(), (self.config.namespace, list(store_ids)))
            return max(0, cur.rowcount or 0)

    @fresh_after_restart
    async def search(self, vector: Sequence[float], limit: int) -> list[Scored]:
        if not self.config.shared and self._table_dims is None and not await self.exists():
            return []
        text = self._query_text(vector)
        async with self.connection() as conn:
            cur = await conn.execute(self.sql.search(), (text, self.config.namespace, limit))
            rows = await cur.fetchmany(limit)
        # a NULL vector (a shared table's) has a NULL distance; a zero one a NaN cosine
        return [(self._id(i), None if d is None else self.sql.score(float(d))) for i, d in rows]

    def _query_text(self, vector: Sequence[float]) -> str:
        """A query vector's text form, kept per vector: a load pass repeats the fixture's
        queries, and formatting the floats is a visible share of the loop's time per
        search (bench/stores.py measures it)."""
        key = tuple(vector)
        text = self._texts.get(key)
        if text is None:
            if len(self._texts) >= MAX_QUERY_TEXTS:
                self._texts.clear()
            text = self._texts[key] = vector_text(vector)
        return text

    def _id(self, value: Any) -> str:
        sid = str(value)
        if len(sid) > MAX_SHOWN_ID:
            raise TargetProtocolError(
                f"{self.where}: a row in namespace {self.config.namespace!r} has an id of more "
                f"than {MAX_SHOWN_ID} characters: not benchd's, and not read further"
            )
        return sid


def _mark(value: Any) -> dict[str, Any]:
    """The metadata column as read (cut at MAX_MARK_BYTES: a cut mark reads as none)."""
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def dsn_parts(dsn: str) -> dict[str, str]:
    """A DSN's fields (URL or ``key=value`` form), parsed without psycopg (it imports slowly).

    Only for showing where it points and masking its password: psycopg reads
    the DSN itself when it connects.
    """
    if dsn.startswith(("postgresql://", "postgres://")):
        try:
            url = urlsplit(dsn)
            port = url.port
        except ValueError:
            return {}
        fields = {"user": unquote(url.username or ""), "password": unquote(url.password or ""),
                  "host": url.hostname or "", "port": str(port or ""),
                  "dbname": unquote(url.path.lstrip("/"))}  # fmt: skip
        return {k: v for k, v in fields.items() if v}
    try:
        pairs = shlex.split(dsn)
    except ValueError:
        return {}
    return {k.strip(): v for k, sep, v in (p.partition("=") for p in pairs) if sep}


def public_dsn(dsn: str) -> str:
    """Where the DSN points, no password: ``HOST:PORT db NAME user USER``.

    Never URL-shaped: redaction masks any run of text that begins or ends
    like a registered secret, and the DSN is one (``postgresql://...``).
    """
    parts = dsn_parts(dsn)
    where = (parts.get("host") or "localhost") + (f":{parts['port']}" if parts.get("port") else "")
    db = f" db {parts['dbname']}" if parts.get("dbname") else ""
    user = f" user {parts['user']}" if parts.get("user") else ""
    return where + db + user


def register_dsn_password(dsn: str) -> None:
    """Mask the DSN's password on its own too (the whole DSN is registered as the secret)."""
    password = dsn_parts(dsn).get("password")
    if password:
        redact.register_secret(password)


class PgvectorStore(VectorStore):
    """The ``pgvector`` kind behind the store seam."""

    config: PgvectorConfig
    kind = KIND
    client_library = CLIENT_LIBRARY

    def __init__(self, config: PgvectorConfig, dsn: str, embed: EmbedStage | None = None) -> None:
        stage = embed or embed_stage(config.embed, config)
        endpoint = f"{public_dsn(dsn)} table {config.table}"  # the DSN itself is secret
        io = PgvectorIO(config, dsn, stage)
        super().__init__(io, stage, endpoint, config, delete_concurrency=config.pool_size)

    @classmethod
    def capabilities_for(cls, settings: PgvectorConfig) -> Capabilities:
        """Lists, writes and deletes its namespace's rows; the sentinel keeps the lease."""
        return Capabilities(
            lists=True, writes=True, deletes=True, lease=True, owned_ids=True, scores=True,
            holders=True,
            full_answers=True, bulk_deletes=BULK_DELETE,
        )

    @classmethod
    def probe_target(
        cls,
        settings: PgvectorConfig,
        secret: Secret | None,
        *,
        lease: LeaseHolder | None = None,
        write_rate: WriteRate | None = None,
    ) -> ProbeTarget:
        """The ``pgvector`` kind: the shared namespace flow over a store of these settings."""
        dsn = secret.reveal() if secret is not None else ""
        register_dsn_password(dsn)
        return NamespaceFlow(cls(settings, dsn), lease=lease, write_rate=write_rate)


