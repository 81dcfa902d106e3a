"""The gateway's listening socket in its MCP servers' hands (issue 27's N1, critical): every stdio server inherited
it, so a server could accept clients' connections (their keys with them), keep the port after the gateway died,
and accept connections during the shutdown grace that were then left hanging. Run as a user runs `toolbridge`."""

import contextlib
import json
import os
import signal
import socket
import time
from pathlib import Path

import httpx
import psutil

from tests.conftest import stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.test_cli import EXIT_TIMEOUT, clean_env, serving, toolbridge, write_config


def _open_files(process: psutil.Process) -> set[str]:
    """What the process's descriptors above stdio point at: sockets and files (pipes and /dev are its own)."""
    targets = set()
    for fd in Path(f"/proc/{process.pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if int(fd.name) > 2 and (target.startswith("socket:") or target.startswith("/")) \
                    and not target.startswith("/dev/"):
                targets.add(target)
    return targets


def test_no_mcp_server_nor_its_helpers_hold_the_gateways_listener_connections_or_files(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    """A stdio server is third-party code: holding the listening socket, it could accept clients' connections
    (their keys with them), keep the port after the gateway died, and accept during the shutdown grace."""
    helper_file = tmp_path / "helper.pid"
    config = write_config(tmp_path, {"spawner": stdio_entry("spawner.py", str(helper_file)),
                                     "time": {"command": "mcp-server-time"}})
    env = clean_env() | {"TOOLBRIDGE_UPSTREAM_URL": f"{upstream.url}/v1"}
    with toolbridge(tmp_path, config, env=env, ready=lambda b: b["status"] == "ok") as (gateway, base):
        port = int(base.rsplit(":", 1)[1])
        assert httpx.get(f"{base}/v1/models").status_code == 200  # an upstream connection, kept alive
        gateway_files = _open_files(psutil.Process(gateway.pid))
        assert any(target.startswith("socket:") for target in gateway_files)
        servers = psutil.Process(gateway.pid).children(recursive=True)
        assert len(servers) >= 3  # two servers and the helper one of them left running
        for server in servers:
            assert _open_files(server) & gateway_files == set(), server.cmdline()
        listeners = [c for c in psutil.net_connections("tcp")
                     if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
        assert [c.pid for c in listeners] == [gateway.pid]


def test_connections_during_the_shutdown_grace_are_refused_not_left_hanging(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    with serving(tmp_path, upstream, TOOLBRIDGE_SHUTDOWN_GRACE="30") as (gateway, base):
        port = int(base.rsplit(":", 1)[1])
        upstream.script(Turn(calls=[Call("sleep", {"seconds": 10})]), Turn(content="slept well"))
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "sleep"}]}
        with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, timeout=EXIT_TIMEOUT) as response:
            lines = response.iter_lines()
            for line in lines:  # the trace announces the call as it starts
                if "Calling sleep" in line:
                    break
            gateway.send_signal(signal.SIGTERM)
            refused = False
            deadline = time.monotonic() + 5  # well inside the 10 s the call keeps the gateway in its grace
            while not refused and time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                except ConnectionRefusedError:
                    refused = True
                else:
                    time.sleep(0.02)  # the gateway stops listening once uvicorn's shutdown begins
            assert refused and gateway.poll() is None  # refused while the stream in flight still runs
            events = [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]
        chunks = [json.loads(event) for event in events if event != "[DONE]"]
        assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == "slept well"
