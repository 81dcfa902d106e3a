"""When the memory's store fails, over real HTTP and real processes: a Redis that stops answering
(SIGSTOP) costs one timeout, not two per chat, and is asked again once it answers; a SQLite file that is
corrupt at start, deleted while in use, or on a full disk shows in /health and in the log as what it is."""

import json
import os
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from app.state.redis import SOCKET_TIMEOUT
from tests.chat.memory.test_memory import ask, tool_turn
from tests.conftest import running_gateway, stdio_entry, wait_for_health
from tests.support.fake_upstream import FakeUpstream, Turn
from tests.support.replica_services import RedisServer
from tests.support.servers import free_port
from tests.test_cli import TOOLBRIDGE, clean_env, write_config

SERVERS = {"basic": stdio_entry("basic.py")}


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.stop()


def memory_errors(logs: list[dict[str, Any]]) -> list[str]:
    return [entry["error"] for entry in logs if entry["event"] == "memory_unavailable"]


def test_a_redis_that_stops_answering_costs_one_timeout_then_is_skipped_until_it_answers_again(
    redis_server: RedisServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    pid = redis_server._process.pid  # type: ignore[union-attr]
    with running_gateway(tmp_path, SERVERS, ready=["basic"], upstream_url=f"{upstream.url}/v1", tool_trace="off",
                         state_url=redis_server.url) as gateway:
        client = gateway.client(timeout=30)
        os.kill(pid, signal.SIGSTOP)
        try:
            question = {"role": "user", "content": "Echo frozen."}
            earlier = [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Hello."}]
            with capture_logs() as first:  # a read (there is an earlier turn), then a write (a tool ran)
                upstream.script(*tool_turn("frozen", "It said frozen."))
                content = ask(client, [*earlier, question], stream=False)  # answered, without memory
            # One timeout (the read); the write after it is skipped, not a second timeout.
            assert [("Timeout" in e, "skipped" in e) for e in memory_errors(first)] == [(True, False), (False, True)]
            with capture_logs() as second:
                upstream.script(Turn(content="Still here."))
                started = time.monotonic()
                ask(client, [*earlier, question, {"role": "assistant", "content": content},
                             {"role": "user", "content": "?"}], stream=False)
                took = time.monotonic() - started
            assert memory_errors(second) and all("skipped" in e for e in memory_errors(second))
            assert took < SOCKET_TIMEOUT  # a hang guard: without the breaker, 2 timeouts (4 s) every chat
            health = httpx.get(f"{gateway.url}/health", timeout=10).json()
            assert health["status"] == "degraded" and "no answer within" in health["memory"]["error"]
        finally:
            os.kill(pid, signal.SIGCONT)
        wait_for_health(gateway.url, lambda body: body["status"] == "ok", timeout=30)  # recovered by itself
        question = {"role": "user", "content": "Echo thawed."}
        upstream.script(*tool_turn("thawed", "It said thawed."))
        content = ask(client, [question], stream=False)
        upstream.script(Turn(content="Yes."))
        ask(client, [question, {"role": "assistant", "content": content}, {"role": "user", "content": "And?"}],
            stream=False)
        restored = [m for m in upstream.chat_requests()[0]["messages"] if m["role"] == "tool"]
        assert [json.loads(m["content"])["data"] for m in restored] == [{"result": "echo: thawed"}]


def test_health_says_degraded_after_a_start_on_a_corrupt_database(upstream: FakeUpstream, tmp_path: Path) -> None:
    (tmp_path / "state.db").write_bytes(b"this is not SQLite at all " * 200)
    with running_gateway(tmp_path, SERVERS, upstream_url=f"{upstream.url}/v1") as gateway:
        health = httpx.get(f"{gateway.url}/health", timeout=10).json()
    assert health["status"] == "degraded"
    assert health["memory"]["store"] == "none"
    assert "file is not a database" in health["memory"]["error"] and str(tmp_path) not in health["memory"]["error"]


def test_health_says_degraded_when_the_database_file_is_deleted(upstream: FakeUpstream, tmp_path: Path) -> None:
    with running_gateway(tmp_path, SERVERS, ready=["basic"], upstream_url=f"{upstream.url}/v1") as gateway:
        assert httpx.get(f"{gateway.url}/health", timeout=10).json()["status"] == "ok"
        (tmp_path / "state.db").unlink()
        health = httpx.get(f"{gateway.url}/health", timeout=10).json()
    assert health["status"] == "degraded" and "deleted" in health["memory"]["error"]
    assert str(tmp_path) not in health["memory"]["error"]


def test_a_full_disk_is_logged_as_itself_and_health_says_so(upstream: FakeUpstream, tmp_path: Path) -> None:
    # No root for a tiny filesystem: a file size limit (RLIMIT_FSIZE) fails the writes past it the same way
    # (Python ignores SIGXFSZ). The gateway logs to a pipe, which the limit does not touch.
    config = write_config(tmp_path, SERVERS)
    port = free_port()
    env = clean_env() | {"TOOLBRIDGE_UPSTREAM_URL": f"{upstream.url}/v1", "TOOLBRIDGE_TOOL_TRACE": "off",
                         "TOOLBRIDGE_STATE_URL": f"sqlite:///{tmp_path / 'state.db'}", "TOOLBRIDGE_LOG_FORMAT": "json",
                         "XDG_DATA_HOME": str(tmp_path / "data")}

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))

    gateway = subprocess.Popen([TOOLBRIDGE, "--port", str(port), "--mcp-config", str(config)], cwd=tmp_path, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=limited, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(gateway.stderr or []), daemon=True)
    reader.start()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(base, lambda body: body.get("status") == "ok")
        upstream.script(*[turn for n in range(12) for turn in tool_turn(str(n % 10) * 20_000, "Done.")])
        for n in range(12):  # each stores about 40 KB: the limit is passed within a few
            body = {"model": "m", "messages": [{"role": "user", "content": f"Echo a lot ({n})."}]}
            assert httpx.post(f"{base}/v1/chat/completions", json=body, timeout=30).status_code == 200
        health = httpx.get(f"{base}/health", timeout=10).json()
    finally:
        gateway.send_signal(signal.SIGTERM)
        gateway.wait(timeout=30)
        reader.join(timeout=10)
    assert health["status"] == "degraded" and "the last write failed: disk I/O error" in health["memory"]["error"]
    failures = [json.loads(line) for line in lines if '"memory_unavailable"' in line]
    assert failures and all("disk I/O error" in entry["error"] for entry in failures)
    assert not any("cannot rollback" in line for line in lines)
