"""Test plumbing: judge a (status, headers, body) answer the way benchd's HTTP layer does.

The error map (:func:`~benchd.http.client.status_error`) runs first,
then the target's async search parser on a 2xx, as both passes do.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import anyio

from benchd.http.client import Answer, status_error
from benchd.store.target import SearchQuery


def parse_answer(
    target: Any,
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    limit: int = 100,
    what: str = "GET /memory/search",
) -> tuple[str, ...]:
    """Ranked ids from one answer, or the TargetError benchd raises for it."""
    lower = {k.lower(): v for k, v in headers.items()}
    error = status_error(status, lower, body, what)
    if error is not None:
        raise error
    parse = functools.partial(
        target.parse_search_response, Answer(status, lower, body), SearchQuery("q", limit)
    )
    ranked: tuple[str, ...] = anyio.run(parse)
    return ranked


async def parse_answer_async(
    target: Any,
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    limit: int = 100,
    what: str = "GET /memory/search",
) -> tuple[str, ...]:
    """:func:`parse_answer` for a test already running on an event loop."""
    lower = {k.lower(): v for k, v in headers.items()}
    error = status_error(status, lower, body, what)
    if error is not None:
        raise error
    ranked: tuple[str, ...] = await target.parse_search_response(
        Answer(status, lower, body), SearchQuery("q", limit)
    )
    return ranked
