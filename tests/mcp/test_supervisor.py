"""One server's supervisor on its own (app/mcp/supervisor.py, and the calls on its connection, app/mcp/live.py)
with a fake connection opener: start, loss and restart, backoff cut short by a call, a call retried on the
next connection, and stopping. In milliseconds; the real transports are tested in tests/mcp/test_pool.py."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from mcp.client.subscriptions import ListenNotSupportedError, ToolsListChanged
from mcp.types import (
    CallToolResult,
    ListToolsResult,
    ServerCapabilities,
    TextContent,
    Tool,
    ToolAnnotations,
    ToolsCapability,
)

from app.mcp.calling import McpCall
from app.mcp.config import HttpServerConfig
from app.mcp.connect import Connection, StartGate
from app.mcp.convert import build_catalogue
from app.mcp.status import ServerState
from app.mcp.supervisor import PoolOptions, ServerSupervisor
from app.openai.result_format import RenderOptions

pytestmark = pytest.mark.anyio
LIMIT = 5  # seconds; every wait below is bounded, none is a guess at how long something takes
ECHO = Tool(name="echo", input_schema={"type": "object"}, annotations=ToolAnnotations(read_only_hint=True))


@dataclass
class FakeClient:
    """One connection: lists `tools`, answers calls with their arguments, and can be made to break."""

    tools: list[Tool]
    protocol_version: str = "2025-11-25"
    server_capabilities: ServerCapabilities = field(default_factory=lambda: ServerCapabilities(tools=ToolsCapability()))
    broken: anyio.Event = field(default_factory=anyio.Event)
    calls: list[dict[str, Any]] = field(default_factory=list)

    async def list_tools(self, cursor: str | None = None, cache_mode: str = "use") -> ListToolsResult:
        return ListToolsResult(tools=self.tools)

    announcements: list[anyio.Event] = field(default_factory=list)  # 2026 era: each one set is a change

    @asynccontextmanager
    async def listen(self, **_: Any) -> AsyncIterator[AsyncIterator[ToolsListChanged]]:
        if self.protocol_version < "2026-07-28":
            raise ListenNotSupportedError(self.protocol_version)

        async def changes() -> AsyncIterator[ToolsListChanged]:
            for announced in self.announcements:
                await announced.wait()
                yield ToolsListChanged()
            await anyio.sleep_forever()

        yield changes()

    input_required_max_rounds: int = 10

    @property
    def session(self) -> "FakeClient":  # a tools/call goes through the session (app/mcp/input_rounds.py)
        return self

    async def call_tool(self, tool: str, arguments: dict[str, Any], **_: Any) -> CallToolResult:
        if self.broken.is_set():
            raise anyio.ClosedResourceError
        self.calls.append(arguments)
        return CallToolResult(content=[TextContent(type="text", text=f"{tool}: {arguments}")])


@dataclass
class FakeOpener:
    """Opens a new `FakeClient` per attempt, or fails while `failing`. `drop()` breaks the live connection:
    its next call finds it closed, as a real transport's would. Over "http" a call that never reached the
    server may be sent again; over "stdio" nothing tells, so only a read-only call is."""

    failing: bool = False
    transport: str = "http"
    protocol_version: str = "2025-11-25"
    tools: list[Tool] = field(default_factory=lambda: [ECHO])
    opened: list[FakeClient] = field(default_factory=list)
    attempts: int = 0
    attempted: anyio.Event = field(default_factory=anyio.Event)
    start_gate: StartGate = field(default_factory=lambda: StartGate(slots=1, hold=60))

    @asynccontextmanager
    async def open(self, name: str, server: Any, **_: Any) -> AsyncIterator[Connection]:
        self.attempts += 1
        self.attempted.set()
        self.attempted = anyio.Event()
        if self.failing:
            raise ConnectionRefusedError("refused")
        client = FakeClient(self.tools, self.protocol_version, announcements=[anyio.Event(), anyio.Event()])
        self.opened.append(client)
        yield Connection(client, self.transport)  # type: ignore[arg-type]

    def drop(self) -> None:
        self.opened[-1].broken.set()


@dataclass
class Pool:
    """What the pool gives a supervisor: the shutdown event and the two callbacks, counted."""

    stopping: anyio.Event = field(default_factory=anyio.Event)
    tool_changes: int = 0
    changed: anyio.Event = field(default_factory=anyio.Event)
    listed: anyio.Event = field(default_factory=anyio.Event)

    def tools_changed(self) -> None:
        self.tool_changes += 1
        self.listed.set()
        self.listed = anyio.Event()

    def state_changed(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()


def supervisor(opener: FakeOpener, pool: Pool, **options: Any) -> ServerSupervisor:
    config = HttpServerConfig(url="http://127.0.0.1:9/mcp")
    return ServerSupervisor(
        "remote", config, PoolOptions(connect_timeout=LIMIT, call_timeout=LIMIT, **options), opener,  # type: ignore[arg-type]
        stopping=pool.stopping, offer_changed=pool.tools_changed, state_changed=pool.state_changed,
    )


async def until(pool: Pool, server: ServerSupervisor, state: ServerState) -> None:
    with anyio.fail_after(LIMIT):
        while server.status.state is not state:
            await pool.changed.wait()


@asynccontextmanager
async def serving(server: ServerSupervisor, pool: Pool, *, ready: bool = True) -> AsyncIterator[None]:
    """The supervisor running: the block starts once its server is ready (unless `ready` is False), and the
    pool shuts down after it."""
    async with anyio.create_task_group() as group:
        group.start_soon(server.run)
        if ready:
            await until(pool, server, ServerState.READY)
        yield
        pool.stopping.set()


def call(server: ServerSupervisor, tool: Tool = ECHO) -> McpCall:
    route = build_catalogue({"remote": [tool]}).route(f"remote__{tool.name}")
    assert route is not None
    return McpCall(route, RenderOptions(result_format="text"), None)


async def test_a_started_server_publishes_its_tools_and_is_ready() -> None:
    opener, pool = FakeOpener(), Pool()
    server = supervisor(opener, pool)
    async with serving(server, pool):
        assert [t.name for t in server.offer.offered()] == ["echo"] and pool.tool_changes == 1
        ended = await server.live.call(call(server), '{"text": "hi"}')
        assert (ended.outcome.content, ended.failure) == ("echo: {'text': 'hi'}", None)
    assert server.status.state is ServerState.STOPPED and server.done.is_set()


async def test_a_call_that_loses_its_connection_is_sent_again_on_the_next_one() -> None:
    opener, pool = FakeOpener(), Pool()
    server = supervisor(opener, pool)
    async with serving(server, pool):
        opener.drop()  # the next call finds the connection closed; echo only reads, so it may run twice
        with anyio.fail_after(LIMIT):
            ended = await server.live.call(call(server), '{"text": "again"}')
        assert (ended.outcome.content, ended.failure) == ("echo: {'text': 'again'}", None)
        assert len(opener.opened) == 2 and opener.opened[1].calls == [{"text": "again"}]
        assert server.status.restarts == 1 and server.status.state is ServerState.READY


async def test_a_call_that_may_not_run_twice_is_not_sent_again() -> None:
    opener, pool = FakeOpener(transport="stdio"), Pool()
    server = supervisor(opener, pool)
    writes = Tool(name="write", input_schema={"type": "object"})
    async with serving(server, pool):
        opener.drop()
        ended = await server.live.call(call(server, writes), "{}")
        assert ended.failure is not None and ended.failure.value == "server_unavailable"
        assert all(client.calls == [] for client in opener.opened)


async def test_a_server_that_fails_to_start_backs_off_until_a_call_needs_it() -> None:
    opener, pool = FakeOpener(failing=True), Pool()
    server = supervisor(opener, pool, retry_first=10 * LIMIT)  # on its own it would not try again in time
    async with serving(server, pool, ready=False):
        await until(pool, server, ServerState.FAILED)
        assert server.status.error == "ConnectionRefusedError: refused" and opener.attempts == 1
        opener.failing = False
        attempted = opener.attempted
        ended = await server.live.call(call(server), "{}")
        assert ended.failure is not None and "failed to start" in ended.outcome.content
        assert "refused" not in ended.outcome.content  # the error is the operator's, not the chat's
        with anyio.fail_after(LIMIT):
            await attempted.wait()
        await until(pool, server, ServerState.READY)
        assert opener.attempts == 2


async def test_retiring_a_server_withdraws_its_tools_at_once_and_stops_it() -> None:
    opener, pool = FakeOpener(), Pool()
    server = supervisor(opener, pool)
    async with serving(server, pool):
        server.retire()
        assert server.offer.offered() == []
        with anyio.fail_after(LIMIT):
            await server.done.wait()
    assert server.status.state is ServerState.STOPPED and server.live.client is None


async def test_shutdown_while_starting_is_not_held_up_by_the_connect_timeout() -> None:
    pool = Pool()

    class Hanging(FakeOpener):
        @asynccontextmanager
        async def open(self, name: str, server: Any, **_: Any) -> AsyncIterator[Connection]:
            self.attempted.set()
            await anyio.sleep_forever()
            yield  # type: ignore[misc]

    opener = Hanging()
    server = supervisor(opener, pool)
    with anyio.fail_after(LIMIT / 2):  # less than the connect timeout
        async with anyio.create_task_group() as group:
            group.start_soon(server.run)
            await opener.attempted.wait()
            pool.stopping.set()
            server.cancel_start()
    assert server.status.state is ServerState.FAILED and server.status.error == "stopped while starting"


async def test_every_tool_change_a_2026_server_announces_is_listed_again() -> None:
    opener, pool = FakeOpener(protocol_version="2026-07-28"), Pool()
    server = supervisor(opener, pool)
    async with serving(server, pool):
        client = opener.opened[0]
        for round_number, name in enumerate(["second", "third"]):
            client.tools = [*client.tools, Tool(name=name, input_schema={"type": "object"})]
            client.announcements[round_number].set()
            with anyio.fail_after(LIMIT):
                while [t.name for t in server.offer.offered()][-1] != name:
                    await pool.listed.wait()
