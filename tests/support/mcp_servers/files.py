"""A test MCP server of notes, for approvals: one tool that only reads, one its annotations call destructive,
and one that writes with no annotations at all (as most servers' tools are today).

Notes live in a dict in this process, so a test sees whether a call ran by reading the note afterwards.
Run: `python files.py` (stdio).
"""

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("files", version="1.0.0")
_notes: dict[str, str] = {}


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_note(name: str) -> str:
    """Read a note by its name."""
    return _notes.get(name, f"no note '{name}'")


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def delete_note(name: str) -> str:
    """Delete a note by its name."""
    return f"deleted '{name}'" if _notes.pop(name, None) is not None else f"no note '{name}'"


@server.tool()
def write_note(name: str, text: str) -> str:
    """Write a note, replacing one of the same name."""
    _notes[name] = text
    return f"wrote '{name}'"


if __name__ == "__main__":
    server.run()
