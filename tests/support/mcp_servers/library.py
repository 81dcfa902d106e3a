"""A test MCP server with resources and prompts: notes to read, a template, links, list changes, completions.

`LIBRARY_NOTES` sets how many `note://N` resources it lists (default 3). Run: `python library.py` (stdio).
"""

import base64
import contextlib
import json
import os

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import AssistantMessage, UserMessage
from mcp.types import (
    Completion,
    EmbeddedResource,
    ImageContent,
    PromptReference,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

server = MCPServer("library", version="1.0.0")
NOTES = int(os.environ.get("LIBRARY_NOTES", "3"))
# A 1x1 PNG.
PIXEL = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000" "1f15c4890000000d49444154789c6360f8ffff3f0005fe02fe"
    "a7d6a4a40000000049454e44ae426082")).decode()
TEAM = ["Ada", "Alan", "Grace", "Linus"]


def _add_note(number: int, text: str) -> None:
    server.resource(f"note://{number}", name=f"note-{number}", description=f"Note number {number}",
                    mime_type="text/plain")(lambda: text)


for _number in range(1, NOTES + 1):
    _add_note(_number, f"The text of note {_number}.")


@server.resource("data://stats", name="stats", description="Counts, as JSON", mime_type="application/json")
def stats() -> str:
    return json.dumps({"notes": NOTES, "shelves": 2})


@server.resource("pixel://logo", name="logo", description="The library's logo", mime_type="image/png")
def logo() -> bytes:
    return base64.b64decode(PIXEL)


@server.resource("book://{title}", name="book", description="A book's first line, by title", mime_type="text/plain")
def book(title: str) -> str:
    return f"The first line of {title}."


@server.tool()
def find_note(number: int) -> list:
    """Finds a note and links to it instead of returning its text."""
    return [TextContent(type="text", text=f"Found note {number}."),
            ResourceLink(type="resource_link", uri=f"note://{number}", name=f"note-{number}", mime_type="text/plain")]


async def _announce(ctx: Context, resources: bool) -> None:
    if resources:
        await ctx.notify_resources_changed()  # subscribers on 2026-era connections
    else:
        await ctx.notify_prompts_changed()
    with contextlib.suppress(Exception):  # 2025-era sessions get the classic notification
        if resources:
            await ctx.session.send_resource_list_changed()
        else:
            await ctx.session.send_prompt_list_changed()


@server.tool()
async def shelve(number: int, text: str, ctx: Context) -> str:
    """Adds a note and says the resources changed."""
    _add_note(number, text)
    await _announce(ctx, resources=True)
    return "shelved"


@server.tool()
async def teach(ctx: Context) -> str:
    """Adds the prompt `farewell` and says the prompts changed."""
    server.prompt(name="farewell", description="Says goodbye")(lambda: "Say goodbye nicely.")
    await _announce(ctx, resources=False)
    return "taught"


@server.prompt(description="Greets someone.\nSecond line of the description.")
def greet(name: str, style: str = "plain") -> str:
    return f"Write a {style} greeting for {name}."


@server.prompt(description="Reviews a piece of code")
def review(code: str) -> list:
    return [UserMessage(f"Review this code:\n{code}"), AssistantMessage("I will look for bugs first."),
            UserMessage("Start with the worst one.")]


@server.prompt(description="Describes the logo, with the picture and the stats")
def picture() -> list:
    return [UserMessage(ImageContent(type="image", data=PIXEL, mime_type="image/png")),
            UserMessage(EmbeddedResource(type="resource", resource=TextResourceContents(
                uri="data://stats", mime_type="application/json", text=stats()))),
            UserMessage("What does the picture show?")]


@server.prompt(description="Always fails")
def broken() -> str:
    raise ValueError("the prompt broke on purpose")


@server.completion()
async def complete(ref: object, argument: object, context: object) -> Completion | None:
    if isinstance(ref, PromptReference) and ref.name == "greet" and getattr(argument, "name", "") == "name":
        partial = getattr(argument, "value", "")
        return Completion(values=[n for n in TEAM if n.lower().startswith(partial.lower())])
    return None


if __name__ == "__main__":
    server.run("stdio")
