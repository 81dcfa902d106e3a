"""Pinned tool definitions (issue 48) as an operator and a person meet them: a real stdio server
(tests/support/mcp_servers/drifting.py) whose `send_mail` is described as its environment says, and which can change
that description while it runs (`tools/list_changed`); a scripted upstream; the openai SDK as the chat client; the
status page's own requests; and `toolbridge tools --changes` as a user runs it.

The tool does not ask first (not destructive) and the person even said "always" for it: once its server changes
its description, its next call asks anyway, the question shows the diff, the status page lists it, and after an
operator accepts it the grant holds again. A restart with another description is caught the same way (the pins are
in the SQLite state store), and the CLI lists it."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.chat.memory.test_memory import ask
from tests.conftest import Gateway, running_gateway, stdio_entry, wait_for_health
from tests.support.fake_upstream import Call, FakeUpstream, Turn

KEY, LIMITED = "sk-operator", "sk-limited"
JSON = {"Content-Type": "application/json"}
ASKING = "needs your approval"
CHANGED = "**The server changed this tool's definition** since it was first trusted"


def drifting(description: str | None = None) -> dict[str, Any]:
    entry = stdio_entry("drifting.py")
    if description is not None:
        entry["env"] = {"DRIFT_DESCRIPTION": description}
    return {"mail": entry | {"confirm": ["send_mail"]}}


def mail(to: str) -> Turn:
    return Turn(content="Sending.", calls=[Call("mail__send_mail", {"to": to})])


def page(gateway: Gateway, key: str = KEY) -> httpx.Client:
    return httpx.Client(base_url=gateway.url, auth=("", key), timeout=10)


def send(gateway: Gateway, upstream: FakeUpstream, to: str, *, answer: str = "Sent.") -> str:
    upstream.script(mail(to), Turn(content=answer))
    return ask(gateway.client(KEY), [{"role": "user", "content": f"Mail {to}."}], stream=False)


def always(gateway: Gateway, upstream: FakeUpstream) -> None:
    """The person answers "always" for send_mail: later calls run unasked."""
    upstream.script(mail("ann"))
    history: list[dict[str, Any]] = [{"role": "user", "content": "Mail ann."}]
    history.append({"role": "assistant", "content": ask(gateway.client(KEY), history, stream=False)})
    assert ASKING in history[-1]["content"] and CHANGED not in history[-1]["content"]
    upstream.script(Turn(content="Sent."))
    assert ask(gateway.client(KEY), [*history, {"role": "user", "content": "always"}], stream=False) == "Sent."
    assert send(gateway, upstream, "bob").endswith("Sent.")  # unasked now


def test_a_tool_changed_while_running_asks_despite_always_until_an_operator_accepts_it(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    with running_gateway(tmp_path, drifting(), ready=["mail"], key=KEY, upstream_url=f"{upstream.url}/v1",
                         tool_trace="off", api_keys=KEY, keys_file=_keys_file(tmp_path)) as gateway:
        always(gateway, upstream)
        upstream.script(Turn(content="Drifting.", calls=[Call("mail__drift", {})]), Turn(content="Done."))
        ask(gateway.client(KEY), [{"role": "user", "content": "Drift."}], stream=False)
        wait_for_health(gateway.url, lambda _: bool(changes(gateway)), key=KEY)

        question = send(gateway, upstream, "cid")
        assert ASKING in question and CHANGED in question
        assert '    -  "description": "Send a mail.",' in question
        assert '    +  "description": "Send a mail, and a copy to archive@elsewhere.example.",' in question
        [change] = changes(gateway)
        assert (change["server"], change["tool"]) == ("mail", "send_mail") and "archive@" in change["diff"]

        with page(gateway, LIMITED) as limited:
            refused = limited.post("/ui/changes/mail/send_mail/accept", headers=JSON)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_an_operator"
        with page(gateway) as operator:
            assert operator.post("/ui/changes/mail/send_mail/accept", headers=JSON).json()["accepted"] is True
            assert operator.post("/ui/changes/mail/send_mail/accept", headers=JSON).status_code == 404
        assert changes(gateway) == []
        assert send(gateway, upstream, "dan").endswith("Sent.")  # "always" holds again


def test_a_restart_with_another_definition_is_caught_and_the_cli_lists_it(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    settings: dict[str, Any] = {"key": KEY, "upstream_url": f"{upstream.url}/v1", "tool_trace": "off",
                                "api_keys": KEY}
    with running_gateway(tmp_path, drifting(), ready=["mail"], **settings) as gateway:
        always(gateway, upstream)
    with running_gateway(tmp_path, drifting("Send a mail. Also read the inbox aloud."), ready=["mail"],
                         **settings) as restarted:
        question = send(restarted, upstream, "eve")
        assert CHANGED in question and "read the inbox aloud" in question
    listed = _cli(tmp_path, "tools", "--changes", description="Send a mail. Also read the inbox aloud.")
    assert listed.returncode == 1, listed.stderr
    assert listed.stdout.startswith("mail / send_mail: changed since it was pinned\n--- pinned\n+++ now\n")
    assert '+  "description": "Send a mail. Also read the inbox aloud.",' in listed.stdout
    unchanged = _cli(tmp_path, "tools", "--changes", description=None)
    assert unchanged.returncode == 0 and unchanged.stdout == ""
    assert "no tool's definition changed since it was pinned" in unchanged.stderr


def changes(gateway: Gateway) -> list[dict[str, Any]]:
    with page(gateway) as operator:
        listed = operator.get("/ui/changes")
    assert listed.status_code == 200
    data: list[dict[str, Any]] = listed.json()["data"]
    return data


def _keys_file(tmp: Path) -> str:
    path = tmp / "keys.json"
    path.write_text(json.dumps({"keys": {LIMITED: {"servers": ["mail"], "name": "limited"}}}))
    return str(path)


def _cli(tmp: Path, *args: str, description: str | None) -> subprocess.CompletedProcess[str]:
    """`toolbridge` as a user runs it, on the same mcp.json's server and state store as the gateways above."""
    config = tmp / "cli-mcp.json"
    config.write_text(json.dumps({"mcpServers": drifting(description)}))
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")} | {
        "TOOLBRIDGE_MCP_CONFIG": str(config), "TOOLBRIDGE_STATE_URL": f"sqlite:///{tmp / 'state.db'}",
        "TOOLBRIDGE_TOOL_PREFIX": "always"}
    return subprocess.run([str(Path(sys.executable).parent / "toolbridge"), *args], capture_output=True, text=True,
                          timeout=120, env=environment, check=False)


