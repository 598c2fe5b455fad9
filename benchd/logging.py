"""structlog configuration and benchd's own processors.

JSON lines when stderr is not a terminal, a readable console when it is.
A console line reads ``TIME [level] EVENT probe=NAME key=value ...``: the
event and the probe lead, the other keys keep the order they were logged
in, and unix times (``*_at`` keys) are shown as UTC date-times. JSON lines
keep every value as logged (epoch floats included).
The last processor before rendering is :func:`benchd.redact.processor`:
every registered secret and every URL's user info is masked in every event
value (tracebacks included), wherever it appears.
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
    installed: about 0.1 s, for JSON lines that never use it. The block lasts only
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
    "configure_logging",
    "console_order",
    "get_logger",
]


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


def get_logger(name: str = "benchd") -> Any:
    return structlog.get_logger(name)
