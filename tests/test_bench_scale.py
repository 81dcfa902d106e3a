"""bench/many_tools_server.py over real stdio, run as the scale benchmark's mcp.json runs it: it serves the slice
of the catalogue it is asked for, as recorded (but for output schemas), and answers a call."""

import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from bench.scale_catalogue import mcp_tools, recorded

pytestmark = pytest.mark.anyio
SERVER = Path(__file__).resolve().parent.parent / "bench" / "many_tools_server.py"


async def test_the_server_lists_its_slice_of_the_catalogue_as_recorded_and_answers_a_call() -> None:
    # Tools 150-169 cross the end of the 155 recorded: the last five keep their names, the rest get "_2".
    server = StdioServerParameters(command=sys.executable, args=[str(SERVER), "--count", "20", "--offset", "150"])
    async with Client(server, read_timeout_seconds=30) as client:
        listed = (await client.session.list_tools()).tools
        result = await client.session.call_tool(listed[-1].name, {})
    expected = mcp_tools(20, 150)
    assert [tool.name for tool in listed] == [tool["name"] for tool in expected]
    assert listed[0].name == recorded()[150]["name"] and listed[5].name == f"{recorded()[0]['name']}_2"
    assert [tool.description for tool in listed] == [tool.get("description") for tool in expected]
    assert [tool.input_schema for tool in listed] == [tool["inputSchema"] for tool in expected]
    assert isinstance(result.content[0], TextContent) and result.content[0].text == f"{listed[-1].name}: done"
