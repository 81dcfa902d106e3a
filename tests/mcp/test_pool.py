"""The MCP pool on its own: start failures, timeouts and routing, against real stdio servers."""

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from structlog.testing import capture_logs

from app.chat.ports import ToolAnswers
from app.mcp.config import HttpServerConfig, McpConfig, ServerConfig, StdioServerConfig
from app.mcp.convert import Catalogue, ConversionOptions
from app.mcp.pool import McpPool
from app.mcp.supervisor import PoolOptions
from tests.conftest import BASIC_TOOLS, SERVERS
from tests.support.fake_upstream import readable
from tests.support.servers import free_port

pytestmark = pytest.mark.anyio
SETTLE_TIMEOUT = 60


def stdio(script: str, *args: str, **options: object) -> StdioServerConfig:
    return StdioServerConfig(command=sys.executable, args=[str(SERVERS / script), *args], **options)


def config(**servers: ServerConfig) -> McpConfig:
    return McpConfig(path=Path("test-mcp.json"), found=True, servers=servers)


def options(*, connect_timeout: float = 60, call_timeout: float = 10, **more: Any) -> PoolOptions:
    return PoolOptions(connect_timeout=connect_timeout, call_timeout=call_timeout, **more)


async def test_a_server_that_never_answers_fails_at_the_connect_timeout_and_others_start() -> None:
    # Its own short timeout: with the pool's, basic.py (an SDK import, a second unloaded) failed under load.
    never = StdioServerConfig(command=sys.executable, args=["-c", "import time; time.sleep(60)"], connect_timeout=2)
    pool = McpPool(config(never=never, basic=stdio("basic.py")), options(connect_timeout=60, call_timeout=5))
    async with pool:
        with anyio.fail_after(SETTLE_TIMEOUT):
            await pool.wait_settled()
        health = pool.health()
        assert health["never"] == {"state": "failed", "transport": "stdio", "tools": 0,
                                   "error": "did not start within 2 s"}
        assert health["basic"]["state"] == "ready"
        outcome = await pool.call_tool("basic__echo", '{"text": "still fine"}')
        assert (readable(outcome.content), outcome.is_error) == ("echo: still fine", False)


async def test_a_servers_own_connect_timeout_overrides_the_default() -> None:
    hang = ["-c", "import time; time.sleep(60)"]
    impatient = StdioServerConfig(command=sys.executable, args=hang, connect_timeout=1)
    patient = StdioServerConfig(command=sys.executable, args=hang)
    pool = McpPool(config(impatient=impatient, patient=patient), options(connect_timeout=60, call_timeout=5))
    async with pool:
        failed = await wait_until(pool, "impatient", lambda s: s["state"] == "failed")
        assert failed["error"] == "did not start within 1 s"
        assert pool.health()["patient"]["state"] == "starting"


async def test_a_slow_tool_gets_a_timeout_error_and_the_server_stays_usable() -> None:
    pool = McpPool(config(basic=stdio("basic.py", timeout=0.5)), options(connect_timeout=60, call_timeout=30))
    async with pool:
        with anyio.fail_after(SETTLE_TIMEOUT):
            await pool.wait_settled()
            slow = await pool.call_tool("basic__sleep", '{"seconds": 20}')
            after = await pool.call_tool("basic__add", '{"a": 1, "b": 1}')
    assert slow.is_error
    data = json.loads(slow.content)["data"]
    assert (data["error"], data["retry_after"]) == ("timeout", 5)
    assert slow.retryable and not after.retryable  # the tool loop may run a timed-out call again
    assert data["message"].startswith("The tool ran without progress for 0.5 s")
    assert (readable(after.content), after.is_error) == ("2", False)


async def test_a_failed_server_offers_no_tools_and_calls_to_them_are_errors() -> None:
    pool = McpPool(config(broken=stdio("crash_on_start.py")), options(connect_timeout=30, call_timeout=5))
    async with pool:
        with anyio.fail_after(SETTLE_TIMEOUT):
            await pool.wait_settled()
        assert pool.catalogue.openai_tools == ()
        assert "GITHUB_TOKEN is not set" in pool.health()["broken"]["error"]
        outcome = await pool.call_tool("broken__anything", "{}")
    assert outcome.is_error
    assert json.loads(outcome.content)["data"]["error"] == "unknown_tool"


