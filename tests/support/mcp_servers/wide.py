"""A test MCP server of what is wide or long to show: a description holding a long unbroken URL, a schema with a
long pattern and a long one-line description, and a document of many lines returned as plain text.
Run: `python wide.py` (stdio)."""

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import TextContent
from pydantic import Field

server = MCPServer("wide", version="1.0.0")
URL = "https://example.com/" + "very-long-path-segment/" * 40 + "end"
PATTERN = "^(" + "|".join(f"option-number-{n}" for n in range(60)) + ")$"


@server.tool(description=f"Looks a term up in the catalogue described at {URL}.")
def catalogue(
    term: Annotated[str, Field(pattern=PATTERN, description="A catalogue term; " + "one of many words " * 40)],
) -> str:
    return term


@server.tool()
def document(lines: int) -> TextContent:
    """A document of `lines` numbered lines, as plain text (no structured content)."""
    return TextContent(type="text", text="\n".join(f"Line {n} of the document." for n in range(1, lines + 1)))


if __name__ == "__main__":
    server.run()
