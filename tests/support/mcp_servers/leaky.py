"""A test MCP server that logs what users send it to stderr, as many real servers do, and then dies.

`note(text)` writes "saving note for user: TEXT" to stderr and exits. The marker file (first argument)
keeps it down afterwards: every later start prints the operator's secret to stderr and fails, so any
later call meets it unavailable, with that stderr in its error.
"""

import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

marker = Path(sys.argv[1])
if marker.exists():
    print("config: DB_PASSWORD=OPERATOR-SECRET-CANARY", file=sys.stderr, flush=True)
    sys.exit(1)

server = MCPServer("leaky")


@server.tool()
def note(text: str) -> str:
    """Saves a note."""
    print(f"saving note for user: {text}", file=sys.stderr, flush=True)
    marker.write_text("down")
    os._exit(3)


@server.tool()
def ping() -> str:
    """Answers pong."""
    return "pong"


if __name__ == "__main__":
    server.run()
