"""A test MCP server that outlives its stdin: after EOF it lingers, so only a real kill ends it.

A gateway that merely exits would leave this process behind; one that shuts its pool down properly
has the SDK terminate it.
"""

import time

from mcp.server.mcpserver import MCPServer

LINGER_SECONDS = 60

server = MCPServer("lingering")


@server.tool()
def still_here() -> str:
    """Answers while connected."""
    return "yes"


server.run()
time.sleep(LINGER_SECONDS)
