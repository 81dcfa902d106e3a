"""A server's tool list changing under requests: those in flight keep theirs, the next ones see the new list."""

import time
from pathlib import Path
from typing import Any

import httpx

from app.main import create_app
from tests.conftest import make_settings, servers_ready, stdio_entry, wait_for_health
from tests.support.fake_upstream import Call, FakeUpstream, Turn
from tests.support.servers import ServerThread

CHANGE_TIMEOUT = 30


def tool_names(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools", [])]


def test_a_request_in_flight_keeps_its_tools_when_a_server_adds_one(upstream: FakeUpstream, tmp_path: Path) -> None:
    settings = make_settings(tmp_path, {"basic": stdio_entry("basic.py")}, upstream_url=f"{upstream.url}/v1")
    with ServerThread(create_app(settings)) as gateway:
        wait_for_health(gateway.url, servers_ready("basic"))

        def once_the_new_tool_is_listed(_body: dict[str, Any]) -> Turn:
            # grow ran and announced `late_tool`; go on only once the gateway's catalogue has it, so the
            # next round is built after the change for certain.
            deadline = time.monotonic() + CHANGE_TIMEOUT
            while time.monotonic() < deadline:
                listed = [t["function"]["name"] for t in httpx.get(f"{gateway.url}/tools").json()["data"]]
                if "basic__late_tool" in listed:
                    return Turn(calls=[Call("basic__echo", {"text": "again"})])
                time.sleep(0.02)
            return Turn(content="the catalogue never changed")

        upstream.script(Turn(calls=[Call("basic__grow", {})]), once_the_new_tool_is_listed, Turn(content="grown"))
        body = {"model": "m", "messages": [{"role": "user", "content": "grow"}]}
        reply = httpx.post(f"{gateway.url}/v1/chat/completions", json=body, timeout=60).json()
        assert reply["choices"][0]["message"]["content"] == "grown"
        first, _, after_the_change = upstream.chat_requests()
        assert "basic__late_tool" not in tool_names(first)
        assert tool_names(after_the_change) == tool_names(first)

        upstream.script(Turn(content="hello"))
        httpx.post(f"{gateway.url}/v1/chat/completions", json=body, timeout=60)
        [later] = upstream.chat_requests()
        assert tool_names(later) == [*tool_names(first), "basic__late_tool"]
