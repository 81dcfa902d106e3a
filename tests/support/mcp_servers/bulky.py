"""A test MCP server whose results are as large as asked: `big(size, tag)` returns the tag, then `size`
characters, so a turn can store megabytes from small arguments. Run: `python bulky.py` (stdio)."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("bulky", version="1.0.0")


@server.tool()
def big(size: int, tag: str) -> str:
    """The tag, then `size` characters of filler."""
    return f"{tag}:" + "x" * size


if __name__ == "__main__":
    server.run()
