"""One MCP server of mcp.json, supervised: its connection's life, restarts with capped backoff, and its
status. What the connection offers (tools, resources, prompts) is its `offer`; the calls routed to it find
the connection in its `live` (live.py).

The pool runs one supervisor per server, each in its own task of the pool's task group: it connects,
lists the tools, publishes them, and waits for shutdown. anyio requires a client to be opened and closed
in one task, and this layout gives that for free. What the whole pool shares (shutdown, the catalogue,
"has every server settled") reaches a supervisor as an event and callbacks.
"""

import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import structlog
from mcp import Client

from app.mcp.calling import CALL_TIMEOUT_SLACK
from app.mcp.config import ServerConfig, StdioServerConfig
from app.mcp.connect import Connection, ConnectionOpener
from app.mcp.failures import describe_failure
from app.mcp.live import LiveConnection
from app.mcp.offer import Listing, ServerOffer
from app.mcp.options import PoolOptions as PoolOptions  # its home before options.py; imported from here still
from app.mcp.pauses import back_off, keep_signed_in, wait_for_sign_in
from app.mcp.processes import StderrTail
from app.mcp.server_auth import ServerAuth
from app.mcp.status import ServerState, ServerStatus, transport_name
from app.mcp.waits import first_of
from app.mcp.watching import keep_alive, pings

log = structlog.get_logger("toolbridge.mcp")

# Reconnection after a failed start: 1 s, 2 s, 4 s ... (PoolOptions.retry_first) at most a minute apart.
RETRY_MAX = 60.0


