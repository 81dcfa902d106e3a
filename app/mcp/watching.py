"""A live connection, watched: its tool list (every page), word that a list changed (tools, resources,
prompts), and whether it is still there (pings, the end of its listen stream, the errors that mean it
is gone)."""

import json
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeVar

import anyio
import structlog
from mcp import Client, MCPDeprecationWarning, MCPError
from mcp.client.subscriptions import (
    ListenNotSupportedError,
    PromptsListChanged,
    ResourcesListChanged,
    SubscriptionLost,
    ToolsListChanged,
)
from mcp.types import (
    CONNECTION_CLOSED,
    PromptListChangedNotification,
    ResourceListChangedNotification,
    Tool,
    ToolListChangedNotification,
)

from app.mcp.connect import tracking_delivery

log = structlog.get_logger("toolbridge.mcp")

T = TypeVar("T")
ListKind = Literal["tools", "resources", "prompts"]
_CHANGE_KINDS: dict[type, ListKind] = {ToolsListChanged: "tools", ResourcesListChanged: "resources",
                                       PromptsListChanged: "prompts"}
_NOTIFIED_KINDS: dict[type, ListKind] = {ToolListChangedNotification: "tools",
                                         ResourceListChangedNotification: "resources",
                                         PromptListChangedNotification: "prompts"}


def notified_change(message: Any) -> ListKind | None:
    """Which list a 2025-era notification says changed, if it says one did."""
    return _NOTIFIED_KINDS.get(type(message))

PING_TIMEOUT = 10.0
BUSY_PING_INTERVAL = 2.0  # while calls run on a 2025-era remote session (keep_alive)
MODERN_PROTOCOL = "2026-07-28"
# We ping only 2025-era sessions, where ping is part of the protocol; the SDK warns about 2026 ones.
warnings.filterwarnings("ignore", message="ping is removed as of 2026", category=MCPDeprecationWarning)


async def listen_for_changes(
    server: str, client: Client, changed: Callable[[ListKind], None], lost: Callable[[], None],
    kinds: frozenset[ListKind] = frozenset({"tools"}),
) -> None:
    """2026-era servers announce list changes (tools, resources, prompts) only on a subscriptions/listen
    stream.

    That stream is also the only sign of life of a stateless server between calls: when it ends, the
    connection counts as lost and is made again, which lists everything and listens anew.
    """
    try:
        async with client.listen(tools_list_changed="tools" in kinds, resources_list_changed="resources" in kinds,
                                 prompts_list_changed="prompts" in kinds) as subscription:
            for kind in kinds:  # a change between the first listing and the subscription would go unseen
                changed(kind)
            async for event in subscription:
                what = _CHANGE_KINDS.get(type(event))
                if what is not None:
                    changed(what)
        log.info("mcp_listen_closed", server=server)
        lost()
    except SubscriptionLost:
        lost()
    except ListenNotSupportedError:
        return  # a 2025-era connection: changes arrive through the message handler instead
    except MCPError as exc:
        # Servers without subscriptions/listen (mcp-server-time: "Method not found") just never announce changes;
        # nothing else is lost. Debug: at info it read like an error on every start.
        log.debug("mcp_listen_unavailable", server=server, error=exc.message)


async def keep_alive(
    server: str, client: Client, lost: Callable[[], None], interval: float, busy: Callable[[], bool]
) -> None:
    """Pings a 2025-era remote session now and then: nothing else tells of a server that went away or
    a session it expired until a call fails. (2026 has no ping; its subscription stream does this.)

    While calls run (`busy`) it pings every BUSY_PING_INTERVAL: a server killed while a helper process of
    its kept the call's connection open sends no end to that stream, and the call would wait out its whole
    timeout; its closed port refuses the ping at once. A ping unanswered while busy proves nothing (a
    server running a blocking tool answers nothing until it ends), so only a refusal counts then."""
    step = min(interval, BUSY_PING_INTERVAL)
    idle = 0.0
    while True:
        await anyio.sleep(step)
        idle += step
        calls_running = busy()
        if idle < interval and not calls_running:
            continue
        idle = 0.0
        try:
            with (anyio.fail_after(PING_TIMEOUT), anyio.CancelScope() as attempt,
                  tracking_delivery(on_refused=attempt.cancel) as delivery):
                await client.send_ping()
            if not delivery.refused:
                continue
            reason = "its address refused the connection"
        except MCPError as exc:
            if not connection_gone(exc):
                log.info("mcp_ping_unsupported", server=server, error=exc.message)
                return
            reason = exc.message
        except TimeoutError:
            if calls_running:
                continue
            reason = f"no answer to a ping within {PING_TIMEOUT:g} s"
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
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


async def list_pages(
    fetch: Callable[[str | None], Awaitable[tuple[Sequence[T], str | None]]], at_most: int, pages: int = 20
) -> tuple[list[T], bool]:
    """Every page of a list (resources, templates, prompts) up to `at_most` items or `pages` pages, and
    whether there was more: a server may list far more than a description can use."""
    items: list[T] = []
    cursor: str | None = None
    for _ in range(pages):
        page, cursor = await fetch(cursor)
        items.extend(page)
        if not cursor or len(items) >= at_most:
            break
    return items[:at_most], bool(cursor) or len(items) > at_most


async def list_all_tools(client: Client, refresh: bool = False) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="refresh" if refresh else "use")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
