"""A hostile stdio server's output and leftovers (issue 27's audit: N12, N14, N6, N9): helpers it starts, in its
process group and out of it, are ended at every restart; a stderr line over a mebibyte, bytes that are not UTF-8
on its stdout, an answer over the message bound: each costs that call at most, never the server or the gateway."""

import json
from pathlib import Path

import httpx
import psutil

from tests.conftest import running_gateway, servers_ready, stdio_entry, wait_for_health

JSON = {"Content-Type": "application/json"}


def _play(url: str, tool: str, arguments: dict) -> dict:
    response = httpx.post(f"{url}/ui/playground", json={"tool": tool, "arguments": arguments}, timeout=30)
    assert response.status_code == 200, response.text
    return json.loads(response.json()["content"])


def _restarts(url: str) -> int:
    return httpx.get(f"{url}/health", timeout=30).json()["servers"]["spawner"].get("restarts", 0)


def test_a_restart_ends_the_helpers_a_server_started_in_its_group_and_out_of_it(tmp_path: Path) -> None:
    servers = {"spawner": stdio_entry("spawner.py", str(tmp_path / "helper.pid"))}
    with running_gateway(tmp_path, servers, ready=("spawner",)) as gateway:
        pids = _play(gateway.url, "spawner__spawn", {"in_group": 2, "escaping": 2})["data"]["result"]
        helpers = [psutil.Process(pid) for pid in [*pids, int((tmp_path / "helper.pid").read_text())]]
        assert len(helpers) == 5 and all(helper.is_running() for helper in helpers)
        before = _restarts(gateway.url)
        assert httpx.post(f"{gateway.url}/ui/servers/spawner/restart", headers=JSON, timeout=30).status_code == 202
        wait_for_health(gateway.url, lambda b: servers_ready("spawner")(b) and _restarts(gateway.url) > before)
        try:
            _, alive = psutil.wait_procs(helpers, timeout=10)
            assert alive == []  # ended at the restart, not left running until the gateway stops
        finally:
            for helper in helpers:
                if helper.is_running():
                    helper.kill()
        assert _play(gateway.url, "spawner__helper_pid", {})["status"] == "success"  # the new one serves


def test_a_stderr_line_over_a_mebibyte_is_cut_and_the_server_keeps_serving(tmp_path: Path) -> None:
    servers = {"spawner": stdio_entry("spawner.py", str(tmp_path / "helper.pid"))}
    with running_gateway(tmp_path, servers, ready=("spawner",)) as gateway:
        try:
            assert _play(gateway.url, "spawner__shout", {"characters": 2_000_000})["data"] == {"result": "shouted"}
            assert _play(gateway.url, "spawner__shout", {"characters": 10})["data"] == {"result": "shouted"}
            status = httpx.get(f"{gateway.url}/health", timeout=30).json()["servers"]["spawner"]
            assert status["state"] == "ready" and status.get("restarts", 0) == 0
        finally:
            psutil.Process(int((tmp_path / "helper.pid").read_text())).kill()


def test_bytes_that_are_not_utf8_on_a_servers_stdout_do_not_wedge_it(tmp_path: Path) -> None:
    servers = {"bad": stdio_entry("misbehaving.py", "garbage")}
    with running_gateway(tmp_path, servers, ready=("bad",), tool_timeout=5) as gateway:
        assert _play(gateway.url, "bad__garble", {})["data"] == {"result": "after garbage"}
        assert _play(gateway.url, "bad__ping", {})["data"] == {"result": "pong"}
        assert httpx.get(f"{gateway.url}/health", timeout=30).json()["servers"]["bad"]["state"] == "ready"


def test_an_answer_over_the_message_bound_fails_its_call_saying_so_and_the_server_keeps_serving(
    tmp_path: Path,
) -> None:
    # The gateway reads past such a line without holding it (TOOLBRIDGE_MCP_MESSAGE_MB), and answers the call
    # it belonged to at once rather than letting it wait out its timeout.
    with running_gateway(tmp_path, {"bulky": stdio_entry("bulky.py")}, ready=("bulky",), mcp_message_mb=1) as gateway:
        refused = _play(gateway.url, "bulky__big", {"size": 3_000_000, "tag": "too-big"})
        assert refused["status"] == "error"
        assert "over 1 MiB" in refused["data"]["message"] and "TOOLBRIDGE_MCP_MESSAGE_MB" in refused["data"]["message"]
        under = _play(gateway.url, "bulky__big", {"size": 400_000, "tag": "fits"})
        assert under["status"] == "success"
        health = httpx.get(f"{gateway.url}/health", timeout=30).json()["servers"]["bulky"]
        assert (health["state"], health.get("restarts", 0)) == ("ready", 0)
