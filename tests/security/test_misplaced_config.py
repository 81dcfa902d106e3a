"""Audit 2026-11-27, S3: a field in the wrong place of mcp.json was dropped without a word.

Server entries were read ignoring unknown fields, so `"per_key": true` written beside `"oauth"` instead of inside it
left the server shared: the first key to sign in gave every key its account (measured: carol signed in, alice and
the operator both acted as carol). A misspelt `"confirm"` turned that server's approvals off. The attacker is any
key holder who signs in to such a server, or has the model run a destructive tool with no one asked.

Now every field of the files toolbridge reads is known or the start stops (exit status 2) naming it, where it is and
the nearest known field; a reload to such a file keeps the last good one and /health says `degraded`; and files
written for other products (their own fields included) still start.
"""

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml

from tests.conftest import READY_TIMEOUT, servers_ready, stdio_entry, wait_for_health
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.servers import free_port
from tests.test_cli import TOOLBRIDGE, clean_env, toolbridge

ROOT = Path(__file__).parents[2]
UNREACHABLE = "http://127.0.0.1:9/mcp"  # never connected: the start stops before


def start(tmp_path: Path, config: str) -> tuple[int, str]:
    """`toolbridge` started as a user starts it; its exit status and what it said, once it has exited. A gateway
    that serves instead fails the test (and is stopped)."""
    port = free_port()
    with (tmp_path / "gateway.log").open("w") as log:
        gateway = subprocess.Popen([TOOLBRIDGE, "--port", str(port), "--mcp-config", config], cwd=tmp_path,
                                   env=clean_env() | {"XDG_DATA_HOME": str(tmp_path / "data")},
                                   stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + READY_TIMEOUT
    try:
        while True:
            try:
                return gateway.wait(timeout=0.1), (tmp_path / "gateway.log").read_text()
            except subprocess.TimeoutExpired:
                pass
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the gateway neither served nor exited"
                continue
            pytest.fail(f"the gateway started and serves with {config}")
    finally:
        if gateway.poll() is None:
            gateway.send_signal(signal.SIGTERM)
            gateway.wait(timeout=30)


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"url": UNREACHABLE, "oauth": True, "per_key": True},
         'mcpServers.protk: unknown field "per_key" (did you mean "oauth.per_key"?)'),
        ({"url": UNREACHABLE, "oauth": {"scopes": ["read"]}, "perKey": True},
         'mcpServers.protk: unknown field "perKey" (did you mean "oauth.per_key"?)'),
        (stdio_entry("basic.py") | {"confim": ["add"]},
         'mcpServers.protk: unknown field "confim" (did you mean "confirm"?)'),
    ],
    ids=["per_key-beside-oauth", "perKey-beside-oauth", "confirm-misspelt"],
)
def test_a_misplaced_field_stops_the_start_with_one_line_naming_it(tmp_path: Path, entry: dict, said: str) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"time": {"command": "mcp-server-time"}, "protk": entry}}))
    status, output = start(tmp_path, str(config))
    assert status == 2
    assert output == f"toolbridge: {config}: {said}\n"


def test_a_reload_to_a_misplaced_field_keeps_the_last_good_servers_and_says_degraded(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    good = {"basic": stdio_entry("basic.py") | {"confirm": ["add"]}}
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": good}))
    flags = ("--watch-config", "--upstream-url", f"{upstream.url}/v1")
    with toolbridge(tmp_path, config, *flags, ready=servers_ready("basic")) as (_, url):
        # The operator means to keep asking before `add`, and misspells it.
        config.write_text(json.dumps({"mcpServers": {"basic": stdio_entry("basic.py") | {"confim": ["add"]}}}))
        health = wait_for_health(url, lambda body: body["status"] == "degraded" and "error" in body["mcp_config"])
        assert health["mcp_config"]["error"] == (
            f'{config}: mcpServers.basic: unknown field "confim" (did you mean "confirm"?)')
        assert health["servers"]["basic"]["state"] == "ready" and "restarts" not in health["servers"]["basic"]
        # The last good file is in force: `add` still waits for the person's yes.
        upstream.script(Turn(content="Adding.", calls=[Call("add", {"a": 1, "b": 2})]), Turn(content="3"))
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
        answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "1+2?"}])
        assert "needs your approval" in (answer.choices[0].message.content or "")
        assert len(upstream.chat_requests()) == 1  # nothing ran
        # A good file ends it.
        config.write_text(json.dumps({"mcpServers": good | {"second": stdio_entry("basic.py")}}))
        health = wait_for_health(url, lambda body: body["servers"].get("second", {}).get("state") == "ready")
        assert health["status"] == "ok" and "error" not in health["mcp_config"]
    log = (tmp_path / "gateway.log").read_text()
    assert "mcp_config_reload_failed" in log and 'unknown field "confim"' in log


