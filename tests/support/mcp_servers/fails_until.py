"""A test MCP server that fails to start until the file named in argv[1] exists, then serves."""

import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

if not Path(sys.argv[1]).exists():
    print("not ready yet: the database is down", file=sys.stderr, flush=True)
    sys.exit(1)

server = MCPServer("recovering")


@server.tool()
def hello() -> str:
    """Says hello once the server could start."""
    return "hello"


server.run()
