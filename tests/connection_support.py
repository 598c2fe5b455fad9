"""Test plumbing: the connection settings :func:`benchd.http.client.open_clients` takes.

Shared by the tests of the HTTP layer and of its hostile-answer bounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ConnectionSettings:
    """The connection keys every HTTP target kind has (``ClientSettings``): no retries."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0
    max_retries: int = 0
    backoff_s: float = 0.0
    max_retry_after_s: float = 0.0
    max_response_bytes: int = 1 << 20