def gated_children(gate: Path) -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if str(gate) in child.cmdline() and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.Error:  # it exited while we looked
            continue
    return found


async def gated_child_running(gate: Path) -> None:
    while not gated_children(gate):
        await anyio.sleep(0.02)


@pytest.mark.parametrize("spawned", [False, True], ids=["before-spawn", "during-handshake"])
async def test_stopping_cancels_servers_that_are_still_starting(tmp_path: Path, spawned: bool) -> None:
    never_opened = tmp_path / "gate"
    gated = config(gated=stdio("gated_start.py", str(never_opened)))
    pool = McpPool(gated, options(connect_timeout=120, call_timeout=5))
    with anyio.fail_after(SETTLE_TIMEOUT):
        async with pool:
            if spawned:
                await gated_child_running(never_opened)
            assert pool.health()["gated"]["state"] == "starting"
    assert pool.health()["gated"] == {"state": "failed", "transport": "stdio", "tools": 0,
                                      "error": "stopped while starting"}
    assert gated_children(never_opened) == []


def children_from_now_on() -> Callable[[], list[psutil.Process]]:
    """Lists this process's children started after the call: other tests' servers may still be running."""
    before = {child.pid for child in psutil.Process().children()}
    return lambda: [child for child in psutil.Process().children() if child.pid not in before]


async def wait_until(pool: McpPool, name: str, predicate: Any) -> dict:
    with anyio.fail_after(SETTLE_TIMEOUT):
        return await pool.wait_for(name, predicate)


async def test_a_crashed_server_is_restarted_and_its_tools_come_back() -> None:
    pool = McpPool(config(basic=stdio("basic.py")), options())
    async with pool:
        with anyio.fail_after(SETTLE_TIMEOUT):
            await pool.wait_settled()
        crashed = await pool.call_tool("basic__crash", "{}")
        assert json.loads(crashed.content)["data"]["error"] == "server_unavailable"
        status = await wait_until(pool, "basic", lambda s: s["state"] == "ready" and s.get("restarts") == 1)
        assert "connection was lost" in status["last_error"]
        assert "crashing on purpose" in status["last_error"]
        after = await pool.call_tool("basic__echo", '{"text": "back"}')
        assert (readable(after.content), after.is_error) == ("echo: back", False)


async def test_a_server_that_failed_to_start_is_retried_until_it_starts(tmp_path: Path) -> None:
    gate = tmp_path / "database-up"
    pool = McpPool(config(flaky=stdio("fails_until.py", str(gate))), options())
    async with pool:
        failed = await wait_until(pool, "flaky", lambda s: s["state"] == "failed")
        assert "the database is down" in failed["error"]
        gate.touch()
        await wait_until(pool, "flaky", lambda s: s["state"] == "ready")
        outcome = await pool.call_tool("flaky__hello", "{}")
        assert readable(outcome.content) == "hello"


async def test_a_server_that_keeps_failing_the_same_way_is_reported_once() -> None:
    pool = McpPool(config(missing=StdioServerConfig(command="no-such-mcp-server")), options())
    with capture_logs() as logs:
        async with pool:
            with anyio.fail_after(SETTLE_TIMEOUT):
                while not any(entry["event"] == "mcp_server_still_failing" for entry in logs):  # retried
                    await pool.next_change()
    assert [entry["error"] for entry in logs if entry["event"] == "mcp_server_failed"] == [
        "command not found: no-such-mcp-server"
    ]
    assert not any(entry["log_level"] == "error" for entry in logs if entry["event"] != "mcp_server_failed")


async def test_without_retries_a_failed_server_stays_failed(tmp_path: Path) -> None:
    pool = McpPool(config(flaky=stdio("fails_until.py", str(tmp_path / "never"))), options(retry=False))
    async with pool:
        with anyio.fail_after(SETTLE_TIMEOUT):
            await pool.wait_settled()
    assert pool.health()["flaky"]["state"] == "failed"


