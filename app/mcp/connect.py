"""Opening a connection to one MCP server: a stdio process (its stderr read, its process group kept),
streamable HTTP with legacy SSE as the fallback, what became of a call's HTTP request, and a readable
reason when connecting fails (failures.py)."""

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import psutil
import structlog
from mcp import Client, StdioServerParameters
from mcp.client.session import ElicitationFnT
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from app import __version__
from app.mcp.callbacks import declining_elicitation, server_log_forwarder
from app.mcp.config import HttpServerConfig, ServerConfig, StdioServerConfig
from app.mcp.failures import describe_failure as describe_failure
from app.mcp.processes import (
    SERVER_MARKER,
    StderrTail,
    descendants,
    end_process_groups,
    pump_stderr,
    resolve_command,
    run_since,
    session_children,
    spawned_since,
)
from app.mcp.sampling import Complete, sampling_handler
from app.mcp.server_auth import ServerAuth
from app.mcp.stdio import DEFAULT_MAX_MESSAGE_BYTES, stdio_client
from app.mcp.tasks import TasksExtension

log = structlog.get_logger("toolbridge.mcp")

CLIENT_INFO = Implementation(name="toolbridge", version=__version__)
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
MessageHandler = Callable[[Any], Awaitable[None]]
START_TURN_SECONDS = 1.0  # the longest a starting server keeps others waiting (StartGate)


@dataclass(frozen=True)
class Connection:
    client: Client
    transport: str  # "stdio", "http" or "sse": what the server turned out to speak


class StartGate:
    """Servers on this machine start a few at a time: as many as there are cores. Starting is mostly
    CPU (a Python server imports its SDK for most of a second), so ten at once on two cores made all ten
    ready late and the gateway slow to answer meanwhile; in turns, the first are ready early. A turn ends
    when the server is ready, or after `hold` seconds: one slow for another reason (a download, a network)
    does not keep the others waiting."""

    def __init__(self, slots: int, hold: float) -> None:
        self._slots = anyio.Semaphore(max(1, slots))
        self._hold = hold

    @asynccontextmanager
    async def slot(self, needed: bool) -> AsyncIterator[Callable[[], None]]:
        """Waits for a turn (when `needed`); yields the function that ends it early."""
        if not needed:
            yield lambda: None
            return
        await self._slots.acquire()
        holding = True

        def release() -> None:
            nonlocal holding
            if holding:
                holding = False
                self._slots.release()

        timer = asyncio.get_running_loop().call_later(self._hold, release)
        try:
            yield release
        finally:
            timer.cancel()
            release()


@dataclass
class ConnectionOpener:
    """Opens the pool's connections. Its stderr readers run in the pool's task group (`task_group`, set once
    the pool is entered), so that shutdown can cancel the ones a stray grandchild keeps open; the process
    groups of stdio servers are gathered in `process_groups`, to end what they leave behind."""

    complete: Complete | None = None
    sampling_model: str | None = None
    task_group: anyio.abc.TaskGroup | None = None
    process_groups: set[int] = field(default_factory=set)
    start_gate: StartGate = field(default_factory=lambda: StartGate(os.cpu_count() or 1, START_TURN_SECONDS))
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES

    @asynccontextmanager
    async def open(
        self, name: str, server: ServerConfig, *, read_timeout: float, on_message: MessageHandler,
        stderr: StderrTail | None, on_question: ElicitationFnT | None = None, auth: ServerAuth | None = None,
    ) -> AsyncIterator[Connection]:
        """`on_question`: what a server's question in the middle of a call is handed to (held_calls.py); declined
        without it. `auth`: an HTTP server's OAuth (server_auth.py), which sees its answers."""
        options: dict[str, Any] = {
            "client_info": CLIENT_INFO,
            "read_timeout_seconds": read_timeout,
            "logging_callback": server_log_forwarder(name),
            "message_handler": on_message,
            "mode": server.mode,
            # Declared so that a 2026-era server asks (input_required) rather than refusing the call.
            "elicitation_callback": on_question or declining_elicitation(name),
            # A 2026-era server may then answer a call with a task, which the gateway follows (tasks.py).
            "extensions": [TasksExtension()],
        }
        if self.complete is not None:  # registering the callback is what declares the capability
            options["sampling_callback"] = sampling_handler(name, self.complete, self.sampling_model, log)
        async with AsyncExitStack() as stack:
            if isinstance(server, StdioServerConfig):
                assert stderr is not None
                yield Connection(await self._enter_stdio(stack, name, server, options, stderr), "stdio")
            else:
                yield Connection(*await enter_http(stack, server, options, auth))

    async def _enter_stdio(
        self, stack: AsyncExitStack, name: str, server: StdioServerConfig, options: dict[str, Any], tail: StderrTail
    ) -> Client:
        # A mark in the server's environment tells its process apart from any other started meanwhile (two
        # entries may run the same command), so that what it leaves behind, and only that, is ended.
        marker = f"{name}:{os.urandom(8).hex()}"
        # Bytes that are not UTF-8 on stdout become U+FFFD, so that line fails as JSON and the session reads on;
        # decoded strictly, the SDK's reader died of the first such byte and every later call hung.
        params = StdioServerParameters(command=resolve_command(server.command), args=server.args,
                                       env=server.env | {SERVER_MARKER: marker}, cwd=server.cwd,
                                       encoding_error_handler="replace")
        read_fd, write_fd = os.pipe()
        errlog = os.fdopen(write_fd, "w")
        assert self.task_group is not None
        self.task_group.start_soon(pump_stderr, name, read_fd, tail, name=f"mcp-stderr:{name}")
        before = session_children()
        groups: set[int] = set()
        # Pushed first, so it runs last, once the SDK has ended the server: what it left behind is ended at
        # every restart, reload and loss, not only at shutdown (a crash-looping server piled up orphans).
        stack.push_async_callback(self._end_leftovers, groups, helpers := [])
        try:
            transport = stdio_client(params, name=name, max_message_bytes=self.max_message_bytes, errlog=errlog)
            client = await stack.enter_async_context(Client(transport, **options))
        finally:
            errlog.close()  # the child holds its own copy; ours would keep the pipe open forever
            # Each stdio server leads its own process group; remember ours to end what it leaves behind. Also
            # when the start failed or was cut off: shutdown landing while the SDK spawns leaves it a live
            # process it never learns of (one that was cleaned up is gone and not found here).
            groups.update(spawned_since(before, marker))
            # A start cut off while the SDK spawned may leave a process not yet showing the mark; shutdown
            # ends any new one run with these arguments then, as the closest match.
            self.process_groups.update(groups or run_since(before, server.args))
        # Runs first, while the server still lives: helpers that left its group (setsid) are found only as
        # its descendants, and only until it exits.
        stack.callback(lambda: helpers.extend(descendants(groups)))
        return client

    async def _end_leftovers(self, groups: set[int], helpers: list[psutil.Process]) -> None:
        with anyio.CancelScope(shield=True):  # also when the connection ends by cancellation; bounded anyway
            await end_process_groups(groups, helpers)
        self.process_groups.difference_update(groups)  # a pid ended may be reused: never signal it again


