"""Audit 2026-11-27, S10: the config watcher logged every write in its folders, and fed itself at debug.

The watcher of mcp.json and the keys file watched their folders, and its library logged "N changes detected" (info)
for a write to any file there: a busy file beside the keys file wrote thousands of lines in minutes. With the
gateway's own log in that folder at TOOLBRIDGE_LOG_LEVEL=debug, each line was a change that logged another (86 of the
first 106 lines, 10 a second, forever). The attacker is anyone who may write a file beside the config (another
service's log, a shared folder): they flood the gateway's log, and its disk.

Now only the watched files wake the watcher, a save of one is logged at debug, and the library's own lines at
warning: each test writes other files in the folder, saves mcp.json as the one real change to wait on, and reads
the log.
"""

import json
import os
from pathlib import Path

from tests.conftest import stdio_entry, wait_for_health
from tests.test_cli import toolbridge

OPERATOR = "sk-operator-key-0123"
WATCHER_LINES = ("change detected", "changes detected", "changes filtered out")


def save_and_wait(config: Path, url: str, servers: dict, key: str | None = None) -> None:
    """Saves mcp.json as editors do (a new file renamed over it), and returns once /health shows these servers all
    ready: the reload is done."""
    saving = config.with_name(f".{config.name}.saving")
    saving.write_text(json.dumps({"mcpServers": servers}))
    os.replace(saving, config)
    wait_for_health(url, lambda body: set(body["servers"]) == set(servers) and all(
        s["state"] == "ready" for s in body["servers"].values()), key=key)


def test_writes_to_other_files_beside_the_config_files_wake_nothing_and_log_nothing(tmp_path: Path) -> None:
    config, keys, neighbour = tmp_path / "mcp.json", tmp_path / "keys.json", tmp_path / "busy.log"
    config.write_text(json.dumps({"mcpServers": {"basic": stdio_entry("basic.py")}}))
    keys.write_text(json.dumps({"keys": {"sk-alice-key-0123": {"servers": ["basic"]}}}))
    ready = lambda body: body.get("servers", {}).get("basic", {}).get("state") == "ready"  # noqa: E731
    flags = ("--watch-config", "--keys-file", str(keys), "--api-keys", OPERATOR)
    with toolbridge(tmp_path, config, *flags, ready=ready, key=OPERATOR) as (_, url):
        for line in range(50):  # a busy neighbour: each write is an event in the watched folder
            with neighbour.open("a") as busy:
                busy.write(f"line {line}\n")
        save_and_wait(config, url, {"basic": stdio_entry("basic.py"), "second": stdio_entry("basic.py")}, OPERATOR)
    log = (tmp_path / "gateway.log").read_text()
    assert not [line for line in log.splitlines() if any(said in line for said in WATCHER_LINES)]
    assert "busy.log" not in log
    assert log.count("mcp_config_reloaded") == 1 and "keys_file_reloaded" not in log
    assert "config_file_changed" not in log  # a save is logged at debug


def test_a_debug_log_in_the_watched_folder_does_not_feed_itself(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"  # the log is tmp_path/gateway.log: beside it
    config.write_text(json.dumps({"mcpServers": {"basic": stdio_entry("basic.py")}}))
    ready = lambda body: body.get("servers", {}).get("basic", {}).get("state") == "ready"  # noqa: E731
    with toolbridge(tmp_path, config, "--watch-config", "--log-level", "debug", ready=ready) as (_, url):
        save_and_wait(config, url, {"basic": stdio_entry("basic.py"), "second": stdio_entry("basic.py")})
        save_and_wait(config, url, {"basic": stdio_entry("basic.py")})
    lines = (tmp_path / "gateway.log").read_text().splitlines()
    assert not [line for line in lines if any(said in line for said in WATCHER_LINES)]
    assert not [line for line in lines if "gateway.log" in line]  # no line is about the log's own writes
    changed = [line for line in lines if "config_file_changed" in line]
    assert changed and all(str(config) in line for line in changed)  # at debug, each names mcp.json alone
    assert sum("mcp_config_reloaded" in line for line in lines) == 2