async def test_progress_extends_the_timeout_up_to_the_cap() -> None:
    pool = McpPool(config(basic=stdio("basic.py", timeout=1.0)), options(call_timeout=30, call_timeout_max=4.0))
    async with pool:
        with anyio.fail_after(SETTLE_TIMEOUT):
            await pool.wait_settled()
            # 5 steps 0.5 s apart: 2.5 s in all, never 1 s without progress.
            steady = await pool.call_tool("basic__steps", '{"count": 5, "every": 0.5}')
            # 10 steps 0.5 s apart would take 5 s: past the 4 s cap.
            endless = await pool.call_tool("basic__steps", '{"count": 10, "every": 0.5}')
            after = await pool.call_tool("basic__add", '{"a": 2, "b": 2}')
    assert (readable(steady.content), steady.is_error) == ("5 steps done", False)
    data = json.loads(endless.content)["data"]
    assert data["error"] == "timeout"
    assert data["message"].startswith("The tool ran its limit of 4")
    assert readable(after.content) == "4"


async def test_a_server_is_ready_once_its_tools_are_offered_and_the_catalogue_is_built_off_the_event_loop() -> None:
    building, release = threading.Event(), threading.Event()
    on_loop: list[bool] = []

    def prepare(catalogue: Catalogue) -> None:  # with each build, in its thread: held until the test lets it end
        on_loop.append(asyncio._get_running_loop() is not None)
        building.set()
        release.wait(SETTLE_TIMEOUT)

    pool = McpPool(config(basic=stdio("basic.py")), options(), prepare=prepare)
    async with pool:
        try:
            with anyio.fail_after(SETTLE_TIMEOUT):
                assert await anyio.to_thread.run_sync(building.wait, SETTLE_TIMEOUT)  # its tools listed, being built
                assert pool.health()["basic"]["state"] == "starting" and not pool.catalogue.owns("basic__echo")
                release.set()  # the loop runs this while the build waits for it
                await pool.wait_for("basic", lambda health: health["state"] == "ready")
                assert pool.catalogue.owns("basic__echo") and pool.health()["basic"]["tools"] == len(BASIC_TOOLS)
        finally:
            release.set()
    assert on_loop and not any(on_loop)


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-listen", "2025-notification"])
async def test_a_changed_tool_list_is_picked_up_on_both_protocol_eras(mode: str) -> None:
    pool = McpPool(config(basic=stdio("basic.py", mode=mode)), options())
    async with pool:
        with anyio.fail_after(SETTLE_TIMEOUT):
            await pool.wait_settled()
            assert not pool.catalogue.owns("basic__late_tool")
            await pool.call_tool("basic__grow", "{}")
            while not pool.catalogue.owns("basic__late_tool"):
                await pool.next_change()
        assert readable((await pool.call_tool("basic__late_tool", "{}")).content) == "late"
        assert pool.health()["basic"]["tools"] == len(BASIC_TOOLS) + 1


@pytest.mark.parametrize("block", [False, True], ids=["flagged", "blocked"])
async def test_a_changed_definition_is_flagged_and_can_be_withdrawn(block: bool) -> None:
    pool = McpPool(config(basic=stdio("basic.py")), options(block_changed_tools=block))
    with capture_logs() as logs:
        async with pool:
            with anyio.fail_after(SETTLE_TIMEOUT):
                await pool.wait_settled()
                await pool.call_tool("basic__mutate", "{}")
                while not any(e["event"] == "mcp_tools_changed" for e in logs):
                    await pool.next_change()
                # The log comes before the catalogue is rebuilt: wait for the rebuild (a withdrawal that never
                # comes fails here, at the deadline).
                while pool.catalogue.owns("basic__echo") is block:
                    await pool.next_change()
            offered = pool.catalogue.owns("basic__echo")
    [warning] = [e for e in logs if e["event"] == "mcp_tool_definition_changed"]
    assert (warning["log_level"], warning["server"], warning["tools"]) == ("warning", "basic", ["echo"])
    assert offered is not block


