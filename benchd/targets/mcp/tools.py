"""The store's I/O as tool calls: the tool map rendered, called and read.

:class:`ToolStore` is all an ``mcp`` store does over its session: check
the map against ``tools/list``, search, write a batch, list one page,
delete one record, read the model label. It knows the tool map and the
templates, not the transport (that is the session's) nor benchd's
guarantees (those are the shared flow's).

A tool's answer is read from its ``structuredContent`` when it gives one,
else from its text parts parsed as JSON (one part: that value; several: the
list of them). A path that does not fit the answer is a ``decode`` error
naming the tool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchd.errors import TargetProtocolError
from benchd.targets.answers import finite_number, loads
from benchd.targets.client import run_bounded
from benchd.targets.http.templating import MISSING, PathError, extract, parse_path, render
from benchd.targets.mcp.config import ListTool, McpConfig
from benchd.targets.mcp.session import McpSession, ToolAnswer, ToolSpec

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


class ToolStore:
    """A store's operations as calls of the mapped tools (see the module docstring)."""

    def __init__(self, config: McpConfig, session: McpSession) -> None:
        self.config = config
        self.session = session
        self.namespace = config.namespace

    def _what(self, op: str, name: str) -> str:
        return f"mcp tool {name!r} ({op})"

    async def _call(self, op: str, name: str, arguments: Any, values: Mapping[str, Any]) -> Any:
        rendered = render(arguments, {"namespace": self.namespace, **values})
        answer = await self.session.call_tool(name, rendered if rendered is not MISSING else {})
        return payload(answer, self._what(op, name))

    async def check(self) -> list[str]:
        """The tool map's mismatches with what the server offers (empty when it fits)."""
        return map_problems(self.config, await self.session.list_tools())

    async def search(
        self, q: str, k: int, reference_date: str | None = None
    ) -> tuple[list[str], list[float | None]]:
        """The ids the search tool answered (all of a set; at most ``k`` of a ranking)."""
        tool = self.config.tools.search
        limit = min(k, tool.max_k) if tool.max_k is not None else k
        values: dict[str, Any] = {"q": q, "k": limit}
        if reference_date is not None:
            values["reference_date"] = reference_date
        data = await self._call("search", tool.name, tool.arguments, values)
        what = self._what("search", tool.name)
        ids = _ids(_at(tool.ids, data, what), what)
        if tool.returns == "ranked":
            ids = ids[: k + 1]  # one more: the flow drops a sentinel and cuts
        scores: list[float | None] = []
        if tool.scores is not None:
            raw = _at(tool.scores, data, what)
            raw = raw if isinstance(raw, list) else [raw]
            if len(raw) < len(ids):
                raise TargetProtocolError(f"{what}: fewer scores than ids")
            scores = [finite_number(s) for s in raw[: len(ids)]]
        return ids, scores

    async def write(self, records: Sequence[Mapping[str, Any]]) -> int:
        """Write one batch (each record rendered from the memory's fields); the count sent."""
        tool = self.config.tools.write
        assert tool is not None
        rendered = [render(tool.record, record) for record in records]
        await self._call("write", tool.name, tool.arguments, {"records": rendered})
        return len(rendered)

    async def list_page(self, page: int) -> tuple[list[str], bool]:
        """One page of the listing's ids and whether another page may follow."""
        tool = self.config.tools.list
        assert tool is not None
        values = {"offset": page * tool.page_size, "limit": tool.page_size, "page": page}
        data = await self._call("list", tool.name, tool.arguments, values)
        what = self._what("list", tool.name)
        ids = _ids(_at(tool.ids, data, what), what)
        return ids, _more(tool, len(ids))

    async def delete(self, store_ids: Sequence[str]) -> None:
        """Ask the delete tool to remove ``store_ids``: one call for the list where the tool
        takes ``{ids}``, else one per id (its "done" proves nothing: list after)."""
        tool = self.config.tools.delete
        assert tool is not None
        if tool.takes_set:
            await self._call("delete", tool.name, tool.arguments, {"ids": list(store_ids)})
            return

        async def one(store_id: str) -> None:
            await self._call("delete", tool.name, tool.arguments, {"id": store_id})

        await run_bounded(store_ids, one, limit=tool.concurrency)

    async def labels(self) -> tuple[str, str]:
        """The model label and version the info tool gives ("" where it gives none)."""
        tool = self.config.tools.info
        if tool is None:
            return self.config.model, ""
        data = await self._call("info", tool.name, tool.arguments, {})
        what = self._what("info", tool.name)
        model = str(_at(tool.model, data, what)) if tool.model else self.config.model
        version = str(_at(tool.version, data, what)) if tool.version else ""
        return model, version


def _more(tool: ListTool, got: int) -> bool:
    return tool.paged and got >= tool.page_size

