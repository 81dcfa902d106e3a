"""A test MCP server that is slow to start: it serves only once the file named in argv[1] exists."""

import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer

GIVE_UP_AFTER = 120.0

gate = Path(sys.argv[1])
deadline = time.monotonic() + GIVE_UP_AFTER
while not gate.exists():
    if time.monotonic() > deadline:
        sys.exit("gate never opened")
    time.sleep(0.02)

server = MCPServer("gated")


@server.tool()
def ping() -> str:
    """Answers pong."""
    return "pong"


server.run()
