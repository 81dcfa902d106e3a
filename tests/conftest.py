"""Shared fixtures: a scripted upstream, a real streamable-HTTP MCP server, and a running gateway."""

import compileall
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from app.main import create_app
from app.settings import Settings
from tests.support.fake_upstream import FakeUpstream
from tests.support.lanes import mark_the_slow, no_processes_or_sockets
from tests.support.replica_services import RedisServer
from tests.support.servers import ServerThread

SERVERS = Path(__file__).parent / "support" / "mcp_servers"
READY_TIMEOUT = 60.0
# The tools of tests/support/mcp_servers/basic.py as exposed (sanitised), in the order it lists them.
BASIC_TOOLS = [
    "echo", "add", "fail", "get_weather", "rendezvous", "sleep", "grow", "mutate", "crash", "steps", "ask",
    "ask_model",
]


# The TOOLBRIDGE_TOKEN_KEY every gateway on Redis gets unless a test names its own (or None): replicas must share
# one, as a deployment passes one secret to each.
REPLICAS_TOKEN_KEY = "n2b1u1n3d3PgyGwQyVfVQk0Y2fXoZfCq3V5mB1hS7mc="


def stdio_entry(script: str, *args: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(SERVERS / script), *args]}


def make_settings(tmp: Path, servers: dict[str, Any] | None, **overrides: Any) -> Settings:
    config = tmp / "mcp.json"
    if servers is not None:
        config.write_text(json.dumps({"mcpServers": servers}))
    # `server__tool` names, so that each call in a test says which server it is for; the default (bare names)
    # is tested through the CLI, the pool and the conversion.
    # Memory in the test's own directory, never the user's data directory.
    values: dict[str, Any] = {"mcp_config": config, "mcp_connect_timeout": 120, "tool_timeout": 20,
                              "tool_prefix": "always", "state_url": f"sqlite:///{tmp / 'state.db'}",
                              "tool_budget": 0}  # every tool offered, unless a test sets a budget
    if str(overrides.get("state_url", "")).startswith("redis") and "token_key" not in overrides:
        values["token_key"] = REPLICAS_TOKEN_KEY
    return Settings.load(_env_file=None, **(values | overrides))


def wait_for_health(
    base_url: str, predicate: Any, timeout: float = READY_TIMEOUT, key: str | None = None
) -> dict[str, Any]:
    """Polls /health until `predicate(body)` holds; bounded, so a broken start fails instead of hanging."""
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    while time.monotonic() < deadline:
        try:
            body = httpx.get(f"{base_url}/health", timeout=5, headers=headers).json()
        except httpx.ConnectError:  # a gateway started as a process may not listen yet
            body = {}
        except httpx.ReadTimeout:  # a machine busy with other work (CI beside an eval): ask again, to the deadline
            body = {}
        if body and predicate(body):
            return body
        time.sleep(0.05)
    raise AssertionError(f"/health never reached the expected state: {body}")


def servers_ready(*names: str) -> Any:
    return lambda body: all(body["servers"].get(n, {}).get("state") == "ready" for n in names)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Two workers a core for `-n auto`: most tests wait on processes and sockets, and with one worker a core
    the two cores were 67 % busy. Measured on two cores, quiet, the whole suite: 437 s with two workers, 400 s
    with three, 367 s with four (CPU in all: 721 s with three, 700 s with four)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 2 * cores


