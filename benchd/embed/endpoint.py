"""An OpenAI-compatible ``POST /v1/embeddings`` endpoint: its URL, its answer, its client.

The spec's URL is taken apart once (:class:`EndpointURL`): the origin and
path requests go to, the query string sent as parameters (``?api-key=...``
after the path, never before it), the user info sent as Basic auth, and a
public form (no user info, no query) for every message.

What travels is decided by a :class:`Poster`. The targets give the embedder
the bounded client every store answer goes through (size cap, one deadline
for the whole answer, large answers decoded off the loop, retries, the error
map: ``benchd.embed.client``); without one (the reference store) a
plain bounded httpx exchange serves (:class:`HttpxPoster`). Either hands the
decoded answer to :func:`matrix_of`, which accepts only the documented shape
and raises ``ValueError`` for anything else: a bad reply is ``decode``.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, Protocol, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

import anyio
import anyio.to_thread
import httpx
import numpy as np
import numpy.typing as npt

from benchd import redact
from benchd.embed.config import DEFAULT_MAX_RESPONSE_BYTES

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "Connect",
    "EmbedderError",
    "EndpointURL",
    "HttpxPoster",
    "Limits",
    "OpenAIEmbedder",
    "Poster",
    "endpoint_url",
    "matrix_of",
]

T = TypeVar("T")
FloatMatrix = npt.NDArray[np.float32]

_OPENAI_BATCH = 256
_INLINE_BYTES = 512 * 1024  # the fallback decodes larger answers in a thread
_MAX_DEPTH = 64


class EmbedderError(RuntimeError):
    """The embedder could not produce vectors; ``kind`` is the error kind it counts as."""

    def __init__(self, message: str, kind: str = "connect") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Limits:
    """How long and how much an embeddings request may take (the target's, where it has them)."""

    timeout_s: float = 30.0
    max_retries: int = 3
    backoff_s: float = 0.25
    max_retry_after_s: float = 30.0
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES


@dataclass(frozen=True, slots=True)
class EndpointURL:
    """An endpoint URL taken apart: where to send, what to send with it, what to show."""

    origin: str  # scheme://host[:port], no user info
    path: str  # .../embeddings
    params: tuple[tuple[str, str], ...]  # the query string, sent with every request
    basic: str | None  # "Basic ..." from the user info, if any

    @property
    def public(self) -> str:
        """The URL as any message shows it: no user info, no query string."""
        return self.origin + self.path


def endpoint_url(url: str) -> EndpointURL:
    """``url`` (the base ``.../v1`` or the full ``.../v1/embeddings``) taken apart."""
    parts = urlsplit(url)
    public = redact.public_url(url)
    origin = public[: len(public) - len(parts.path)] if parts.path else public
    path = parts.path.rstrip("/")
    if not path.endswith("/embeddings"):
        path += "/embeddings"
    basic = None
    if parts.username is not None or parts.password is not None:
        plain = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
        basic = "Basic " + base64.b64encode(plain.encode()).decode()
    params = tuple(parse_qsl(parts.query, keep_blank_values=True))
    return EndpointURL(origin, path, params, basic)


# -- the answer --------------------------------------------------------------------


def _row(item: Any, at: int) -> list[float] | npt.NDArray[np.float32]:
    if not isinstance(item, dict) or "embedding" not in item:
        raise ValueError(f"data[{at}] is not an object with an 'embedding'")
    value = item["embedding"]
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"data[{at}].embedding is a string but not base64") from None
        if len(raw) % 4:
            raise ValueError(f"data[{at}].embedding is base64 of {len(raw)} bytes, not float32s")
        return np.frombuffer(raw, dtype="<f4")
    if isinstance(value, list) and all(type(x) is float or type(x) is int for x in value):
        return value
    raise ValueError(f"data[{at}].embedding is neither a list of numbers nor base64")


def _order(items: list[Any], rows: int) -> list[Any]:
    """The items by their ``index`` (each of 0..rows-1 once), or as sent if none has one."""
    if not any(isinstance(i, dict) and "index" in i for i in items):
        return items
    indexes = [i.get("index") if isinstance(i, dict) else None for i in items]
    if sorted(x for x in indexes if type(x) is int) != list(range(rows)):
        raise ValueError(f"data's indexes are not 0..{rows - 1}, each once")
    return [item for _, item in sorted(zip(indexes, items, strict=True))]


def matrix_of(value: Any, rows: int) -> FloatMatrix:
    """The ``rows`` x dims float32 matrix an embeddings answer holds; ValueError if it holds none.

    Module level and picklable: the decode worker runs it on a large answer and
    hands back only the matrix.
    """
    items = value.get("data") if isinstance(value, dict) else None
    if not isinstance(items, list):
        raise ValueError("the answer has no 'data' array")
    if len(items) != rows:
        raise ValueError(f"the answer holds {len(items)} embeddings for {rows} texts")
    vectors = [_row(item, at) for at, item in enumerate(_order(items, rows))]
    widths = {len(v) for v in vectors}
    if len(widths) > 1 or 0 in widths:
        raise ValueError(f"the embeddings have widths {sorted(widths)[:4]}, not one")
    if not vectors:
        return np.zeros((0, 1), dtype=np.float32)
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            matrix = np.asarray(vectors, dtype=np.float32)
    except OverflowError:  # an integer beyond any float
        raise ValueError("an embedding holds a number beyond float32") from None
    if not np.isfinite(matrix).all():
        raise ValueError("an embedding holds a value that is not finite (or not a float32)")
    return matrix


