"""benchd's exception tree and the exit codes that ``cli.py`` maps them to.

Every error a user can cause or meet carries a one-line, actionable message
(what is wrong, where, what to do). Nothing below prints or exits: only
``benchd.cli`` turns an error into an exit code.

::

    BenchdError                      exit 4  (internal / unexpected)
    ├── InputError                   exit 2  bad input the user owns
    │   ├── UsageError                       bad command-line flag or argument
    │   ├── ConfigError                      bad TOML config (file + key path)
    │   ├── FixtureError                     bad fixture (file + JSON path), may hold many problems
    │   │   └── FixtureChanged                   a streamed fixture changed since it was loaded
    │   │                                        (kind "fixture_changed": fails the cycle)
    │   └── RunFileError                     bad qrels / run / result file (FILE:LINE)
    ├── TargetError                  exit 3  the store could not be used
    │   ├── TargetUnreachable                connection refused / DNS / TLS
    │   ├── TargetAuthError                  401 / 403: key refused (never retried)
    │   ├── TargetTimeout                    no answer in time
    │   ├── TargetHTTPError                  unexpected status (.status; kind http_4xx|http_5xx)
    │   │   ├── TargetRateLimited                429 (.retry_after_s; kind "rate_limited")
    │   │   └── TargetRedirect                   3xx, never followed (kind "redirect")
    │   ├── TargetProtocolError              a 2xx whose body breaks the contract (kind "decode")
    │   ├── TargetToolError                  a tool call the store answered as failed (MCP
    │   │                                    ``isError``; kind "tool_error", never an HTTP status)
    │   └── OwnershipError                   namespace holds records benchd did not write
    ├── ThresholdBreached            exit 1  a --fail-under threshold was not met
    └── OutputError                  exit 5  writing a file or stream failed (disk full, read-only)

Each :class:`TargetError` has a ``kind`` — one of ``timeout``, ``connect``,
``auth``, ``redirect``, ``http_4xx``, ``rate_limited``, ``http_5xx``, ``decode``,
``tool_error``, ``ownership`` — the bounded label value used for error counters. Which
answer becomes which error is decided in one place,
:func:`benchd.http.client.status_error`.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Sequence

__all__ = [
    "ERROR_KINDS",
    "EXIT_INPUT",
    "EXIT_INTERNAL",
    "EXIT_IO",
    "EXIT_OK",
    "EXIT_TARGET",
    "EXIT_THRESHOLD",
    "BenchdError",
    "ConfigError",
    "FixtureChanged",
    "FixtureError",
    "InputError",
    "OutputError",
    "OwnershipError",
    "RunFileError",
    "TargetAuthError",
    "TargetError",
    "TargetHTTPError",
    "TargetProtocolError",
    "TargetRateLimited",
    "TargetRedirect",
    "TargetTimeout",
    "TargetToolError",
    "TargetUnreachable",
    "ThresholdBreached",
    "UsageError",
    "one_line",
]

EXIT_OK = 0
EXIT_THRESHOLD = 1
EXIT_INPUT = 2
EXIT_TARGET = 3
EXIT_INTERNAL = 4
EXIT_IO = 5

ERROR_KINDS = (
    "timeout",
    "connect",
    "auth",
    "redirect",
    "http_4xx",
    "rate_limited",
    "http_5xx",
    "decode",
    "tool_error",
    "ownership",
)


class BenchdError(Exception):
    """Base of every error benchd raises on purpose."""

    exit_code = EXIT_INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InputError(BenchdError):
    """Something the user owns (flag, config, fixture, file) is wrong."""

    exit_code = EXIT_INPUT


class UsageError(InputError):
    """A bad command-line flag or argument."""


# Every problem `run` and `once` find, keys included: plain `validate -c` checks how a
# key is named, not whether it is set, so it would list fewer.
_LISTS_ALL = "benchd validate --check-secrets -c FILE lists them all"


class ConfigError(InputError):
    """A bad config file; each problem names the file and the key path.

    ``ConfigError(["a", "b"])`` carries several problems (``.problems``); its
    message is the first with a count of the rest, so it stays one line.
    """

    def __init__(self, message: str | Sequence[str]) -> None:
        problems = (message,) if isinstance(message, str) else tuple(message)
        self.problems = tuple(one_line(problem) for problem in problems)
        first = self.problems[0] if self.problems else "invalid config"
        more = len(self.problems) - 1
        if more > 0:
            noun = "problem" if more == 1 else "problems"
            first = f"{first} (and {more} more {noun}: {_LISTS_ALL})"
        super().__init__(first)


def one_line(text: str) -> str:
    """``text`` with each line break escaped as Python writes it (``\\n``, ``\\u2028``).

    A problem names the file and the values the config gave, and a path may hold a line
    break (``web_config = "\\n"`` is a valid file name): escaped, it stays one line.
    """
    return _LINE_BREAKS.sub(lambda m: repr(m.group())[1:-1], text)


_LINE_BREAKS = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")  # str.splitlines


class RunFileError(InputError):
    """A malformed qrels, run or result file; the message is ``FILE:LINE: what``."""


class FixtureError(InputError):
    """A fixture with one or more problems, each a full one-line message."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        first = self.problems[0] if self.problems else "invalid fixture"
        more = len(self.problems) - 1
        summary = first if more <= 0 else f"{first} (and {more} more problem(s))"
        super().__init__(summary)


