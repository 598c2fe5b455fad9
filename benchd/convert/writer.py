"""Stream memory and query records into a fixture file, JSON or JSON Lines.

The writer never holds the corpus: each record is serialised as it arrives.
Memories come first, then queries (a JSON fixture's ``memories`` array must
close before ``queries`` opens, and converters only know which queries survive
once the corpus has been read). The file is written beside its destination
and renamed into place on success, so a failed conversion leaves nothing
half-written behind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from benchd.convert.common import Progress
from benchd.errors import UsageError

__all__ = ["FixtureWriter", "dumps_record", "output_format"]

_FORMATS = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def dumps_record(record: Mapping[str, Any]) -> str:
    """Serialise one record the same way every time (key order kept, UTF-8 kept)."""
    return json.dumps(record, ensure_ascii=False, separators=(", ", ": "))


def output_format(path: Path) -> str:
    """``"json"`` or ``"jsonl"`` from the output file's suffix; anything else is a usage error."""
    fmt = _FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise UsageError(
            f"--out {path}: unknown fixture format; name the file *.json (one document) "
            "or *.jsonl (JSON Lines, for large corpora)"
        )
    return fmt


class FixtureWriter:
    """Context manager: ``add_memory`` for each memory, then ``add_query`` for each query.

    ``meta`` holds fixture-level keys (``_comment``, ``reference_date``): top-level
    keys of a JSON fixture, the ``{"fixture": {...}}`` first line of a JSON Lines one
    (the layout :mod:`benchd.fixture_reader` reads).
    """

    def __init__(
        self,
        path: Path,
        *,
        meta: Mapping[str, Any] | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.path = path
        self.format = output_format(path)
        self.memories = 0
        self.queries = 0
        self._meta = dict(meta or {})
        self._progress = progress
        self._tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self._fh: TextIO | None = None

    def __enter__(self) -> FixtureWriter:
        try:
            self._fh = self._tmp.open("w", encoding="utf-8", newline="\n")
        except OSError as exc:
            raise UsageError(f"--out {self.path}: cannot write: {exc.strerror or exc}") from exc
        self._open_document()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._fh is not None
        try:
            if exc_type is None:
                self._close_document()
            self._fh.close()
            if exc_type is None:
                self._tmp.replace(self.path)
        finally:
            if self._tmp.exists():
                self._tmp.unlink()
            if self._progress is not None:
                self._progress.close()

    def add_memory(self, record: Mapping[str, Any]) -> None:
        """Write one import record (it must carry its ``id``)."""
        if self.queries:
            raise RuntimeError("FixtureWriter: memories must all be written before queries")
        self._emit(record, first=self.memories == 0, kind="memory")
        self.memories += 1
        self._tick()

    def add_query(self, record: Mapping[str, Any]) -> None:
        """Write one labeled query (``id``, ``q``, ``expected_ids`` or ``relevance``, ...)."""
        if self.queries == 0 and self.format == "json":
            self._write('\n  ],\n  "queries": [' if self.memories else '],\n  "queries": [')
        self._emit(record, first=self.queries == 0, kind="query")
        self.queries += 1
        self._tick()

    # ------------------------------------------------------------------ layout

    def _write(self, text: str) -> None:
        assert self._fh is not None
        self._fh.write(text)

    def _open_document(self) -> None:
        if self.format == "jsonl":
            if self._meta:
                self._write(dumps_record({"fixture": self._meta}) + "\n")
            return
        head = "{\n"
        for key, value in self._meta.items():
            head += f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)},\n"
        self._write(head + '  "memories": [')

    def _emit(self, record: Mapping[str, Any], *, first: bool, kind: str) -> None:
        if self.format == "jsonl":
            self._write(dumps_record({kind: record}) + "\n")
        else:
            self._write(("\n    " if first else ",\n    ") + dumps_record(record))

    def _close_document(self) -> None:
        if self.format == "jsonl":
            return
        if self.queries == 0:
            self._write('\n  ],\n  "queries": [' if self.memories else '],\n  "queries": [')
        self._write("\n  ]\n}\n" if self.queries else "]\n}\n")

    def _tick(self) -> None:
        if self._progress is not None:
            self._progress.tick(self.memories, self.queries)
