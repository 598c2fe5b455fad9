"""The store's I/O as tool calls: the tool map rendered, called and read.

:class:`ToolStore` is all an ``mcp`` store does over its session: check
the map against ``tools/list``, search, write a batch, list one page,
delete one record, read the model label. It knows the tool map and the
templates, not the transport (that is the session's) nor benchd's
guarantees (those are the shared flow's).

A tool's answer is read from its ``structuredContent`` when it gives one,
else from its text parts parsed as JSON (one part: that value; several: the
list of them). A path that does not fit the answer is a ``decode`` error
naming the tool. Each operation reads its answer with a module-level
function handed to the session (``keep``): it runs where the answer is
decoded, in the decode worker for a large one (a 5 MiB ``read_graph``), and
only what benchd keeps comes back (ids cut to what was asked, scores,
labels cut to :data:`~benchd.http.answers.LABEL_SOURCE_CHARS`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from benchd.errors import TargetProtocolError
from benchd.http.answers import LABEL_SOURCE_CHARS, finite_number, loads
from benchd.kinds.http.templating import MISSING, PathError, extract, parse_path, render
from benchd.kinds.mcp.config import ListTool, McpConfig
from benchd.kinds.mcp.session import McpSession, ToolAnswer, ToolSpec
from benchd.store.concurrency import run_bounded

__all__ = ["ToolStore", "map_problems", "payload"]


def map_problems(config: McpConfig, offered: Mapping[str, ToolSpec]) -> list[str]:
    """One line per place the tool map and the server's ``tools/list`` disagree."""
    problems: list[str] = []
    for op, tool in config.tools.named().items():
        spec = offered.get(tool.name)
        where = f"[probe.target.tools.{op}]"
        if spec is None:
            known = ", ".join(sorted(offered)) or "none"
            problems.append(f"{where}: the server has no tool {tool.name!r} (it offers: {known})")
            continue
        given = set(tool.arguments)
        if spec.arguments and not spec.open_arguments:
            for name in sorted(given - spec.arguments):
                takes = ", ".join(sorted(spec.arguments))
                problems.append(
                    f"{where}: tool {tool.name!r} has no argument {name!r} (it takes: {takes})"
                )
        for name in sorted(spec.required - given):
            problems.append(
                f"{where}: tool {tool.name!r} requires argument {name!r}, which the map "
                "does not give"
            )
    return problems


def payload(answer: ToolAnswer, what: str) -> Any:
    """What a tool answered: its structured content, else its text parsed as JSON."""
    if answer.structured is not None:
        return answer.structured
    if not answer.texts:
        raise TargetProtocolError(f"{what}: the answer has neither structuredContent nor text")
    values = [loads(text.encode("utf-8"), what) for text in answer.texts]
    return values[0] if len(values) == 1 else values


def _at(path: str, data: Any, what: str) -> Any:
    try:
        return extract(parse_path(path), data)
    except PathError as exc:
        raise TargetProtocolError(f"{what}: {exc}") from None


def _ids(values: Any, what: str) -> list[str]:
    if not isinstance(values, list):
        values = [values]
    out: list[str] = []
    for value in values:
        if value is None or isinstance(value, bool | dict | list):
            raise TargetProtocolError(f"{what}: a result has no usable id")
        out.append(str(value))
    return out


def _found(
    answer: ToolAnswer, what: str, ids: str, scores: str | None, cut: int | None
) -> tuple[list[str], list[float | None]]:
    """A search answer's ids (the first ``cut`` where it is a ranking) and their scores."""
    data = payload(answer, what)
    found = _ids(_at(ids, data, what), what)
    if cut is not None:
        found = found[:cut]
    kept: list[float | None] = []
    if scores is not None:
        raw = _at(scores, data, what)
        raw = raw if isinstance(raw, list) else [raw]
        if len(raw) < len(found):
            raise TargetProtocolError(f"{what}: fewer scores than ids")
        kept = [finite_number(s) for s in raw[: len(found)]]
    return found, kept


def _listed(answer: ToolAnswer, what: str, ids: str) -> list[str]:
    """A listing page's ids."""
    return _ids(_at(ids, payload(answer, what), what), what)


