"""The MCP servers of mcp.json, connected for the gateway's lifetime, supervised, and their tools routed to.

Each server runs in its own task of the pool's task group: it connects, lists its tools, publishes
them, and waits for shutdown. anyio requires a client to be opened and closed in one task, and this
layout gives that for free. Servers start in parallel and the pool's `__aenter__` returns at once,
so HTTP serves while slow servers are still starting.
"""

import math
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
import structlog
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import (
    Implementation,
    Tool,
    ToolListChangedNotification,
)
from watchfiles import awatch

from app import __version__
from app.mcp.callbacks import server_log_forwarder
from app.mcp.calling import (
    CALL_TIMEOUT_SLACK,
    CallsInFlight,
    ConnectionLost,
    Finished,
    Limits,
    ProgressFn,
    ToolCall,
)
from app.mcp.config import McpConfig, McpConfigError, ServerConfig, StdioServerConfig
from app.mcp.connect import (
    definition,
    describe_failure,
    enter_http,
    keep_alive,
    list_all_tools,
    listen_for_tool_changes,
    pings,
)
from app.mcp.convert import Catalogue, ConversionOptions, build_catalogue
from app.mcp.processes import (
    StderrTail,
    end_process_groups,
    pump_stderr,
    resolve_command,
    session_children,
    spawned_since,
)
from app.mcp.results import FailureKind, RenderOptions, ToolOutcome, render_failure
from app.mcp.sampling import Complete, sampling_handler

log = structlog.get_logger("toolbridge.mcp")

CLIENT_INFO = Implementation(name="toolbridge", version=__version__)
# How often a 2025-era remote session is pinged to learn that it is gone before a call does.
KEEPALIVE_INTERVAL = 30.0
# How long a safe call whose remote session expired waits for the reconnection before its one retry.
RECONNECT_WAIT = 10.0
# Reconnection after a failed start: 1 s, 2 s, 4 s ... at most a minute apart.
RETRY_FIRST = 1.0
RETRY_MAX = 60.0
# A call for a server that is down cuts its backoff short, but attempts stay at least this far apart.
RETRY_WHEN_NEEDED = 1.0
# The SDK bounds each stdio shutdown (close stdin, 2 s, SIGTERM, 2 s, SIGKILL); this bounds them all.
SHUTDOWN_TIMEOUT = 10.0
# A server that died has flushed its stderr; this bounds the wait for our reader to catch up.
STDERR_SETTLE_TIMEOUT = 1.0


class ServerState(StrEnum):
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"
    FAILED = "failed"
    DISABLED = "disabled"
    STOPPED = "stopped"


@dataclass
class ServerStatus:
    state: ServerState
    transport: str
    tools: int = 0
    error: str | None = None
    protocol_version: str | None = None
    restarts: int = 0
    last_error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state.value, "transport": self.transport, "tools": self.tools}
        if self.error:
            out["error"] = self.error
        if self.restarts:
            out["restarts"] = self.restarts
        if self.last_error and self.last_error != self.error:
            out["last_error"] = self.last_error
        if self.protocol_version:
            out["protocol_version"] = self.protocol_version
        return out