# -- the client --------------------------------------------------------------------


class Poster(Protocol):
    """Sends one embeddings request; raises the error kinds of a store's answer."""

    async def post(self, body: Mapping[str, Any], what: str, reduce: Callable[[Any], T]) -> T: ...

    async def aclose(self) -> None: ...


Connect = Callable[[EndpointURL, Mapping[str, str], Limits], Poster]
"""Builds a :class:`Poster` for an endpoint, with its auth headers and limits."""


class HttpxPoster:
    """One bounded exchange per request over httpx: size cap, one deadline, no retries.

    The reference store's client (it cannot import the targets'); its
    failures are :class:`EmbedderError` with the kind they would count as.
    """

    def __init__(self, url: EndpointURL, auth: Mapping[str, str], limits: Limits) -> None:
        self._url = url
        self._limits = limits
        self._client = httpx.AsyncClient(
            base_url=url.origin, headers=dict(auth), follow_redirects=False
        )

    async def post(self, body: Mapping[str, Any], what: str, reduce: Callable[[Any], T]) -> T:
        limit = self._limits.max_response_bytes
        try:
            with anyio.fail_after(self._limits.timeout_s):
                raw = await self._exchange(body, what, limit)
        except (TimeoutError, httpx.TimeoutException):
            raise EmbedderError(f"{what}: no complete answer in time", "timeout") from None
        except httpx.HTTPError as exc:
            raise EmbedderError(f"{what}: cannot connect ({type(exc).__name__})") from None
        if len(raw) > _INLINE_BYTES:
            return await anyio.to_thread.run_sync(_decoded, raw, what, reduce)
        return _decoded(raw, what, reduce)

    async def _exchange(self, body: Mapping[str, Any], what: str, limit: int) -> bytes:
        request = self._client.build_request(
            "POST", self._url.path, params=list(self._url.params), json=dict(body)
        )
        response = await self._client.send(request, stream=True)
        try:
            status = response.status_code
            if status >= 300:
                raise EmbedderError(f"{what}: HTTP {status}", _status_kind(status))
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise EmbedderError(f"{what}: answer of {declared} bytes is too large", "decode")
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise EmbedderError(f"{what}: answer over {limit} bytes", "decode")
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()


def _status_kind(status: int) -> str:
    if status < 400:
        return "redirect"
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limited"
    return "http_4xx" if status < 500 else "http_5xx"


def _decoded(raw: bytes, what: str, reduce: Callable[[Any], T]) -> T:
    try:
        value = json.loads(raw)
        _shallow(value)
        return reduce(value)
    except RecursionError:
        raise EmbedderError(f"{what}: answer nests JSON too deep", "decode") from None
    except (ValueError, TypeError) as exc:
        raise EmbedderError(f"{what}: unexpected answer ({exc})", "decode") from None


def _shallow(value: Any) -> None:
    level = [value]
    for _ in range(_MAX_DEPTH):
        level = [c for n in level if isinstance(n, dict | list) for c in _children(n)]
        if not level:
            return
    raise RecursionError


def _children(node: dict[str, Any] | list[Any]) -> list[Any]:
    return [c for c in (node.values() if isinstance(node, dict) else node)
            if isinstance(c, dict | list)]  # fmt: skip


def _normalise(matrix: FloatMatrix) -> FloatMatrix:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: FloatMatrix = (matrix / norms).astype(np.float32, copy=False)
    return unit


def _auth(url: EndpointURL) -> dict[str, str]:
    """The request's credentials (registered as secrets): ``OPENAI_API_KEY``, else the user info."""
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        redact.register_secret(key)
        return {"Authorization": f"Bearer {key}"}
    return {"Authorization": url.basic} if url.basic else {}


class OpenAIEmbedder:
    """An OpenAI-compatible ``POST /v1/embeddings`` client, over a :class:`Poster`."""

    def __init__(
        self,
        url: str,
        model: str,
        encoding: Literal["float", "base64"] = "float",
        *,
        connect: Connect = HttpxPoster,
        limits: Limits = Limits(),
    ) -> None:
        redact.register_url(url)
        self.endpoint = endpoint_url(url)
        self.url = self.endpoint.public
        self.model = model
        self.encoding = encoding
        suffix = "&encoding=base64" if encoding == "base64" else ""
        self._spec = f"openai:{redact.public_url(url)}#{model}{suffix}"
        self._poster = connect(self.endpoint, _auth(self.endpoint), limits)

    @property
    def spec(self) -> str:
        return self._spec

    async def _batch(self, texts: Sequence[str]) -> FloatMatrix:
        body = {"model": self.model, "input": list(texts), "encoding_format": self.encoding}
        what = f"POST {self.url}"
        return await self._poster.post(body, what, partial(matrix_of, rows=len(texts)))

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        parts = [
            await self._batch(texts[start : start + _OPENAI_BATCH])
            for start in range(0, len(texts), _OPENAI_BATCH)
        ]
        if not parts:
            return np.zeros((0, 1), dtype=np.float32)
        if len({p.shape[1] for p in parts}) > 1:
            raise EmbedderError(f"POST {self.url}: batches answered different widths", "decode")
        return _normalise(np.vstack(parts))

    async def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        return await self.embed(texts)

    async def aclose(self) -> None:
        await self._poster.aclose()
