"""``[probe.target]`` for ``kind = "mcp"``: the server, its transport and the tool map.

The tool map names, per operation, one tool and a template of its
arguments (the ``http`` kind's templates: ``{q}``, ``{k}``,
``{namespace}``, ``{records}``, a memory's fields, see
:mod:`benchd.kinds.http.templating`), and where in the tool's answer the
ids (and scores) are. A wrong placeholder or path is a config error naming
its key path when the file loads; a tool or argument the server does not
offer is found against ``tools/list`` (the cycle's ``info`` phase and
``benchd validate --check-store``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from benchd.config.schema import check, concurrency_problem, headers_problem, label_problem
from benchd.http.client import (
    DEFAULT_MAX_RESPONSE_BYTES,
    http_url_problem,
    non_negative_problem,
    positive_problem,
)
from benchd.kinds.http.config import (
    BATCH_NAMES,
    DELETE_NAMES,
    EXPORT_NAMES,
    HEALTH_NAMES,
    RECORD_NAMES,
    SEARCH_NAMES,
)
from benchd.kinds.http.templating import parse_path, template_problem
from benchd.store.owned import namespace_problem

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "NO_NAMESPACE",
    "DeleteTool",
    "InfoTool",
    "ListTool",
    "McpConfig",
    "SearchTool",
    "ToolMap",
    "WriteTool",
]

DEFAULT_MAX_LINE_BYTES = DEFAULT_MAX_RESPONSE_BYTES
"""Longest stdio message read (the same cap as any other answer)."""


NO_NAMESPACE = (
    "the mcp server gives benchd no namespace of its own: set namespace_by = 'argument' "
    "(every tool takes {namespace}, e.g. user_id) or 'server' (the server holds only "
    "benchd's records, e.g. a memory file of its own), or adopt_namespace = true to write "
    "into the shared server anyway (benchd still deletes only the ids it wrote)"
)
"""Why benchd refuses to write into an MCP server it cannot keep its records apart in."""


def _path_problem(v: str | None) -> str | None:
    if v is None:
        return None
    try:
        parse_path(v)
    except ValueError as exc:
        return str(exc)
    return None


def _url_problem(v: str | None) -> str | None:
    return None if v is None else http_url_problem(v)


def _name_problem(v: str) -> str | None:
    return None if v and v.strip() == v else "must be the tool's name as tools/list gives it"


def _arguments_problem(arguments: Any, names: tuple[str, ...]) -> None:
    if not isinstance(arguments, dict):
        raise ValueError("arguments: must be a table (the tool's arguments)")
    if problem := template_problem(arguments, names, "arguments"):
        raise ValueError(problem)


@dataclass(frozen=True, slots=True)
class SearchTool:
    """``[probe.target.tools.search]``: one labeled query -> one tool call -> ids."""

    name: str = field(metadata=check(_name_problem))
    ids: str = field(metadata=check(_path_problem))  # e.g. "results[*].id"
    arguments: dict[str, Any] = field(default_factory=dict)
    scores: str | None = field(default=None, metadata=check(_path_problem))
    # "set": the tool returns every match in no order (a substring filter): benchd
    # scores the whole set and leaves the rank measures out
    returns: Literal["ranked", "set"] = "ranked"
    max_k: int | None = None

    def __post_init__(self) -> None:
        _arguments_problem(self.arguments, SEARCH_NAMES)
        if self.max_k is not None and self.max_k <= 0:
            raise ValueError("max_k: must be > 0")
        if self.returns == "set" and self.scores is not None:
            raise ValueError("scores: a search that returns a set has no scores; remove it")


@dataclass(frozen=True, slots=True)
class WriteTool:
    """``[probe.target.tools.write]``: the corpus written ``batch_size`` records a call."""

    name: str = field(metadata=check(_name_problem))
    arguments: dict[str, Any] = field(default_factory=lambda: {"records": "{records}"})
    record: Any = "{memory}"  # one fixture memory as the tool wants it
    batch_size: int = field(default=50, metadata=check(positive_problem))
    # calls in flight; 1 for a server that rewrites one file per call (server-memory)
    concurrency: int = field(default=1, metadata=check(concurrency_problem))

    def __post_init__(self) -> None:
        _arguments_problem(self.arguments, BATCH_NAMES)
        if problem := template_problem(self.record, RECORD_NAMES, "record"):
            raise ValueError(problem)


@dataclass(frozen=True, slots=True)
class ListTool:
    """``[probe.target.tools.list]``: what the namespace holds (verify, own, delete)."""

    name: str = field(metadata=check(_name_problem))
    ids: str = field(metadata=check(_path_problem))  # e.g. "entities[*].name"
    arguments: dict[str, Any] = field(default_factory=dict)
    # paged: {offset}/{limit}/{page} in the arguments; stops at a short page
    page_size: int = field(default=500, metadata=check(positive_problem))
    max_pages: int = field(default=1000, metadata=check(positive_problem))

    def __post_init__(self) -> None:
        _arguments_problem(self.arguments, EXPORT_NAMES)

    @property
    def paged(self) -> bool:
        """Whether the arguments page through the listing."""
        text = repr(self.arguments)
        return any(f"{{{name}" in text for name in ("offset", "limit", "page"))


DELETE_SET_NAMES = (*DELETE_NAMES, "ids")
"""A delete tool's placeholders: ``{id}`` (one record a call) or ``{ids}`` (a list of them)."""


