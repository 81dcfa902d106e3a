"""A test MCP server that is slow to start: it serves only once the file named in argv[1] exists; with `fail` as
argv[2], it then fails to start instead, saying why on stderr as real servers do."""

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
if sys.argv[2:] == ["fail"]:
    sys.exit("fatal: SECRET_TOKEN=s3cr3t was refused")

server = MCPServer("gated")


@server.tool()
def ping() -> str:
    """Answers pong."""
    return "pong"


server.run()
