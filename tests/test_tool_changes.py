"""A server's tool list changing under requests: those in flight keep theirs, the next ones see the new list."""

from pathlib import Path
from typing import Any

import anyio
import httpx

from tests.conftest import running_gateway, stdio_entry
from tests.support.fake_upstream import Call, FakeUpstream, Turn

CHANGE_TIMEOUT = 30


def tool_names(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools", [])]


def test_a_request_in_flight_keeps_its_tools_when_a_server_adds_one(upstream: FakeUpstream, tmp_path: Path) -> None:
    servers = {"basic": stdio_entry("basic.py")}
    with running_gateway(tmp_path, servers, ready=("basic",), upstream_url=f"{upstream.url}/v1") as gateway:

        async def once_the_new_tool_is_listed(_body: dict[str, Any]) -> Turn:
            # grow ran and announced `late_tool`; go on only once the gateway's catalogue has it, so the
            # next round is built after the change for certain. Awaited: the fake upstream's loop keeps serving.
            async with httpx.AsyncClient() as client:
                with anyio.move_on_after(CHANGE_TIMEOUT):
                    while True:
                        listed = (await client.get(f"{gateway.url}/tools")).json()["data"]
                        if "basic__late_tool" in [t["function"]["name"] for t in listed]:
                            return Turn(calls=[Call("basic__echo", {"text": "again"})])
                        await anyio.sleep(0.02)
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