def product_files(folder: Path, remote: str, legacy: str) -> dict[str, dict[str, Any]]:
    """Files as other products write them, each with the fields of its own, pointing at the suite's servers."""
    basic, library = stdio_entry("basic.py"), stdio_entry("library.py")
    (folder / "library.env").write_text("LIBRARY_NOTES=5\n")
    return {
        "claude_desktop_config.json": {"mcpServers": {"desktop": basic | {"env": {"A": "1"}}},
                                       "globalShortcut": "Ctrl+Alt+Space"},
        "lmstudio.json": {"mcpServers": {"lmstudio": basic, "lmstudio_remote": {"url": remote,
                                                                                 "headers": {"X-A": "1"}}}},
        "cursor.json": {"mcpServers": {"cursor": {"url": remote, "headers": {"X-Token": "${env:HOME}"}},
                                       "cursor_stdio": library | {"envFile": "library.env"}}},
        "vscode.json": {"inputs": [{"type": "promptString", "id": "key", "password": True}], "servers": {
            "vscode": {"type": "stdio", **library, "envFile": "library.env", "dev": {"watch": "${workspaceFolder}/**"}},
            "vscode_http": {"type": "http", "url": remote, "gallery": "https://api.mcp.github.com", "version": "1.0.0"},
        }},
        "cline_mcp_settings.json": {"mcpServers": {
            "cline": {"url": legacy, "transportType": "sse", "disabled": False, "autoApprove": ["echo"], "timeout": 60},
            "cline_off": {"command": "never-run", "args": [], "disabled": True, "autoApprove": []},
        }},
        "roo_mcp.json": {"mcpServers": {"roo": basic | {"type": "stdio", "alwaysAllow": ["add"], "confirm": ["add"],
                                                        "disabledTools": ["crash"], "watchPaths": ["**/*.py"],
                                                        "timeout": 60, "disabled": False}}},
        "windsurf_mcp_config.json": {"mcpServers": {"windsurf": {"serverUrl": remote, "disabled": False}}},
        "claude_code.mcp.json": {"mcpServers": {"claude_code": {"type": "http", "url": remote,
                                                                "headersHelper": "print-headers"}}},
    }


def shipped_examples(folder: Path) -> list[Path]:
    kubernetes = yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / "toolbridge.yaml").read_text())
    [configmap] = [doc for doc in kubernetes if doc and doc.get("kind") == "ConfigMap" and "mcp.json" in doc["data"]]
    (folder / "kubernetes.json").write_text(configmap["data"]["mcp.json"])
    return [folder / "kubernetes.json", ROOT / "config" / "mcp.example.json", ROOT / "mcp.json"]  # mcp.json's time wins


def test_the_shipped_examples_and_other_products_files_start(
    tmp_path: Path, upstream: FakeUpstream, remote_mcp: str, legacy_sse_mcp: str
) -> None:
    files = []
    for name, content in product_files(tmp_path, remote_mcp, legacy_sse_mcp).items():
        (tmp_path / name).write_text(json.dumps(content))
        files.append(tmp_path / name)
    configs = ",".join(str(path) for path in [*shipped_examples(tmp_path), *files])
    products = ["desktop", "lmstudio", "lmstudio_remote", "cursor", "cursor_stdio", "vscode", "vscode_http", "cline",
                "roo", "windsurf", "claude_code"]
    ready = servers_ready(*products)
    with toolbridge(tmp_path, Path(configs), "--upstream-url", f"{upstream.url}/v1", ready=ready) as (_, url):
        health = httpx.get(f"{url}/health", timeout=30).json()
        resources = {r["server"]: r for r in httpx.get(f"{url}/resources", timeout=30).json()["data"]}
        tools = {(t["server"], t["tool"]): t for t in httpx.get(f"{url}/tools", timeout=30).json()["data"]}
    assert "error" not in health["mcp_config"] and all(f["found"] for f in health["mcp_config"]["files"])
    assert health["servers"]["cline_off"]["state"] == "disabled"
    assert health["servers"]["cline"]["transport"] == "sse"  # Cline's transportType, read as type
    assert health["servers"]["time"]["state"] == "ready"  # the shipped examples' own server
    # No entry of any file failed for what it says: a server may fail to run here, never to be read.
    assert not [s for s in health["servers"].values() if str(tmp_path) in s.get("error", "") or str(ROOT) in
                s.get("error", "")]
    for name in ("vscode", "cursor_stdio"):  # their envFile's LIBRARY_NOTES=5 reached the server
        assert len([r for r in resources[name]["resources"] if r["uri"].startswith("note://")]) == 5
    assert ("roo", "crash") not in tools  # Roo Code's disabledTools
    assert tools[("roo", "add")]["asks_first"]  # its alwaysAllow takes no question away
    log = (tmp_path / "gateway.log").read_text()
    assert "mcp_config_fields_unused" in log and "autoApprove" in log
