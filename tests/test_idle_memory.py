"""What an idle gateway has not imported (issue 47: idle, it had grown from 100 MB to 120 by importing at start what
waits for its first use now).

The gateway is started by its own entry point (`app.cli.main`, the `toolbridge` command's) in a fresh interpreter
with one stdio server and its state in memory; a thread of that process waits until the server is ready, reads
`sys.modules`, sends one chat whose tools fit the budget, reads it again, and stops the gateway as a supervisor does
(SIGTERM). A module named here came back if something imports it at start again: not a memory threshold, which
would move with every library's release and the machine's load.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import stdio_entry
from tests.support.fake_upstream import MODEL, FakeUpstream, Turn
from tests.support.servers import free_port

ROOT = Path(__file__).parent.parent
NOT_AT_IDLE = {
    "bm25s": "the ranker: imported when a request first ranks (app/chat/offer/ranker_import.py)",
    "numpy": "the ranker's",
    "jwt": "the client-credentials sign-in's (app/mcp/server_auth.py)",
    "websockets": "uvicorn's WebSocket upgrades: no route takes one (app/cli.py)",
    "sqlite3": "the SQLite store's and vault's, with a state URL that names no SQLite file (app/state/open.py)",
}
NOT_FOR_A_CHAT_THAT_FITS = ("bm25s", "numpy")
SCRIPT = """
import json, os, signal, sys, threading, time

import httpx

from app.cli import main

PORT, CHECKED = int(sys.argv[1]), json.loads(sys.argv[2])
BASE = f"http://127.0.0.1:{PORT}"


def imported():
    return sorted(name for name in CHECKED if name in sys.modules)


def look_then_stop():
    found = {}
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                servers = httpx.get(BASE + "/health", timeout=5).json()["servers"]
            except httpx.TransportError:  # not listening yet
                servers = {}
            if servers and all(server["state"] == "ready" for server in servers.values()):
                found["at_idle"] = imported()
                break
            time.sleep(0.05)
        chat = {"model": sys.argv[3], "messages": [{"role": "user", "content": "Say hello."}]}
        found["chat_status"] = httpx.post(BASE + "/v1/chat/completions", json=chat, timeout=30).status_code
        found["after_a_chat"] = imported()
    finally:
        print(json.dumps(found), flush=True)
        os.kill(os.getpid(), signal.SIGTERM)


threading.Thread(target=look_then_stop, daemon=True).start()
sys.exit(main(sys.argv[4:]))
"""


def test_an_idle_gateway_and_one_whose_chats_fit_have_not_imported_what_waits_for_its_first_use(
    tmp_path: Path, upstream: FakeUpstream,
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"basic": stdio_entry("basic.py")}}))
    port = free_port()
    upstream.script(Turn(content="Hello."))
    # A context the server's 12 tools fit in whole: the chat below must not rank.
    flags = ["--port", str(port), "--mcp-config", str(config), "--upstream-url", f"{upstream.url}/v1",
             "--state-url", "memory://", "--context-tokens", "100000", "--log-level", "warning"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")}
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(port), json.dumps(sorted(NOT_AT_IDLE)), MODEL, *flags],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert result.returncode == 0, result.stderr[-3000:]
    assert found["at_idle"] == [], {name: NOT_AT_IDLE[name] for name in found["at_idle"]}
    assert found["chat_status"] == 200 and upstream.chat_requests()
    assert not set(found["after_a_chat"]) & set(NOT_FOR_A_CHAT_THAT_FITS), found["after_a_chat"]