def pytest_configure(config: pytest.Config) -> None:
    """Compiles the gateway's and the test servers' modules once, before the workers start: hundreds of tests
    start them as processes, and where PYTHONDONTWRITEBYTECODE is set (CI's image sets it) each process compiled
    app/ again, about 0.12 s of CPU a gateway. compileall writes whatever that variable says."""
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist), not each worker
        root = Path(__file__).parent.parent
        for folder in ("app", "tests/support", "bench"):
            compileall.compile_dir(root / folder, quiet=1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks `slow` every test that starts a server, a process or a browser (tests/support/lanes.py), so that
    `pytest -m "not slow"` runs the pure ones in seconds.

    Then the slow tests go first and the pure ones last, each in the order collected: xdist's work-stealing
    scheduler (`--dist worksteal`, in pyproject.toml) splits the list between the workers and a worker that runs
    out takes half of what another has left, so the thousands of pure tests, a few milliseconds each, are what
    the workers share at the end and they finish together. (The default `load` scheduler handed each worker its
    share early and could not take it back: one worker ran server tests for 111 s after the other had ended.)"""
    mark_the_slow(items)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _pure_tests_stay_pure(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test not marked slow that starts a process or opens a socket fails, in every run."""
    if request.node.get_closest_marker("slow") is not None:
        yield
        return
    with no_processes_or_sockets(request.node.nodeid) as violations:
        yield
    if violations:
        pytest.fail(violations[0], pytrace=False)


@pytest.fixture(scope="session")
def upstream() -> Iterator[FakeUpstream]:
    fake = FakeUpstream()
    with ServerThread(fake.app) as thread:
        fake.url = thread.url  # type: ignore[attr-defined]
        yield fake


@pytest.fixture(scope="session")
def remote_mcp() -> Iterator[str]:
    """The basic test server over streamable HTTP, in this process, on a free port."""
    from tests.support.mcp_servers.basic import server

    with ServerThread(server.streamable_http_app()) as thread:
        yield f"{thread.url}/mcp"


@pytest.fixture(scope="session")
def legacy_sse_mcp() -> Iterator[str]:
    """The basic test server over the legacy HTTP+SSE transport, which a plain URL must fall back to."""
    from tests.support.mcp_servers.basic import server

    with ServerThread(server.sse_app()) as thread:
        yield f"{thread.url}/sse"


class Gateway:
    def __init__(self, thread: ServerThread, settings: Settings) -> None:
        self.thread = thread
        self.settings = settings
        self.url = thread.url

    def client(self, api_key: str = "sk-client-secret", **options: Any) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=api_key, max_retries=0, **options)


@contextmanager
def running_gateway(
    tmp: Path, servers: dict[str, Any] | None = None, *, ready: Sequence[str] = (), key: str | None = None,
    **overrides: Any,
) -> Iterator[Gateway]:
    """A gateway in this process on a free port, with these MCP servers (None: no mcp.json) and settings.
    Returns once the `ready` servers are ready (bounded: a broken start fails the test, never hangs it);
    `key` is the API key /health needs to show them."""
    settings = make_settings(tmp, servers, **overrides)
    with ServerThread(create_app(settings)) as thread:
        if ready:
            wait_for_health(thread.url, servers_ready(*ready), key=key)
        yield Gateway(thread, settings)


@pytest.fixture(scope="session")
def gateway(
    upstream: FakeUpstream, remote_mcp: str, legacy_sse_mcp: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    servers = {
        "basic": stdio_entry("basic.py"),
        "remote": {"url": remote_mcp},
        "legacy": {"url": legacy_sse_mcp},
        "broken": stdio_entry("crash_on_start.py"),
        "invalid": {"args": ["no command and no url"]},
        "off": {"command": "never-run", "disabled": True},
    }
    with running_gateway(
        tmp_path_factory.mktemp("gateway"), servers, ready=("basic", "remote", "legacy"),
        upstream_url=f"{upstream.url}/v1", max_tool_rounds=3, upstream_api_key="sk-upstream",
    ) as gateway:
        # Past its first start too: a chat while it still starts waits for it and says so (TOOLBRIDGE_MCP_START_WAIT).
        wait_for_health(gateway.url, lambda body: body["servers"]["broken"]["state"] == "failed")
        yield gateway


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    """A real redis-server shared by a module's tests (require_redis says where it is missing)."""
    server = RedisServer()
    server.start()
    yield server
    server.stop()
