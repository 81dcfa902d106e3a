"""bench.compare's `least` arm does what its figures claim to measure: the least an MCP gateway can do, a tool round
included (the upstream's tool call made on mcp-server-time through the mcp SDK and its result sent back), so that
its tool round beside toolbridge's compares the same work."""

import sys
from pathlib import Path

import pytest
from openai import OpenAI

from bench.relays import least_app
from bench.upstream import app as upstream_app
from tests.support.servers import ServerThread

# The arm starts the server beside its interpreter, as bench.compare's own straight calls do.
pytestmark = pytest.mark.skipif(not (Path(sys.executable).parent / "mcp-server-time").exists(),
                                reason="mcp-server-time not installed beside this interpreter")


def test_the_least_gateway_makes_the_models_tool_call_on_the_mcp_server_and_relays_streams() -> None:
    with ServerThread(upstream_app) as upstream, ServerThread(least_app(f"{upstream.url}/v1")) as least:
        client = OpenAI(base_url=f"{least.url}/v1", api_key="none")
        asked = client.chat.completions.create(
            model="bench", messages=[{"role": "user", "content": "What time is it in UTC?"}])
        plain = client.chat.completions.create(model="bench", messages=[{"role": "user", "content": "Say hi."}])
        streamed = client.chat.completions.create(
            model="bench", messages=[{"role": "user", "content": "Say hi."}], stream=True, max_tokens=3)
        words = [chunk.choices[0].delta.content for chunk in streamed
                 if chunk.choices and chunk.choices[0].delta.content]
    # The stand-in model calls get_current_time only when offered it: the tool came from the server's own list.
    answer = asked.choices[0].message.content or ""
    assert answer.startswith("The tool said: ") and '"timezone": "UTC"' in answer and '"datetime"' in answer
    assert plain.choices[0].message.content == " ".join(["word"] * 40)
    assert words == ["word", " word", " word"]