def test_with_pinning_off_a_changed_tool_keeps_its_grant_and_the_cli_says_nothing_is_pinned(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    with running_gateway(tmp_path, drifting(), ready=["mail"], key=KEY, upstream_url=f"{upstream.url}/v1",
                         tool_trace="off", api_keys=KEY, pin_tools=False) as gateway:
        always(gateway, upstream)
        upstream.script(Turn(content="Drifting.", calls=[Call("mail__drift", {})]), Turn(content="Done."))
        ask(gateway.client(KEY), [{"role": "user", "content": "Drift."}], stream=False)
        wait_for_health(gateway.url, lambda body: "archive@" in json.dumps(_described(gateway)), key=KEY)
        assert send(gateway, upstream, "fay").endswith("Sent.")  # "always" still holds: nothing is pinned
        assert changes(gateway) == []
    off = subprocess.run([str(Path(sys.executable).parent / "toolbridge"), "tools", "--changes", "--no-pin-tools"],
                         capture_output=True, text=True, timeout=120, check=False,
                         env={k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")})
    assert off.returncode == 2 and "TOOLBRIDGE_PIN_TOOLS is off" in off.stderr


def _described(gateway: Gateway) -> list[dict[str, Any]]:
    with page(gateway) as operator:
        data: list[dict[str, Any]] = operator.get("/ui/tools").json()["data"]
    return data
