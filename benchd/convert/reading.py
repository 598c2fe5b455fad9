"""Reading converter inputs: lines, JSON Lines and huge JSON arrays, with FILE:LINE errors.

Every reader streams, tracks line numbers, and turns malformed input into a
one-line :class:`~benchd.errors.RunFileError` ``FILE:LINE: what is wrong``.
``*.gz`` files are read transparently.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, TextIO, cast

from benchd.errors import RunFileError, UsageError

__all__ = [
    "bad_line",
    "iter_json_array",
    "iter_jsonl",
    "iter_lines",
    "open_text",
    "read_text",
    "require_file",
]

# A JSON array element larger than this is treated as malformed rather than
# buffered further (LongMemEval_M's largest question is a few megabytes).
_MAX_ELEMENT_CHARS = 256 << 20


def bad_line(path: Path | str, line: int, what: str) -> RunFileError:
    """The one-line ``FILE:LINE: what`` error every converter raises on bad input."""
    return RunFileError(f"{path}:{line}: {what}")


def require_file(path: Path, what: str) -> Path:
    """Return ``path`` if it is a readable file, else a usage error naming ``what`` it should be."""
    if not path.is_file():
        raise UsageError(f"{path}: no such file (expected {what})")
    return path


def open_text(path: Path) -> TextIO:
    """Open a UTF-8 text file (transparently gunzipped for ``*.gz``); CRLF reads as LF."""
    try:
        if path.suffix == ".gz":
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline=None)
        return path.open(encoding="utf-8", newline=None)
    except OSError as exc:
        raise UsageError(f"{path}: cannot open: {exc.strerror or exc}") from exc


def _open_binary(path: Path) -> BinaryIO:
    try:
        if path.suffix == ".gz":
            return cast(BinaryIO, gzip.open(path, "rb"))
        return path.open("rb")
    except OSError as exc:
        raise UsageError(f"{path}: cannot open: {exc.strerror or exc}") from exc


def iter_lines(path: Path, *, latin1_fallback: bool = False) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` with CRLF read as LF (``*.gz`` gunzipped).

    A line that is not UTF-8 is a ``FILE:LINE`` error, or, with
    ``latin1_fallback`` (old TREC disks are Latin-1), decoded as Latin-1.
    """
    with _open_binary(path) as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                if not latin1_fallback:
                    what = f"not UTF-8 text (bad byte at column {exc.start + 1}); save it as UTF-8"
                    raise bad_line(path, number, what) from None
                text = raw.decode("latin-1")
            yield number, text.replace("\r\n", "\n")


def read_text(path: Path) -> str:
    """A whole (small) UTF-8 text file, CRLF read as LF; not UTF-8 is a ``FILE:LINE`` error."""
    return "".join(text for _, text in iter_lines(path))


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line of a JSON Lines file."""
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise bad_line(path, number, f"not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise bad_line(path, number, "expected a JSON object on each line")
        yield number, obj


def iter_json_array(path: Path, chunk_size: int = 1 << 20) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, element)`` for each element of a top-level JSON array.

    Elements are decoded one at a time from a sliding buffer, so a multi-gigabyte
    file (LongMemEval_M) costs the memory of its largest element, not of the whole.
    """
    decoder = json.JSONDecoder()
    with open_text(path) as fh:
        reader = _ArrayReader(path, fh, decoder, chunk_size)
        yield from reader.elements()


class _ArrayReader:
    """Incremental decoder for ``[elem, elem, ...]`` that tracks line numbers."""

    def __init__(self, path: Path, fh: TextIO, decoder: json.JSONDecoder, chunk_size: int) -> None:
        self._path, self._fh, self._decoder, self._chunk = path, fh, decoder, chunk_size
        self._buf = ""
        self._pos = 0
        self._line = 1  # line number of self._buf[0]
        self._eof = False

    def _fill(self) -> bool:
        """Append a chunk to the buffer (dropping consumed text); False at end of file."""
        if self._eof:
            return False
        self._line += self._buf.count("\n", 0, self._pos)
        self._buf = self._buf[self._pos :]
        self._pos = 0
        try:
            chunk = self._fh.read(self._chunk)
        except UnicodeDecodeError as exc:
            raise RunFileError(f"{self._path}: not UTF-8 text ({exc.reason})") from None
        self._eof = not chunk
        self._buf += chunk
        return bool(chunk)

    def _line_at(self, pos: int) -> int:
        return self._line + self._buf.count("\n", 0, pos)

    def _next_char(self) -> str:
        """Skip whitespace and return the next character ('' at end of file)."""
        while True:
            while self._pos < len(self._buf) and self._buf[self._pos] in " \t\r\n":
                self._pos += 1
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._fill():
                return ""

    def _expect(self, allowed: str, what: str) -> str:
        char = self._next_char()
        if not char or char not in allowed:
            found = repr(char) if char else "end of file"
            raise bad_line(self._path, self._line_at(self._pos), f"expected {what}, found {found}")
        self._pos += 1
        return char

    def _decode(self) -> tuple[int, Any]:
        self._next_char()
        while True:
            try:
                obj, end = self._decoder.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError as exc:
                if len(self._buf) - self._pos < _MAX_ELEMENT_CHARS and self._fill():
                    continue  # most likely cut short by the chunk: read on and retry
                line = self._line_at(exc.pos)
                raise bad_line(self._path, line, f"not valid JSON ({exc.msg})") from None
            if end == len(self._buf) and self._fill():
                continue  # a number may continue in the next chunk: decode again
            line = self._line_at(self._pos)
            self._pos = end
            return line, obj

    def elements(self) -> Iterator[tuple[int, Any]]:
        self._expect("[", "a JSON array '[' at the top level")
        if self._next_char() == "]":
            self._pos += 1
            return
        while True:
            yield self._decode()
            if self._expect(",]", "',' or ']' after an array element") == "]":
                break
        if self._next_char():
            raise bad_line(self._path, self._line_at(self._pos), "extra text after the array")