async def test_a_2025_era_question_mid_call_holds_the_call_for_the_answer() -> None:
    # Elicitation is declared (a 2026 server refuses to ask otherwise); a question pushed in the middle of a
    # 2025-era call holds the call for the person's answer (more in test_held_calls.py; the 2026 way in
    # test_input_required.py).
    pool = McpPool(config(basic=stdio("basic.py", mode="legacy")), options())
    async with pool:
        with anyio.fail_after(SETTLE_TIMEOUT):
            await pool.wait_settled()
            assert pool.health()["basic"]["protocol_version"] == "2025-11-25"
            asked = await pool.call_tool("basic__ask", "{}")
            assert asked.input_needed is not None and asked.input_needed.state
            [key] = asked.input_needed.requests
            answer = ToolAnswers({key: {"action": "decline"}}, asked.input_needed.state)
            outcome = await pool.call_tool("basic__ask", "{}", answers=answer)
    assert (readable(outcome.content), outcome.is_error) == ("the client answered: decline", False)


@pytest.mark.parametrize(
    ("filters", "offered"),
    [
        ({"disabledTools": ["crash", "mutate"]}, [t for t in BASIC_TOOLS if t not in ("crash", "mutate")]),
        ({"enabledTools": ["echo", "add"]}, ["echo", "add"]),
        ({"enabledTools": ["echo", "add"], "disabledTools": ["add"]}, ["echo"]),
    ],
)
async def test_enabled_and_disabled_tools_filter_what_is_offered(filters: dict, offered: list[str]) -> None:
    from app.mcp.config import StdioServerConfig as Config

    server = Config.model_validate({"command": sys.executable, "args": [str(SERVERS / "basic.py")], **filters})
    pool = McpPool(config(basic=server), options())
    async with pool:
        with anyio.fail_after(SETTLE_TIMEOUT):
            await pool.wait_settled()
        names = [t["function"]["name"] for t in pool.catalogue.openai_tools]
        assert pool.health()["basic"]["tools"] == len(offered)
    assert names == [f"basic__{name}" for name in offered]


@pytest.mark.parametrize("how", ["garbage", "flood", "stubborn"])
async def test_misbehaving_servers_serve_and_shut_down_within_bounds(how: str) -> None:
    pool = McpPool(config(bad=stdio("misbehaving.py", how)), options())
    with anyio.fail_after(SETTLE_TIMEOUT):
        async with pool:
            await wait_until(pool, "bad", lambda s: s["state"] == "ready")
            outcome = await pool.call_tool("bad__ping", "{}")
            assert readable(outcome.content) == "pong"
            processes = [c for c in psutil.Process().children() if c.cmdline()[-1:] == [how]]
            assert len(processes) == 1
    _, alive = psutil.wait_procs(processes, timeout=5)
    assert alive == []


async def _listening(port: int) -> None:
    with anyio.fail_after(SETTLE_TIMEOUT):
        while True:
            try:
                await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                return
            except OSError:
                await anyio.sleep(0.05)


