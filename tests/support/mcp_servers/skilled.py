"""A test MCP server with skills (issue 49): two SKILL.md documents as `skill://{name}/SKILL.md` resources (the
Skills over MCP interest group's convention), one ordinary resource, and one tool.
Run: `python skilled.py` (stdio).
"""

from mcp.server.mcpserver import MCPServer

server = MCPServer("skilled", version="1.0.0")

RELEASE_NOTES = """---
name: release-notes
description: Write release notes from a list of changes.
---
# Release notes
1. Group the changes under Added, Changed and Fixed.
2. One line each, in the past tense, with the issue number.
3. End with the word SHIPPED.
"""


@server.resource("skill://release-notes/SKILL.md", name="release-notes",
                 description="Write release notes from a list of changes.", mime_type="text/markdown")
def release_notes() -> str:
    return RELEASE_NOTES


@server.resource("skill://haiku/SKILL.md", name="haiku", description="Answer in a haiku.", mime_type="text/markdown")
def haiku() -> str:
    return "# Haiku\nAnswer in three lines of five, seven and five syllables.\n"


@server.resource("note://readme", name="readme", description="Not a skill", mime_type="text/plain")
def readme() -> str:
    return "A note."


@server.tool()
def changes() -> str:
    """The changes since the last release."""
    return "#12 faster search; #15 dark mode; #16 crash on empty notes"


if __name__ == "__main__":
    server.run()