class McpPool:
    """Connects every configured server in the background and routes tool calls to them."""

    def __init__(
        self,
        config: McpConfig,
        *,
        connect_timeout: float,
        call_timeout: float,
        conversion: ConversionOptions | None = None,
        rendering: RenderOptions | None = None,
        retry: bool = True,
        retry_first: float = RETRY_FIRST,
        call_timeout_max: float | None = None,
        block_changed_tools: bool = False,
        load_config: Callable[[], McpConfig] | None = None,
        watch: Sequence[Path] = (),
        complete: Complete | None = None,
        sampling_model: str | None = None,
        keepalive_interval: float = KEEPALIVE_INTERVAL,
        on_tool_call: Callable[[str, str, str, float], None] | None = None,
    ) -> None:
        """`on_tool_call(server, tool, outcome, seconds)` learns of every call that reached a route."""
        self._on_tool_call = on_tool_call
        self._keepalive_interval = keepalive_interval
        self._retry_first = retry_first
        self._needed: dict[str, anyio.Event] = {}
        self.config = config
        self._retry = retry
        self._block_changed = block_changed_tools
        self._call_timeout_max = call_timeout_max or call_timeout
        self._conversion = conversion or ConversionOptions()
        self._rendering = rendering or RenderOptions()
        self._connect_timeout = connect_timeout
        self._call_timeout = call_timeout
        self._status: dict[str, ServerStatus] = {}
        for name, server in config.servers.items():  # replaced by _start once the pool is entered
            self._status[name] = ServerStatus(ServerState.STARTING, _transport_name(server))
        self._record_unrun(config)
        self._clients: dict[str, Client] = {}
        self._stderr: dict[str, StderrTail] = {}
        self._start_scopes: dict[str, anyio.CancelScope] = {}
        self._lost: dict[str, anyio.Event] = {}
        self._process_groups: set[int] = set()
        self._published: dict[str, anyio.Event] = {}
        self._changes: dict[str, anyio.Event] = {}
        self._blocked: dict[str, set[str]] = {}
        self._tools: dict[str, list[Tool]] = {}
        self._configs: dict[str, ServerConfig] = {}
        self._server_stops: dict[str, anyio.Event] = {}
        self._server_done: dict[str, anyio.Event] = {}
        self._in_flight = CallsInFlight()
        self._reload_requested = anyio.Event()
        self._load_config = load_config
        self._complete, self._sampling_model = complete, sampling_model
        self._watch = [path.resolve() for path in watch]
        self._catalogue = Catalogue()
        self._stopping = anyio.Event()
        self._settled = anyio.Event()
        self._all_stopped = anyio.Event()
        self._running = 0
        self._task_group: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> Self:
        for name, problem in self.config.problems.items():
            log.error("mcp_server_config_invalid", server=name, error=problem)
        if not self.config.found:
            paths = [str(path) for path, _ in self.config.files] or [str(self.config.path)]
            log.warning("mcp_config_missing", paths=paths, effect="no MCP tools")
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        for name, server in self.config.servers.items():
            self._start(name, server)
        self._check_settled()
        if not self._running:
            self._all_stopped.set()
        if self._load_config is not None:
            self._task_group.start_soon(self._reload_when_asked, name="mcp:reload")
            if self._watch:
                self._task_group.start_soon(self._reload_on_change, name="mcp:watch")
        return self

    async def _reload_on_change(self) -> None:
        """Asks for a reload whenever one of the config files is written (TOOLBRIDGE_WATCH_CONFIG)."""
        folders = sorted({str(path.parent) for path in self._watch if path.parent.exists()})
        watched = {str(path) for path in self._watch}
        async for changes in awatch(*folders, debounce=200, recursive=False):
            if any(changed in watched for _, changed in changes):
                log.info("mcp_config_changed", files=sorted(c for _, c in changes if c in watched))
                self.request_reload()

    def request_reload(self) -> None:
        """Re-reads the config soon: new servers start, removed ones stop, changed ones restart."""
        self._reload_requested.set()

    def _start(self, name: str, server: ServerConfig) -> None:
        assert self._task_group is not None
        self._configs[name] = server
        self._status[name] = ServerStatus(ServerState.STARTING, _transport_name(server))
        self._server_stops[name], self._server_done[name] = anyio.Event(), anyio.Event()
        if not self._running and self._all_stopped.is_set():
            self._all_stopped = anyio.Event()
        self._running += 1
        self._task_group.start_soon(self._run_server, name, server, name=f"mcp:{name}")

    async def _reload_when_asked(self) -> None:
        assert self._load_config is not None
        while True:
            await self._reload_requested.wait()
            self._reload_requested = anyio.Event()
            try:
                new = await anyio.to_thread.run_sync(self._load_config)
            except McpConfigError as exc:
                log.error("mcp_config_reload_failed", error=str(exc), effect="the running servers are kept")
                continue
            await self._apply(new)

    async def _apply(self, new: McpConfig) -> None:
        old_servers = dict(self._configs)
        going = [n for n, s in old_servers.items() if new.servers.get(n) != s]
        coming = [n for n, s in new.servers.items() if old_servers.get(n) != s]
        log.info("mcp_config_reloaded", stopping=going, starting=coming, unchanged=len(old_servers) - len(going))
        for name in going:
            self._server_stops[name].set()
            self._tools.pop(name, None)  # new requests stop seeing its tools; calls in flight still reach it
        self._rebuild_catalogue()
        for name in going:
            with anyio.move_on_after(self._longest_call(name) + SHUTDOWN_TIMEOUT):
                await self._server_done[name].wait()
            self._forget(name)
        self.config = new
        self._record_unrun(new)
        for name in [n for n in self._status if n not in new.servers and n not in new.problems
                     and n not in new.disabled and n not in self._configs]:
            del self._status[name]
        for name in coming:
            self._start(name, new.servers[name])
        self._rebuild_catalogue()

    def _record_unrun(self, config: McpConfig) -> None:
        """Statuses for the entries that never run: broken ones and disabled ones."""
        for name, problem in config.problems.items():
            self._status[name] = ServerStatus(ServerState.FAILED, "unknown", error=problem)
        for name in config.disabled:
            self._status[name] = ServerStatus(ServerState.DISABLED, "none")

    def _forget(self, name: str) -> None:
        for table in (self._configs, self._clients, self._tools, self._blocked, self._status, self._needed):
            table.pop(name, None)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stopping.set()
        for scope in self._start_scopes.values():
            scope.cancel()  # a server still starting would otherwise hold shutdown up to its connect timeout
        assert self._task_group is not None
        with anyio.move_on_after(SHUTDOWN_TIMEOUT):
            await self._all_stopped.wait()
        # What is left are stderr readers of pipes a stray grandchild may hold open.
        self._task_group.cancel_scope.cancel()
        await self._task_group.__aexit__(exc_type, exc, tb)
        await end_process_groups(self._process_groups)

    @property
    def catalogue(self) -> Catalogue:
        """The current tools; replaced as a whole when a list changes, so readers keep a stable view."""
        return self._catalogue

    def health(self) -> dict[str, dict[str, Any]]:
        return {name: status.as_dict() for name, status in self._status.items()}

    @property
    def degraded(self) -> bool:
        unhealthy = (ServerState.FAILED, ServerState.STARTING, ServerState.RESTARTING)
        return any(s.state in unhealthy for s in self._status.values())

    async def wait_settled(self) -> None:
        """Returns once no server is still starting."""
        await self._settled.wait()

    def tools_for_request(self, offered: bool = True, client_tools: frozenset[str] = frozenset()) -> "RequestTools":
        """The catalogue as it is now, kept by one request for its whole life (an empty one if not offered),
        with no name that one of the client's own tools has."""
        return RequestTools(self, self._catalogue.clear_of(client_tools) if offered else Catalogue())

    async def call_tool(
        self, name: str, arguments: str, on_progress: ProgressFn | None = None, catalogue: Catalogue | None = None
    ) -> ToolOutcome:
        """Runs one tool call, named as in `catalogue` (default: the current one). Every failure comes back
        as an error outcome for the model, never raised."""
        catalogue = self._catalogue if catalogue is None else catalogue
        route = catalogue.route(name)
        if route is None:
            similar = catalogue.similar(name)
            hint = f" Did you mean: {', '.join(similar)}?" if similar else ""
            return render_failure(
                FailureKind.UNKNOWN_TOOL, f"There is no tool named '{name}'.{hint}",
                self._rendering, similar_tools=similar,
            )
        call = ToolCall(route, self._rendering, on_progress)
        finished = await self._run(call, arguments)
        log.info(
            "tool_call",
            server=route.server,
            tool=route.tool,
            duration_ms=round(call.duration_ms, 1),
            ok=not finished.outcome.is_error,
            **({"failure": finished.failure.value} if finished.failure else {}),
        )
        if self._on_tool_call is not None:
            outcome = finished.failure.value if finished.failure else "error" if finished.outcome.is_error else "ok"
            self._on_tool_call(route.server, route.tool, outcome, call.duration_ms / 1000)
        return finished.outcome

    async def _run(self, call: ToolCall, arguments: str) -> Finished:
        server = call.route.server
        client = self._clients.get(server)
        if client is None:
            status = self._status.get(server)
            if status is None:  # a request from before a reload that removed the server
                return call.fail(FailureKind.SERVER_UNAVAILABLE, f"MCP server '{server}' was removed from the config.")
            if (needed := self._needed.get(server)) is not None:  # it served before: retry it now, not later
                needed.set()
            return call.fail(FailureKind.SERVER_UNAVAILABLE, _unavailable(server, status.state))
        parsed = call.checked_arguments(arguments)
        if isinstance(parsed, Finished):
            return parsed
        limits = Limits(self._timeout_for(server), self._call_timeout_max, self._status[server].transport == "http")
        with self._in_flight.running(server):
            ended = await call.send(client, parsed, limits)
        if isinstance(ended, ConnectionLost):
            self._lost[server].set()
            # Once more, on the next connection: when running it twice does no harm, or it never ran at all.
            if (call.route.safe_to_retry or ended.never_ran) and await self._reconnected(server, client):
                with self._in_flight.running(server):
                    ended = await call.send(self._clients[server], parsed, limits)
        if isinstance(ended, ConnectionLost):
            self._lost[server].set()
            return call.fail(FailureKind.SERVER_UNAVAILABLE,
                             f"MCP server '{server}' closed the connection; it is being restarted.")
        return ended

    async def _reconnected(self, server: str, old: Client) -> bool:
        """Waits, bounded, for the server's next connection after `old` was lost."""
        with anyio.move_on_after(RECONNECT_WAIT):
            while self._clients.get(server) in (None, old):
                await self._published_event(server).wait()
            return True
        return False

    def _published_event(self, server: str) -> anyio.Event:
        event = self._published.get(server)
        if event is None or event.is_set():
            event = self._published[server] = anyio.Event()
        return event

    def _timeout_for(self, server: str) -> float:
        configured = self._configs[server].timeout
        return configured if configured is not None else self._call_timeout

    def _longest_call(self, server: str) -> float:
        return max(self._timeout_for(server), self._call_timeout_max)

    def _connect_timeout_for(self, server: str) -> float:
        configured = self._configs[server].connect_timeout
        return configured if configured is not None else self._connect_timeout

    async def _run_server(self, name: str, server: ServerConfig) -> None:
        """Supervises one server: connects, serves until shutdown, and reconnects with capped backoff
        when it fails to start or its connection is lost."""
        status = self._status[name]
        stop = self._server_stops[name]
        failures = 0
        try:
            while not (self._stopping.is_set() or stop.is_set()):
                ended = await self._serve_once(name, server)
                if self._stopping.is_set() or stop.is_set() or not self._retry or ended == "stopped":
                    break
                if ended == "lost":
                    status.restarts += 1
                    failures = 0  # it ran until it died: try again at once, then back off
                else:
                    failures += 1
                delay = 0.0 if failures == 0 else min(self._retry_first * 2 ** (failures - 1), RETRY_MAX)
                await self._back_off(name, delay)
        finally:
            self._server_done[name].set()
            self._start_scopes.pop(name, None)
            if status.state is ServerState.STARTING:  # shutdown came before this task first ran
                self._fail(name, "stopped while starting")
            if status.state in (ServerState.READY, ServerState.RESTARTING):
                status.state = ServerState.STOPPED
            self._running -= 1
            self._check_settled()
            if not self._running:
                self._all_stopped.set()

    async def _back_off(self, name: str, delay: float) -> None:
        """Waits `delay` before the next attempt, or less once a call needs the server (see `_run`),
        though never less than RETRY_WHEN_NEEDED after the last attempt: a dead server is not hammered."""
        stopped = (self._stopping.wait, self._server_stops[name].wait)
        earliest = anyio.current_time() + min(delay, RETRY_WHEN_NEEDED)
        needed = self._needed[name] = anyio.Event()
        with anyio.move_on_after(delay):
            await _first_of(*stopped, needed.wait)
        with anyio.move_on_after(earliest - anyio.current_time()):
            await _first_of(*stopped)

    async def _serve_once(self, name: str, server: ServerConfig) -> str:
        """One connection's life: "stopped" (shutdown), "lost" (it died after serving), or "failed"."""
        status = self._status[name]
        connect_timeout = self._connect_timeout_for(name)
        started = time.perf_counter()
        lost = self._lost[name] = anyio.Event()
        served = False
        try:
            # One scope for the connection's whole life: its deadline covers only the start, and task
            # groups opened inside the client must close inside the same scope.
            with anyio.CancelScope(deadline=anyio.current_time() + connect_timeout) as scope:
                self._start_scopes[name] = scope
                if self._stopping.is_set():  # shutdown came before this task first ran
                    scope.cancel()
                async with self._open(name, server) as client:
                    tools = await list_all_tools(client)
                    scope.deadline = math.inf
                    del self._start_scopes[name]
                    self._publish(name, client, tools)
                    served = True
                    status.protocol_version = client.protocol_version
                    log.info("mcp_server_ready", server=name, tools=len(tools), protocol=client.protocol_version,
                             seconds=round(time.perf_counter() - started, 2), restarts=status.restarts)
                    async with anyio.create_task_group() as connection:
                        connection.start_soon(self._follow_tool_changes, name, client)
                        if pings(client, status.transport):
                            connection.start_soon(keep_alive, name, client, lost.set, self._keepalive_interval)
                        stop = self._server_stops[name]
                        await _first_of(self._stopping.wait, stop.wait, lost.wait, self._stderr_closed(name))
                        connection.cancel_scope.cancel()
                    if stop.is_set() and not self._stopping.is_set():
                        await self._let_calls_finish(name, lost)
                    if self._stopping.is_set() or stop.is_set():
                        self._unpublish(name)
                        return "stopped"
                    self._lose(name, "the server's connection was lost" + await self._stderr_hint(name))
                    return "lost"
            if scope.cancelled_caught and self._stopping.is_set():
                self._fail(name, "stopped while starting")
                return "stopped"
            self._fail(name, f"did not start within {connect_timeout:g} s" + await self._stderr_hint(name))
        except Exception as exc:  # boundary: any failure of one server must leave the others running
            command = server.command if isinstance(server, StdioServerConfig) else None
            reason = describe_failure(exc, command) + await self._stderr_hint(name)
            if not served:
                self._fail(name, reason)
            elif self._stopping.is_set() or self._server_stops[name].is_set():
                self._unpublish(name)
                return "stopped"
            else:  # it served, then its transport broke: the same as any other lost connection
                self._lose(name, reason)
                return "lost"
        return "failed"

    async def _let_calls_finish(self, name: str, lost: anyio.Event) -> None:
        """A server stopped by a reload first finishes the calls running on it (each is bounded anyway)."""
        if self._in_flight.count(name):
            log.info("mcp_server_draining", server=name, calls=self._in_flight.count(name))
        with anyio.move_on_after(self._longest_call(name) + CALL_TIMEOUT_SLACK):
            await _first_of(lambda: self._in_flight.drained(name), self._stopping.wait, lost.wait)

    def _notification_handler(self, name: str) -> Callable[[Any], Awaitable[None]]:
        async def handle(message: Any) -> None:
            if isinstance(message, ToolListChangedNotification):  # 2025-era connections push this
                self._tools_changed(name).set()
            elif isinstance(message, Exception):
                log.warning("mcp_transport_error", server=name, error=str(message))

        return handle

    def _tools_changed(self, name: str) -> anyio.Event:
        return self._changes.setdefault(name, anyio.Event())

    async def _follow_tool_changes(self, name: str, client: Client) -> None:
        """Re-lists a server's tools whenever it says they changed, on either protocol era."""
        async with anyio.create_task_group() as group:
            group.start_soon(listen_for_tool_changes, name, client, self._tools_changed(name).set, self._lost[name].set)
            while True:
                await self._tools_changed(name).wait()
                self._changes[name] = anyio.Event()
                try:
                    tools = await list_all_tools(client, refresh=True)
                except (MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
                    log.warning("mcp_tools_relist_failed", server=name, error=str(exc))
                    continue
                self._republish(name, tools)

    def _republish(self, name: str, tools: list[Tool]) -> None:
        """Swaps in a changed tool list; a changed definition of a known tool is flagged (rug pull)."""
        before = {tool.name: definition(tool) for tool in self._tools.get(name, [])}
        after = {tool.name: definition(tool) for tool in tools}
        added, removed = sorted(after.keys() - before.keys()), sorted(before.keys() - after.keys())
        changed = sorted(n for n in after.keys() & before.keys() if after[n] != before[n])
        if changed:
            log.warning("mcp_tool_definition_changed", server=name, tools=changed,
                        blocked=self._block_changed, note="a server changed a tool it had offered before")
            if self._block_changed:
                self._blocked.setdefault(name, set()).update(changed)
        if added or removed or changed:
            log.info("mcp_tools_changed", server=name, added=added, removed=removed, changed=changed)
        self._tools[name] = tools
        self._rebuild_catalogue()

    def _offered(self, name: str, tools: list[Tool]) -> list[Tool]:
        blocked = self._blocked.get(name, set())
        server = self._configs[name]
        return [tool for tool in tools if tool.name not in blocked and server.offers(tool.name)]

    def _stderr_closed(self, name: str) -> Callable[[], Awaitable[None]]:
        tail = self._stderr.get(name)
        if tail is None or not isinstance(self._configs.get(name), StdioServerConfig):
            return _never
        return tail.closed.wait  # a stdio server's stderr closes when its process exits

    def _lose(self, name: str, reason: str) -> None:
        """A served connection died: calls answer `server_unavailable` until the restart lists tools again."""
        self._clients.pop(name, None)
        status = self._status[name]
        status.state, status.error, status.last_error = ServerState.RESTARTING, reason, reason
        log.warning("mcp_server_lost", server=name, error=reason, restarts=status.restarts + 1)

    @asynccontextmanager
    async def _open(self, name: str, server: ServerConfig) -> AsyncIterator[Client]:
        options: dict[str, Any] = {
            "client_info": CLIENT_INFO,
            "read_timeout_seconds": self._connect_timeout_for(name),
            "logging_callback": server_log_forwarder(name),
            "message_handler": self._notification_handler(name),
            "mode": server.mode,
        }
        if self._complete is not None:  # registering the callback is what declares the capability
            options["sampling_callback"] = sampling_handler(name, self._complete, self._sampling_model, log)
        async with AsyncExitStack() as stack:
            if isinstance(server, StdioServerConfig):
                client = await self._enter_stdio(stack, name, server, options)
            else:
                client, self._status[name].transport = await enter_http(stack, server, options)
            yield client

    async def _enter_stdio(
        self, stack: AsyncExitStack, name: str, server: StdioServerConfig, options: dict[str, Any]
    ) -> Client:
        params = StdioServerParameters(
            command=resolve_command(server.command), args=server.args, env=server.env, cwd=server.cwd
        )
        read_fd, write_fd = os.pipe()
        errlog = os.fdopen(write_fd, "w")
        tail = self._stderr[name] = StderrTail()
        assert self._task_group is not None
        self._task_group.start_soon(pump_stderr, name, read_fd, tail, name=f"mcp-stderr:{name}")
        before = session_children()
        try:
            client = await stack.enter_async_context(Client(stdio_client(params, errlog=errlog), **options))
        finally:
            errlog.close()  # the child holds its own copy; ours would keep the pipe open forever
        # Each stdio server leads its own process group; remember ours to end what it leaves behind.
        self._process_groups.update(spawned_since(before, server.args))
        return client

    async def _stderr_hint(self, name: str) -> str:
        tail = self._stderr.get(name)
        if tail is None:
            return ""
        with anyio.move_on_after(STDERR_SETTLE_TIMEOUT):
            await tail.closed.wait()
        return f"; stderr: {' | '.join(tail.lines)}" if tail.lines else ""

    def _publish(self, name: str, client: Client, tools: list[Tool]) -> None:
        self._clients[name] = client
        self._published_event(name).set()
        self._tools[name] = tools
        status = self._status[name]
        status.state, status.error = ServerState.READY, None
        self._rebuild_catalogue()
        self._check_settled()

    def _unpublish(self, name: str) -> None:
        self._clients.pop(name, None)
        self._tools.pop(name, None)
        self._rebuild_catalogue()

    def _rebuild_catalogue(self) -> None:
        ordered = {name: self._offered(name, self._tools[name]) for name in self._configs if name in self._tools}
        self._catalogue = build_catalogue(ordered, self._conversion)
        # What is offered, after every filter (mcp.json, blocked, tools that only run as MCP tasks).
        offered = Counter(route.server for route in self._catalogue.routes.values())
        for name in ordered:
            self._status[name].tools = offered[name]

    def _fail(self, name: str, reason: str) -> None:
        status = self._status[name]
        again = status.state is ServerState.FAILED and status.error == reason
        status.state, status.error, status.last_error = ServerState.FAILED, reason, reason
        self._check_settled()
        if self._stopping.is_set():
            log.info("mcp_server_start_abandoned", server=name, error=reason)
        elif again:  # each retry of a server that keeps failing the same way would repeat the same error
            log.debug("mcp_server_still_failing", server=name, error=reason)
        else:
            log.error("mcp_server_failed", server=name, error=reason)

    def _check_settled(self) -> None:
        if not any(s.state is ServerState.STARTING for s in self._status.values()):
            self._settled.set()


def _unavailable(server: str, state: ServerState) -> str:
    """What a model (and so the user, and whoever shares the gateway) learns of a server that is down: its
    state, never its error, which carries the server's stderr (other users' arguments, the operator's
    secrets). The operator finds the error in the log and in /health."""
    if state in (ServerState.STARTING, ServerState.RESTARTING):
        return f"MCP server '{server}' is {state.value}; try again in a moment."
    if state is ServerState.FAILED:
        return f"MCP server '{server}' is not available: it failed to start (the gateway's operator can see why)."
    return f"MCP server '{server}' is {state.value}."


async def _first_of(*waits: Callable[[], Awaitable[Any]]) -> None:
    """Returns as soon as any of the waits returns."""
    async with anyio.create_task_group() as group:
        async def run(wait: Callable[[], Awaitable[Any]]) -> None:
            await wait()
            group.cancel_scope.cancel()

        for wait in waits:
            group.start_soon(run, wait)


async def _never() -> None:
    await anyio.sleep_forever()


@dataclass(frozen=True)
class RequestTools:
    """The tools one request offers and calls, fixed for its whole life."""

    pool: McpPool
    catalogue: Catalogue

    @property
    def openai_tools(self) -> Sequence[dict[str, Any]]:
        return self.catalogue.openai_tools

    async def call_tool(self, name: str, arguments: str, on_progress: ProgressFn | None = None) -> ToolOutcome:
        return await self.pool.call_tool(name, arguments, on_progress, self.catalogue)


def _transport_name(server: ServerConfig) -> str:
    if isinstance(server, StdioServerConfig):
        return "stdio"
    return "sse" if server.is_legacy_sse else "http"