@dataclass(frozen=True, slots=True)
class DeleteTool:
    """``[probe.target.tools.delete]``: remove records by ``{id}`` (one a call) or ``{ids}``.

    Deletes go in sets of up to ``batch_size``: the tool is called for the
    set (once with ``{ids}``, else once per id, ``concurrency`` calls at a
    time), then one listing verifies every delete of the set.
    """

    name: str = field(metadata=check(_name_problem))
    arguments: dict[str, Any] = field(default_factory=lambda: {"id": "{id}"})
    concurrency: int = field(default=1, metadata=check(concurrency_problem))
    batch_size: int = field(default=100, metadata=check(positive_problem))

    def __post_init__(self) -> None:
        _arguments_problem(self.arguments, DELETE_SET_NAMES)
        text = repr(self.arguments)
        named = [p for p in ("{id}", "{ids}") if p in text]
        if len(named) != 1:
            raise ValueError(
                "arguments: must name the records to delete with {id} (one a call) or "
                "{ids} (the list), not both"
            )

    @property
    def takes_set(self) -> bool:
        """Whether one call deletes a list of ids (``{ids}``)."""
        return "{ids}" in repr(self.arguments)


@dataclass(frozen=True, slots=True)
class InfoTool:
    """``[probe.target.tools.info]``: a tool whose answer names the store's model."""

    name: str = field(metadata=check(_name_problem))
    arguments: dict[str, Any] = field(default_factory=dict)
    model: str | None = field(default=None, metadata=check(_path_problem))
    version: str | None = field(default=None, metadata=check(_path_problem))

    def __post_init__(self) -> None:
        _arguments_problem(self.arguments, HEALTH_NAMES)


@dataclass(frozen=True, slots=True)
class ToolMap:
    """``[probe.target.tools]``: which tool does what."""

    search: SearchTool
    write: WriteTool | None = None
    list: ListTool | None = None
    delete: DeleteTool | None = None
    info: InfoTool | None = None

    def named(self) -> dict[str, Any]:
        """The configured tools by operation (absent ones left out)."""
        tools = {
            "search": self.search,
            "write": self.write,
            "list": self.list,
            "delete": self.delete,
            "info": self.info,
        }
        return {op: tool for op, tool in tools.items() if tool is not None}


@dataclass(frozen=True, slots=True)
class McpConfig:
    """``[probe.target]`` keys for ``kind = "mcp"``."""

    tools: ToolMap
    transport: Literal["stdio", "http"] = "stdio"
    # stdio: the server benchd starts (one long-lived process per probe)
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    max_line_bytes: int = field(default=DEFAULT_MAX_LINE_BYTES, metadata=check(positive_problem))
    # http: the streamable-HTTP endpoint (with its path, e.g. http://host:8000/mcp)
    url: str | None = field(default=None, metadata=check(_url_problem))
    headers: dict[str, str] = field(default_factory=dict, metadata=check(headers_problem))
    api_key_env: str | None = None
    api_key_file: str | None = None
    auth_header: str = "Authorization"
    auth_prefix: str = "Bearer "
    # How benchd's records are kept apart from everyone else's: "argument" (every
    # tool takes {namespace}, e.g. user_id) or "server" (the server holds nothing
    # but benchd's records: its own memory file). Unset: benchd writes nothing
    # unless adopt_namespace says the operator accepts sharing the server.
    namespace_by: Literal["argument", "server"] | None = None
    namespace: str = field(default="benchd-eval", metadata=check(namespace_problem))
    adopt_namespace: bool = False
    cleanup: Literal["before", "after", "never"] = "never"
    verify: bool = True
    # the store's model label when no info tool names it
    model: str = field(default="", metadata=check(label_problem))
    timeout_s: float = field(default=10.0, metadata=check(positive_problem))
    max_retries: int = field(default=3, metadata=check(non_negative_problem))
    backoff_s: float = field(default=0.25, metadata=check(non_negative_problem))
    max_retry_after_s: float = field(default=30.0, metadata=check(non_negative_problem))
    max_response_bytes: int = field(
        default=DEFAULT_MAX_RESPONSE_BYTES, metadata=check(positive_problem)
    )
    searchable_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.transport == "stdio" and not self.command:
            raise ValueError("command: required for transport = 'stdio' (the server to start)")
        if self.transport == "http" and not self.url:
            raise ValueError("url: required for transport = 'http' (the streamable-HTTP endpoint)")
        if self.transport == "stdio" and self.url:
            raise ValueError("url: only for transport = 'http'; a stdio server has a command")
        if self.transport == "http" and self.command:
            raise ValueError("command: only for transport = 'stdio'; an http server has a url")
        if self.tools.write is not None and self.namespace_by is None and not self.adopt_namespace:
            raise ValueError(f"tools.write: {NO_NAMESPACE}")
        if self.namespace_by == "argument":
            lacking = [
                op
                for op, tool in self.tools.named().items()
                if op != "info" and "{namespace" not in repr(tool.arguments)
            ]
            if lacking:
                raise ValueError(
                    f"tools.{lacking[0]}.arguments: namespace_by = 'argument' needs "
                    '{namespace} in every tool\'s arguments (e.g. user_id = "{namespace}")'
                )
        needed = {"write": self.tools.write, "list": self.tools.list, "delete": self.tools.delete}
        lacking = [f"[probe.target.tools.{op}]" for op, tool in needed.items() if tool is None]
        if self.cleanup != "never" and lacking:
            raise ValueError(
                f"cleanup = {self.cleanup!r} needs {' and '.join(lacking)} (benchd deletes "
                "only what it wrote and listed); add them or set cleanup = 'never'"
            )

    @property
    def endpoint(self) -> str:
        """Where the server is, as ``info`` and errors name it (never its env or key)."""
        if self.transport == "http":
            return self.url or ""
        return "stdio:" + " ".join((self.command or "", *self.args))