class FixtureChanged(FixtureError):
    """A streamed fixture's file no longer holds the memories loaded from it.

    Raised while the memories are read again to be written: nothing that
    differs from what was loaded is ever sent. ``kind`` labels the failed cycle.
    """

    kind = "fixture_changed"

    def __init__(self, problem: str) -> None:
        super().__init__([problem])


class TargetError(BenchdError):
    """The store could not be used; ``kind`` is a bounded label value."""

    exit_code = EXIT_TARGET
    kind = "connect"


class TargetUnreachable(TargetError):
    kind = "connect"


class TargetAuthError(TargetError):
    kind = "auth"


class TargetTimeout(TargetError):
    kind = "timeout"


class TargetHTTPError(TargetError):
    """An unexpected HTTP status from the store."""

    def __init__(self, message: str, status: int, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s

    @property
    def kind(self) -> str:  # type: ignore[override]
        if self.status == 429:  # the error map raises TargetRateLimited; same kind either way
            return "rate_limited"
        return "http_5xx" if self.status >= 500 else "http_4xx"


class TargetRateLimited(TargetHTTPError):
    """HTTP 429: the store's rate limit. ``retry_after_s`` is its ``Retry-After``, if any.

    Without ``Retry-After`` (``None``) the real store means an auth lockout:
    never retried.
    """

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message, 429, retry_after_s)

    @property
    def kind(self) -> str:  # type: ignore[override]
        return "rate_limited"


class TargetRedirect(TargetHTTPError):
    """A 3xx answer. Never followed: the API key must not go to another address."""

    @property
    def kind(self) -> str:  # type: ignore[override]
        return "redirect"


class TargetProtocolError(TargetError):
    """A successful status whose body does not follow the store's contract."""

    kind = "decode"


class TargetToolError(TargetError):
    """A tool the store offers answered its call as failed (MCP's ``isError``).

    The answer itself was well formed, and its transport succeeded (MCP
    carries a tool's failure inside an HTTP 200 or a stdio line): not an
    HTTP status, not a broken contract. The message is the tool's own text,
    masked and cut.
    """

    kind = "tool_error"


class OwnershipError(TargetError):
    """The reserved namespace holds records benchd did not write."""

    kind = "ownership"


class ThresholdBreached(BenchdError):
    """A ``--fail-under`` threshold was not met."""

    exit_code = EXIT_THRESHOLD


class OutputError(BenchdError):
    """Writing an output, baseline or pid file (or stdout) failed: disk full, read-only, ..."""

    exit_code = EXIT_IO

    @classmethod
    def from_os_error(cls, exc: OSError, what: str | None = None) -> OutputError:
        """One line: what was being written, the system's reason, and what to do."""
        target = what or (f"writing {exc.filename}" if exc.filename else "writing standard output")
        reason = exc.strerror or str(exc)
        hint = _IO_HINTS.get(exc.errno or 0, "check the path and the device")
        return cls(f"I/O error {target}: {reason}; {hint}")


_IO_HINTS = {
    errno.ENOSPC: "free some space or write elsewhere",
    errno.EDQUOT: "the disk quota is exhausted; free some space or write elsewhere",
    errno.EROFS: "the file system is read-only; write elsewhere",
    errno.EACCES: "permission denied; write where benchd may",
    errno.EIO: "the device reported an error",
}