def _done(answer: ToolAnswer, what: str) -> None:
    """A write's or a delete's answer: read (it must be an answer), nothing kept."""
    payload(answer, what)


def _labels(
    answer: ToolAnswer, what: str, model: str | None, version: str | None, default: str
) -> tuple[str, str]:
    """The info tool's model label and version, cut to what benchd keeps of a label."""
    data = payload(answer, what)
    label = str(_at(model, data, what)) if model else default
    named = str(_at(version, data, what)) if version else ""
    return label[:LABEL_SOURCE_CHARS], named[:LABEL_SOURCE_CHARS]


class ToolStore:
    """A store's operations as calls of the mapped tools (see the module docstring)."""

    def __init__(self, config: McpConfig, session: McpSession) -> None:
        self.config = config
        self.session = session
        self.namespace = config.namespace

    def _what(self, op: str, name: str) -> str:
        return f"mcp tool {name!r} ({op})"

    async def _call(
        self,
        op: str,
        name: str,
        arguments: Any,
        values: Mapping[str, Any],
        read: Callable[..., Any],
        **how: Any,
    ) -> Any:
        """Call the tool; ``read(answer, what, **how)`` is what comes back of its answer."""
        rendered = render(arguments, {"namespace": self.namespace, **values})
        keep = functools.partial(read, what=self._what(op, name), **how)
        return await self.session.call_tool(
            name, rendered if rendered is not MISSING else {}, keep
        )

    async def check(self) -> list[str]:
        """The tool map's mismatches with what the server offers (empty when it fits)."""
        return map_problems(self.config, await self.session.list_tools())

    async def search(
        self, q: str, asked: int, reference_date: str | None = None
    ) -> tuple[list[str], list[float | None]]:
        """The ids the search tool answered: at most ``asked`` of a ranking (the flow's
        k plus room for benchd's own records), all of a set (asked for k, scored whole)."""
        tool = self.config.tools.search
        limit = min(asked, tool.max_k) if tool.max_k is not None else asked
        values: dict[str, Any] = {"q": q, "k": limit}
        if reference_date is not None:
            values["reference_date"] = reference_date
        cut = asked if tool.returns == "ranked" else None
        found: tuple[list[str], list[float | None]] = await self._call(
            "search", tool.name, tool.arguments, values, _found,
            ids=tool.ids, scores=tool.scores, cut=cut,
        )
        return found

    async def write(self, records: Sequence[Mapping[str, Any]]) -> int:
        """Write one batch (each record rendered from the memory's fields); the count sent."""
        tool = self.config.tools.write
        assert tool is not None
        rendered = [render(tool.record, record) for record in records]
        await self._call("write", tool.name, tool.arguments, {"records": rendered}, _done)
        return len(rendered)

    async def list_page(self, page: int) -> tuple[list[str], bool]:
        """One page of the listing's ids and whether another page may follow."""
        tool = self.config.tools.list
        assert tool is not None
        values = {"offset": page * tool.page_size, "limit": tool.page_size, "page": page}
        ids: list[str] = await self._call(
            "list", tool.name, tool.arguments, values, _listed, ids=tool.ids
        )
        return ids, _more(tool, len(ids))

    async def delete(self, store_ids: Sequence[str]) -> None:
        """Ask the delete tool to remove ``store_ids``: one call for the list where the tool
        takes ``{ids}``, else one per id (its "done" proves nothing: list after)."""
        tool = self.config.tools.delete
        assert tool is not None
        if tool.takes_set:
            await self._call("delete", tool.name, tool.arguments, {"ids": list(store_ids)}, _done)
            return

        async def one(store_id: str) -> None:
            await self._call("delete", tool.name, tool.arguments, {"id": store_id}, _done)

        await run_bounded(store_ids, one, limit=tool.concurrency)

    async def labels(self) -> tuple[str, str]:
        """The model label and version the info tool gives ("" where it gives none)."""
        tool = self.config.tools.info
        if tool is None:
            return self.config.model, ""
        labels: tuple[str, str] = await self._call(
            "info", tool.name, tool.arguments, {}, _labels,
            model=tool.model, version=tool.version, default=self.config.model,
        )
        return labels


def _more(tool: ListTool, got: int) -> bool:
    return tool.paged and got >= tool.page_size

