"""An ``openai:`` embedder's requests through the client every store answer goes through.

:func:`embedder_maker` gives the embed stage embedders whose endpoint
requests pass :class:`~benchd.http.client.RetryingClient` (the error map,
``Retry-After``, bounded retries, the target's ``timeout_s`` as one deadline
for the whole answer, ``max_response_bytes`` from ``[probe.target.embed]``)
and :func:`benchd.http.answers.decode` (depth and shape checks; an answer
over 512 KiB decoded in the decode worker, only its matrix handed back).
Every failure is a counted kind: ``timeout``, ``connect``, ``auth``,
``decode``, ``http_4xx``/``http_5xx``, ``rate_limited``, ``redirect``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from benchd.embed.config import EmbedConfig
from benchd.embed.endpoint import EndpointURL, Limits
from benchd.embed.models import Embedder, parse_embedder
from benchd.http import answers
from benchd.http.client import ErrorContext, open_clients

__all__ = ["BoundedPoster", "embedder_maker", "limits_of"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Settings:
    """:class:`~benchd.http.client.ClientSettings` for an embeddings endpoint."""

    url: str
    timeout_s: float
    max_retries: int
    backoff_s: float
    max_retry_after_s: float
    max_response_bytes: int
    headers: dict[str, str] = field(default_factory=dict)


class BoundedPoster:
    """Sends embeddings requests as an adapter sends a store's (:mod:`benchd.http.client`)."""

    def __init__(self, url: EndpointURL, auth: Mapping[str, str], limits: Limits) -> None:
        self._url = url
        settings = _Settings(
            url.origin, limits.timeout_s, limits.max_retries, limits.backoff_s,
            limits.max_retry_after_s, limits.max_response_bytes,
        )  # fmt: skip
        bearer = auth.get("Authorization", "").startswith("Bearer ")
        key_source = "OPENAI_API_KEY" if bearer else "the URL's user info"
        context = ErrorContext(api="an OpenAI-style embeddings endpoint", key_source=key_source)
        self._http = open_clients(settings, dict(auth), context=context).http

    @property
    def retries(self) -> int:
        """Requests sent again (after a 5xx, a timeout, a refused connection or a 429)."""
        return self._http.retries

    async def post(self, body: Mapping[str, Any], what: str, reduce: Callable[[Any], T]) -> T:
        answer = await self._http.request(
            "POST", self._url.path, params=list(self._url.params), json=dict(body)
        )
        return await answers.decode(answer.body, what, reduce)

    async def aclose(self) -> None:
        await self._http.aclose()


def limits_of(config: EmbedConfig, target: object) -> Limits:
    """The endpoint's bounds: the target's timeout and retries, the embed table's size cap."""
    default = Limits()
    return Limits(
        timeout_s=float(getattr(target, "timeout_s", default.timeout_s)),
        max_retries=int(getattr(target, "max_retries", default.max_retries)),
        backoff_s=float(getattr(target, "backoff_s", default.backoff_s)),
        max_retry_after_s=float(getattr(target, "max_retry_after_s", default.max_retry_after_s)),
        max_response_bytes=config.max_response_bytes,
    )


def embedder_maker(config: EmbedConfig, target: object) -> Callable[[str], Embedder]:
    """What the embed stage builds its embedder with: an endpoint's over :class:`BoundedPoster`."""
    limits = limits_of(config, target)

    def make(spec: str) -> Embedder:
        return parse_embedder(spec, connect=BoundedPoster, limits=limits)

    return make
