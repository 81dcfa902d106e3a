"""What the attacks share: a gateway whose upstream takes a key (the key an attacker would like to see go
elsewhere), a host that records what reached it, and a gateway whose memory is on or off."""

from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Gateway, running_gateway
from tests.support.fake_upstream import FakeUpstream
from tests.support.raw_http import Recorder
from tests.support.servers import ServerThread

UPSTREAM_KEY = "sk-upstream-CANARY"
DEADLINE = 10.0  # seconds: a hang guard; what hostile requests take now is milliseconds (bench/hostile_inputs.py)
MB = 1_000_000


def send(gateway: Gateway, messages: list[dict[str, Any]], stream: bool = False, **extra: Any) -> httpx.Response:
    body = {"model": "m", "messages": messages, "stream": stream, **extra}
    return httpx.post(f"{gateway.url}/v1/chat/completions", json=body, timeout=DEADLINE)


def answer_text(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text[:500]
    return str(response.json()["choices"][0]["message"]["content"])


def gateway_at(
    tmp_path: Path, upstream_url: str, servers: dict | None = None, **overrides: Any
) -> AbstractContextManager[Gateway]:
    return running_gateway(tmp_path, servers, upstream_url=upstream_url, **overrides)


@pytest.fixture
def relay(tmp_path: Path, upstream: FakeUpstream) -> Iterator[Gateway]:
    """A gateway without MCP servers whose upstream takes UPSTREAM_KEY."""
    upstream.script()
    with gateway_at(tmp_path, f"{upstream.url}/v1", upstream_api_key=UPSTREAM_KEY) as gateway:
        yield gateway


@pytest.fixture
def recorder() -> Iterator[tuple[Recorder, int]]:
    target = Recorder()
    with ServerThread(target.app) as thread:
        yield target, thread.port


@pytest.fixture(scope="package", params=["sqlite", "none"], ids=["memory-on", "memory-off"])
def plain(request: pytest.FixtureRequest, upstream: FakeUpstream,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A gateway without MCP servers, with memory (SQLite) and without: where hostile text is read twice."""
    directory = tmp_path_factory.mktemp("hostile")
    state = f"sqlite:///{directory / 'state.db'}" if request.param == "sqlite" else "none"
    with running_gateway(directory, None, upstream_url=f"{upstream.url}/v1", state_url=state) as gateway:
        yield gateway
