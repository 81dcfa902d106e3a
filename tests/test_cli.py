"""The `toolbridge` command as a user runs it: printing tools, serving, and stopping cleanly."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest

from tests.conftest import stdio_entry, wait_for_health
from tests.support.servers import free_port

TOOLBRIDGE = str(Path(sys.executable).parent / "toolbridge")
EXIT_TIMEOUT = 30


def write_config(tmp_path: Path, servers: dict) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")}


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TOOLBRIDGE, *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=clean_env(), check=False
    )


def test_tools_prints_the_openai_tools_and_exits(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"basic": stdio_entry("basic.py")})
    result = run_cli("tools", "--mcp-config", str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    tools = json.loads(result.stdout)
    assert [t["function"]["name"] for t in tools] == [
        "basic__echo", "basic__add", "basic__fail", "basic__get_weather", "basic__rendezvous", "basic__sleep"
    ]
    assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in tools)


def test_tools_names_failed_servers_and_exits_nonzero(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, {"basic": stdio_entry("basic.py"), "broken": {"command": "no-such-mcp-server-binary"}}
    )
    result = run_cli("tools", "--mcp-config", str(config), cwd=tmp_path)
    assert result.returncode == 1
    assert len(json.loads(result.stdout)) == 6
    assert "'broken' failed" in result.stderr
    assert "command not found" in result.stderr


def test_broken_json_config_is_a_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {"a": {"command": "x",}}}')
    result = run_cli("--mcp-config", str(config), cwd=tmp_path)
    assert result.returncode == 2
    assert str(config) in result.stderr
    assert "line 1" in result.stderr


def test_settings_come_from_environment_and_dotenv(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"basic": stdio_entry("basic.py")})
    (tmp_path / ".env").write_text(f"TOOLBRIDGE_MCP_CONFIG={config}\n")
    result = run_cli("tools", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)) == 6


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_stopping_leaves_no_mcp_server_process_behind(tmp_path: Path, stop_signal: signal.Signals) -> None:
    config = write_config(tmp_path, {"one": stdio_entry("basic.py"), "two": stdio_entry("lingering.py")})
    port = free_port()
    log_path = tmp_path / "gateway.log"
    with log_path.open("w") as log_file:
        gateway = subprocess.Popen(
            [TOOLBRIDGE, "--port", str(port), "--mcp-config", str(config), "--log-format", "json"],
            cwd=tmp_path, env=clean_env(), stdout=subprocess.DEVNULL, stderr=log_file,
        )
    try:
        wait_for_health(f"http://127.0.0.1:{port}", lambda b: b["status"] == "ok")
        children = psutil.Process(gateway.pid).children(recursive=True)
        assert len(children) >= 2
        gateway.send_signal(stop_signal)
        # uvicorn shuts down gracefully, then re-raises the signal so the exit status tells of it.
        assert gateway.wait(timeout=EXIT_TIMEOUT) in (0, -stop_signal)
        assert "Application shutdown complete" in log_path.read_text()
        _, alive = psutil.wait_procs(children, timeout=5)
        assert alive == []
    finally:
        if gateway.poll() is None:
            gateway.kill()
            gateway.wait(timeout=EXIT_TIMEOUT)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/health")
