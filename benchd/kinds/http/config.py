"""``[probe.target]`` for ``kind = "http"``: strict, frozen request templates.

Each endpoint is a table of templates (see :mod:`benchd.kinds.http.templating`)
that may only use the placeholders that make sense there; a wrong one is a
config error naming its key path when the file loads, not a failure mid-run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from benchd.config.schema import check, concurrency_problem, headers_problem, label_problem
from benchd.embed.config import EmbedConfig
from benchd.http.client import (
    DEFAULT_MAX_RESPONSE_BYTES,
    http_url_problem,
    non_negative_problem,
    positive_problem,
)
from benchd.kinds.http.templating import parse_path, template_problem
from benchd.store.owned import namespace_problem

__all__ = [
    "DeleteTemplate",
    "Endpoint",
    "ExportTemplate",
    "HealthTemplate",
    "HttpConfig",
    "SearchTemplate",
    "SeedTemplate",
]

Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]

SEARCH_NAMES = ("q", "k", "namespace", "reference_date", "q_embedding")
RECORD_NAMES = ("id", "content", "namespace", "memory", "embedding")
BATCH_NAMES = ("records", "namespace")
EXPORT_NAMES = ("namespace", "offset", "limit", "page")
DELETE_NAMES = ("id", "namespace")
HEALTH_NAMES = ("namespace",)
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP header name (RFC 9110 token)


class Endpoint(Protocol):
    """What every endpoint table has: one templated request."""

    @property
    def method(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def query(self) -> dict[str, Any]: ...
    @property
    def headers(self) -> dict[str, Any]: ...
    @property
    def body(self) -> Any: ...


def _path_problem(v: str | None) -> str | None:
    if v is None:
        return None
    try:
        parse_path(v)
    except ValueError as exc:
        return str(exc)
    return None


def _url_path(v: str) -> str | None:
    return None if v.startswith("/") else "must start with '/' (it is joined to url)"


def _request_problem(t: Endpoint, names: tuple[str, ...]) -> None:
    """Raise ValueError for the first bad template of a request table."""
    for key in ("query", "headers"):
        for name, value in getattr(t, key).items():
            if isinstance(value, dict | list):
                raise ValueError(f"{key}.{name}: must be a string, number or boolean")
            if key == "headers" and not _TOKEN.match(name):
                raise ValueError(f"headers: {name!r} is not a valid header name")
    for key in ("path", "query", "headers", "body"):
        if problem := template_problem(getattr(t, key), names, key):
            raise ValueError(problem)


@dataclass(frozen=True, slots=True)
class SearchTemplate:
    """``[probe.target.search]``: one labeled query → one request → ranked ids."""

    path: str = field(metadata=check(_url_path))
    ids: str = field(metadata=check(_path_problem))  # e.g. "results[*].id"
    method: Method = "GET"
    query: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    max_k: int | None = None  # the store's own cap on {k}
    # a kNN store: every search answers min({k}, records in the namespace); fewer is
    # counted as a short answer (a keyword store answers only what matches: leave it off)
    full_answers: bool = False
    # the store's own score of each result, parallel to ``ids`` (e.g.
    # "results[*].score"): only the drift stage's label-free score shift reads it
    scores: str | None = field(default=None, metadata=check(_path_problem))

    def __post_init__(self) -> None:
        _request_problem(self, SEARCH_NAMES)
        if self.max_k is not None and self.max_k <= 0:
            raise ValueError("max_k: must be > 0")


@dataclass(frozen=True, slots=True)
class SeedTemplate:
    """``[probe.target.seed]``: the corpus written in batches of ``batch_size`` records."""

    path: str = field(metadata=check(_url_path))
    method: Method = "POST"
    query: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, Any] = field(default_factory=dict)
    body: Any = "{records}"  # the batch; {records} is the list of rendered records
    record: Any = "{memory}"  # one fixture memory as the store wants it
    fields: dict[str, Any] = field(default_factory=dict)  # set on every rendered record
    batch_size: int = field(default=100, metadata=check(positive_problem))
    concurrency: int = field(default=4, metadata=check(concurrency_problem))
    imported: str | None = field(default=None, metadata=check(_path_problem))
    skipped: str | None = field(default=None, metadata=check(_path_problem))
    errors: str | None = field(default=None, metadata=check(_path_problem))

    def __post_init__(self) -> None:
        _request_problem(self, BATCH_NAMES)
        for key in ("record", "fields"):
            if problem := template_problem(getattr(self, key), RECORD_NAMES, key):
                raise ValueError(problem)


@dataclass(frozen=True, slots=True)
class ExportTemplate:
    """``[probe.target.export]``: list the namespace page by page (verify, own, map ids)."""

    path: str = field(metadata=check(_url_path))
    ids: str = field(metadata=check(_path_problem))  # e.g. "memories[*].id"
    method: Method = "GET"
    query: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    fixture_ids: str | None = field(default=None, metadata=check(_path_problem))
    contents: str | None = field(default=None, metadata=check(_path_problem))
    paged: bool = True  # false: one request lists the whole namespace
    page_size: int = field(default=500, metadata=check(positive_problem))
    has_more: str | None = field(default=None, metadata=check(_path_problem))
    total: str | None = field(default=None, metadata=check(_path_problem))
    max_pages: int = field(default=1000, metadata=check(positive_problem))

    def __post_init__(self) -> None:
        _request_problem(self, EXPORT_NAMES)
        if self.has_more and self.total:
            raise ValueError("export: set has_more or total, not both")


@dataclass(frozen=True, slots=True)
class DeleteTemplate:
    """``[probe.target.delete]``: remove one record by its (server) ``{id}``."""

    path: str = field(metadata=check(_url_path))
    method: Method = "DELETE"
    query: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    gone: tuple[int, ...] = (404,)  # statuses meaning "already deleted"
    concurrency: int = field(default=4, metadata=check(concurrency_problem))

    def __post_init__(self) -> None:
        _request_problem(self, DELETE_NAMES)


@dataclass(frozen=True, slots=True)
class HealthTemplate:
    """``[probe.target.health]``: where ``info()`` reads the model label and version."""

    path: str = field(metadata=check(_url_path))
    method: Method = "GET"
    query: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    model: str | None = field(default=None, metadata=check(_path_problem))
    version: str | None = field(default=None, metadata=check(_path_problem))

    def __post_init__(self) -> None:
        _request_problem(self, HEALTH_NAMES)


@dataclass(frozen=True, slots=True)
class HttpConfig:
    """``[probe.target]`` keys for ``kind = "http"``."""

    url: str = field(metadata=check(http_url_problem))
    search: SearchTemplate
    seed: SeedTemplate | None = None
    export: ExportTemplate | None = None
    delete: DeleteTemplate | None = None
    health: HealthTemplate | None = None
    namespace: str = field(default="benchd-eval", metadata=check(namespace_problem))
    api_key_env: str | None = None
    api_key_file: str | None = None
    auth_header: str = field(
        default="Authorization",
        metadata=check(lambda v: None if _TOKEN.match(v) else "is not a valid header name"),
    )
    auth_prefix: str = "Bearer "
    headers: dict[str, str] = field(default_factory=dict, metadata=check(headers_problem))
    cleanup: Literal["before", "after", "never"] = "never"
    adopt_namespace: bool = False
    verify: bool = True
    # label for the store's embedding model when health has none
    model: str = field(default="", metadata=check(label_problem))
    timeout_s: float = field(default=10.0, metadata=check(positive_problem))
    max_retries: int = field(default=3, metadata=check(non_negative_problem))
    backoff_s: float = field(default=0.25, metadata=check(non_negative_problem))
    max_retry_after_s: float = field(default=30.0, metadata=check(non_negative_problem))
    max_response_bytes: int = field(
        default=DEFAULT_MAX_RESPONSE_BYTES, metadata=check(positive_problem)
    )
    searchable_timeout_s: float = 30.0  # 0: do not measure time-to-searchable
    # vectors computed by benchd for {embedding} / {q_embedding}; its label is the model label
    embed: EmbedConfig | None = None

    def __post_init__(self) -> None:
        if self.embed is not None and self.model:
            raise ValueError(
                "set model or [probe.target.embed], not both: the embedder's label "
                f"({self.embed.label}) is this probe's model label"
            )
        needed = {"seed": self.seed, "delete": self.delete, "export": self.export}
        lacking = [f"[probe.target.{name}]" for name, table in needed.items() if table is None]
        if self.cleanup != "never" and lacking:
            raise ValueError(
                f"cleanup = {self.cleanup!r} needs {' and '.join(lacking)} (benchd deletes "
                "only what it wrote where its sentinel proves the namespace is its own); "
                "add them or set cleanup = 'never'"
            )
        for name in self.headers:
            if not _TOKEN.match(name):
                raise ValueError(f"headers: {name!r} is not a valid header name")
