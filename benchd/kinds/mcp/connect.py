"""Open a probe's MCP session from its config: a stdio process or an HTTP endpoint."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from benchd.config.secrets import Secret
from benchd.http.client import ErrorContext, RetryingClient, RetryPolicy
from benchd.kinds.mcp.config import McpConfig
from benchd.kinds.mcp.events import answer_events
from benchd.kinds.mcp.session import McpSession
from benchd.kinds.mcp.wire import HttpWire, StdioWire, Wire

__all__ = ["open_session"]


def open_session(config: McpConfig, secret: Secret | None) -> McpSession:
    """A session that opens its wire on first use (and again after the wire ended)."""
    if config.transport == "stdio":
        assert config.command is not None

        async def stdio() -> Wire:
            wire = StdioWire(
                config.command or "",
                config.args,
                config.env,
                cwd=config.cwd,
                max_line_bytes=config.max_line_bytes,
            )
            await wire.start()
            return wire

        return McpSession(stdio, config.timeout_s)
    client, http = _http_client(config, secret)
    path = urlsplit(config.url or "").path or "/"

    async def streamable() -> Wire:
        return HttpWire(http, config.url or "", path)

    session = McpSession(streamable, config.timeout_s, on_close=client.aclose)
    session.http = http
    return session


def _http_client(
    config: McpConfig, secret: Secret | None
) -> tuple[httpx.AsyncClient, RetryingClient]:
    parts = urlsplit(config.url or "")
    base = f"{parts.scheme}://{parts.netloc}"
    auth = {} if secret is None else {config.auth_header: config.auth_prefix + secret.reveal()}
    client = httpx.AsyncClient(
        base_url=base,
        headers={"user-agent": "benchd", **config.headers, **auth},
        timeout=config.timeout_s,
        follow_redirects=False,
        # an event-stream answer ends at its JSON-RPC answer, open stream or not
        event_hooks={"response": [answer_events(config.max_response_bytes)]},
    )
    policy = RetryPolicy(
        config.max_retries, config.backoff_s, max_retry_after_s=config.max_retry_after_s
    )
    return client, RetryingClient(
        client,
        policy,
        base,
        max_response_bytes=config.max_response_bytes,
        deadline_s=config.timeout_s,
        context=ErrorContext(api="an MCP server", key_source=secret.source if secret else ""),
    )