class ServerSupervisor:
    """Keeps one server connected while the pool runs; the calls routed to it go to its `live` connection."""

    def __init__(
        self,
        name: str,
        config: ServerConfig,
        options: PoolOptions,
        opener: ConnectionOpener,
        *,
        stopping: anyio.Event,
        offer_changed: Callable[[], None],
        state_changed: Callable[[], None],
        offered: Callable[[], Awaitable[None]] | None = None,
        auth: ServerAuth | None = None,
    ) -> None:
        """`stopping`: the pool's shutdown; `offer_changed`, `state_changed`: rebuild the catalogue, the status
        changed; `offered`: returns once the catalogue offers what the offer published last. `auth`: an HTTP
        server's OAuth."""
        self.name, self.config, self._options, self._opener = name, config, options, opener
        self._stopping, self._state_changed, self._offered = stopping, state_changed, offered
        self.status = ServerStatus(ServerState.STARTING, transport_name(config))
        self.live = LiveConnection(name, self.status, self.call_timeout, options.longest_call_timeout, options.held,
                                   task_wait=options.task_wait, task_book=options.task_book)
        self.offer = ServerOffer(name, config, block_changed_tools=options.block_changed_tools,
                                 resource_tools=options.resource_tools, changed=offer_changed,
                                 trusted=options.trusted)
        self.stop, self.done = anyio.Event(), anyio.Event()
        self._stderr: StderrTail | None = None
        self._start_scope: anyio.CancelScope | None = None
        self._unreadable_start: str | None = None  # why the start was given up before its deadline
        self._served = False  # this connection published what it offers
        self._restart_asked = False
        self.auth = auth
        if auth is not None:  # a sign-in taken back ends the connection; a new one replaces it
            auth.served_by(self.live, self.restart)

    @property
    def call_timeout(self) -> float:
        configured = self.config.timeout
        return configured if configured is not None else self._options.call_timeout

    @property
    def longest_call(self) -> float:
        return max(self.call_timeout, self._options.longest_call_timeout)

    @property
    def connect_timeout(self) -> float:
        configured = self.config.connect_timeout
        return configured if configured is not None else self._options.connect_timeout

    def retire(self) -> None:
        """Stops the server (a reload removed or changed it); new requests stop seeing its tools once the pool has
        rebuilt its catalogue."""
        self.stop.set()
        self.offer.withdraw(announce=False)

    def restart(self) -> None:
        """Ends the live connection (calls in flight end as on any loss) and starts again; one waiting out its
        backoff tries again now."""
        if self.live.client is not None:
            self._restart_asked = True
            self.live.lost.set()
        elif self.live.needed is not None:  # down: cut the backoff short (a server still starting is left to it)
            self.live.needed.set()

    def count_tools(self, count: int) -> None:  # what the pool offers of it, after every filter
        self.status.tools = count

    def cancel_start(self) -> None:
        """Shutdown: a server still starting would otherwise hold it up to its connect timeout."""
        if self._start_scope is not None:
            self._start_scope.cancel()

    async def run(self) -> None:
        """Connects, serves until shutdown, and reconnects with capped backoff when it fails or is lost."""
        status = self.status
        failures = 0
        try:
            while not (self._stopping.is_set() or self.stop.is_set()):
                ended = await self._serve_once()
                if self._stopping.is_set() or self.stop.is_set() or not self._options.retry or ended == "stopped":
                    break
                if ended == "sign_in" and self.auth is not None:
                    await wait_for_sign_in(self.live, self.auth, self._stopping, self.stop)
                    continue
                if ended == "lost":
                    status.restarts += 1
                    failures = 0  # it ran until it died: try again at once, then back off
                else:
                    failures += 1
                first = self._options.retry_first
                delay = 0.0 if failures == 0 else min(first * 2 ** (failures - 1), RETRY_MAX)
                await back_off(self.live, self._stopping, self.stop, delay)
        finally:
            self.done.set()
            self._start_scope = None
            if status.state is ServerState.STARTING:  # shutdown came before this task first ran
                self._fail("stopped while starting")
            if status.state in (ServerState.READY, ServerState.RESTARTING):
                status.state = ServerState.STOPPED
            self._state_changed()

    async def _serve_once(self) -> str:
        """One connection's life: "stopped" (shutdown), "lost" (died after serving), "sign_in", or "failed"."""
        if self.auth is not None and self.auth.person_signs_in and not await self.auth.check():
            return self._needs_sign_in()
        connect_timeout = self.connect_timeout
        lost = self.live.lost = anyio.Event()
        self._stderr = StderrTail() if isinstance(self.config, StdioServerConfig) else None
        self._unreadable_start = None
        self._served = False
        try:
            # One scope for the connection's whole life: its deadline covers only the start (from when its
            # turn to start came), and task groups opened inside the client must close inside the same scope.
            with anyio.CancelScope() as scope:
                self._start_scope = scope
                if self._stopping.is_set():  # shutdown came before this task first ran
                    scope.cancel()
                # Servers that start on this machine take turns (StartGate): ten Python servers importing
                # their SDK at once on two cores were all ready late, and the gateway answered late too.
                async with self._opener.start_gate.slot(isinstance(self.config, StdioServerConfig)) as ready:
                    scope.deadline = anyio.current_time() + connect_timeout
                    started = time.perf_counter()
                    async with self._opener.open(
                        self.name, self.config, read_timeout=connect_timeout,
                        on_message=self._on_message, stderr=self._stderr, on_question=self.live.holder.question,
                        auth=self.auth,
                    ) as connection:
                        await self._start(connection, ready, scope, started)
                        return await self._serve(connection.client, lost)
            if scope.cancelled_caught and self._stopping.is_set():
                self._fail("stopped while starting")
                return "stopped"
            self._fail((self._unreadable_start or f"did not start within {connect_timeout:g} s")
                       + await self._stderr_hint())
        except Exception as exc:  # boundary: any failure of one server must leave the others running
            return await self._broke(exc)
        return "failed"

    async def _start(self, connection: Connection, ready: Callable[[], None], scope: anyio.CancelScope,
                     started: float) -> None:
        """Lists what a new connection offers and publishes it: the start, and its deadline, end here."""
        client = connection.client
        self.status.transport = connection.transport
        listing = await self.offer.list_everything(client)
        ready()  # the next server may start: this one's CPU-bound start is over
        scope.deadline = math.inf
        self._start_scope = None
        await self._publish(connection, listing)
        log.info("mcp_server_ready", server=self.name, tools=len(listing.tools),
                 protocol=client.protocol_version, seconds=round(time.perf_counter() - started, 2),
                 restarts=self.status.restarts)

    async def _serve(self, client: Client, lost: anyio.Event) -> str:
        """Serves until shutdown, a stop, or the connection's loss: "stopped" or "lost"."""
        async with anyio.create_task_group() as watchers:
            watchers.start_soon(self.offer.follow, client, lost.set)
            watchers.start_soon(keep_signed_in, self.auth)
            if pings(client, self.status.transport):
                watchers.start_soon(keep_alive, self.name, client, lost.set,
                                    self._options.keepalive_interval, lambda: self.live.in_flight.count > 0)
            await first_of(self._stopping.wait, self.stop.wait, lost.wait, self._process_exited)
            watchers.cancel_scope.cancel()
        if self.stop.is_set() and not self._stopping.is_set():
            await self._let_calls_finish(lost)
        if self._stopping.is_set() or self.stop.is_set():
            self._unpublish()
            return "stopped"
        if self.auth is not None and await self.auth.waits_for_person():  # the sign-in was taken back
            return self._needs_sign_in()
        asked, self._restart_asked = self._restart_asked, False
        self._lose("restarted on request" if asked else "the server's connection was lost" + await self._stderr_hint(),
                   asked=asked)
        return "lost"

    async def _broke(self, exc: Exception) -> str:
        """What an exception in a connection's life means: it failed to start, or it was lost or stopped."""
        command = self.config.command if isinstance(self.config, StdioServerConfig) else None
        reason = describe_failure(exc, command) + await self._stderr_hint()
        if not self._served and self.auth is not None and await self.auth.waits_for_person(exc):
            return self._needs_sign_in()
        if not self._served:
            self._fail(reason)
            return "failed"
        if self._stopping.is_set() or self.stop.is_set():
            self._unpublish()
            return "stopped"
        self._lose(reason)  # it served, then its transport broke: the same as any other lost connection
        return "lost"

    def _needs_sign_in(self) -> str:
        self._unpublish()
        if self.status.state is not ServerState.NEEDS_SIGN_IN:
            log.warning("mcp_server_needs_sign_in", server=self.name, where=f"/ui/servers/{self.name}/sign-in")
        self.status.state, self.status.error, self.status.tools = ServerState.NEEDS_SIGN_IN, None, 0
        self._state_changed()
        return "sign_in"

    async def _let_calls_finish(self, lost: anyio.Event) -> None:
        """A server stopped by a reload first finishes the calls running on it (each is bounded anyway)."""
        in_flight = self.live.in_flight
        if in_flight.count:
            log.info("mcp_server_draining", server=self.name, calls=in_flight.count)
        with anyio.move_on_after(self.longest_call + CALL_TIMEOUT_SLACK):
            await first_of(in_flight.drained, self._stopping.wait, lost.wait)

    async def _on_message(self, message: Any) -> None:
        if self.offer.notified(message):  # 2025-era connections push notifications
            return
        if isinstance(message, Exception):
            log.warning("mcp_transport_error", server=self.name, error=str(message))
            # The SDK drops a message it cannot parse; nested past the parser's depth, it was an answer the
            # start waits for and never gets. Other unreadable lines (a banner on stdout) are only noise.
            if self._start_scope is not None and "recursion limit exceeded" in str(message):
                self._unreadable_start = ("sent a message nested deeper than the MCP SDK can read "
                                          "(its tool list, most likely)")
                self._start_scope.cancel()

    async def _process_exited(self) -> None:
        if self._stderr is None:
            await anyio.sleep_forever()
        else:
            await self._stderr.closed.wait()  # a stdio server's stderr closes when its process exits

    async def _stderr_hint(self) -> str:
        return "" if self._stderr is None else await self._stderr.hint()

    async def _publish(self, connection: Connection, listing: Listing) -> None:
        self.live.publish(connection.client)
        self.offer.publish(listing)
        self._served = True
        if self._offered is not None:  # ready means offered: a client that waits for "ready" gets its tools
            await self._offered()
        status = self.status
        status.state, status.error, status.ready_since = ServerState.READY, None, time.monotonic()
        status.protocol_version = connection.client.protocol_version
        self._state_changed()

    def _unpublish(self) -> None:
        self.live.withdraw()
        self.offer.withdraw()

    def _lose(self, reason: str, asked: bool = False) -> None:
        """A served connection died (or a restart was asked for): calls answer `server_unavailable` until the
        restart lists tools again."""
        self.live.withdraw()
        status = self.status
        status.state, status.error = ServerState.RESTARTING, reason
        if not asked:
            status.last_error = reason
        self._state_changed()
        if asked:
            log.info("mcp_server_restarting", server=self.name, reason=reason)
        else:
            log.warning("mcp_server_lost", server=self.name, error=reason, restarts=status.restarts + 1)

    def _fail(self, reason: str) -> None:
        status = self.status
        again = status.state is ServerState.FAILED and status.error == reason
        status.state, status.error, status.last_error = ServerState.FAILED, reason, reason
        self._state_changed()
        if self._stopping.is_set():
            log.info("mcp_server_start_abandoned", server=self.name, error=reason)
        elif again:  # each retry of a server that keeps failing the same way would repeat the same error
            log.debug("mcp_server_still_failing", server=self.name, error=reason)
        else:
            log.error("mcp_server_failed", server=self.name, error=reason)
