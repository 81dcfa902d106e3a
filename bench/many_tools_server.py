"""A stdio MCP server of `--count` tools taken from the recorded catalogue of popular servers, from `--offset` on
(bench/scale_catalogue.py): fifty of these, 20 tools each, mount 1,000 real-looking tools for bench/scale.py.
Every call answers at once with one line of text naming the tool. It uses the SDK's low-level server, so the
tools are listed as recorded (names, descriptions, input schemas), not rebuilt from Python signatures; their
output schemas are left out, since a text answer would break them (clients check it) and the gateway offers
no output schema to a model. With `--changing` it also offers `change_list`, whose every call adds a tool
(`added_1`, `added_2`, ...) and says that the list changed (a 2025-era notification: connect with "mode": "legacy").

    python bench/many_tools_server.py --count 20 --offset 40 [--changing]
"""

import argparse
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server

if __package__ in (None, ""):  # run as a file by an MCP client: bench/ is a package of the checkout above
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.scale_catalogue import mcp_tools

CHANGE = "change_list"


def build(count: int, offset: int, changing: bool = False) -> Server[Any]:
    tools = [types.Tool.model_validate({**tool, "outputSchema": None}) for tool in mcp_tools(count, offset)]
    if changing:
        tools.append(types.Tool(name=CHANGE, description="Adds a tool to this server's list.",
                                input_schema={"type": "object", "properties": {}}))
    names = {tool.name for tool in tools}

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == CHANGE and changing:
            added = f"added_{sum(name.startswith('added_') for name in names) + 1}"
            tools.append(types.Tool.model_validate({**mcp_tools(1, offset)[0], "name": added, "outputSchema": None}))
            names.add(added)
            await ctx.session.send_tool_list_changed()
            return types.CallToolResult(content=[types.TextContent(type="text", text=added)])
        if params.name not in names:
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"no tool {params.name}")],
                                        is_error=True)
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name}: done")])

    return Server(f"many-tools-{offset}", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(count: int, offset: int, changing: bool) -> None:
    server = build(count, offset, changing)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream,
                         server.create_initialization_options(NotificationOptions(tools_changed=changing)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--changing", action="store_true", help="offer change_list, which adds a tool")
    args = parser.parse_args()
    anyio.run(serve, args.count, args.offset, args.changing)


if __name__ == "__main__":
    main()