class RemoteServer:
    """basic.py over streamable HTTP in its own process, to be killed and started again on one port."""

    def __init__(self, script: str = "basic.py") -> None:
        self.script = script
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        self.process = subprocess.Popen([sys.executable, str(SERVERS / self.script), "http", str(self.port)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        await _listening(self.port)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)

    async def restart_when_it_exits(self) -> None:
        assert self.process is not None
        await anyio.to_thread.run_sync(self.process.wait)
        await self.start()


@pytest.fixture
async def remote_server() -> AsyncIterator[RemoteServer]:
    remote = RemoteServer()
    await remote.start()
    try:
        yield remote
    finally:
        remote.kill()


def remote_pool(remote: RemoteServer) -> McpPool:
    # 2025-era sessions: a restarted server no longer knows the session, and its loss goes unseen until a call.
    server = HttpServerConfig(url=remote.url, mode="legacy")
    return McpPool(config(remote=server), options(connect_timeout=30, call_timeout=10))


@pytest.mark.parametrize("tool", ["echo", "add"])
async def test_a_call_to_an_expired_remote_session_is_retried_once_reconnected(
    remote_server: RemoteServer, tool: str
) -> None:
    # echo is read-only; add is neither read-only nor idempotent, but an expired session (404) means
    # the server refused the call before running it, so it is retried too.
    arguments = '{"text": "two"}' if tool == "echo" else '{"a": 2, "b": 2}'
    async with remote_pool(remote_server) as pool:
        await wait_until(pool, "remote", lambda s: s["state"] == "ready")
        assert not (await pool.call_tool("remote__echo", '{"text": "one"}')).is_error
        remote_server.kill()
        await remote_server.start()
        again = await pool.call_tool(f"remote__{tool}", arguments)
        assert (readable(again.content), again.is_error) == ("echo: two" if tool == "echo" else "4", False)
        assert pool.health()["remote"]["restarts"] == 1


async def test_a_call_that_never_reached_a_down_server_is_retried_once_it_is_back(
    remote_server: RemoteServer,
) -> None:
    async with remote_pool(remote_server) as pool:
        await wait_until(pool, "remote", lambda s: s["state"] == "ready")
        remote_server.kill()
        async with anyio.create_task_group() as group:
            outcomes = []

            async def call() -> None:
                outcomes.append(await pool.call_tool("remote__add", '{"a": 2, "b": 3}'))

            group.start_soon(call)
            # The call's POST was refused (nothing sent), which ended the connection; bring the server back.
            await wait_until(pool, "remote", lambda s: s["state"] != "ready")
            assert outcomes == []
            await remote_server.start()
        assert (readable(outcomes[0].content), outcomes[0].is_error) == ("5", False)


async def test_a_call_lost_mid_way_is_not_repeated_unless_safe(remote_server: RemoteServer, tmp_path: Path) -> None:
    # crash is neither read-only nor idempotent: it reached the server, which died running it. Repeating
    # it on the restarted server would return "survived"; the model must hear of the failure instead.
    marker = tmp_path / "crashed"
    async with remote_pool(remote_server) as pool:
        await wait_until(pool, "remote", lambda s: s["state"] == "ready")
        async with anyio.create_task_group() as group:
            group.start_soon(remote_server.restart_when_it_exits)
            outcome = await pool.call_tool("remote__crash", json.dumps({"once_marker": str(marker)}))
        assert outcome.is_error
        assert json.loads(outcome.content)["data"]["error"] == "server_unavailable"
        assert marker.read_text() == "crashed"
        await wait_until(pool, "remote", lambda s: s["state"] == "ready")
        again = await pool.call_tool("remote__crash", json.dumps({"once_marker": str(marker)}))
        assert (readable(again.content), again.is_error) == ("survived", False)


async def test_a_stateless_remote_server_that_goes_away_is_seen_at_once_and_reconnected(
    remote_server: RemoteServer,
) -> None:
    # On 2026-era connections the tool-change subscription is the only stream held open between calls:
    # its end is how the pool learns that the server is gone, without waiting for a call to fail.
    server = HttpServerConfig(url=remote_server.url)
    pool = McpPool(config(remote=server), options(connect_timeout=30, call_timeout=10))
    async with pool:
        status = await wait_until(pool, "remote", lambda s: s["state"] == "ready")
        assert status["protocol_version"] == "2026-07-28"
        remote_server.kill()
        gone = await wait_until(pool, "remote", lambda s: s["state"] != "ready")
        assert (gone["state"], gone["restarts"]) in {("restarting", 1), ("failed", 1)}
        outcome = await pool.call_tool("remote__add", '{"a": 1, "b": 1}')
        assert json.loads(outcome.content)["data"]["error"] == "server_unavailable"
        await remote_server.start()
        back = await wait_until(pool, "remote", lambda s: s["state"] == "ready")
        assert back["restarts"] == 1
        outcome = await pool.call_tool("remote__add", '{"a": 1, "b": 1}')
        assert (readable(outcome.content), outcome.is_error) == ("2", False)


async def test_a_request_keeps_its_tools_while_a_reload_renames_them() -> None:
    # With prefixes only on conflict, `echo` is plain `echo` until a second server brings its own `echo`.
    # A request that began before that offered `echo`; its model calling `echo` must still reach it.
    before = config(one=stdio("basic.py"))
    after = config(one=stdio("basic.py"), two=stdio("basic.py"))
    pool = McpPool(before, options(conversion=ConversionOptions(prefix="on-conflict")), load_config=lambda: after)
    async with pool:
        await wait_until(pool, "one", lambda s: s["state"] == "ready")
        in_flight = pool.tools_for_request()
        assert "echo" in [t["function"]["name"] for t in in_flight.openai_tools]
        pool.request_reload()
        await wait_until(pool, "two", lambda s: s["state"] == "ready")
        names = [t["function"]["name"] for t in pool.tools_for_request().openai_tools]
        assert "echo" not in names and {"one__echo", "two__echo"} <= set(names)
        kept = await in_flight.call_tool("echo", '{"text": "still here"}')
        assert (readable(kept.content), kept.is_error) == ("echo: still here", False)
        new = await pool.tools_for_request().call_tool("echo", '{"text": "?"}')
        assert json.loads(new.content)["data"]["error"] == "unknown_tool"


async def test_a_bare_name_a_client_tool_also_has_gets_its_prefix_for_that_request() -> None:
    # Open WebUI sends tools of its own; with bare names one of ours may share a name with one of them.
    # Neither is dropped: ours is offered under its prefixed name in that request, and calls reach it.
    pool = McpPool(config(one=stdio("basic.py")), options(conversion=ConversionOptions(prefix="on-conflict")))
    async with pool:
        await wait_until(pool, "one", lambda s: s["state"] == "ready")
        tools = pool.tools_for_request(client_tools=frozenset({"echo"}))
        names = [t["function"]["name"] for t in tools.openai_tools]
        assert "echo" not in names and {"one__echo", "add"} <= set(names)
        renamed = await tools.call_tool("one__echo", '{"text": "mine"}')
        assert (readable(renamed.content), renamed.is_error) == ("echo: mine", False)
        assert "echo" in [t["function"]["name"] for t in pool.tools_for_request().openai_tools]


@pytest.mark.parametrize("change", ["removed", "changed"])
async def test_a_reload_lets_the_calls_running_on_a_server_finish_first(change: str) -> None:
    after = config() if change == "removed" else config(basic=stdio("basic.py", timeout=30))
    pool = McpPool(config(basic=stdio("basic.py")), options(), load_config=lambda: after)
    ours = children_from_now_on()
    async with pool:
        await wait_until(pool, "basic", lambda s: s["state"] == "ready")
        [old_server] = ours()
        in_flight = pool.tools_for_request()
        first_step = anyio.Event()
        outcomes: list[Any] = []

        async def progressed(progress: float, total: float | None, message: str | None) -> None:
            first_step.set()

        async def call() -> None:
            outcomes.append(await in_flight.call_tool("basic__steps", '{"count": 2, "every": 1}', progressed))

        with anyio.fail_after(SETTLE_TIMEOUT):
            async with anyio.create_task_group() as group:
                group.start_soon(call)
                await first_step.wait()
                pool.request_reload()
                while "basic__steps" in [t["function"]["name"] for t in pool.tools_for_request().openai_tools]:
                    await pool.next_change()
                assert outcomes == []  # the reload began while the call ran; new requests no longer see it
        assert (readable(outcomes[0].content), outcomes[0].is_error) == ("2 steps done", False)
        await anyio.to_thread.run_sync(lambda: psutil.wait_procs([old_server], timeout=SETTLE_TIMEOUT))
        if change == "changed":
            await wait_until(pool, "basic", lambda s: s["state"] == "ready" and ours())
        else:
            await wait_until(pool, "basic", lambda s: s["state"] == "unknown")
            late = await in_flight.call_tool("basic__echo", '{"text": "?"}')
            assert json.loads(late.content)["data"]["message"] == "MCP server 'basic' was removed from the config."
        assert not old_server.is_running()


async def test_a_2025_remote_server_that_goes_away_is_seen_by_its_keep_alive_ping(
    remote_server: RemoteServer,
) -> None:
    server = HttpServerConfig(url=remote_server.url, mode="legacy")
    pool = McpPool(config(remote=server), options(connect_timeout=30, call_timeout=10, keepalive_interval=0.2))
    async with pool:
        await wait_until(pool, "remote", lambda s: s["state"] == "ready")
        remote_server.kill()
        gone = await wait_until(pool, "remote", lambda s: s["state"] != "ready")  # no call was made
        assert gone["restarts"] == 1
        await remote_server.start()
        back = await wait_until(pool, "remote", lambda s: s["state"] == "ready")
        assert back["restarts"] == 1
        outcome = await pool.call_tool("remote__add", '{"a": 1, "b": 1}')
        assert (readable(outcome.content), outcome.is_error) == ("2", False)


async def test_a_2025_remote_server_killed_mid_call_is_reported_gone_not_waited_out(tmp_path: Path) -> None:
    # The server's helper keeps the call's connection open, so its stream never ends; only its closed port
    # tells that the server is gone. The call must not wait out its timeout and then be called a timeout.
    remote = RemoteServer("forking.py")
    await remote.start()
    helper = tmp_path / "helper-pid"
    pool = McpPool(config(remote=HttpServerConfig(url=remote.url, mode="legacy")),
                   options(connect_timeout=30, call_timeout=20))
    try:
        async with pool:
            await wait_until(pool, "remote", lambda s: s["state"] == "ready")
            async with anyio.create_task_group() as group:
                outcomes = []

                async def call() -> None:
                    outcomes.append(await pool.call_tool("remote__hold", json.dumps(
                        {"seconds": 60, "marker": str(helper)})))

                group.start_soon(call)
                with anyio.fail_after(SETTLE_TIMEOUT):
                    while not helper.exists() or not helper.read_text():
                        await anyio.sleep(0.05)
                remote.kill()
            [outcome] = outcomes
            assert json.loads(outcome.content)["data"]["error"] == "server_unavailable"
            gone = await wait_until(pool, "remote", lambda s: s["state"] != "ready")
            assert gone["restarts"] == 1
    finally:
        remote.kill()
        if helper.exists() and helper.read_text():
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(int(helper.read_text())).kill()


async def test_a_call_for_a_server_that_is_down_makes_it_retry_now_not_after_its_backoff(tmp_path: Path) -> None:
    gate = tmp_path / "database-up"
    gate.touch()
    # A backoff longer than the test may wait: only the call can bring the server back in time.
    pool = McpPool(config(flaky=stdio("fails_until.py", str(gate))), options(retry_first=10 * SETTLE_TIMEOUT))
    ours = children_from_now_on()
    async with pool:
        await wait_until(pool, "flaky", lambda s: s["state"] == "ready")
        [server] = ours()
        gate.unlink()
        server.kill()  # it is restarted at once, fails (no database), and waits out its long backoff
        await wait_until(pool, "flaky", lambda s: s["state"] == "failed" and s.get("restarts") == 1)
        gate.touch()
        meanwhile = await pool.call_tool("flaky__hello", "{}")
        assert json.loads(meanwhile.content)["data"]["error"] == "server_unavailable"
        await wait_until(pool, "flaky", lambda s: s["state"] == "ready")
        outcome = await pool.call_tool("flaky__hello", "{}")
        assert (readable(outcome.content), outcome.is_error) == ("hello", False)


@pytest.mark.parametrize("use_uvloop", [False, True], ids=["asyncio", "uvloop"])
def test_a_stderr_pipe_is_closed_once_by_its_owner(use_uvloop: bool) -> None:
    # uvloop's libuv closes the fd and then the file object too; if the file object owned the fd as well,
    # it would close a number another thread may have reused by then (an unrelated file failing EBADF).
    import asyncio
    import os

    import uvloop

    from app.mcp.processes import StderrTail, libuv_closes_pipes, pump_stderr

    async def pump() -> tuple[bool, list[str]]:
        read_fd, write_fd = os.pipe()
        os.write(write_fd, b"starting\n")
        os.close(write_fd)
        tail = StderrTail()
        await pump_stderr("s", read_fd, tail)
        await asyncio.sleep(0)  # transports close on the next loop turn
        try:
            os.fstat(read_fd)
        except OSError:
            return libuv_closes_pipes(asyncio.get_running_loop()), list(tail.lines)
        return False, ["fd leaked"]

    owned_by_libuv, lines = uvloop.run(pump()) if use_uvloop else asyncio.run(pump())
    assert (owned_by_libuv, lines) == (use_uvloop, ["starting"])


async def test_stdio_servers_start_in_turns_each_turn_ending_when_its_server_is_ready() -> None:
    """One start at a time and turns an hour long: only the end of each turn at `ready` lets all three start."""
    pool = McpPool(config(a=stdio("basic.py"), b=stdio("basic.py"), c=stdio("basic.py")),
                   options(start_slots=1, start_turn=3600))
    with capture_logs() as logs:
        async with pool:
            with anyio.fail_after(SETTLE_TIMEOUT):
                await pool.wait_settled()
            assert {name: s["state"] for name, s in pool.health().items()} == {"a": "ready", "b": "ready", "c": "ready"}
    assert [e["server"] for e in logs if e["event"] == "mcp_server_ready"] == ["a", "b", "c"]  # in turn, in order


async def test_a_server_that_never_gets_ready_keeps_the_next_waiting_only_for_its_turn() -> None:
    never = StdioServerConfig(command=sys.executable, args=["-c", "import time; time.sleep(60)"])
    pool = McpPool(config(never=never, basic=stdio("basic.py")), options(start_slots=1, start_turn=0.5))
    async with pool:
        ready = await wait_until(pool, "basic", lambda s: s["state"] == "ready")
        assert ready["tools"] == len(BASIC_TOOLS) and pool.health()["never"]["state"] == "starting"


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-listen", "2025-notification"])
async def test_changed_resources_and_prompts_are_picked_up_on_both_protocol_eras(mode: str) -> None:
    pool = McpPool(config(library=stdio("library.py", mode=mode)), options())

    def reader_description() -> str:
        return next(t["function"]["description"] for t in pool.catalogue.openai_tools
                    if t["function"]["name"] == "library__read_resource")

    async with pool:
        with anyio.fail_after(SETTLE_TIMEOUT):
            await pool.wait_settled()
            assert "note://9" not in reader_description() and pool.prompt_book.find("farewell") is None
            await pool.call_tool("library__shelve", '{"number": 9, "text": "nine"}')
            await pool.call_tool("library__teach", "{}")
            while "note://9" not in reader_description() or pool.prompt_book.find("farewell") is None:
                await pool.next_change()
        read = await pool.call_tool("library__read_resource", '{"uri": "note://9"}')
        farewell = pool.prompt_book.find("farewell")
        assert farewell is not None
        prompt = await pool.get_prompt(farewell, {})
    assert readable(read.content) == "nine"
    assert prompt.messages[0].content.text == "Say goodbye nicely."  # type: ignore[union-attr]


@pytest.mark.parametrize(("enabled", "reader"), [(None, True), (["find_note"], False),
                                                 (["find_note", "read_resource"], True)])
async def test_mcp_json_filters_the_reader_like_any_tool(enabled: list[str] | None, reader: bool) -> None:
    pool = McpPool(config(library=stdio("library.py", enabledTools=enabled)), options())
    async with pool:
        with anyio.fail_after(SETTLE_TIMEOUT):
            await pool.wait_settled()
        assert pool.catalogue.owns("library__find_note")
        assert pool.catalogue.owns("library__read_resource") is reader