@dataclass
class Delivery:
    """How far one tool call's request got on a streamable HTTP connection.

    The SDK reports a refused connection and a connection lost mid-call alike (connection closed);
    only the HTTP layer knows whether the server can have seen the request.
    """

    posted: bool = False  # the request was handed to the HTTP client
    refused: bool = False  # ... which could not connect, so nothing was sent
    # Called with `refused` set: on a 2025-era connection the SDK's sender dies of the refusal and no
    # answer, not even an error, ever comes back, so a waiter must learn of it here.
    on_refused: Callable[[], None] = lambda: None

    @property
    def reached_server(self) -> bool:
        return self.posted and not self.refused


# The SDK posts each request from a task started in the sender's context, so this reaches it.
_delivery: ContextVar[Delivery | None] = ContextVar("toolbridge_mcp_delivery", default=None)


@contextmanager
def tracking_delivery(on_refused: Callable[[], None] = lambda: None) -> Iterator[Delivery]:
    """Records what becomes of the HTTP requests sent within the block."""
    delivery = Delivery(on_refused=on_refused)
    token = _delivery.set(delivery)
    try:
        yield delivery
    finally:
        _delivery.reset(token)


class _DeliveryTrackingClient(httpx2.AsyncClient):
    # Overriding send, not the transport, keeps httpx's own transport choice (proxies from the environment).
    def __init__(self, saw: Callable[[httpx2.Response], None], **options: Any) -> None:
        super().__init__(**options)
        self._saw = saw

    async def send(self, request: httpx2.Request, **options: Any) -> httpx2.Response:
        delivery = _delivery.get()
        if delivery is not None and request.method == "POST":
            delivery.posted = True
        try:
            response = await super().send(request, **options)
        except httpx2.ConnectError:  # raised before a byte of the request is written
            if delivery is not None and request.method == "POST":
                delivery.refused = True
                delivery.on_refused()
            raise
        self._saw(response)
        return response


async def enter_http(
    stack: AsyncExitStack, server: HttpServerConfig, options: dict[str, Any], auth: ServerAuth | None = None
) -> tuple[Client, str]:
    """Streamable HTTP, falling back to legacy SSE when no `type` says which one the server speaks."""
    provider = await auth.provider() if auth is not None else None
    if server.is_legacy_sse:
        return await stack.enter_async_context(Client(sse_transport(server, provider), **options)), "sse"
    attempt = AsyncExitStack()
    try:
        http = await attempt.enter_async_context(_DeliveryTrackingClient(
            auth.saw if auth is not None else lambda _: None,
            headers=server.headers, timeout=HTTP_TIMEOUT, follow_redirects=True, auth=provider,
        ))
        client = await attempt.enter_async_context(
            Client(streamable_http_client(server.url, http_client=http), **options)
        )
    except Exception as streamable_error:  # boundary: any failure here means "try legacy SSE"
        await attempt.aclose()
        if server.type is not None:
            raise
        try:
            return await stack.enter_async_context(Client(sse_transport(server, provider), **options)), "sse"
        except Exception:  # boundary: report the streamable error, the more likely intent
            raise streamable_error from None
    stack.push_async_exit(attempt.__aexit__)
    return client, "http"


def sse_transport(server: HttpServerConfig, auth: httpx2.Auth | None = None) -> Any:
    return sse_client(server.url, headers=server.headers, timeout=30.0, sse_read_timeout=300.0, auth=auth)
