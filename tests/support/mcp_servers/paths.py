"""A test MCP server with one destructive tool that takes a path, for grants bound to a path (issue 48). It deletes
nothing: it says which path it would have deleted, so a test sees whether a call ran.
Run: `python paths.py` (stdio).
"""

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("paths", version="1.0.0")


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def delete_path(path: str) -> str:
    """Delete a file by its path."""
    return f"deleted {path}"


if __name__ == "__main__":
    server.run()
