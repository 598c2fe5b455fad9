"""structlog configuration and benchd's own processors.

JSON lines when stderr is not a terminal, a readable console when it is.
Secrets registered with :func:`register_secret` are replaced by ``***`` in
every event value before rendering, wherever they appear.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

__all__ = ["configure_logging", "get_logger", "redact_secrets", "register_secret"]

_SECRETS: set[str] = set()
_MASK = "***"


def register_secret(value: str) -> None:
    """Make sure ``value`` never appears in a log line (keys shorter than 4 chars are ignored)."""
    if len(value) >= 4:
        _SECRETS.add(value)


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        for secret in _SECRETS:
            if secret in value:
                value = value.replace(secret, _MASK)
        return value
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_scrub(v) for v in value)
    return value


def redact_secrets(
    logger: Any, method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: mask registered secrets in every value."""
    if not _SECRETS:
        return event_dict
    for key in list(event_dict):
        event_dict[key] = _scrub(event_dict[key])
    return event_dict


def _stderr_logger(*args: Any) -> structlog.PrintLogger:
    # Looked up at each logger creation, so a replaced sys.stderr is honoured.
    return structlog.PrintLogger(file=sys.stderr)


def configure_logging(level: str = "info", *, json: bool | None = None) -> None:
    """Configure structlog once for the process; ``json=None`` picks by terminal."""
    as_json = (not sys.stderr.isatty()) if json is None else json
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            redact_secrets,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )


def get_logger(name: str = "benchd") -> Any:
    return structlog.get_logger(name)
