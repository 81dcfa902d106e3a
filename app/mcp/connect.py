"""Connecting to MCP servers: the remote transports, tool lists and their pagination, tool-change
subscriptions, what became of a call's request, and readable reasons when connecting fails."""

import json
import warnings
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import structlog
from mcp import Client, MCPDeprecationWarning, MCPError
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.types import CONNECTION_CLOSED, Tool

from app.mcp.config import HttpServerConfig

log = structlog.get_logger("toolbridge.mcp")

HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
PING_TIMEOUT = 10.0
MODERN_PROTOCOL = "2026-07-28"
# We ping only 2025-era sessions, where ping is part of the protocol; the SDK warns about 2026 ones.
warnings.filterwarnings("ignore", message="ping is removed as of 2026", category=MCPDeprecationWarning)


@dataclass
class Delivery:
    """How far one tool call's request got on a streamable HTTP connection.

    The SDK reports a refused connection and a connection lost mid-call alike (connection closed);
    only the HTTP layer knows whether the server can have seen the request.
    """

    posted: bool = False  # the request was handed to the HTTP client
    refused: bool = False  # ... which could not connect, so nothing was sent

    @property
    def reached_server(self) -> bool:
        return self.posted and not self.refused


# The SDK posts each request from a task started in the sender's context, so this reaches it.
_delivery: ContextVar[Delivery | None] = ContextVar("toolbridge_mcp_delivery", default=None)


@contextmanager
def tracking_delivery() -> Iterator[Delivery]:
    """Records what becomes of the HTTP requests sent within the block."""
    delivery = Delivery()
    token = _delivery.set(delivery)
    try:
        yield delivery
    finally:
        _delivery.reset(token)


class _DeliveryTrackingClient(httpx2.AsyncClient):
    # Overriding send, not the transport, keeps httpx's own transport choice (proxies from the environment).
    async def send(self, request: httpx2.Request, **options: Any) -> httpx2.Response:
        delivery = _delivery.get()
        if delivery is None or request.method != "POST":
            return await super().send(request, **options)
        delivery.posted = True
        try:
            return await super().send(request, **options)
        except httpx2.ConnectError:  # raised before a byte of the request is written
            delivery.refused = True
            raise


async def enter_http(
    stack: AsyncExitStack, server: HttpServerConfig, options: dict[str, Any]
) -> tuple[Client, str]:
    """Streamable HTTP, falling back to legacy SSE when no `type` says which one the server speaks."""
    if server.is_legacy_sse:
        return await stack.enter_async_context(Client(sse_transport(server), **options)), "sse"
    attempt = AsyncExitStack()
    try:
        http = await attempt.enter_async_context(
            _DeliveryTrackingClient(headers=server.headers, timeout=HTTP_TIMEOUT, follow_redirects=True)
        )
        client = await attempt.enter_async_context(
            Client(streamable_http_client(server.url, http_client=http), **options)
        )
    except Exception as streamable_error:  # boundary: any failure here means "try legacy SSE"
        await attempt.aclose()
        if server.type is not None:
            raise
        try:
            return await stack.enter_async_context(Client(sse_transport(server), **options)), "sse"
        except Exception:  # boundary: report the streamable error, the more likely intent
            raise streamable_error from None
    stack.push_async_exit(attempt.__aexit__)
    return client, "http"


def sse_transport(server: HttpServerConfig) -> Any:
    return sse_client(server.url, headers=server.headers, timeout=30.0, sse_read_timeout=300.0)


async def listen_for_tool_changes(
    server: str, client: Client, changed: Callable[[], None], lost: Callable[[], None]
) -> None:
    """2026-era servers announce tool changes only on a subscriptions/listen stream.

    That stream is also the only sign of life of a stateless server between calls: when it ends, the
    connection counts as lost and is made again, which lists the tools and listens anew.
    """
    try:
        async with client.listen(tools_list_changed=True) as subscription:
            changed()  # a change between the first listing and the subscription would go unseen
            async for _event in subscription:
                changed()
        log.info("mcp_listen_closed", server=server)
        lost()
    except SubscriptionLost:
        lost()
    except ListenNotSupportedError:
        return  # a 2025-era connection: changes arrive through the message handler instead
    except MCPError as exc:
        # Servers without subscriptions/listen just never announce changes; nothing else is lost.
        log.info("mcp_listen_unavailable", server=server, error=exc.message)


async def keep_alive(server: str, client: Client, lost: Callable[[], None], interval: float) -> None:
    """Pings a 2025-era remote session now and then: nothing else tells of a server that went away or
    a session it expired until a call fails. (2026 has no ping; its subscription stream does this.)"""
    while True:
        await anyio.sleep(interval)
        try:
            with anyio.fail_after(PING_TIMEOUT):
                await client.send_ping()
            continue
        except MCPError as exc:
            if not connection_gone(exc):
                log.info("mcp_ping_unsupported", server=server, error=exc.message)
                return
            reason = exc.message
        except (TimeoutError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            reason = str(exc) or type(exc).__name__
        log.warning("mcp_ping_failed", server=server, error=reason)
        lost()
        return


def pings(client: Client, transport: str) -> bool:
    """Whether `keep_alive` has work on this connection: remote, and of the 2025 era."""
    # Protocol versions are dates, so they compare as strings.
    return transport != "stdio" and (client.protocol_version or "") < MODERN_PROTOCOL


def session_gone(error: MCPError) -> bool:
    # A restarted or expired remote server: the SDK's 404 mapping, or the server's own JSON-RPC error.
    return error.message.lower() in ("session terminated", "session not found")


def connection_gone(error: MCPError) -> bool:
    """The error says the connection or its session is gone, not that the server refused a request."""
    return error.code == CONNECTION_CLOSED or session_gone(error)


def definition(tool: Tool) -> str:
    return json.dumps(tool.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True)


async def list_all_tools(client: Client, refresh: bool = False) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="refresh" if refresh else "use")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


def describe_failure(exc: BaseException, command: str | None = None) -> str:
    """A readable reason from whatever the SDK raised, exception groups unwrapped."""
    leaves = list(_leaves(exc))
    parts = []
    for leaf in leaves:
        if isinstance(leaf, FileNotFoundError):
            parts.append(f"command not found: {leaf.filename or command}")
        elif isinstance(leaf, MCPError):
            parts.append(f"{leaf.message} (MCP error {leaf.code})")
        else:
            parts.append(f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__)
    return "; ".join(dict.fromkeys(parts)) or type(exc).__name__


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc
