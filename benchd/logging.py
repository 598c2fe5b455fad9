"""structlog configuration and benchd's own processors.

JSON lines when stderr is not a terminal, a readable console when it is.
A console line reads ``TIME [level] EVENT probe=NAME key=value ...``: the
event and the probe lead, the other keys keep the order they were logged
in, and unix times (``*_at`` keys) are shown as UTC date-times. JSON lines
keep every value as logged (epoch floats included).
The last processor before rendering is :func:`benchd.redact.processor`:
every registered secret and every URL's user info is masked in every event
value (tracebacks included), wherever it appears.

Store client libraries log through the standard library (psycopg, gRPC,
asyncio) or print with handlers of their own (pymilvus), and Python's
warnings print to stderr: :func:`configure_logging` routes all of them into
this log, one event each on one line (the message's first line, an exception
as ``Type: message``, never a traceback), at most at level ``warning`` (the
cycle reports what failed). :func:`route_library_logs` takes over the
handlers a library installs for itself when it is imported.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from datetime import UTC, datetime
from typing import Any

from benchd import redact


def _import_structlog_without_rich() -> None:
    """Import structlog; keep it from importing rich unless stderr is a terminal.

    structlog's dev module imports rich (for console tracebacks) wherever it is
    installed: a slow import, for JSON lines that never use it. The block lasts only
    for structlog's own import, so anything else may still import rich.
    """
    if "structlog" in sys.modules or "rich" in sys.modules or sys.stderr.isatty():
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` -> ImportError
    try:
        import structlog  # noqa: F401  # the import this guard exists for
    finally:
        del sys.modules["rich"]


_import_structlog_without_rich()

import structlog  # noqa: E402  # after the guard above, on purpose

__all__ = [
    "LibraryLogHandler",
    "configure_logging",
    "console_order",
    "get_logger",
    "route_library_logs",
]

LIBRARY_LINE_CHARS = 500
"""A library's message is cut to its first line and to this many characters."""



def _stderr_logger(*args: Any) -> structlog.PrintLogger:
    # Looked up at each logger creation, so a replaced sys.stderr is honoured.
    return structlog.PrintLogger(file=sys.stderr)


_LEAD = ("timestamp", "level", "event", "probe")


def console_order(
    logger: Any, method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor (console only): time, level, event, probe first; readable times."""
    ordered: dict[str, Any] = {k: event_dict[k] for k in _LEAD if k in event_dict}
    for key, value in event_dict.items():
        if key in ordered:
            continue
        ordered[key] = _readable_time(value) if key.endswith("_at") else value
    return ordered


def _readable_time(value: Any) -> Any:
    """A unix time as ``2026-12-01T10:23:45.123Z``; anything else unchanged."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e11:
        return value
    stamp = datetime.fromtimestamp(value, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


class LibraryLogHandler(logging.Handler):
    """A standard-library log record (a store library's, a warning) as one benchd log event."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields: dict[str, Any] = {"logger": record.name}
            if record.levelno > logging.WARNING:
                fields["library_level"] = record.levelname.lower()
            exc = record.exc_info[1] if record.exc_info else None
            if exc is not None:
                fields["error"] = _one_line(f"{type(exc).__name__}: {exc}")
            level = min(record.levelno, logging.WARNING)
            get_logger(record.name).log(level, _one_line(record.getMessage()), **fields)
        except Exception:  # a log record must never fail the call that logged it
            self.handleError(record)


def _one_line(text: str) -> str:
    """The first non-blank line of ``text``, cut to :data:`LIBRARY_LINE_CHARS`."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= LIBRARY_LINE_CHARS else line[: LIBRARY_LINE_CHARS - 3] + "..."


def route_library_logs(name: str) -> None:
    """Logger ``name`` and those under it log into benchd's log, not through handlers of
    their own (pymilvus installs stderr handlers, not propagating, when it is imported)."""
    manager = logging.Logger.manager
    for each in [name, *(n for n in manager.loggerDict if n.startswith(name + "."))]:
        logger = logging.getLogger(each)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.propagate = True


def _route_standard_logging() -> None:
    """The root logger's one handler is benchd's; Python's warnings go through it too."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, LibraryLogHandler)]:
        root.removeHandler(handler)
    root.addHandler(LibraryLogHandler())
    logging.captureWarnings(True)


def configure_logging(level: str = "info", *, json: bool | None = None) -> None:
    """Configure structlog once for the process; ``json=None`` picks by terminal."""
    as_json = (not sys.stderr.isatty()) if json is None else json
    tail: list[Any] = (
        [
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            redact.processor,
            structlog.processors.JSONRenderer(),
        ]
        if as_json
        else [
            structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S", utc=True),
            structlog.processors.format_exc_info,
            redact.processor,
            console_order,
            structlog.dev.ConsoleRenderer(colors=False, sort_keys=False),
        ]
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            *tail,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
    _route_standard_logging()


def get_logger(name: str = "benchd") -> Any:
    return structlog.get_logger(name)
